// taskproducer: enqueue one gq task with curlyq's Producer and go/gqtask, for gq's
// interop tests.
//
//	taskproducer -addr 127.0.0.1:6379 -queue Q -task NAME [-id ID] [-retries N]
//	             [-timeout D] [-expired] [-shards N]
//
// The task "deliver" gets deliver("https://example.com/hook", {"event": "paid", "items":
// [1, 2.5, nil, true], "nested": {"deep": {"x": "y"}}}, tenant="acme", blob=\x00\x01\xff,
// when=2026-12-01T12:00:00.5Z) and the header traceparent; other tasks get no arguments.
// -expired sets the expiry an hour ago. -shards N writes to the shard of sharded queue Q
// that the job's id routes to (gqtask.Layout). Prints the job's id and its Data in hex.
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

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	queue := flag.String("queue", "", "queue name")
	name := flag.String("task", "deliver", "task name")
	id := flag.String("id", "", "job id (default: curlyq makes one)")
	retries := flag.Int("retries", -1, "opts retries (-1: unset)")
	timeout := flag.Duration("timeout", 0, "opts timeout (0: unset)")
	expired := flag.Bool("expired", false, "opts expires an hour ago")
	shards := flag.Int("shards", 0, "the shards of sharded queue Q (0: Q is a plain queue)")
	flag.Parse()

	task := gqtask.Task{Name: *name, Opts: gqtask.Options{Timeout: *timeout}}
	if *retries >= 0 {
		task.Opts.Retries = gqtask.RetriesOf(*retries)
	}
	if *expired {
		task.Opts.Expires = time.Now().Add(-time.Hour)
	}
	if *name == "deliver" {
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
	job, err := task.Job()
	if err != nil {
		fail(err)
	}
	job.ID = *id
	target := *queue
	if *shards > 0 {
		layout, err := gqtask.NewLayout(*queue, *shards)
		if err != nil {
			fail(err)
		}
		if target, err = layout.Route(&job); err != nil {
			fail(err)
		}
	}
	producer := curlyq.NewProducer(&curlyq.ProducerOpts{Address: *addr, Queue: target})
	jobID, err := producer.Perform(job)
	if err != nil {
		fail(err)
	}
	fmt.Println(jobID, hex.EncodeToString(job.Data))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "taskproducer:", err)
	os.Exit(1)
}
