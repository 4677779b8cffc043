package gqtask

import (
	"errors"
	"testing"
)

func TestTheCountRedisHoldsIsFollowedWhenTheGivenOneIsInItsHistory(t *testing.T) {
	cases := []struct {
		shards          int
		stored, history string
		want            int
	}{{3, "3", "", 3}, {3, "5", "3 5", 5}, {5, "5", "3 5", 5}, {3, "6", "3 5 6", 6}}
	for _, c := range cases {
		if got, err := heldCount("emails", c.shards, c.stored, c.history); err != nil || got != c.want {
			t.Errorf("heldCount(%d, %q, %q) = %d, %v; want %d", c.shards, c.stored, c.history, got, err, c.want)
		}
	}
}

func TestAnotherCountThanRedisHoldsIsRefusedNamingBoth(t *testing.T) {
	for _, history := range []string{"", "3 5", "13"} {
		_, err := heldCount("emails", 4, "5", history)
		if !errors.Is(err, ErrShardCount) {
			t.Fatalf("heldCount(4, 5, %q) = %v, want ErrShardCount", history, err)
		}
		want := `gqtask: wrong count of shards: queue "emails" has 5 shards in Redis (gq:sharded:emails), not 4: ` +
			"every producer and worker must give the same count (or reshard it: gq shards --queue NAME --reshard COUNT)"
		if err.Error() != want {
			t.Errorf("the error says %q", err)
		}
	}
}

func TestAShardedProducerNeedsARedisAndAGoodLayout(t *testing.T) {
	if _, err := NewShardedProducer(ShardedProducerOpts{Queue: "emails", Shards: 3}); err == nil {
		t.Error("a producer without Address or Client was accepted")
	}
	for _, opts := range []ShardedProducerOpts{
		{Address: "127.0.0.1:1", Queue: "emails", Shards: 0},
		{Address: "127.0.0.1:1", Queue: "{emails}", Shards: 3},
	} {
		if _, err := NewShardedProducer(opts); err == nil {
			t.Errorf("NewShardedProducer(%+v) was accepted", opts)
		}
	}
}
