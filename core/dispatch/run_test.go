package dispatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// starts records the runs a Waker or Handler started, and can run them
// (as Lambda runs an asynchronous invoke) with run.
type starts struct {
	mu   sync.Mutex
	keys []queen.WaitKey
	run  func(queen.WaitKey)
	wg   sync.WaitGroup
}

func (s *starts) Start(_ context.Context, k queen.WaitKey) error {
	s.mu.Lock()
	s.keys = append(s.keys, k)
	run := s.run
	s.mu.Unlock()
	if run != nil {
		s.wg.Go(func() { run(k) })
	}
	return nil
}

func (s *starts) started() []queen.WaitKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

func pushOne(t *testing.T, st queen.Store, queue, partition, id string) {
	t.Helper()
	res, err := st.Push(context.Background(), []queen.PushItem{{Queue: queue, Partition: partition, TransactionID: id,
		Payload: json.RawMessage(`{}`)}})
	if err != nil || res[0].Status != queen.StatusQueued {
		t.Errorf("push %s: %v, %v", id, res, err)
	}
}

func newHandler(e *pgstoretest.Env, st dispatch.Starter) (*dispatch.Handler, *bytes.Buffer) {
	var metrics bytes.Buffer
	return &dispatch.Handler{Store: e.Store, Dispatcher: dispatch.New(local(e.Store, nil)),
		Starter: st, Metrics: &metrics}, &metrics
}

func invokeFor(t *testing.T, h *dispatch.Handler, k queen.WaitKey, d time.Duration) dispatch.RunReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	rep, err := h.Invoke(ctx, dispatch.RunEvent{Queue: k.Queue, ConsumerGroup: k.Group})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return rep
}

// Pushes to a subscribed queue start one run per subscription, however
// many there are, until the run gives its wake back; the run delivers
// everything, clears the wake, and the next push starts the next run
// (docs/subscriptions.md §8).
func TestPushesStartOneRunUntilItCatchesUp(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	tg := newTarget(t, completeAll)
	subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
	st := &starts{}
	store := dispatch.WakingStore{Store: e.Store, Waker: &dispatch.Waker{Store: e.Store, Starter: st}}
	for i := range 3 {
		pushOne(t, store, "orders", fmt.Sprintf("p%d", i%2), fmt.Sprintf("m%d", i))
	}
	pushOne(t, store, "unsubscribed", "p0", "u")
	key := queen.WaitKey{Queue: "orders", Group: "billing"}
	if got := st.started(); !slices.Equal(got, []queen.WaitKey{key}) {
		t.Fatalf("three pushes started %v, want one run of orders/billing", got)
	}

	h, metrics := newHandler(e, st)
	rep := invokeFor(t, h, key, 30*time.Second)
	if rep.Settled != 3 || rep.HandedOver {
		t.Fatalf("run report %+v, want 3 settled, not handed over", rep)
	}
	var emf map[string]any
	if err := json.Unmarshal(metrics.Bytes(), &emf); err != nil || emf[dispatch.MetricSettled] != 3.0 {
		t.Fatalf("EMF line %q (%v), want %s 3", metrics.String(), err, dispatch.MetricSettled)
	}

	pushOne(t, store, "orders", "p0", "m3")
	if got := st.started(); len(got) != 2 {
		t.Fatalf("a push after the run caught up started %v, want a second run", got)
	}
	if rep := invokeFor(t, h, key, 30*time.Second); rep.Settled != 1 {
		t.Fatalf("second run settled %d, want 1", rep.Settled)
	}
}

// A push that commits while a run holds the wake starts nothing, and the
// run delivers it before it gives the wake back.
func TestAPushWhileARunHoldsTheWakeIsDelivered(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	ctx := context.Background()
	st := &starts{}
	store := dispatch.WakingStore{Store: e.Store, Waker: &dispatch.Waker{Store: e.Store, Starter: st}}
	var once sync.Once
	tg := newTarget(t, func(dispatch.Event) (int, any) {
		// While the first batch is with the target, a producer pushes:
		// the run holds the wake, so nothing is started.
		once.Do(func() { pushOne(t, store, "orders", "p0", "later") })
		return http.StatusOK, nil
	})
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
	push(t, store, "orders", 1, 1)
	key := queen.WaitKey{Queue: sub.Queue, Group: sub.ConsumerGroup}
	if got := st.started(); len(got) != 1 {
		t.Fatalf("started %v, want one run", got)
	}
	h, _ := newHandler(e, st)
	if rep := invokeFor(t, h, key, 30*time.Second); rep.Settled != 2 {
		t.Fatalf("run settled %d, want 2 (the message pushed while it ran too)", rep.Settled)
	}
	if got := st.started(); len(got) != 1 {
		t.Fatalf("started %v, want still one run", got)
	}
	if ok, err := e.Store.ClaimWake(ctx, key); err != nil || !ok {
		t.Fatalf("after the run the wake is held (%v, %v): the next push would start nothing", ok, err)
	}
}

// A run whose time is up takes no new batch, starts the next run, which
// inherits the wake, and that run delivers the rest.
func TestRunOutOfTimeHandsOver(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	ctx := context.Background()
	tg := newTarget(t, func(dispatch.Event) (int, any) {
		time.Sleep(50 * time.Millisecond) // a slow target: the backlog outlasts the run
		return http.StatusOK, nil
	})
	one, size := 1, 1
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, func(r *queen.SubscriptionRequest) {
		r.MaxConcurrency, r.BatchSize = &one, &size
	})
	push(t, e.Store, "orders", 1, 40)
	key := queen.WaitKey{Queue: sub.Queue, Group: sub.ConsumerGroup}
	if ok, err := e.Store.ClaimWake(ctx, key); err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	st := &starts{}
	h, _ := newHandler(e, st)
	h.Margin = time.Second
	rep := invokeFor(t, h, key, 1500*time.Millisecond) // until = deadline − 0.75 s
	if !rep.HandedOver || rep.Settled == 0 || rep.Settled == 40 {
		t.Fatalf("report %+v, want some settled and the rest handed over", rep)
	}
	if got := st.started(); !slices.Equal(got, []queen.WaitKey{key}) {
		t.Fatalf("started %v, want the next run of %v", got, key)
	}
	if ok, err := e.Store.ClaimWake(ctx, key); err != nil || ok {
		t.Fatalf("claim after the hand-over = %v, %v; want false: the next run holds the wake", ok, err)
	}
	next := invokeFor(t, h, key, time.Minute)
	if rep.Settled+next.Settled != 40 || next.HandedOver {
		t.Fatalf("the next run settled %d after %d, want the rest of 40, caught up", next.Settled, rep.Settled)
	}
	firstsSeen := firsts(tg.received())["p0"]
	if len(firstsSeen) != 40 || !slices.IsSorted(firstsSeen) {
		t.Fatalf("first deliveries %v, want 0..39 in order", firstsSeen)
	}
}

// The reaper's safety net starts a subscription whose run died holding
// its wake, once the wake has gone stale, and a paused one not at all.
func TestDueSubscriptionsAreStarted(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	ctx := context.Background()
	tg := newTarget(t, completeAll)
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
	off := false
	subscribe(t, e.Store, "orders", "paused", tg.srv.URL, func(r *queen.SubscriptionRequest) { r.Enabled = &off })
	key := queen.WaitKey{Queue: sub.Queue, Group: sub.ConsumerGroup}
	if _, err := e.Store.ClaimWake(ctx, key); err != nil { // a run that then died
		t.Fatal(err)
	}
	push(t, e.Store, "orders", 3, 2)
	st := &starts{}
	w := &dispatch.Waker{Store: e.Store, Starter: st}
	if n, err := w.StartDue(ctx); err != nil || n != 0 {
		t.Fatalf("due while the wake is live = %d, %v; want 0", n, err)
	}
	e.Clock.Advance(queen.WakeStale + time.Second)
	if n, err := w.StartDue(ctx); err != nil || n != 1 || !slices.Equal(st.started(), []queen.WaitKey{key}) {
		t.Fatalf("due after the wake went stale = %d, %v, %v; want orders/billing", n, err, st.started())
	}
	h, _ := newHandler(e, st)
	if rep := invokeFor(t, h, key, 30*time.Second); rep.Settled != 6 {
		t.Fatalf("the started run settled %d, want 6", rep.Settled)
	}
}
