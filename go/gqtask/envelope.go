// Package gqtask encodes and decodes gq task envelopes and routes them by task name, so
// that a Go service on curlyq enqueues tasks for a Python gq worker and serves tasks a
// Python producer enqueued (gq's docs/wire.md and SPEC section 14).
//
// A task job is an ordinary curlyq job whose Data is the 4 bytes "\x00gqt" followed by a
// MessagePack map: task (str), args (array), kwargs (map), and optionally opts (map: the
// options gq enforces) and headers (map of str). Everything lives in Data because curlyq
// rewrites a message from its own three fields when it retries or kills a job.
package gqtask

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/mcmathja/curlyq"
	"github.com/vmihailenco/msgpack/v4"
)

// Magic starts the Data of every task job.
const Magic = "\x00gqt"

// ErrNotEnvelope is returned (wrapped) by Decode for Data that is not a task envelope.
var ErrNotEnvelope = errors.New("gqtask: not a task envelope")

// Task is one call of a named task: what an envelope holds.
//
// Values in Args and Kwargs are what MessagePack carries: nil, bool, integers, floats,
// string, []byte, slices, maps with string keys and time.Time (MessagePack's timestamp:
// a timezone-aware datetime in Python). Decoded integers are int64 (uint64 above its
// range), floats float64, arrays []interface{}, maps map[string]interface{}.
type Task struct {
	Name    string
	Args    []interface{}
	Kwargs  map[string]interface{}
	Opts    Options
	Headers map[string]string
}

// Encode returns the envelope: Magic then the MessagePack map.
func (t Task) Encode() ([]byte, error) {
	if t.Name == "" {
		return nil, errors.New("gqtask: a task needs a name")
	}
	rest := map[string]interface{}{"args": orEmpty(t.Args), "kwargs": orEmptyMap(t.Kwargs)}
	if opts := t.Opts.toMap(); len(opts) > 0 {
		rest["opts"] = opts
	}
	if len(t.Headers) > 0 {
		rest["headers"] = t.Headers
	}
	var buf bytes.Buffer
	buf.WriteString(Magic)
	if err := encodeTaskFirst(msgpack.NewEncoder(&buf).SortMapKeys(true), t.Name, rest); err != nil {
		return nil, fmt.Errorf("gqtask: task %s: %w", t.Name, err)
	}
	return buf.Bytes(), nil
}

// encodeTaskFirst writes the envelope's map with "task" as its first key, as gq's own
// envelope does: the job events' Lua reads the task's name there without decoding the
// map (gq/scripts/lib/events.lua). The other keys follow sorted, so the bytes are stable.
func encodeTaskFirst(enc *msgpack.Encoder, name string, rest map[string]interface{}) error {
	keys := make([]string, 0, len(rest))
	for k := range rest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if err := enc.EncodeMapLen(len(rest) + 1); err != nil {
		return err
	}
	if err := enc.EncodeString("task"); err != nil {
		return err
	}
	if err := enc.EncodeString(name); err != nil {
		return err
	}
	for _, k := range keys {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := enc.Encode(rest[k]); err != nil {
			return err
		}
	}
	return nil
}

// Job returns a curlyq job carrying the task (ID empty: curlyq's producer makes one).
func (t Task) Job() (curlyq.Job, error) {
	data, err := t.Encode()
	return curlyq.Job{Data: data}, err
}

// IsEnvelope reports whether a job's Data is a task envelope.
func IsEnvelope(data []byte) bool {
	return bytes.HasPrefix(data, []byte(Magic))
}

// Decode reads an envelope; the error says what is malformed.
func Decode(data []byte) (*Task, error) {
	if !IsEnvelope(data) {
		return nil, fmt.Errorf("%w (no \\x00gqt prefix)", ErrNotEnvelope)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(data[len(Magic):])).UseDecodeInterfaceLoose(true)
	value, err := dec.DecodeInterfaceLoose()
	if err != nil {
		return nil, fmt.Errorf("%w: not MessagePack: %v", ErrNotEnvelope, err)
	}
	body, ok := value.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("%w: a %T, not a map", ErrNotEnvelope, value)
	}
	return fromMap(body)
}

func fromMap(body map[string]interface{}) (*Task, error) {
	name, ok := body["task"].(string)
	if !ok || name == "" {
		return nil, fmt.Errorf("%w: task is %#v, not a non-empty string", ErrNotEnvelope, body["task"])
	}
	t := &Task{Name: name}
	var err error
	if t.Args, ok = body["args"].([]interface{}); !ok {
		return nil, fmt.Errorf("%w: task %s: args is %T, not an array", ErrNotEnvelope, name, body["args"])
	}
	if t.Kwargs, ok = body["kwargs"].(map[string]interface{}); !ok {
		return nil, fmt.Errorf("%w: task %s: kwargs is %T, not a map", ErrNotEnvelope, name, body["kwargs"])
	}
	t.Args = normalize(t.Args).([]interface{})
	t.Kwargs = normalize(t.Kwargs).(map[string]interface{})
	if t.Headers, err = headersOf(body["headers"]); err != nil {
		return nil, fmt.Errorf("%w: task %s: %v", ErrNotEnvelope, name, err)
	}
	if t.Opts, err = optionsOf(body["opts"]); err != nil {
		return nil, fmt.Errorf("%w: task %s: %v", ErrNotEnvelope, name, err)
	}
	return t, nil
}

func headersOf(value interface{}) (map[string]string, error) {
	headers := map[string]string{}
	if value == nil {
		return headers, nil
	}
	raw, ok := value.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("headers is %T, not a map", value)
	}
	for key, v := range raw {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("headers[%q] is %T, not a string", key, v)
		}
		headers[key] = s
	}
	return headers, nil
}

// normalize turns the decoder's *time.Time into time.Time in UTC (as Python reads a
// timestamp back), in place, at any depth.
func normalize(value interface{}) interface{} {
	switch v := value.(type) {
	case *time.Time:
		return v.UTC()
	case time.Time:
		return v.UTC()
	case []interface{}:
		for i, item := range v {
			v[i] = normalize(item)
		}
	case map[string]interface{}:
		for key, item := range v {
			v[key] = normalize(item)
		}
	}
	return value
}

func orEmpty(args []interface{}) []interface{} {
	if args == nil {
		return []interface{}{}
	}
	return args
}

func orEmptyMap(kwargs map[string]interface{}) map[string]interface{} {
	if kwargs == nil {
		return map[string]interface{}{}
	}
	return kwargs
}

// seconds is a duration as gq writes it: float seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }
