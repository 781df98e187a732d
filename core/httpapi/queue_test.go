package httpapi_test

// A queue's numbers as the detail and group routes report them
// (docs/semantics.md §3.7.5): depth, lag and activeLeases.

import (
	"fmt"
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

// A queue's detail pages its partitions in name order: each page's
// nextPartition is the next one's partitionsAfter, the last page has
// none, every partition comes exactly once; a limit that is not a number
// is a 400.
func TestQueueDetailPagesPartitions(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var items []map[string]any
	for i := range 25 {
		items = append(items, map[string]any{"queue": "wide", "partition": fmt.Sprintf("p%02d", i), "payload": i})
	}
	s.expect("POST", "/api/v1/push", map[string]any{"items": items}, 201)
	var seen []string
	after := ""
	for pages := 1; ; pages++ {
		var page struct {
			Partitions []struct {
				Name string `json:"name"`
			} `json:"partitions"`
			NextPartition string `json:"nextPartition"`
		}
		s.expect("GET", "/api/v1/resources/queues/wide?partitionsLimit=10&partitionsAfter="+after, nil, 200).json(t, &page)
		for _, p := range page.Partitions {
			seen = append(seen, p.Name)
		}
		if page.NextPartition == "" {
			if pages != 3 || len(page.Partitions) != 5 {
				t.Fatalf("last page is page %d with %d partitions, want page 3 with 5", pages, len(page.Partitions))
			}
			break
		}
		if len(page.Partitions) != 10 || page.NextPartition != seen[len(seen)-1] {
			t.Fatalf("page %d: %d partitions, next %q; want 10, next %q", pages, len(page.Partitions),
				page.NextPartition, seen[len(seen)-1])
		}
		after = page.NextPartition
	}
	for i, name := range seen {
		if want := fmt.Sprintf("p%02d", i); name != want {
			t.Fatalf("partition %d of the pages is %s, want %s (all of %v)", i, name, want, seen)
		}
	}
	if len(seen) != 25 {
		t.Fatalf("pages held %d partitions, want 25", len(seen))
	}
	if r := s.do("GET", "/api/v1/resources/queues/wide?partitionsLimit=ten", nil); r.status != 400 {
		t.Fatalf("partitionsLimit=ten: %d %s, want 400", r.status, r.body)
	}
}
