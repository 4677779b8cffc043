package gqtask

import (
	"context"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcmathja/curlyq"
)

// fromPython is gq.tasks.envelope.encode("deliver", ["https://a", {"event": "paid", "n": [1, 2.5,
// None, True]}], {"tenant": "acme", "blob": b"\x00\x01", "when": datetime(2026, 12, 1, 12,
// 0, 0, 500000, utc)}, {"retries": 3, "timeout": 30.0, "expires": 1796126400.25,
// "future_key": "x"}, {"traceparent": "00-abc"}), as gq's Python side writes it.
const fromPython = "0067717485a47461736ba764656c69766572a46172677392a968747470733a2f2f6182a56576656e74a470616964a16e9401cb4004000000000000c0c3a66b776172677383a674656e616e74a461636d65a4626c6f62c4020001a47768656ed7ff773594006b0eb6c0a46f70747384a77265747269657303a774696d656f7574cb403e000000000000a765787069726573cb41dac3adb0100000aa6675747572655f6b6579a178a76865616465727381ab7472616365706172656e74a630302d616263"

func TestDecodeWhatPythonWrites(t *testing.T) {
	data, _ := hex.DecodeString(fromPython)
	task, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 12, 1, 12, 0, 0, 500000000, time.UTC)
	want := &Task{
		Name: "deliver",
		Args: []interface{}{"https://a", map[string]interface{}{
			"event": "paid", "n": []interface{}{int64(1), 2.5, nil, true}}},
		Kwargs:  map[string]interface{}{"tenant": "acme", "blob": []byte{0, 1}, "when": when},
		Opts:    Options{Retries: RetriesOf(3), Timeout: 30 * time.Second, Expires: time.Unix(1796126400, 250000000).UTC(), Extra: map[string]interface{}{"future_key": "x"}},
		Headers: map[string]string{"traceparent": "00-abc"},
	}
	if !reflect.DeepEqual(task, want) {
		t.Fatalf("decoded\n%#v\nwant\n%#v", task, want)
	}
}

func TestRoundTripKeepsEveryField(t *testing.T) {
	task := Task{
		Name:    "report",
		Args:    []interface{}{int64(-7), "x", []byte("raw"), []interface{}{map[string]interface{}{"deep": int64(1)}}},
		Kwargs:  map[string]interface{}{"at": time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), "f": 0.5},
		Opts:    Options{Retries: RetriesOf(0), Backoff: 90 * time.Second, ResultTTL: time.Hour, Unique: "u", Group: "acme"},
		Headers: map[string]string{"k": "v"},
	}
	data, err := task.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*back, task) {
		t.Fatalf("round trip\n%#v\nwant\n%#v", *back, task)
	}
}

func TestEncodeLeavesUnsetOptionsOut(t *testing.T) {
	data, err := Task{Name: "noop"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// {"task": "noop", "args": [], "kwargs": {}}: "task" first (as gq writes it, where
	// the job events' Lua reads it), the others sorted, nothing else.
	want := Magic + "\x83\xa4task\xa4noop\xa4args\x90\xa6kwargs\x80"
	if string(data) != want {
		t.Fatalf("got %q, want %q", data, want)
	}
	if _, err := (Task{}).Encode(); err == nil {
		t.Fatal("a task without a name encoded")
	}
}

func TestDecodeRefusesMalformedEnvelopes(t *testing.T) {
	cases := map[string]string{
		"no prefix":       "\x83\xa4task\xa1x",
		"not msgpack":     Magic + "\xc1",
		"not a map":       Magic + "\x90",
		"no task":         Magic + "\x82\xa4args\x90\xa6kwargs\x80",
		"args not array":  Magic + "\x83\xa4task\xa1x\xa4args\x80\xa6kwargs\x80",
		"kwargs not map":  Magic + "\x83\xa4task\xa1x\xa4args\x90\xa6kwargs\x90",
		"header not str":  Magic + "\x84\xa4task\xa1x\xa4args\x90\xa6kwargs\x80\xa7headers\x81\xa1k\x01",
		"retries not int": Magic + "\x84\xa4task\xa1x\xa4args\x90\xa6kwargs\x80\xa4opts\x81\xa7retries\xa1x",
	}
	for name, data := range cases {
		if _, err := Decode([]byte(data)); !errors.Is(err, ErrNotEnvelope) {
			t.Errorf("%s: got %v, want ErrNotEnvelope", name, err)
		}
	}
}

func TestRouterRunsTheNamedHandlerWithItsArguments(t *testing.T) {
	router := NewRouter()
	var got Call
	router.Register("add", func(ctx context.Context, call Call) error {
		got = call
		_, bounded := ctx.Deadline()
		if !bounded {
			return errors.New("the task's timeout did not bound the context")
		}
		return nil
	})
	job, _ := Task{Name: "add", Args: []interface{}{int64(1), int64(2)}, Opts: Options{Timeout: time.Second}}.Job()
	job.ID = "j1"
	if err := router.Serve(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if got.Job.ID != "j1" || !reflect.DeepEqual(got.Args, []interface{}{int64(1), int64(2)}) {
		t.Fatalf("handler got %#v", got)
	}
}

func TestRouterFailsUnknownTasksAndBadData(t *testing.T) {
	router := NewRouter()
	job, _ := Task{Name: "nobody.serves"}.Job()
	err := router.Serve(context.Background(), job)
	if !errors.Is(err, ErrUnknownTask) || !strings.Contains(err.Error(), "nobody.serves") {
		t.Fatalf("got %v, want ErrUnknownTask naming the task", err)
	}
	err = router.Serve(context.Background(), curlyq.Job{ID: "b", Data: []byte("bytes")})
	if !errors.Is(err, ErrNotEnvelope) {
		t.Fatalf("got %v, want ErrNotEnvelope", err)
	}
}
