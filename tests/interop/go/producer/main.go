// producer: enqueue jobs with curlyq's real Producer, for gq's interop tests.
//
//	producer -addr 127.0.0.1:6379 -queue Q -n 10 -prefix go [-data D] [-after 1s]
//
// Job i gets the id "<prefix>-<i>" and, unless -data is given, its id as data.
// Every id is printed on a line of its own once enqueued.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mcmathja/curlyq"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	queue := flag.String("queue", "", "queue name")
	n := flag.Int("n", 1, "jobs to enqueue")
	prefix := flag.String("prefix", "go", "id prefix")
	data := flag.String("data", "", "data of every job (default: its id)")
	after := flag.Duration("after", 0, "schedule this long from now (PerformAfter)")
	flag.Parse()

	producer := curlyq.NewProducer(&curlyq.ProducerOpts{Address: *addr, Queue: *queue})
	for i := 0; i < *n; i++ {
		id := fmt.Sprintf("%s-%d", *prefix, i)
		body := *data
		if body == "" {
			body = id
		}
		job := curlyq.Job{ID: id, Data: []byte(body)}
		var err error
		if *after > 0 {
			_, err = producer.PerformAfter(*after, job)
		} else {
			_, err = producer.Perform(job)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "enqueue", id, "failed:", err)
			os.Exit(1)
		}
		fmt.Println(id)
	}
}
