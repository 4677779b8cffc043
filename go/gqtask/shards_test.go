package gqtask

import (
	"reflect"
	"testing"

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
