package httpapi_test

// A queue's numbers as the detail and group routes report them
// (docs/semantics.md §3.7.5): depth, lag and activeLeases.

import (
	"testing"
	"time"
)

// Groups A and B subscribe (their first pop); five messages are pushed and
// A consumes them. B still has all five to read, so depth is 5 (§3.7.5: a
// subscribed group with no cursor counts from its start) and a queue with
// maxSize 5 refuses a sixth message, writing nothing.
func TestDepthCountsSubscribedGroupWithoutCursor(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.configure("capped", map[string]any{"maxSize": 5})
	for _, g := range []string{"A", "B"} {
		if _, ok := s.popWildcard("capped", g, "&batch=10"); ok {
			t.Fatalf("group %s found a message in an empty queue", g)
		}
	}
	s.pushN("capped", "p", 5)
	p, ok := s.popWildcard("capped", "A", "&batch=10")
	if !ok || len(p.Messages) != 5 {
		t.Fatalf("A popped %d messages, want 5", len(p.Messages))
	}
	s.ackAll("A", p)
	q := s.queue("capped")
	lag := map[string]int64{}
	for _, g := range q.Groups {
		lag[g.Group] = g.Lag
	}
	if q.Depth != 5 || lag["A"] != 0 || lag["B"] != 5 {
		t.Fatalf("depth %d, lag A %d, lag B %d; want 5, 0, 5", q.Depth, lag["A"], lag["B"])
	}
	r := s.do("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "capped", "partition": "p", "payload": 6}}})
	if r.status != 429 {
		t.Fatalf("sixth push into maxSize 5 with B 5 behind: %d %s, want 429", r.status, r.body)
	}
	if b := s.browse("queue=capped&partition=p&limit=100"); len(b.Messages) != 5 {
		t.Fatalf("the refused push wrote: %d messages, want 5", len(b.Messages))
	}
}

// activeLeases counts live leases only: an expired lease stops counting
// when it expires, not when the reaper runs.
func TestActiveLeasesCountOnlyLiveLeases(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("leased", map[string]any{"leaseTime": 30})
	s.pushN("leased", "p", 1)
	if _, ok := s.popWildcard("leased", "g", "&batch=1"); !ok {
		t.Fatal("no message")
	}
	active := func() (onQueue, onGroups int) {
		for _, g := range s.queue("leased").Groups {
			if g.Group == "g" {
				onQueue = g.ActiveLeases
			}
		}
		var gs struct {
			ConsumerGroups []struct {
				Group  string `json:"group"`
				Queues []struct {
					Queue        string `json:"queue"`
					ActiveLeases int    `json:"activeLeases"`
				} `json:"queues"`
			} `json:"consumerGroups"`
		}
		s.expect("GET", "/api/v1/consumer-groups", nil, 200).json(s.t, &gs)
		for _, g := range gs.ConsumerGroups {
			for _, q := range g.Queues {
				if g.Group == "g" && q.Queue == "leased" {
					onGroups = q.ActiveLeases
				}
			}
		}
		return onQueue, onGroups
	}
	if q, g := active(); q != 1 || g != 1 {
		t.Fatalf("while leased: activeLeases %d (queue) %d (groups), want 1", q, g)
	}
	s.env.Clock.Advance(31 * time.Second)
	if q, g := active(); q != 0 || g != 0 {
		t.Fatalf("after the lease expired, before any reap: activeLeases %d (queue) %d (groups), want 0", q, g)
	}
}
