package httpapi_test

import (
	"fmt"
	"testing"
	"time"
)

// A seek is a group's first use of the queue when it comes before any pop:
// it subscribes the group from the seek on (docs/semantics.md §3.7.3).
// After a seek to the end, the group reads exactly what was pushed after
// the seek — on the partitions it positioned and on partitions created
// later — and a later pop's subscriptionMode does not change that (§3.3.3:
// later modes do not change a subscription).
func TestSeekBeforeFirstPopSubscribes(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.pushN("sq", "a", 3)
	s.expect("POST", "/api/v1/consumer-groups/G/queues/sq/seek", map[string]any{"toEnd": true}, 200)
	s.env.Clock.Advance(time.Second)
	s.pushN("sq", "a", 2)
	s.pushN("sq", "b", 2)
	s.env.Clock.Advance(time.Second)
	p, ok := s.popWildcard("sq", "G", "&batch=10&partitions=10&subscriptionMode=new")
	if !ok {
		t.Fatal("204: the four messages pushed after the seek were not delivered")
	}
	got := map[string][]int64{}
	for _, m := range p.Messages {
		got[m.Partition] = append(got[m.Partition], m.Offset)
	}
	if fmt.Sprint(got["a"]) != "[3 4]" || fmt.Sprint(got["b"]) != "[0 1]" || len(p.Messages) != 4 {
		t.Fatalf("after the seek got %v, want a:[3 4] b:[0 1]", got)
	}
	var g struct {
		Queues []struct {
			Queue string `json:"queue"`
			Mode  string `json:"subscriptionMode"`
		} `json:"queues"`
	}
	s.expect("GET", "/api/v1/consumer-groups/G", nil, 200).json(t, &g)
	if len(g.Queues) != 1 || g.Queues[0].Mode != "all" {
		t.Fatalf("group after seek and pop: %+v, want subscribed all", g)
	}
}
