package gqtask_test

import (
	"log"
	"time"

	"gqtask"
)

// The README's "Enqueue to a sharded queue", compiled (not run: it needs a Redis).
func ExampleShardedProducer() {
	sharded, err := gqtask.NewShardedProducer(gqtask.ShardedProducerOpts{
		Address: "127.0.0.1:6379", // or Client: a *redis.Client (go-redis v7, curlyq's)
		Queue:   "emails",
		Shards:  8, // the count gq was given; Redis's is followed after a reshard
	})
	if err != nil {
		log.Fatal(err)
	}
	task := gqtask.Task{
		Name: "send",
		Args: []interface{}{"ann@example.com"},
		Opts: gqtask.Options{Group: "tenant:acme"}, // routed by the group, its id minted
	}
	id, err := sharded.Perform(task) // or PerformAt(when, task)
	if err != nil {
		log.Fatal(err) // gqtask.ErrShardCount: Redis holds another count (errors.Is)
	}
	log.Println("enqueued", id)

	job, _ := task.Job()
	job.ID = "invoice-42"                    // optional: kept as given
	shard, err := sharded.Route(&task, &job) // the shard's name; mints job.ID if empty
	if err != nil {
		log.Fatal(err)
	}
	_, err = sharded.Shard(shard).PerformAfter(time.Minute, job) // its curlyq producer
	if err != nil {
		log.Fatal(err)
	}
}
