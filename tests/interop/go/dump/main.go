// dump: print every message of Q:data as curlyq decodes it, one JSON object a line:
// {"id": ..., "data": <base64>, "attempt": N} or {"id": ..., "error": "..."}.
//
//	dump -addr 127.0.0.1:6379 -queue Q
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/go-redis/redis/v7"
	"github.com/mcmathja/curlyq"
	"github.com/vmihailenco/msgpack/v4"
)

type entry struct {
	Key     string `json:"id"`
	ID      string `json:"msg_id,omitempty"`
	Data    []byte `json:"data,omitempty"`
	Attempt int    `json:"attempt"`
	Error   string `json:"error,omitempty"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	queue := flag.String("queue", "", "queue name")
	flag.Parse()

	client := redis.NewClient(&redis.Options{Addr: *addr})
	messages, err := client.HGetAll(*queue + ":data").Result()
	if err != nil {
		fmt.Fprintln(os.Stderr, "HGETALL failed:", err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	for key, raw := range messages {
		// The same call curlyq's Job.fromMessage makes, into curlyq's own Job type.
		job := curlyq.Job{}
		e := entry{Key: key}
		if err := msgpack.Unmarshal([]byte(raw), &job); err != nil {
			e.Error = err.Error()
		} else {
			e.ID, e.Data, e.Attempt = job.ID, job.Data, job.Attempt
		}
		if err := out.Encode(e); err != nil {
			os.Exit(1)
		}
	}
}
