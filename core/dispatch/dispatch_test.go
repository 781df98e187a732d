package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
	"github.com/queen-serverless/queen/internal/storecount"
)

func TestMain(m *testing.M) { pgstoretest.Main(m) }

// local is the dispatcher's configuration as `queen serve` builds it: the
// egress fence of the default configuration (loopback allowed), over st.
func local(st queen.Store, log *slog.Logger) dispatch.Config {
	cfg, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		panic(err)
	}
	return dispatch.Config{Store: st, Logger: log, Fence: cfg.Fence()}
}

// target is a user's endpoint: it records every event and answers what
// answer says for it.
type target struct {
	t      *testing.T
	mu     sync.Mutex
	events []dispatch.Event
	answer func(ev dispatch.Event) (status int, body any)
	srv    *httptest.Server
}

func newTarget(t *testing.T, answer func(dispatch.Event) (int, any)) *target {
	tg := &target{t: t, answer: answer}
	tg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev dispatch.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			t.Errorf("target: undecodable event: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		tg.mu.Lock()
		tg.events = append(tg.events, ev)
		tg.mu.Unlock()
		status, body := tg.answer(ev)
		w.WriteHeader(status)
		if body != nil {
			_ = json.NewEncoder(w).Encode(body)
		}
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

func (tg *target) received() []dispatch.Event {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return slices.Clone(tg.events)
}

func completeAll(dispatch.Event) (int, any) { return http.StatusOK, nil }

// firstThenComplete answers the first event with status and body, and
// completes every later one (an empty batchItemFailures).
func firstThenComplete(status int, body any) func(dispatch.Event) (int, any) {
	var calls atomic.Int64
	return func(dispatch.Event) (int, any) {
		if calls.Add(1) == 1 {
			return status, body
		}
		return http.StatusOK, map[string]any{"batchItemFailures": []any{}}
	}
}

func subscribe(t *testing.T, st queen.Store, queue, group, url string, opts func(*queen.SubscriptionRequest)) queen.Subscription {
	t.Helper()
	req := queen.SubscriptionRequest{Queue: queue, ConsumerGroup: group, Target: queen.SubscriptionTarget{URL: url}}
	if opts != nil {
		opts(&req)
	}
	s, err := st.PutSubscription(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func push(t *testing.T, st queen.Store, queue string, partitions, perPartition int) {
	t.Helper()
	var items []queen.PushItem
	for p := range partitions {
		for i := range perPartition {
			items = append(items, queen.PushItem{Queue: queue, Partition: fmt.Sprintf("p%d", p),
				TransactionID: fmt.Sprintf("p%d-m%d", p, i), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		}
	}
	if _, err := st.Push(context.Background(), items); err != nil {
		t.Fatal(err)
	}
}

// firsts returns, per partition, the offsets of first deliveries in the
// order the target saw them.
func firsts(events []dispatch.Event) map[string][]int64 {
	seen := map[string]bool{}
	out := map[string][]int64{}
	for _, ev := range events {
		for _, r := range ev.Records {
			if !seen[r.TransactionID] {
				seen[r.TransactionID] = true
				out[ev.Partition] = append(out[ev.Partition], r.Offset)
			}
		}
	}
	return out
}

// Every message reaches the target, each partition's in offset order, in
// events of at most batchSize records of one partition, and the group's
// cursors end at the head.
func TestDrainDeliversEveryMessageInOrder(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	tg := newTarget(t, completeAll)
	size := 4
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, func(r *queen.SubscriptionRequest) { r.BatchSize = &size })
	push(t, e.Store, "orders", 5, 9)

	d := dispatch.New(local(e.Store, nil))
	dr, err := d.Drain(context.Background(), sub)
	if err != nil || dr.Settled != 45 {
		t.Fatalf("drain: %d settled, %v; want 45", dr.Settled, err)
	}
	evs := tg.received()
	for _, ev := range evs {
		if len(ev.Records) == 0 || len(ev.Records) > size || ev.ConsumerGroup != "billing" || ev.Queue != "orders" || ev.LeaseID == "" {
			t.Fatalf("event %+v", ev)
		}
	}
	for p, offs := range firsts(evs) {
		if len(offs) != 9 || !slices.IsSorted(offs) {
			t.Errorf("partition %s: first deliveries %v, want 9 in offset order", p, offs)
		}
	}
	g, err := e.Store.Group(context.Background(), "billing")
	if err != nil || len(g.Queues) != 1 || g.Queues[0].Lag != 0 {
		t.Fatalf("group after drain: %+v %v, want lag 0", g, err)
	}
	s, _ := e.Store.Subscription(context.Background(), "orders", "billing")
	if s.Delivered != 45 || s.LastDeliveryAt == nil {
		t.Fatalf("counters %+v", s)
	}
}

// A record the target lists in batchItemFailures is acked failed with the
// others completed: by the model's clamp rule the cursor stops before it,
// so it comes back as the head with one more attempt until retryLimit
// sends it to the DLQ, and the records after it come back with it.
func TestFailedRecordIsRetriedThenDeadLettered(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	ctx := context.Background()
	if _, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "orders",
		Options: queen.QueueOptions{RetryLimit: func() *int { v := 1; return &v }()}}); err != nil {
		t.Fatal(err)
	}
	tg := newTarget(t, func(ev dispatch.Event) (int, any) {
		var fails []map[string]any
		for _, r := range ev.Records {
			if r.TransactionID == "p0-m2" {
				fails = append(fails, map[string]any{"itemIdentifier": r.TransactionID})
			}
		}
		return http.StatusOK, map[string]any{"batchItemFailures": fails}
	})
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
	push(t, e.Store, "orders", 1, 5)

	d := dispatch.New(local(e.Store, nil))
	if _, err := d.Drain(ctx, sub); err != nil {
		t.Fatal(err)
	}
	var poison []dispatch.Record
	for _, ev := range tg.received() {
		for _, r := range ev.Records {
			if r.TransactionID == "p0-m2" {
				poison = append(poison, r)
			}
		}
	}
	// retryLimit 1: dead-lettered on its second failed attempt.
	if len(poison) != 2 || poison[0].RetryCount != 0 || poison[1].RetryCount != 1 {
		t.Fatalf("the failing record was delivered %+v, want twice (retryCount 0, then 1)", poison)
	}
	page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "orders"})
	if err != nil || len(page.Messages) != 1 || page.Messages[0].TransactionID != "p0-m2" {
		t.Fatalf("DLQ %+v %v, want p0-m2", page, err)
	}
	g, err := e.Store.Group(ctx, "billing")
	if err != nil || g.Queues[0].Lag != 0 {
		t.Fatalf("group %+v %v, want every other message completed", g, err)
	}
}

// A target that fails as a whole (a 500) ends the lease as an expiry: the
// head comes back alone with one more attempt, and a target that recovers
// then gets the rest.
func TestFailedDeliveryIsALeaseExpiry(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	ctx := context.Background()
	tg := newTarget(t, firstThenComplete(http.StatusInternalServerError, map[string]string{"error": "boom"}))
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
	push(t, e.Store, "orders", 1, 3)
	d := dispatch.New(local(e.Store, nil))
	if _, err := d.Drain(ctx, sub); err != nil {
		t.Fatal(err)
	}
	evs := tg.received()
	if len(evs) < 2 || len(evs[0].Records) != 3 || len(evs[1].Records) != 1 ||
		evs[1].Records[0].TransactionID != "p0-m0" || evs[1].Records[0].RetryCount != 1 {
		t.Fatalf("events %+v, want the batch of 3, then its head alone with retryCount 1", evs)
	}
	s, _ := e.Store.Subscription(ctx, "orders", "billing")
	if s.LastError == nil || s.LastErrorAt == nil || s.Delivered != 3 {
		t.Fatalf("subscription %+v, want the 500 recorded and 3 delivered", s)
	}
}

// Events stay within maxBatchBytes; the records left out come back, and
// no attempt is counted for them.
func TestEventsFitMaxBatchBytes(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	ctx := context.Background()
	tg := newTarget(t, completeAll)
	limit, size := 1024, 100
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, func(r *queen.SubscriptionRequest) {
		r.MaxBatchBytes, r.BatchSize = &limit, &size
	})
	push(t, e.Store, "orders", 1, 30)
	d := dispatch.New(local(e.Store, nil))
	if dr, err := d.Drain(ctx, sub); err != nil || dr.Settled != 30 {
		t.Fatalf("drain: %d, %v", dr.Settled, err)
	}
	evs := tg.received()
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		if len(b) > limit {
			t.Errorf("event of %d bytes over the %d limit", len(b), limit)
		}
		for _, r := range ev.Records {
			if r.RetryCount != 0 {
				t.Errorf("record %s counted an attempt: %+v", r.TransactionID, r)
			}
		}
	}
	if got := firsts(evs)["p0"]; len(got) != 30 || !slices.IsSorted(got) {
		t.Fatalf("first deliveries %v", got)
	}
}

// Run delivers a push it is woken for, and later pushes too.
func TestRunDeliversWhenWoken(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	tg := newTarget(t, completeAll)
	subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
	d := dispatch.New(local(e.Store, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	for round := 1; round <= 3; round++ {
		if _, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "orders", Partition: "p0",
			TransactionID: fmt.Sprintf("round-%d", round), Payload: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		d.Wake("orders")
		deadline := time.Now().Add(30 * time.Second)
		for len(firsts(tg.received())["p0"]) < round {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d delivered", round, len(firsts(tg.received())["p0"]))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// A target that is down fails each batch as a whole; the dispatcher waits
// longer after each such pass, so an outage of a few seconds spends an
// attempt or two of the head, not its whole retry budget.
func TestOutageBacksOff(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	tg := newTarget(t, func(dispatch.Event) (int, any) { return http.StatusServiceUnavailable, nil })
	one := 1 // one worker: the calls are the passes
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, func(r *queen.SubscriptionRequest) { r.MaxConcurrency = &one })
	push(t, e.Store, "orders", 1, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	if _, err := dispatch.New(local(e.Store, nil)).Drain(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if n := len(tg.received()); n < 2 || n > 3 {
		t.Fatalf("%d calls in 2.5 s of outage, want 2 or 3 (at once, after 1 s, after 2 s more)", n)
	}
	page, err := e.Store.ListDeadLetters(context.Background(), queen.DLQFilter{Queue: "orders"})
	if err != nil || len(page.Messages) != 0 {
		t.Fatalf("dead letters %+v %v, want none yet (retryLimit 3)", page.Messages, err)
	}
}

// Under steady traffic (the backlog never empties) a drain sees its
// subscription deleted and stops.
func TestDrainStopsWhenTheSubscriptionGoes(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var once sync.Once
	tg := newTarget(t, func(dispatch.Event) (int, any) {
		once.Do(func() {
			if err := e.Store.DeleteSubscription(ctx, "orders", "billing"); err != nil {
				t.Errorf("delete: %v", err)
			}
		})
		return http.StatusOK, nil
	})
	size := 1
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, func(r *queen.SubscriptionRequest) { r.BatchSize = &size })
	stopPushing := make(chan struct{})
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		for i := 0; ; i++ {
			select {
			case <-stopPushing:
				return
			default:
			}
			if _, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "orders", Partition: "p",
				TransactionID: fmt.Sprintf("m%d", i), Payload: json.RawMessage(`{}`)}}); err != nil && ctx.Err() == nil {
				t.Errorf("push: %v", err)
				return
			}
		}
	}()
	_, err := dispatch.New(local(e.Store, nil)).Drain(ctx, sub)
	close(stopPushing)
	<-pushed
	if err != nil || ctx.Err() != nil {
		t.Fatalf("drain: %v (context: %v); want it to stop once the subscription is gone", err, ctx.Err())
	}
}

// Answers that are not a result fail the batch as a whole, as in Lambda's
// partial-batch contract: a function's error answered with 200 (the Lambda
// emulator's invoke URL, as a URL target, answers so), and an
// itemIdentifier that names no record of the batch. Nothing is completed:
// the head comes back alone with one attempt counted.
func TestInvalidAnswersFailTheBatch(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]any{
		"error payload":      map[string]string{"errorMessage": "boom", "errorType": "Error"},
		"unknown identifier": map[string]any{"batchItemFailures": []map[string]string{{"itemIdentifier": "no-such-record"}}},
		"empty identifier":   map[string]any{"batchItemFailures": []map[string]string{{"itemIdentifier": ""}}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := pgstoretest.New(t)
			tg := newTarget(t, firstThenComplete(http.StatusOK, answer))
			sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
			push(t, e.Store, "orders", 1, 2)
			if _, err := dispatch.New(local(e.Store, nil)).Drain(context.Background(), sub); err != nil {
				t.Fatal(err)
			}
			evs := tg.received()
			if len(evs) < 2 || len(evs[1].Records) != 1 || evs[1].Records[0].RetryCount != 1 {
				t.Fatalf("events %+v, want the batch, then its head alone with retryCount 1", evs)
			}
		})
	}
}

// Run sends no statement for a wake of a queue no subscription delivers,
// and delivers a subscription it is told of (Changed, as queen serve's API
// tells it) when its queue is woken; it reads the subscriptions once, at
// its first wake.
func TestWakesCostNothingWithoutASubscription(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	tg := newTarget(t, completeAll)
	counted := &storecount.Counting{Store: e.Store}
	d := dispatch.New(local(counted, nil))
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
	push(t, e.Store, "orders", 1, 1)
	d.Changed(sub) // before Run: the listing at its first wake has it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	delivered := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for len(tg.received()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d deliveries, want %d", len(tg.received()), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	delivered(1)

	for range 100 {
		d.Wake("elsewhere")
	}
	// A wake of orders after them: once it is delivered, Run has taken
	// the wakes of elsewhere too.
	pushOne(t, e.Store, "orders", "p0", "after")
	d.Wake("orders")
	delivered(2)
	if n := counted.Listings.Load(); n != 1 {
		t.Errorf("%d listings of the subscriptions, want the one at Run's first wake", n)
	}
	if counted.Probes.Load() != 0 {
		t.Errorf("%d probes, want none: the wakes name the queue", counted.Probes.Load())
	}
}

// staleListing returns, from its first listing of the subscriptions, what
// the store held when the listing was read, but only once the test lets
// it: a listing overtaken by a change.
type staleListing struct {
	queen.Store
	read, release chan struct{}
	once          sync.Once
}

func (s *staleListing) Subscriptions(ctx context.Context) ([]queen.Subscription, error) {
	subs, err := s.Store.Subscriptions(ctx)
	s.once.Do(func() {
		close(s.read)
		<-s.release
	})
	return subs, err
}

// A subscription the dispatcher is told of while it lists the
// subscriptions is not lost to that listing, which predates it.
func TestChangeDuringAListingIsKept(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	tg := newTarget(t, completeAll)
	st := &staleListing{Store: e.Store, read: make(chan struct{}), release: make(chan struct{})}
	d := dispatch.New(local(st, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	d.Due(ctx)
	<-st.read // Run's first listing has read: no subscription yet
	sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
	d.Changed(sub)
	close(st.release)
	push(t, e.Store, "orders", 1, 1)
	d.Wake("orders")
	deadline := time.Now().Add(30 * time.Second)
	for len(tg.received()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the subscription told during a listing was not delivered")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
