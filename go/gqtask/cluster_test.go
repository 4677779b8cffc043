package gqtask

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis/v7"
	"github.com/mcmathja/curlyq"
)

func TestKeySlotIsTheSlotOfTheHashTag(t *testing.T) {
	// Redis Cluster's own vectors (CLUSTER KEYSLOT): "foo" 12182, "{user1000}.following" as
	// "user1000" 3443; an empty tag or no closing brace hashes the whole key.
	cases := map[string]int{"foo": 12182, "{user1000}.following": 3443, "user1000": 3443,
		"{}foo": int(crc16([]byte("{}foo")) % clusterSlots), "{foo": int(crc16([]byte("{foo")) % clusterSlots),
		"{emails~1~0}:data": int(crc16([]byte("emails~1~0")) % clusterSlots)}
	for key, want := range cases {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestASlotMapOfRedis7IsRead(t *testing.T) {
	node := func(host string, port int64) []interface{} {
		return []interface{}{host, port, "0123abcd", []interface{}{}} // Redis 7: 4 elements
	}
	reply := []interface{}{
		[]interface{}{int64(0), int64(5460), node("10.0.0.1", 7000), node("10.0.0.4", 7003)},
		[]interface{}{int64(5461), int64(16383), node("", 7001)}, // "": the host asked
	}
	got, err := parseSlots(reply, "10.0.0.9:7005")
	want := []slotRange{{0, 5460, "10.0.0.1:7000"}, {5461, 16383, "10.0.0.9:7001"}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parseSlots = %v, %v; want %v", got, err, want)
	}
	if _, err := parseSlots([]interface{}{[]interface{}{int64(0), int64(1)}}, "a:1"); err == nil {
		t.Error("an entry without a master was read")
	}
}

func TestRedirectsAndLostConnectionsAreTriedAgainOtherErrorsNot(t *testing.T) {
	redisErr := func(text string) error { return fmt.Errorf("gqtask: declaring queue %q: %w", "q", errors.New(text)) }
	again := []error{redisErr("MOVED 3999 127.0.0.1:6381"), errors.New("ASK 3999 127.0.0.1:6381"),
		errors.New("TRYAGAIN Multiple keys request during rehashing of slot"), errors.New("CLUSTERDOWN The cluster is down"),
		io.EOF, &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	for _, err := range again {
		if !redirected(err) {
			t.Errorf("redirected(%v) = false", err)
		}
	}
	for _, err := range []error{nil, errors.New("ERR wrong number of arguments"), ErrShardCount,
		curlyq.ErrJobAlreadyExists{Job: curlyq.Job{ID: "x"}}, errors.New("NOSCRIPT No matching script")} {
		if redirected(err) {
			t.Errorf("redirected(%v) = true", err)
		}
	}
	if lostAnswer(errors.New("MOVED 1 a:1")) || !lostAnswer(io.EOF) {
		t.Error("only a lost connection may have written")
	}
}

// A ShardedProducer on a real Redis Cluster ($GQTASK_TEST_CLUSTER: its nodes' host:port,
// separated by commas; tests/test_go_sharded_cluster.py sets it), given a stale slot map
// (every slot on one master): its writes to the shards on the other masters get MOVED,
// it reads the map once again and writes each job on its shard's master.
func TestAStaleSlotMapIsReadAgainAfterAMoved(t *testing.T) {
	addrs := os.Getenv("GQTASK_TEST_CLUSTER")
	if addrs == "" {
		t.Skip("GQTASK_TEST_CLUSTER is not set (tests/test_go_sharded_cluster.py sets it)")
	}
	queue := fmt.Sprintf("gostale-%d", time.Now().UnixNano())
	p, err := NewShardedProducer(ShardedProducerOpts{Cluster: &redis.ClusterOptions{Addrs: strings.Split(addrs, ",")},
		Queue: queue, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	layout, err := p.Layout() // reads the map and declares the queue
	if err != nil {
		t.Fatal(err)
	}
	defer cleanUp(t, p, layout)
	owners := map[string]*redis.Client{} // each shard's master, by the true map
	for _, shard := range layout.Queues {
		owners[shard], _, _ = p.masters.master(keySlot(shard))
	}
	onMasters := map[*redis.Client]bool{}
	for _, owner := range owners {
		onMasters[owner] = true
	}
	if len(onMasters) != 3 {
		t.Fatalf("the 3 shards are on %d masters", len(onMasters))
	}
	p.masters.mu.Lock()
	p.masters.ranges = []slotRange{{0, clusterSlots - 1, owners[layout.Queues[0]].Options().Addr}} // stale
	reads := p.masters.reads
	p.masters.mu.Unlock()
	for _, shard := range layout.Queues {
		job := curlyq.Job{ID: "go-stale-" + shard, Data: []byte("x")}
		if _, err := p.Enqueue(shard, job, time.Time{}); err != nil {
			t.Fatalf("Enqueue on %s: %v", shard, err)
		}
		if held, err := owners[shard].HExists(shard+":data", job.ID).Result(); err != nil || !held {
			t.Errorf("%s's master does not hold %s: %v %v", shard, job.ID, held, err)
		}
	}
	if p.masters.reads != reads+1 {
		t.Errorf("the map was read %d times after it went stale, want 1 (the first MOVED)", p.masters.reads-reads)
	}
}

func cleanUp(t *testing.T, p *ShardedProducer, layout Layout) {
	keys := []string{DescriptorKey(layout.Name)}
	for _, shard := range layout.Queues {
		keys = append(keys, shard+":data", shard+":active", shard+":signal")
	}
	for _, key := range keys {
		if err := p.on(key, func(c *redis.Client) error { return c.Del(key).Err() }); err != nil {
			t.Errorf("deleting %s: %v", key, err)
		}
	}
}
