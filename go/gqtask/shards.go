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
//     key being its id, or for an id "<uuid>.<suffix>" (a workflow's job) that uuid.

import (
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/gofrs/uuid"
	"github.com/mcmathja/curlyq"
)

// MaxShards is the most shards of one queue (gq's limit too).
const MaxShards = 256

const clusterSlots = 16384

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

// Route gives job an id if it has none (a UUID, as curlyq would) and returns its shard:
// the queue of the curlyq producer that must write it.
func (l Layout) Route(job *curlyq.Job) (string, error) {
	if job.ID == "" {
		id, err := uuid.NewV4()
		if err != nil {
			return "", err
		}
		job.ID = id.String()
	}
	return l.ForID(job.ID), nil
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
