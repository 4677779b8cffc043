package gqtask

// Sharded queues: one logical queue ("emails") made of N plain curlyq queues, its
// shards, each under a hash tag chosen by its Redis Cluster slot (docs/deployment.md,
// "One queue over many masters"). A Go producer writes a job to the shard gq's own
// producers would choose, so that gq's workers, `gq job ID`, cancel and dead retry find
// it where its id says:
//
//   - shard i of N is named "{emails~i~k}", k the first of 0, 1, 2... for which the
//     CRC16 slot of "emails~i~k" falls in the i-th of N equal ranges of the 16384 slots;
//   - a job goes to shard crc32(key) mod N (CRC-32 IEEE of the key's UTF-8 bytes), its
//     key being its id, or for an id "<uuid>.<suffix>" (a workflow's job) that uuid;
//     a grouped task's key is its group, a unique task's its lock, and its id is minted
//     (drawn again until it routes to that key's shard), so that a lookup by id alone
//     finds it on one shard.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"github.com/mcmathja/curlyq"
)

// MaxShards is the most shards of one queue (gq's limit too).
const MaxShards = 256

const clusterSlots = 16384

// mintTries bounds the ids drawn to find one that routes to a shard (gq's MINT_TRIES: each
// draw hits with probability 1/N, N <= 256, so running out is a chance below 1e-30).
const mintTries = 20000

// ErrGroupWithUnique is returned by RouteTask for a task with both Opts.Group and
// Opts.Unique, which gq refuses too ("group with unique_for is not supported yet").
var ErrGroupWithUnique = errors.New("gqtask: a task with a group cannot be unique (gq refuses group with unique_for)")

// Layout is the shards of a sharded queue, in order.
type Layout struct {
	Name   string
	Queues []string
}

// NewLayout returns the layout of queue name over shards shards. The count must be the
// one gq's producers and workers give (Redis holds it in the hash gq:sharded:<name>,
// field "shards"); name has no braces.
func NewLayout(name string, shards int) (Layout, error) {
	if shards < 1 || shards > MaxShards {
		return Layout{}, fmt.Errorf("gqtask: shards of queue %q must be 1 to %d, not %d", name, MaxShards, shards)
	}
	if strings.ContainsAny(name, "{}") {
		return Layout{}, fmt.Errorf("gqtask: a sharded queue's name has no braces, not %q", name)
	}
	queues := make([]string, shards)
	for i := range queues {
		queues[i] = ShardName(name, i, shards)
	}
	return Layout{Name: name, Queues: queues}, nil
}

// ShardName is shard index of shards of queue name: "{name~index~k}".
func ShardName(name string, index, shards int) string {
	low := index * clusterSlots / shards
	high := (index + 1) * clusterSlots / shards
	for k := 0; ; k++ {
		tag := fmt.Sprintf("%s~%d~%d", name, index, k)
		if slot := int(crc16([]byte(tag)) % clusterSlots); low <= slot && slot < high {
			return "{" + tag + "}"
		}
	}
}

// ShardIndex is the routing function: CRC-32 (IEEE) of key's UTF-8 bytes modulo shards.
func ShardIndex(key string, shards int) int {
	return int(crc32.ChecksumIEEE([]byte(key)) % uint32(shards))
}

// RouteKey is a job id's routing key: the id, or the uuid of a workflow's "<uuid>.<suffix>".
func RouteKey(id string) string {
	if len(id) > 36 && id[36] == '.' && isUUID(id[:36]) {
		return id[:36]
	}
	return id
}

// ForKey is the shard of routing key key.
func (l Layout) ForKey(key string) string {
	return l.Queues[ShardIndex(key, len(l.Queues))]
}

// ForID is the shard of a job routed by its id (every job a Go producer writes).
func (l Layout) ForID(id string) string {
	return l.ForKey(RouteKey(id))
}

// Route gives job an id if it has none (a UUIDv7, as gq's producers make) and returns its
// shard: the queue of the curlyq producer that must write it. A grouped or unique task's
// job goes through RouteTask instead.
func (l Layout) Route(job *curlyq.Job) (string, error) {
	return l.RouteTask(nil, job)
}

// TaskKey is a task's routing key in a sharded queue, as gq's producers choose it: its
// group (Opts.Group), else its uniqueness lock (Opts.Unique), else "" (route by the id).
func TaskKey(task *Task) (string, error) {
	if task == nil {
		return "", nil
	}
	if task.Opts.Group != "" && task.Opts.Unique != "" {
		return "", fmt.Errorf("%w: task %s", ErrGroupWithUnique, task.Name)
	}
	if task.Opts.Group != "" {
		return task.Opts.Group, nil
	}
	return task.Opts.Unique, nil
}

// RouteTask returns the shard job (carrying task; nil: a plain job) must be written to,
// as gq's producers route it: by the task's group, else its lock, else the job's id.
// A job without an id gets a new UUIDv7, minted for a grouped or unique task so that
// the id routes to the same shard (gq job ID, cancel and app.result find it on one
// shard). An id given in job.ID is kept; a grouped or unique job so named still goes to
// its group's or lock's shard, and gq finds it by asking every shard (as for gq's
// using(id=...)).
func (l Layout) RouteTask(task *Task, job *curlyq.Job) (string, error) {
	key, err := TaskKey(task)
	if err != nil {
		return "", err
	}
	if job.ID == "" {
		if job.ID, err = l.mint(key); err != nil {
			return "", err
		}
	}
	if key == "" {
		return l.ForID(job.ID), nil
	}
	return l.ForKey(key), nil
}

// mint returns a new id that routes where key does (any new id for key "").
func (l Layout) mint(key string) (string, error) {
	for i := 0; i < mintTries; i++ {
		id, err := NewID()
		if err != nil || key == "" || l.ForID(id) == l.ForKey(key) {
			return id, err
		}
	}
	return "", fmt.Errorf("gqtask: no id routes to %s after %d tries", l.ForKey(key), mintTries)
}

// NewID returns a new job id as gq makes them: a UUIDv7 (RFC 9562) in its text form, its
// first 48 bits the milliseconds of its making, from which gq reads the enqueue time.
func NewID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[6:]); err != nil {
		return "", fmt.Errorf("gqtask: a random id: %w", err)
	}
	ms := uint64(time.Now().UnixNano() / int64(time.Millisecond))
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*uint(i)))
	}
	b[6] = 0x70 | b[6]&0x0f // version 7
	b[8] = 0x80 | b[8]&0x3f // variant 10
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// UniqueLock is the lock gq's producers take for a task given unique_key key
// (@app.task(unique_for=..., unique_key=...) or using(unique_key=...)): set it as
// Opts.Unique so that a Go job routes to the shard of that lock.
func UniqueLock(task, key string) string {
	return task + ":key:" + key
}

func isUUID(text string) bool {
	for i, ch := range text {
		dash := i == 8 || i == 13 || i == 18 || i == 23
		hex := ('0' <= ch && ch <= '9') || ('a' <= ch && ch <= 'f') || ('A' <= ch && ch <= 'F')
		if dash != (ch == '-') || (!dash && !hex) {
			return false
		}
	}
	return true
}

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM: polynomial 0x1021, initial 0).
func crc16(data []byte) uint16 {
	var crc uint16
	for _, b := range data {
		crc ^= uint16(b) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
