package httpapi_test

// Pops through the API: which partitions a wildcard pop serves
// (docs/semantics.md §3.4.3) and how many one pop leases (§3.4.1). Every
// expected value comes from docs/semantics.md; none was taken from running
// the engine.

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Consumed partitions do not hide a deliverable one: 150 partitions are
// consumed one by one; a message then pushed to the last one served is
// deliverable, so the very next wildcard pop returns it.
func TestWildcardPopFindsPushAfterDrain(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.pushOnePerPartition("wide", 150, func(i int) string { return fmt.Sprintf("p%03d", i) })
	seen := map[string]bool{}
	var last string
	for range 150 {
		p, ok := s.popWildcard("wide", "g", "&batch=1")
		if !ok {
			t.Fatalf("204 after %d of 150 partitions, with messages waiting", len(seen))
		}
		last = p.Partition
		seen[last] = true
		s.ackAll("g", p)
	}
	if len(seen) != 150 {
		t.Fatalf("served %d distinct partitions, want 150", len(seen))
	}
	if _, ok := s.popWildcard("wide", "g", "&batch=1"); ok {
		t.Fatal("a pop after the drain found a message; none was pushed")
	}
	s.pushN("wide", last, 1)
	p, ok := s.popWildcard("wide", "g", "&batch=1")
	if !ok || p.Partition != last || len(p.Messages) != 1 || p.Messages[0].Offset != 1 {
		t.Fatalf("after pushing to %s: ok=%v %+v, want its offset 1", last, ok, p)
	}
}

// Waiting partitions do not hide a deliverable one either: with
// windowBuffer 10 s, 100 partitions pushed to a moment ago are not
// deliverable, and the quiet partition scheduled after them is.
func TestWildcardPopSkipsPartitionsInTheirWindow(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("windowed", map[string]any{"windowBuffer": 10})
	busy := func(i int) string { return fmt.Sprintf("busy%03d", i) }
	s.pushOnePerPartition("windowed", 100, busy)
	s.pushN("windowed", "quiet", 1)
	s.env.Clock.Advance(11 * time.Second)
	s.pushOnePerPartition("windowed", 100, busy) // their windows start again
	for range 2 {
		p, ok := s.popWildcard("windowed", "g", "&batch=1")
		if !ok || p.Partition != "quiet" {
			t.Fatalf("wildcard pop: ok=%v partition %q, want the quiet partition, the only deliverable one", ok, p.Partition)
		}
		s.ackAll("g", p)
		if _, ok := s.popWildcard("windowed", "g", "&batch=1"); ok {
			t.Fatal("a pop found a message while every other partition is inside its window")
		}
		s.pushN("windowed", "quiet", 1)
		s.env.Clock.Advance(10 * time.Second)
		s.pushOnePerPartition("windowed", 100, busy)
	}
	// Once the busy partitions are quiet for 10 s they are served again.
	s.env.Clock.Advance(10 * time.Second)
	got := 0
	for {
		p, ok := s.popWildcard("windowed", "g", "&batch=1000&partitions=100")
		if !ok {
			break
		}
		got += len(p.Messages)
		s.ackAll("g", p)
	}
	if want := 100*4 + 1; got != want { // four pushes to each busy partition, the quiet one's last
		t.Fatalf("after the windows passed got %d messages, want %d", got, want)
	}
}

// partitions=N: one pop leases up to N partitions (§3.4.1), here 100 of
// 120 each holding one message, under one lease id.
func TestPopLeasesManyPartitionsUnderOneLease(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.pushOnePerPartition("many", 120, func(i int) string { return fmt.Sprintf("m%03d", i) })
	p, ok := s.popWildcard("many", "g", "&batch=500&partitions=100")
	if !ok {
		t.Fatal("204 with 120 partitions waiting")
	}
	parts := map[string]bool{}
	for _, m := range p.Messages {
		parts[m.Partition] = true
		if m.LeaseID != p.LeaseID {
			t.Fatalf("message under lease %s, pop lease %s", m.LeaseID, p.LeaseID)
		}
	}
	if len(p.Messages) != 100 || len(parts) != 100 {
		t.Fatalf("partitions=100 leased %d messages from %d partitions, want 100 from 100", len(p.Messages), len(parts))
	}
}

// Pushes in flight to a partition with a backlog do not hide it from
// wildcard pops. Four producers push one message at a time while one
// consumer pops and acks; every pop finds the backlog.
func TestWildcardPopSeesBacklogDuringPushes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for range 4 {
		s.pushN("hot", "only", 500)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"items":[{"queue":"hot","partition":"only","payload":%d}]}`, w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Post(s.URL+"/api/v1/push", "application/json", strings.NewReader(body))
				if err != nil {
					return
				}
				resp.Body.Close()
			}
		}()
	}
	const pops = 200
	empty := 0
	for range pops {
		p, ok := s.popWildcard("hot", "g", "&batch=1")
		if !ok {
			empty++
			continue
		}
		s.ackAll("g", p)
	}
	close(stop)
	wg.Wait()
	if empty > 0 {
		t.Fatalf("%d of %d wildcard pops answered 204 while at least 1,800 messages waited", empty, pops)
	}
}
