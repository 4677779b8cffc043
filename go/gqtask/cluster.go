package gqtask

// A sharded queue on a Redis Cluster: its shards' hash tags are chosen so that they spread
// over the masters by slot, and a curlyq producer talks to one server (a *redis.Client).
// The ShardedProducer reads which master serves each slot (CLUSTER SLOTS), keeps one
// client per master, and writes each shard through its master's client.
//
// go-redis v7's ClusterClient (curlyq's go-redis) is not used: v7.2.0 cannot read the
// CLUSTER SLOTS reply of Redis 7 (each node has a fourth element there, its metadata:
// "got 4 elements in cluster info address, expected 2 or 3"), so the map is read here
// with a plain command and taken element by element.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/go-redis/redis/v7"
)

// slotRange is a range of slots and the address of the master that serves them.
type slotRange struct {
	first, last int
	master      string
}

// masters is a Redis Cluster's slot map and a client per master, made on first use with
// the ClusterOptions' settings (password, TLS, dialer, timeouts, pool).
type masters struct {
	opts *redis.ClusterOptions

	mu      sync.Mutex
	ranges  []slotRange
	reads   int // how many times the map was read: a failed write refreshes it once
	clients map[string]*redis.Client
}

func newMasters(opts *redis.ClusterOptions) *masters {
	return &masters{opts: opts, clients: map[string]*redis.Client{}}
}

// on runs write on the client of the master serving key's slot. After a redirect (MOVED,
// ASK, TRYAGAIN, CLUSTERDOWN) or a lost connection (a failover, a slot migration) it
// reads the slot map again (unless another write did since) and runs write once more,
// on the master the map names now; that error, if any, is the caller's.
func (m *masters) on(key string, write func(*redis.Client) error) error {
	slot := keySlot(key)
	client, reads, err := m.master(slot)
	if err != nil {
		return err
	}
	err = write(client)
	if !redirected(err) {
		return err
	}
	if refreshErr := m.refresh(reads); refreshErr != nil {
		return fmt.Errorf("%w (and the slot map could not be read again: %v)", err, refreshErr)
	}
	if client, _, err = m.master(slot); err != nil {
		return err
	}
	return write(client)
}

// master is the client of slot's master and the count of reads of the map it came from.
func (m *masters) master(slot int) (*redis.Client, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ranges == nil {
		if err := m.read(); err != nil {
			return nil, 0, err
		}
	}
	for _, r := range m.ranges {
		if r.first <= slot && slot <= r.last {
			return m.client(r.master), m.reads, nil
		}
	}
	return nil, 0, fmt.Errorf("gqtask: no master of the Redis Cluster serves slot %d (CLUSTER SLOTS)", slot)
}

// refresh reads the map again unless it was read since the read seen (reads).
func (m *masters) refresh(seen int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reads != seen {
		return nil
	}
	return m.read()
}

// read asks the known masters, then the seed addresses, for CLUSTER SLOTS: the first
// answer is the map. m.mu is held.
func (m *masters) read() error {
	var asked []string
	for _, r := range m.ranges {
		asked = appendNew(asked, r.master)
	}
	for _, addr := range m.opts.Addrs {
		asked = appendNew(asked, addr)
	}
	err := errors.New("gqtask: a Redis Cluster needs ClusterOptions.Addrs")
	for _, addr := range asked {
		var reply interface{}
		if reply, err = m.client(addr).Do("CLUSTER", "SLOTS").Result(); err == nil {
			var ranges []slotRange
			if ranges, err = parseSlots(reply, addr); err == nil {
				m.ranges = ranges
				m.reads++
				return nil
			}
		}
	}
	return fmt.Errorf("gqtask: reading the Redis Cluster's slots (CLUSTER SLOTS from %s): %w",
		strings.Join(asked, ", "), err)
}

// client is addr's client, made at its first use. m.mu is held.
func (m *masters) client(addr string) *redis.Client {
	client, ok := m.clients[addr]
	if !ok {
		o := m.opts
		client = redis.NewClient(&redis.Options{
			Addr: addr, Dialer: o.Dialer, OnConnect: o.OnConnect, Password: o.Password,
			MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			PoolSize: o.PoolSize, MinIdleConns: o.MinIdleConns, MaxConnAge: o.MaxConnAge,
			PoolTimeout: o.PoolTimeout, IdleTimeout: o.IdleTimeout, IdleCheckFrequency: o.IdleCheckFrequency,
			TLSConfig: o.TLSConfig,
		})
		m.clients[addr] = client
	}
	return client
}

// close closes every client made.
func (m *masters) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var first error
	for _, client := range m.clients {
		if err := client.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// parseSlots reads a CLUSTER SLOTS reply: entries [first, last, master, replicas...],
// each node [endpoint, port, id, metadata...]. An empty endpoint is the host that answered
// (asked).
func parseSlots(reply interface{}, asked string) ([]slotRange, error) {
	entries, _ := reply.([]interface{})
	ranges := make([]slotRange, 0, len(entries))
	for _, entry := range entries {
		fields, _ := entry.([]interface{})
		if len(fields) < 3 {
			return nil, fmt.Errorf("gqtask: CLUSTER SLOTS entry %v has no master", entry)
		}
		first, firstOK := fields[0].(int64)
		last, lastOK := fields[1].(int64)
		node, _ := fields[2].([]interface{})
		if !firstOK || !lastOK || len(node) < 2 {
			return nil, fmt.Errorf("gqtask: CLUSTER SLOTS entry %v is not [first, last, [host, port, ...], ...]", entry)
		}
		host, _ := node[0].(string)
		port, _ := node[1].(int64)
		if host == "" {
			host, _, _ = net.SplitHostPort(asked)
		}
		master := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		ranges = append(ranges, slotRange{first: int(first), last: int(last), master: master})
	}
	return ranges, nil
}

// redirected tells whether err says that the key's slot is served elsewhere now, or that
// the connection was lost: worth a new slot map and one more try.
func redirected(err error) bool {
	if err == nil || lostAnswer(err) {
		return err != nil
	}
	for inner := errors.Unwrap(err); inner != nil; inner = errors.Unwrap(inner) {
		err = inner // Redis's own error, under Declare's wrapping
	}
	for _, prefix := range []string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "READONLY "} {
		if strings.HasPrefix(err.Error(), prefix) {
			return true
		}
	}
	return false
}

// lostAnswer tells whether err is a lost connection: the write may have been done.
func lostAnswer(err error) bool {
	var netErr net.Error
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr))
}

// keySlot is key's Redis Cluster slot: the CRC16 of its hash tag (the text between its
// first "{" and the next "}", when not empty), else of the key.
func keySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if length := strings.IndexByte(key[open+1:], '}'); length > 0 {
			key = key[open+1 : open+1+length]
		}
	}
	return int(crc16([]byte(key)) % clusterSlots)
}

func appendNew(items []string, item string) []string {
	if contains(items, item) {
		return items
	}
	return append(items, item)
}
