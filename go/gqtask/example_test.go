package gqtask_test

import (
	"log"
	"os"
	"time"

	"github.com/go-redis/redis/v7"
	"gqtask"
)

// The README's "Enqueue to a sharded queue", compiled (not run: it needs a Redis).
func ExampleShardedProducer() {
	sharded, err := gqtask.NewShardedProducer(gqtask.ShardedProducerOpts{
		Address: "127.0.0.1:6379", // or Client (a *redis.Client, go-redis v7), or Cluster
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
	_, err = sharded.Enqueue(shard, job, time.Now().Add(time.Minute)) // or time.Time{}: now
	if err != nil {
		log.Fatal(err)
	}
}

// The README's "On a Redis Cluster", compiled (not run).
func ExampleShardedProducer_cluster() {
	task := gqtask.Task{Name: "send", Args: []interface{}{"ann@example.com"}}
	sharded, err := gqtask.NewShardedProducer(gqtask.ShardedProducerOpts{
		Cluster: &redis.ClusterOptions{ // go-redis v7's options: seed nodes, password, TLS...
			Addrs:    []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"},
			Password: os.Getenv("REDIS_PASSWORD"),
		},
		Queue:  "emails",
		Shards: 8,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sharded.Close() // the clients it made, one per master
	id, err := sharded.Perform(task)
	if err != nil {
		log.Fatal(err)
	}
	log.Println("enqueued", id)
}
