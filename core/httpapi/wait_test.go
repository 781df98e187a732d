package httpapi_test

// Long-polls (docs/semantics.md §3.4.6, internals.md §6): what wakes a
// waiting consumer, what ends its wait, and what idle waiters cost. Each
// test waits for events, never for time: a long-poll that must be woken
// waits an hour unless something wakes it, so its reply within replyLimit
// is the proof, and how soon replies come is measured by make bench (W,
// docs/benchmarks.md), not here.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/storecount"
)

// anHour is a long-poll timeout (ms) no test waits out: a long-poll that
// answers within replyLimit was woken by what the test did.
const anHour = 3_600_000

// replyLimit bounds the wait for a reply a test expects. It only turns a
// hang into a failure; it is not a measure of speed.
const replyLimit = time.Minute

// waitAnHour lets long-polls wait an hour (the server's cap).
func waitAnHour(cfg *httpapi.Config, _ *queen.Store) { cfg.MaxWait = time.Hour }

// longPoll sends GET path from another goroutine, as a waiting consumer
// does, and returns the channel its reply arrives on.
func (s *server) longPoll(path string) <-chan reply {
	done := make(chan reply, 1)
	s.longPollTo(done, path)
	return done
}

// longPollTo is longPoll replying on done. The request is cancelled when
// the test ends, so a long-poll the test no longer waits for ends with it.
// A request that fails has status -1 and the error as its body.
func (s *server) longPollTo(done chan<- reply, path string) {
	ctx, cancel := context.WithCancel(context.Background())
	s.t.Cleanup(cancel)
	go func() {
		r := reply{status: -1}
		req, err := http.NewRequestWithContext(ctx, "GET", s.URL+path, nil)
		if err == nil {
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				r.status, r.header = resp.StatusCode, resp.Header
				r.body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		}
		if err != nil {
			r.body = []byte(err.Error())
		}
		done <- r
	}()
}

// await returns the reply that arrives on done, or fails the test after
// replyLimit.
func await(t *testing.T, done <-chan reply, what string) reply {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(replyLimit):
		t.Fatalf("%s: no reply within %v", what, replyLimit)
		return reply{}
	}
}

// awaitEmptyPop returns once a long-poll's pop found nothing (empty
// reports it), failing the test if the long-poll answered first.
func awaitEmptyPop(t *testing.T, empty <-chan struct{}, done <-chan reply) {
	t.Helper()
	select {
	case <-empty:
	case r := <-done:
		t.Fatalf("long-poll ended (%d %s) before it found the queue empty", r.status, r.body)
	case <-time.After(replyLimit):
		t.Fatalf("no empty pop within %v", replyLimit)
	}
}

// popWatch reports every empty pop of one queue on empty (when it has
// room). It hides queen.Prober: its API cannot probe the store.
type popWatch struct {
	queen.Store
	queue string
	empty chan struct{}
}

func (w *popWatch) Pop(ctx context.Context, req queen.PopRequest) (queen.PopResult, error) {
	res, err := w.Store.Pop(ctx, req)
	if err == nil && req.Queue == w.queue && len(res.Messages) == 0 {
		select {
		case w.empty <- struct{}{}:
		default:
		}
	}
	return res, err
}

// drain discards the empty pops reported so far.
func (w *popWatch) drain() {
	for len(w.empty) > 0 {
		<-w.empty
	}
}

// probedWatch is popWatch over a store the API can still probe.
type probedWatch struct{ popWatch }

func (w *probedWatch) Deliverable(ctx context.Context, keys []queen.WaitKey) ([]bool, error) {
	return w.Store.(queen.Prober).Deliverable(ctx, keys)
}

// A push through this API wakes its waiting long-poll. The store here
// cannot be probed and the API would poll it once an hour, so only the
// in-process wake-up can deliver the message, pushed after the long-poll's
// first, empty, pop. An empty long-poll answers 204 when its own timeout
// passes — not the server's hour-long cap — having popped once more at its
// end.
func TestLongPollWakesOnPush(t *testing.T) {
	t.Parallel()
	watch := &popWatch{queue: "later", empty: make(chan struct{}, 1000)}
	s := newServer(t, func(cfg *httpapi.Config, st *queen.Store) {
		cfg.PollInterval = time.Hour
		cfg.MaxWait = time.Hour
		watch.Store = *st
		*st = watch
	})
	// The queue does not exist yet: consumers often start first.
	done := s.longPoll(fmt.Sprintf("/api/v1/pop/queue/later?wait=true&timeout=%d", anHour))
	awaitEmptyPop(t, watch.empty, done)
	s.expect("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "later", "payload": "hi"}}}, 201)
	if r := await(t, done, "a long-poll woken by a push"); r.status != 200 {
		t.Fatalf("long-poll got %d %s, want the message pushed while it waited", r.status, r.body)
	}

	watch.drain()
	r := await(t, s.longPoll("/api/v1/pop/queue/later?wait=true&timeout=600"), "an empty long-poll with timeout 600 ms")
	if r.status != 204 {
		t.Fatalf("empty long-poll: %d %s, want 204", r.status, r.body)
	}
	if n := len(watch.empty); n < 2 {
		t.Fatalf("empty long-poll popped %d time(s): it answered without waiting for its timeout", n)
	}
}

// A push from another process (straight into the store) is found by
// probing: nothing else can deliver it to the long-poll, which waits an
// hour after its first empty pop.
func TestLongPollSeesOtherWriters(t *testing.T) {
	t.Parallel()
	watch := &probedWatch{popWatch{queue: "ext", empty: make(chan struct{}, 1000)}}
	s := newServer(t, func(cfg *httpapi.Config, st *queen.Store) {
		cfg.MaxWait = time.Hour
		watch.Store = *st
		*st = watch
	})
	done := s.longPoll(fmt.Sprintf("/api/v1/pop/queue/ext?wait=true&timeout=%d&consumerGroup=g", anHour))
	awaitEmptyPop(t, watch.empty, done)
	other := pgstore.New(s.env.Pool, pgstore.Config{})
	if _, err := other.Push(context.Background(), nil); err == nil {
		t.Fatal("empty push accepted")
	}
	if _, err := other.Push(context.Background(), pushItems("ext", 1)); err != nil {
		t.Fatal(err)
	}
	r := await(t, done, "a long-poll on a queue another process pushed to")
	var got struct {
		Messages []struct{ Data json.RawMessage } `json:"messages"`
	}
	if r.status == 200 {
		r.json(t, &got)
	}
	if r.status != 200 || len(got.Messages) != 1 || string(got.Messages[0].Data) != "0" {
		t.Fatalf("long-poll: %d %s, want 200 with the pushed message", r.status, r.body)
	}
}

// After 3,000 partitions were drained, a message pushed during a long-poll
// reaches it: the pop it is woken for finds the message however many
// consumed partitions the queue holds.
func TestLongPollWakesAfterDrain(t *testing.T) {
	t.Parallel()
	watch := &probedWatch{popWatch{queue: "drained", empty: make(chan struct{}, 1000)}}
	s := newServer(t, func(cfg *httpapi.Config, st *queen.Store) {
		cfg.MaxWait = time.Hour
		watch.Store = *st
		*st = watch
	})
	n := 3000 // any count well past the pop's 64-row scan budget
	if testing.Short() {
		n = 400
	}
	s.pushOnePerPartition("drained", n, func(i int) string { return fmt.Sprintf("d%04d", i) })
	var last string
	for got := 0; got < n; {
		p, ok := s.popWildcard("drained", "g", "&batch=100&partitions=100")
		if !ok {
			t.Fatalf("204 after %d of %d messages", got, n)
		}
		got += len(p.Messages)
		last = p.Messages[len(p.Messages)-1].Partition
		s.ackAll("g", p)
	}
	watch.drain()
	done := s.longPoll(fmt.Sprintf("/api/v1/pop/queue/drained?consumerGroup=g&wait=true&timeout=%d", anHour))
	awaitEmptyPop(t, watch.empty, done)
	s.pushN("drained", last, 1)
	if r := await(t, done, "a long-poll after the drain"); r.status != 200 {
		t.Fatalf("long-poll after a drain of %d partitions: %d %s, want the message pushed to %s", n, r.status, r.body, last)
	}
}

// probeLog counts what long-polls send the store (storecount.Counting) and
// reports, for each probe, how many waited-for (queue, group) pairs it
// asked about.
type probeLog struct {
	*storecount.Counting
	asked chan int
}

func (p *probeLog) Deliverable(ctx context.Context, keys []queen.WaitKey) ([]bool, error) {
	select {
	case p.asked <- len(keys):
	default:
	}
	return p.Counting.Deliverable(ctx, keys)
}

// newCountingServer is a server whose long-polls may wait an hour, over a
// store that counts their pops and probes.
func newCountingServer(t *testing.T) (*server, *probeLog) {
	cs := &probeLog{Counting: &storecount.Counting{Empty: make(chan string, 1000)}, asked: make(chan int, 1000)}
	s := newServer(t, func(cfg *httpapi.Config, st *queen.Store) {
		waitAnHour(cfg, st)
		cs.Store = *st
		*st = cs
	})
	return s, cs
}

// startWaiters starts n long-polls (path(i) for the i-th) and returns once
// each is waiting: its first pop found nothing. Their replies arrive on the
// channel.
func startWaiters(s *server, cs *probeLog, n int, path func(i int) string) <-chan reply {
	s.t.Helper()
	done := make(chan reply, n)
	for i := range n {
		s.longPollTo(done, path(i))
	}
	for i := range n {
		select {
		case <-cs.Empty:
		case r := <-done:
			s.t.Fatalf("a long-poll ended (%d %s) before it found its queue empty", r.status, r.body)
		case <-time.After(replyLimit):
			s.t.Fatalf("%d of %d long-polls waiting after %v", i, n, replyLimit)
		}
	}
	return done
}

// Idle long-polls do not pop while they wait: one probe statement asks
// about all of them at once, however many wait (internals.md §6), and a
// push made elsewhere (another process: here the store itself, not this
// API) reaches a waiting consumer through it. What the probes cost per
// second is measured by make bench (W).
func TestLongPollsShareOneProbe(t *testing.T) {
	t.Parallel()
	s, cs := newCountingServer(t)
	const waiters = 20
	done := startWaiters(s, cs, waiters, func(i int) string {
		return fmt.Sprintf("/api/v1/pop/queue/idle-%d?wait=true&timeout=%d", i, anHour)
	})
	pops0 := cs.Pops.Load()
	for len(cs.asked) > 0 {
		<-cs.asked
	}
	// The first probe reported from now on may have listed the waiters
	// before the last one came; every later one lists them all.
	for i := range 3 {
		select {
		case keys := <-cs.asked:
			if i > 0 && keys != waiters {
				t.Fatalf("a probe asked about %d (queue, group) pairs while %d long-polls waited on %d, want one probe for all",
					keys, waiters, waiters)
			}
		case <-time.After(replyLimit):
			t.Fatalf("%d probes within %v while %d long-polls waited", i, replyLimit, waiters)
		}
	}
	if pops := cs.Pops.Load() - pops0; pops != 0 {
		t.Errorf("idle waiters popped %d times while the store was probed: they should wait for a probe to find something", pops)
	}

	// A push that does not go through this API (another process's).
	if _, err := s.env.Store.Push(context.Background(), []queen.PushItem{{Queue: "idle-7", Payload: []byte(`"hi"`)}}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, done, "the long-poll on idle-7"); r.status != 200 {
		t.Fatalf("long-poll got %d %s, want the message pushed elsewhere", r.status, r.body)
	}
	select {
	case r := <-done:
		t.Fatalf("an idle long-poll answered %d %s while nothing was pushed to its queue", r.status, r.body)
	default:
	}
}

// A burst for many waiters of one queue is shared out without a herd: each
// message goes to one waiter, and waiters are woken one after another.
func TestLongPollBurstReachesEveryWaiter(t *testing.T) {
	t.Parallel()
	s, cs := newCountingServer(t)
	const waiters = 10
	done := startWaiters(s, cs, waiters, func(int) string {
		return fmt.Sprintf("/api/v1/pop/queue/burst?wait=true&timeout=%d&autoAck=true", anHour)
	})
	items := make([]queen.PushItem, waiters)
	for i := range items {
		items[i] = queen.PushItem{Queue: "burst", Partition: fmt.Sprintf("p%d", i), Payload: []byte(`1`)}
	}
	pops0 := cs.Pops.Load()
	if _, err := s.env.Store.Push(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	for i := range waiters {
		if r := await(t, done, fmt.Sprintf("waiter %d of %d", i+1, waiters)); r.status != 200 {
			t.Fatalf("waiter %d: %d %s", i, r.status, r.body)
		}
	}
	if pops := cs.Pops.Load() - pops0; pops > 2*waiters {
		t.Errorf("%d pops to hand %d messages to %d waiters", pops, waiters, waiters)
	}
}

// docs/semantics.md §3.4.6: a long-poll waits until its timeout, capped by
// the server. An absurd timeout does not overflow into an immediate 204:
// the long-poll answers 204 at the server's cap (1 s here; without it the
// wait would outlast replyLimit), having popped again while it waited.
func TestLongPollHugeTimeoutWaitsTheCap(t *testing.T) {
	t.Parallel()
	watch := &popWatch{queue: "nothing", empty: make(chan struct{}, 1000)}
	s := newServer(t, func(cfg *httpapi.Config, st *queen.Store) {
		cfg.MaxWait = time.Second
		watch.Store = *st
		*st = watch
	})
	for _, timeout := range []string{"10000000000000", "99999999999999999999999"} {
		watch.drain()
		r := await(t, s.longPoll("/api/v1/pop/queue/nothing?wait=true&timeout="+timeout), "timeout="+timeout)
		if r.status != 204 {
			t.Errorf("timeout=%s: %d %s, want 204 at the cap", timeout, r.status, r.body)
		}
		if n := len(watch.empty); n < 2 {
			t.Errorf("timeout=%s answered after %d pop(s), want a wait until the 1 s cap", timeout, n)
		}
	}
	for _, bad := range []string{"-1", "soon"} {
		if r := s.do("GET", "/api/v1/pop/queue/nothing?wait=true&timeout="+bad, nil); r.status != 400 {
			t.Errorf("timeout=%s: status %d, want 400", bad, r.status)
		}
	}
}
