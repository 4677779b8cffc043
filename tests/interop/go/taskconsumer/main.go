// taskconsumer: serve gq tasks with curlyq's Consumer and a go/gqtask Router, for gq's
// interop tests.
//
//	taskconsumer -addr 127.0.0.1:6379 -queue Q -out FILE [-tasks deliver,other]
//	             [-fail-attempts N] [-max-backoff D] [-scheduler-poll D]
//
// Each task named in -tasks is registered; its handler writes one JSON line per run
// {"id", "attempt", "task", "args", "kwargs", "headers", "retries", "timeout", "data"}
// (values tagged with their Go types: {"$int": 1}, {"$bytes": "00ff"}, {"$time": RFC 3339 in µs},
// {"$float": 2.5}; data is the job's Data in hex) and fails while the job's attempt is
// below -fail-attempts. SIGTERM stops it gracefully.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcmathja/curlyq"
	"gqtask"
)

func main() {
	opts := &curlyq.ConsumerOpts{PollerPollDuration: time.Second}
	flag.StringVar(&opts.Address, "addr", "127.0.0.1:6379", "Redis address")
	flag.StringVar(&opts.Queue, "queue", "", "queue name")
	flag.DurationVar(&opts.JobMaxBackoff, "max-backoff", 0, "JobMaxBackoff")
	flag.DurationVar(&opts.SchedulerPollInterval, "scheduler-poll", 0, "SchedulerPollInterval")
	tasks := flag.String("tasks", "deliver", "comma-separated task names to serve")
	failAttempts := flag.Int("fail-attempts", 0, "fail runs whose attempt is below this")
	outPath := flag.String("out", "", "file for one JSON line per run")
	flag.Parse()

	file, err := os.OpenFile(*outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer file.Close()
	var lock sync.Mutex
	out := json.NewEncoder(file)

	router := gqtask.NewRouter()
	for _, name := range strings.Split(*tasks, ",") {
		router.Register(name, func(ctx context.Context, call gqtask.Call) error {
			lock.Lock()
			err := out.Encode(record(call))
			lock.Unlock()
			if err != nil {
				return err
			}
			if call.Job.Attempt < *failAttempts {
				return errors.New("planned failure (-fail-attempts)")
			}
			return nil
		})
	}
	consumer := curlyq.NewConsumer(opts)
	if err := consumer.Consume(router.Serve, os.Interrupt, syscall.SIGTERM); err != nil {
		fmt.Fprintln(os.Stderr, "consumer stopped with an error:", err)
		os.Exit(1)
	}
}

func record(call gqtask.Call) map[string]interface{} {
	var retries interface{}
	if call.Opts.Retries != nil {
		retries = *call.Opts.Retries
	}
	return map[string]interface{}{
		"id": call.Job.ID, "attempt": call.Job.Attempt, "task": call.Name,
		"args": tagged(call.Args), "kwargs": tagged(call.Kwargs), "headers": call.Headers,
		"retries": retries, "timeout": call.Opts.Timeout.Seconds(),
		"data": hex.EncodeToString(call.Job.Data),
	}
}

// tagged marks each value with its Go type, so that the test checks types, not only JSON.
func tagged(value interface{}) interface{} {
	switch v := value.(type) {
	case int64:
		return map[string]interface{}{"$int": v}
	case float64:
		return map[string]interface{}{"$float": v}
	case []byte:
		return map[string]interface{}{"$bytes": hex.EncodeToString(v)}
	case time.Time:
		return map[string]interface{}{"$time": v.Format("2006-01-02T15:04:05.000000Z07:00")}
	case []interface{}:
		items := make([]interface{}, len(v))
		for i, item := range v {
			items[i] = tagged(item)
		}
		return items
	case map[string]interface{}:
		items := make(map[string]interface{}, len(v))
		for key, item := range v {
			items[key] = tagged(item)
		}
		return items
	}
	return value
}
