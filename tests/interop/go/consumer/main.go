// consumer: run jobs with curlyq's real Consumer, for gq's interop tests and benchmarks.
//
//	consumer -addr 127.0.0.1:6379 -queue Q [-concurrency 5] [-buffer 10] [-fail-every K]
//	         [-max-attempts N] [-sleep D] [-out FILE] [-heartbeat D] [-consumer-timeout D]
//	         [-custodian-poll D] [-scheduler-poll D] [-poll-duration D]
//
// Every K-th job handled (K, 2K, ...) fails; the others succeed. With -out, each handled
// job is written as one JSON line {"id", "data" (base64), "attempt", "failed"} before the
// handler returns. With BENCH_N and BENCH_OUT in the environment, the figures of the first
// BENCH_N jobs (first handler start to N-th handler end, CPU time, peak RSS) are written
// to BENCH_OUT as benchmarks/workers/probe.py writes them. SIGINT or SIGTERM stops it
// gracefully.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcmathja/curlyq"
)

type record struct {
	ID      string `json:"id"`
	Data    []byte `json:"data"`
	Attempt int    `json:"attempt"`
	Failed  bool   `json:"failed"`
}

var errPlanned = errors.New("planned failure (-fail-every)")

func main() {
	opts := &curlyq.ConsumerOpts{}
	flag.StringVar(&opts.Address, "addr", "127.0.0.1:6379", "Redis address")
	flag.StringVar(&opts.Queue, "queue", "", "queue name")
	flag.IntVar(&opts.ProcessorConcurrency, "concurrency", 0, "handlers at once (curlyq default 5)")
	flag.IntVar(&opts.PollerBufferSize, "buffer", 0, "jobs buffered (curlyq default 10)")
	flag.IntVar(&opts.JobMaxAttempts, "max-attempts", 0, "JobMaxAttempts (curlyq default 20)")
	flag.DurationVar(&opts.JobMaxBackoff, "max-backoff", 0, "JobMaxBackoff (default 1 week)")
	flag.DurationVar(&opts.HeartbeatPollInterval, "heartbeat", 0, "HeartbeatPollInterval (min 15s)")
	flag.DurationVar(&opts.CustodianConsumerTimeout, "consumer-timeout", 0, "CustodianConsumerTimeout (min 5s)")
	flag.DurationVar(&opts.CustodianPollInterval, "custodian-poll", 0, "CustodianPollInterval")
	flag.DurationVar(&opts.SchedulerPollInterval, "scheduler-poll", 0, "SchedulerPollInterval")
	flag.DurationVar(&opts.PollerPollDuration, "poll-duration", 0, "PollerPollDuration (min 1s)")
	failEvery := flag.Int64("fail-every", 0, "fail every K-th job handled (0: never)")
	sleep := flag.Duration("sleep", 0, "how long each handler takes")
	outPath := flag.String("out", "", "file for one JSON line per handled job")
	flag.Parse()
	if os.Getenv("BENCH_N") != "" {
		opts.Logger = &curlyq.EmptyLogger{}
	}

	var out *json.Encoder
	var outLock sync.Mutex
	if *outPath != "" {
		file, err := os.OpenFile(*outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer file.Close()
		out = json.NewEncoder(file) // unbuffered: each line is written before the ack
	}
	probe := newProbe()
	var handled int64

	handler := func(ctx context.Context, job curlyq.Job) error {
		probe.start()
		defer probe.end()
		if *sleep > 0 {
			time.Sleep(*sleep)
		}
		n := atomic.AddInt64(&handled, 1)
		failed := *failEvery > 0 && n%*failEvery == 0
		if out != nil {
			outLock.Lock()
			err := out.Encode(record{job.ID, job.Data, job.Attempt, failed})
			outLock.Unlock()
			if err != nil {
				return err
			}
		}
		if failed {
			return errPlanned
		}
		return nil
	}

	consumer := curlyq.NewConsumer(opts)
	if err := consumer.Consume(handler, os.Interrupt, syscall.SIGTERM); err != nil {
		fmt.Fprintln(os.Stderr, "consumer stopped with an error:", err)
		os.Exit(1)
	}
}

// probe times the first BENCH_N jobs the way benchmarks/workers/probe.py does.
type probe struct {
	n, count int64
	out      string
	once     sync.Once
	done     sync.Once
	t0       time.Time
	cpu0     time.Duration
}

func newProbe() *probe {
	n, _ := strconv.ParseInt(os.Getenv("BENCH_N"), 10, 64)
	return &probe{n: n, out: os.Getenv("BENCH_OUT")}
}

func (p *probe) start() {
	if p.n == 0 {
		return
	}
	p.once.Do(func() { p.t0, p.cpu0 = time.Now(), cpuTime() })
}

func (p *probe) end() {
	if p.n == 0 || atomic.AddInt64(&p.count, 1) != p.n {
		return
	}
	p.done.Do(func() {
		elapsed := time.Since(p.t0).Seconds()
		cpu := (cpuTime() - p.cpu0).Seconds()
		var usage syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
		rss := float64(usage.Maxrss) / 1024 // KiB on Linux
		result := map[string]interface{}{
			"n": p.n, "capped": false, "elapsed": elapsed, "rate": float64(p.n) / elapsed,
			"cpu_s": cpu, "cpu_us_per_job": cpu / float64(p.n) * 1e6,
			"rss_peak_mb": rss, "ru_maxrss_mb": rss, "pid": os.Getpid(),
		}
		body, _ := json.Marshal(result)
		tmp := p.out + ".tmp"
		if os.WriteFile(tmp, body, 0o644) == nil {
			_ = os.Rename(tmp, p.out)
		}
	})
}

func cpuTime() time.Duration {
	var usage syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}
