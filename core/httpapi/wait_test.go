package httpapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/storecount"
)

// newCountingServer is a server whose store counts the pops and probes of
// its long-polls.
func newCountingServer(t *testing.T) (*server, *storecount.Counting) {
	cs := &storecount.Counting{Empty: make(chan string, 1000)}
	s := newServer(t, func(cfg *httpapi.Config, st *queen.Store) {
		cfg.MaxWait = 20 * time.Second
		cs.Store = *st
		*st = cs
	})
	return s, cs
}

// startWaiters starts n long-polls (path(i) for the i-th) and returns once
// each is waiting: its first pop found nothing. Their replies arrive on the
// channel.
func startWaiters(s *server, cs *storecount.Counting, n int, path func(i int) string) <-chan reply {
	done := make(chan reply, n)
	for i := range n {
		go func() { done <- s.do("GET", path(i), nil) }()
	}
	for range n {
		<-cs.Empty
	}
	return done
}

// docs/semantics.md §3.4.6 and internals.md §6: idle long-polls cost at
// most about one cheap probe per waiter per second, however many wait, and
// a push made
// elsewhere (another process: here the store itself, not this API)
// reaches a waiting consumer within 1 s.
func TestLongPollsShareOneProbe(t *testing.T) {
	t.Parallel()
	s, cs := newCountingServer(t)
	const waiters = 20
	done := startWaiters(s, cs, waiters, func(i int) string {
		return fmt.Sprintf("/api/v1/pop/queue/idle-%d?wait=true&timeout=4500", i)
	})
	pops0, probes0, t0 := cs.Pops.Load(), cs.Probes.Load(), time.Now()
	window := time.NewTimer(2 * time.Second)
	select {
	case r := <-done:
		t.Fatalf("a long-poll ended early: %d %s", r.status, r.body)
	case <-window.C:
	}
	secs := time.Since(t0).Seconds()
	pops, probes := cs.Pops.Load()-pops0, cs.Probes.Load()-probes0
	t.Logf("%d idle waiters over %.1f s: %d pops, %d probes", waiters, secs, pops, probes)
	if pops != 0 {
		t.Errorf("idle waiters popped %d times in %.1f s: they should wait for a probe", pops, secs)
	}
	if perWaiter := float64(probes) / waiters / secs; perWaiter > 1 || probes == 0 {
		t.Errorf("%d probes for %d waiters in %.1f s: %.2f per waiter per second, want (0, 1]", probes, waiters, secs, perWaiter)
	}

	// A push that does not go through this API (another process's).
	pushedAt := time.Now()
	if _, err := s.env.Store.Push(context.Background(), []queen.PushItem{{Queue: "idle-7", Payload: []byte(`"hi"`)}}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.status != 200 {
		t.Fatalf("long-poll got %d %s, want the message pushed elsewhere", r.status, r.body)
	}
	if d := time.Since(pushedAt); d > time.Second {
		t.Fatalf("a message pushed elsewhere reached the waiting consumer after %v, want < 1 s", d)
	}
	for range waiters - 1 {
		if r := <-done; r.status != 204 {
			t.Fatalf("an idle long-poll answered %d %s", r.status, r.body)
		}
	}
}

// A burst for many waiters of one queue is shared out without a herd: each
// message goes to one waiter, and waiters are woken one after another.
func TestLongPollBurstReachesEveryWaiter(t *testing.T) {
	t.Parallel()
	s, cs := newCountingServer(t)
	const waiters = 10
	done := startWaiters(s, cs, waiters, func(int) string {
		return "/api/v1/pop/queue/burst?wait=true&timeout=10000&autoAck=true"
	})
	items := make([]queen.PushItem, waiters)
	for i := range items {
		items[i] = queen.PushItem{Queue: "burst", Partition: fmt.Sprintf("p%d", i), Payload: []byte(`1`)}
	}
	pops0 := cs.Pops.Load()
	if _, err := s.env.Store.Push(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for i := range waiters {
		select {
		case r := <-done:
			if r.status != 200 {
				t.Fatalf("waiter %d: %d %s", i, r.status, r.body)
			}
		case <-deadline:
			t.Fatalf("only %d of %d waiters got one of the %d messages within 5 s", i, waiters, waiters)
		}
	}
	if pops := cs.Pops.Load() - pops0; pops > 2*waiters {
		t.Errorf("%d pops to hand %d messages to %d waiters", pops, waiters, waiters)
	}
}
