// taskproducer: enqueue gq tasks with curlyq's Producer and go/gqtask, for gq's interop
// tests.
//
//	taskproducer -addr 127.0.0.1:6379 -queue Q -task NAME [-id ID] [-retries N]
//	             [-timeout D] [-expired] [-group G] [-unique LOCK] [-result-ttl D]
//	             [-shards N [-follow -n COUNT [-every D]]]
//
// The task "deliver" gets deliver("https://example.com/hook", {"event": "paid", "items":
// [1, 2.5, nil, true], "nested": {"deep": {"x": "y"}}}, tenant="acme", blob=\x00\x01\xff,
// when=2026-12-01T12:00:00.5Z) and the header traceparent; other tasks get no arguments.
// -expired sets the expiry an hour ago; -group, -unique and -result-ttl set those opts.
//
// It prints the job's id and its Data in hex. -shards N writes to the shard of sharded
// queue Q that gq would route the job to (gqtask.Layout.RouteTask: by its group, else its
// lock, else its id). With -follow it writes COUNT jobs, one each -every, through a
// gqtask.ShardedProducer (the layout read from Redis, declared with N shards when Redis
// holds none, followed through a reshard) and prints a line per job: its id, its shard
// and the unix time in ms just before it was routed.
package main

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/mcmathja/curlyq"
	"gqtask"
)

type config struct {
	addr, queue, id, name, group, unique string
	retries, shards, n                   int
	timeout, resultTTL, every            time.Duration
	expired, follow                      bool
}

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:6379", "Redis address")
	flag.StringVar(&c.queue, "queue", "", "queue name")
	flag.StringVar(&c.name, "task", "deliver", "task name")
	flag.StringVar(&c.id, "id", "", "job id (default: curlyq or gqtask makes one)")
	flag.IntVar(&c.retries, "retries", -1, "opts retries (-1: unset)")
	flag.DurationVar(&c.timeout, "timeout", 0, "opts timeout (0: unset)")
	flag.DurationVar(&c.resultTTL, "result-ttl", 0, "opts result_ttl (0: unset)")
	flag.BoolVar(&c.expired, "expired", false, "opts expires an hour ago")
	flag.StringVar(&c.group, "group", "", "opts group")
	flag.StringVar(&c.unique, "unique", "", "opts unique (the lock's name)")
	flag.IntVar(&c.shards, "shards", 0, "the shards of sharded queue Q (0: Q is a plain queue)")
	flag.BoolVar(&c.follow, "follow", false, "write -n jobs through a ShardedProducer")
	flag.IntVar(&c.n, "n", 1, "jobs to write with -follow")
	flag.DurationVar(&c.every, "every", 0, "the pause between two jobs with -follow")
	flag.Parse()

	var err error
	if c.follow {
		err = follow(c)
	} else {
		err = produceOne(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskproducer:", err)
		os.Exit(1)
	}
}

func taskOf(c config) gqtask.Task {
	task := gqtask.Task{Name: c.name, Opts: gqtask.Options{
		Timeout: c.timeout, ResultTTL: c.resultTTL, Group: c.group, Unique: c.unique,
	}}
	if c.retries >= 0 {
		task.Opts.Retries = gqtask.RetriesOf(c.retries)
	}
	if c.expired {
		task.Opts.Expires = time.Now().Add(-time.Hour)
	}
	if c.name == "deliver" {
		task.Args = []interface{}{"https://example.com/hook", map[string]interface{}{
			"event": "paid", "items": []interface{}{1, 2.5, nil, true},
			"nested": map[string]interface{}{"deep": map[string]interface{}{"x": "y"}},
		}}
		task.Kwargs = map[string]interface{}{
			"tenant": "acme", "blob": []byte{0, 1, 255},
			"when": time.Date(2026, 12, 1, 12, 0, 0, 500000000, time.UTC),
		}
		task.Headers = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	}
	return task
}

// produceOne writes one job to Q, or with -shards to the shard a fixed Layout routes it to.
func produceOne(c config) error {
	task := taskOf(c)
	job, err := task.Job()
	if err != nil {
		return err
	}
	job.ID = c.id
	target := c.queue
	if c.shards > 0 {
		layout, err := gqtask.NewLayout(c.queue, c.shards)
		if err != nil {
			return err
		}
		if target, err = layout.RouteTask(&task, &job); err != nil {
			return err
		}
	}
	producer := curlyq.NewProducer(&curlyq.ProducerOpts{Address: c.addr, Queue: target})
	jobID, err := producer.Perform(job)
	if err == nil {
		fmt.Println(jobID, hex.EncodeToString(job.Data))
	}
	return err
}

// follow writes -n jobs through a ShardedProducer, one each -every.
func follow(c config) error {
	sharded, err := gqtask.NewShardedProducer(gqtask.ShardedProducerOpts{
		Address: c.addr, Queue: c.queue, Shards: c.shards,
	})
	if err != nil {
		return err
	}
	task := taskOf(c)
	for i := 0; i < c.n; i++ {
		job, err := task.Job()
		if err != nil {
			return err
		}
		routed := time.Now().UnixNano() / int64(time.Millisecond)
		shard, err := sharded.Route(&task, &job)
		if err != nil {
			return err
		}
		if _, err := sharded.Shard(shard).Perform(job); err != nil {
			return err
		}
		fmt.Println(job.ID, shard, routed)
		time.Sleep(c.every)
	}
	return nil
}
