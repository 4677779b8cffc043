package gqtask

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcmathja/curlyq"
)

// The vectors of tests/test_shard_routing.py: the Python side pins the same ones.
const workflow = "01890a5d-ac96-774b-bcce-b302099a8057"

func TestShardIndexIsCRC32OfTheKeyModuloTheShards(t *testing.T) {
	cases := []struct {
		key    string
		shards int
		want   int
	}{{"job-1", 8, 7}, {"invoice-42", 3, 1}, {"émile", 5, 3}, {workflow, 8, 5}, {"x", 1, 0}}
	for _, c := range cases {
		if got := ShardIndex(c.key, c.shards); got != c.want {
			t.Errorf("ShardIndex(%q, %d) = %d, want %d", c.key, c.shards, got, c.want)
		}
	}
}

func TestAWorkflowsJobRoutesByItsWorkflowsID(t *testing.T) {
	cases := map[string]string{
		workflow + ".0": workflow, workflow + ".then": workflow, workflow: workflow,
		"invoice.42": "invoice.42", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.1": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.1",
	}
	for id, want := range cases {
		if got := RouteKey(id); got != want {
			t.Errorf("RouteKey(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestTheShardsNamesAreGqs(t *testing.T) {
	cases := map[int][]string{
		3: {"{emails~0~2}", "{emails~1~0}", "{emails~2~2}"},
		8: {"{emails~0~2}", "{emails~1~43}", "{emails~2~43}", "{emails~3~2}", "{emails~4~42}",
			"{emails~5~2}", "{emails~6~2}", "{emails~7~42}"},
	}
	for shards, want := range cases {
		layout, err := NewLayout("emails", shards)
		if err != nil || !reflect.DeepEqual(layout.Queues, want) {
			t.Errorf("NewLayout(emails, %d) = %v, %v; want %v", shards, layout.Queues, err, want)
		}
	}
	layout, _ := NewLayout("emails", 8)
	if got := layout.ForID(workflow + ".3"); got != "{emails~5~2}" {
		t.Errorf("ForID(workflow.3) = %q, want {emails~5~2}", got)
	}
}

func TestABadLayoutIsRefused(t *testing.T) {
	for _, shards := range []int{0, -1, MaxShards + 1} {
		if _, err := NewLayout("emails", shards); err == nil {
			t.Errorf("NewLayout(emails, %d) was accepted", shards)
		}
	}
	if _, err := NewLayout("{emails}", 3); err == nil {
		t.Error("a name with braces was accepted")
	}
}

func TestRouteGivesAJobAnIDAndItsShard(t *testing.T) {
	layout, _ := NewLayout("emails", 3)
	job := curlyq.Job{Data: []byte("x")}
	shard, err := layout.Route(&job)
	if err != nil || len(job.ID) != 36 || shard != layout.ForID(job.ID) {
		t.Errorf("Route = %q, %v with id %q", shard, err, job.ID)
	}
	kept := curlyq.Job{ID: "job-1"}
	if shard, _ := layout.Route(&kept); kept.ID != "job-1" || shard != layout.Queues[ShardIndex("job-1", 3)] {
		t.Errorf("Route changed a given id or routed it elsewhere: %q %q", kept.ID, shard)
	}
}

// Routing keys of grouped and unique tasks: tests/test_shard_routing.py pins the same.
func TestAGroupedOrUniqueTaskRoutesByItsGroupOrLockWithAMintedID(t *testing.T) {
	layout, _ := NewLayout("emails", 8)
	cases := []struct {
		opts  Options
		shard string
	}{
		{Options{Group: "tenant:a"}, "{emails~5~2}"},
		{Options{Group: "tenant:b"}, "{emails~7~42}"},
		{Options{Group: "émile-group"}, "{emails~3~2}"},
		{Options{Unique: UniqueLock("deliver", "order-1")}, "{emails~2~43}"},
	}
	for _, c := range cases {
		for i := 0; i < 20; i++ {
			job := curlyq.Job{}
			shard, err := layout.RouteTask(&Task{Name: "deliver", Opts: c.opts}, &job)
			if err != nil || shard != c.shard || layout.ForID(job.ID) != c.shard {
				t.Fatalf("RouteTask(%+v) = %q, %v with id %q (its shard %q), want %q",
					c.opts, shard, err, job.ID, layout.ForID(job.ID), c.shard)
			}
		}
	}
}

func TestAGivenIDIsKeptAndTheJobStillRoutesByItsGroup(t *testing.T) {
	layout, _ := NewLayout("emails", 8)
	job := curlyq.Job{ID: "job-1"} // routes to shard 7 by its id
	shard, err := layout.RouteTask(&Task{Name: "deliver", Opts: Options{Group: "acme"}}, &job)
	if err != nil || job.ID != "job-1" || shard != "{emails~6~2}" {
		t.Errorf("RouteTask = %q, %v with id %q; want {emails~6~2} and id job-1", shard, err, job.ID)
	}
	plain := curlyq.Job{ID: "job-1"}
	if shard, _ := layout.RouteTask(&Task{Name: "deliver"}, &plain); shard != "{emails~7~42}" {
		t.Errorf("a plain task routed to %q, want its id's {emails~7~42}", shard)
	}
}

func TestAGroupedUniqueTaskIsRefused(t *testing.T) {
	layout, _ := NewLayout("emails", 3)
	job := curlyq.Job{}
	task := &Task{Name: "deliver", Opts: Options{Group: "acme", Unique: "deliver:key:1"}}
	if _, err := layout.RouteTask(task, &job); !errors.Is(err, ErrGroupWithUnique) || job.ID != "" {
		t.Errorf("RouteTask = %v with id %q; want ErrGroupWithUnique and no id", err, job.ID)
	}
}

func TestNewIDIsAUUIDv7OfNow(t *testing.T) {
	before := time.Now().UnixNano() / int64(time.Millisecond)
	id, err := NewID()
	after := time.Now().UnixNano() / int64(time.Millisecond)
	if err != nil || len(id) != 36 || !isUUID(id) || id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
		t.Fatalf("NewID() = %q, %v; want a UUIDv7", id, err)
	}
	ms, _ := strconv.ParseInt(id[:8]+id[9:13], 16, 64)
	if ms < before || ms > after {
		t.Errorf("NewID's time %d is not between %d and %d", ms, before, after)
	}
	if other, _ := NewID(); other == id {
		t.Errorf("two ids alike: %q", id)
	}
}
