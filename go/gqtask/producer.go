package gqtask

// ShardedProducer: a Go producer of a sharded queue that follows a reshard as gq's own
// producers do (docs/deployment.md, "Resharding"): it reads the queue's layout from the
// descriptor gq:sharded:<name> at its first use, declaring it there when no gq producer
// did yet, and reads it again at most once a second, so that its jobs go to the new
// layout within a second of `gq shards --reshard` and never to a retired shard.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis/v7"
	"github.com/mcmathja/curlyq"
)

// Refresh is how long a ShardedProducer keeps the layout it read (gq's REFRESH): a
// reshard's old layout is retired no sooner than 10 s after the reshard, long after
// every producer has looked again.
const Refresh = time.Second

// ErrShardCount is returned (wrapped, with the counts) when Redis holds another count of
// shards than the one given and the queue never had the given one: gq refuses it too.
var ErrShardCount = errors.New("gqtask: wrong count of shards")

// declareScript records the layout unless one is recorded (the fields gq's declare writes)
// and returns the count Redis holds and the counts the queue had (its reshards' history).
var declareScript = redis.NewScript(`
if redis.call('HSETNX', KEYS[1], 'shards', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'queues', ARGV[2], 'version', ARGV[3], 'routing', ARGV[4])
end
return redis.call('HMGET', KEYS[1], 'shards', 'history')
`)

// ShardedProducerOpts configures a ShardedProducer.
type ShardedProducerOpts struct {
	// Address of the Redis of the queue, or Client (which overrides Address), as for
	// curlyq's ProducerOpts. One Redis server: the descriptor and every shard are read
	// and written through it (curlyq's producer talks to one server).
	Address string
	Client  *redis.Client
	// Queue is the sharded queue's name ("emails", no braces).
	Queue string
	// Shards is the count the queue is declared with when Redis holds none; gq's count
	// is followed when it differs only by a reshard (the queue had Shards before).
	Shards int
	// Logger is given to each shard's curlyq producer (curlyq's default when nil).
	Logger curlyq.Logger
}

// ShardedProducer writes task jobs to the shards of a sharded queue where gq's producers
// would (Layout.RouteTask), on the layout Redis holds. Safe for concurrent use.
type ShardedProducer struct {
	opts   ShardedProducerOpts
	client *redis.Client

	mu        sync.Mutex
	layout    Layout
	until     time.Time // when to read the descriptor again
	producers map[string]*curlyq.Producer
}

// NewShardedProducer checks opts; Redis is first read at the first job.
func NewShardedProducer(opts ShardedProducerOpts) (*ShardedProducer, error) {
	if opts.Address == "" && opts.Client == nil {
		return nil, errors.New("gqtask: a ShardedProducer needs an Address or a Client")
	}
	if _, err := NewLayout(opts.Queue, opts.Shards); err != nil {
		return nil, err
	}
	client := opts.Client
	if client == nil {
		client = redis.NewClient(&redis.Options{Addr: opts.Address})
	}
	return &ShardedProducer{opts: opts, client: client, producers: map[string]*curlyq.Producer{}}, nil
}

// Layout is the queue's layout as Redis holds it, read again once Refresh has passed
// since the last read (declared with opts.Shards when Redis holds none).
func (p *ShardedProducer) Layout() (Layout, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.layout.Queues != nil && time.Now().Before(p.until) {
		return p.layout, nil
	}
	looked := time.Now() // before the read: a reshard after it is seen within Refresh
	layout, err := Declare(p.client, p.opts.Queue, p.opts.Shards)
	if err != nil {
		return Layout{}, err
	}
	p.layout, p.until = layout, looked.Add(Refresh)
	return layout, nil
}

// Route returns the shard job (carrying task; nil for a plain job) goes to on the
// current layout, giving it an id as Layout.RouteTask does. Write it with Shard(shard).
func (p *ShardedProducer) Route(task *Task, job *curlyq.Job) (string, error) {
	layout, err := p.Layout()
	if err != nil {
		return "", err
	}
	return layout.RouteTask(task, job)
}

// Shard is the curlyq producer of shard (one per shard, made at its first use, sharing
// the ShardedProducer's Redis client).
func (p *ShardedProducer) Shard(shard string) *curlyq.Producer {
	p.mu.Lock()
	defer p.mu.Unlock()
	producer, ok := p.producers[shard]
	if !ok {
		producer = curlyq.NewProducer(&curlyq.ProducerOpts{Client: p.client, Queue: shard, Logger: p.opts.Logger})
		p.producers[shard] = producer
	}
	return producer
}

// Perform enqueues task to run now; it returns the job's id.
func (p *ShardedProducer) Perform(task Task) (string, error) {
	return p.PerformAt(time.Time{}, task)
}

// PerformAt enqueues task to run at at (the zero time: now); it returns the job's id.
func (p *ShardedProducer) PerformAt(at time.Time, task Task) (string, error) {
	job, err := task.Job()
	if err != nil {
		return "", err
	}
	shard, err := p.Route(&task, &job)
	if err != nil {
		return "", err
	}
	if at.IsZero() {
		return p.Shard(shard).Perform(job)
	}
	return p.Shard(shard).PerformAt(at, job)
}

// Declare records the layout of queue name over shards shards in Redis unless one is
// recorded (as gq's producers do at their first use: the hash gq:sharded:<name>, fields
// shards, queues, version, routing, in one script) and returns the layout Redis holds.
// A count the queue had before a reshard follows Redis; any other is ErrShardCount.
func Declare(client redis.Cmdable, name string, shards int) (Layout, error) {
	given, err := NewLayout(name, shards)
	if err != nil {
		return Layout{}, err
	}
	args := []interface{}{shards, strings.Join(given.Queues, " "), "1", "crc32"}
	reply, err := declareScript.Run(client, []string{DescriptorKey(name)}, args...).Result()
	if err != nil {
		return Layout{}, fmt.Errorf("gqtask: declaring queue %q: %w", name, err)
	}
	fields, _ := reply.([]interface{})
	stored, history := field(fields, 0), field(fields, 1)
	held, err := heldCount(name, shards, stored, history)
	if err != nil || held == shards {
		return given, err
	}
	return NewLayout(name, held)
}

// DescriptorKey is the hash in which gq records sharded queue name's layout.
func DescriptorKey(name string) string {
	return "gq:sharded:" + name
}

// heldCount is the count Redis holds (stored) when shards is it or a count the queue had
// before a reshard (history: counts separated by spaces), else ErrShardCount.
func heldCount(name string, shards int, stored, history string) (int, error) {
	given := strconv.Itoa(shards)
	if stored != given && !contains(strings.Fields(history), given) {
		return 0, fmt.Errorf("%w: queue %q has %s shards in Redis (%s), not %d: every producer and "+
			"worker must give the same count (or reshard it: gq shards --queue NAME --reshard COUNT)",
			ErrShardCount, name, stored, DescriptorKey(name), shards)
	}
	held, err := strconv.Atoi(stored)
	if err != nil {
		return 0, fmt.Errorf("gqtask: queue %q: %s holds shards %q, not a count", name, DescriptorKey(name), stored)
	}
	return held, nil
}

func field(fields []interface{}, i int) string {
	if i < len(fields) {
		if s, ok := fields[i].(string); ok {
			return s
		}
	}
	return ""
}

func contains(items []string, item string) bool {
	for _, each := range items {
		if each == item {
			return true
		}
	}
	return false
}
