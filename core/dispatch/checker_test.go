package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/core/reaper"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// TestConcurrentDeliveryChecker runs producers, a subscription's
// dispatcher (killed mid-delivery now and then, and started again) and the
// pulling consumers of another group on one queue at once, and checks
// what docs/subscriptions.md promises:
//   - no two batches of one (partition, group) are in flight at once;
//   - per partition, first deliveries come in offset order;
//   - every message is delivered until it is completed or dead-lettered:
//     the records the target always fails end in the DLQ, once each, and
//     no other record does;
//   - the pulling group is unaffected: it reads everything, nothing of it
//     dead-lettered.
//
// It runs two ways: in process, as queen serve delivers (a Dispatcher
// woken by the producers and by the reaper's passes, killed and started
// again); and as the dispatch function's runs on AWS (pushes through a
// WakingStore start runs, runs hand over when their time is up, a kill
// ends the runs in flight as a crash would, their wakes go stale, and the
// reaper's pass starts the next run).
//
// QUEEN_CHECK_SEED replays a seed's choices (goroutine scheduling still
// varies).
func TestConcurrentDeliveryChecker(t *testing.T) {
	t.Run("in process", func(t *testing.T) {
		t.Parallel()
		checkDelivery(t, inProcess)
	})
	t.Run("as function runs", func(t *testing.T) {
		t.Parallel()
		checkDelivery(t, functionRuns)
	})
}

// deliveryMode starts what delivers the subscription of queue, until ctx
// ends (its goroutines in wg), killing it at each hung call. It returns
// the store producers push through, what the reaper does after each pass,
// and what a producer does after each push.
type deliveryMode func(t *testing.T, ctx context.Context, e *pgstoretest.Env, hung <-chan struct{}, wg *sync.WaitGroup) (
	store queen.Store, onPass func(context.Context), pushed func())

func checkDelivery(t *testing.T, mode deliveryMode) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("QUEEN_CHECK_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("QUEEN_CHECK_SEED: %v", err)
		}
	}
	messages, partitions, kills := 600, 30, 2
	if testing.Short() {
		messages = 200
	}
	t.Logf("seed %d (QUEEN_CHECK_SEED=%d to replay), %d messages over %d partitions, %d kills", seed, seed,
		messages, partitions, kills)
	rng := rand.New(rand.NewPCG(seed, 1))

	e := pgstoretest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const queue = checkedQueue
	lease, retries := 2, 3
	if _, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: queue,
		Options: queen.QueueOptions{LeaseTime: &lease, RetryLimit: &retries}}); err != nil {
		t.Fatal(err)
	}

	// The messages, decided up front from the seed: 1 in 40 is poison.
	type msg struct {
		partition, txid string
		poison          bool
	}
	plan := make([]msg, messages)
	poison := map[string]bool{}
	for i := range plan {
		plan[i] = msg{partition: fmt.Sprintf("p%02d", rng.IntN(partitions)), txid: fmt.Sprintf("m%04d", i),
			poison: rng.IntN(40) == 0}
		if plan[i].poison {
			poison[plan[i].txid] = true
		}
	}
	hangAt := map[int]bool{} // the calls that hang until the dispatcher is killed
	for len(hangAt) < kills {
		hangAt[5+rng.IntN(messages/10)] = true
	}

	// The target.
	var (
		mu       sync.Mutex
		inFlight = map[string]bool{}
		firstOf  = map[string][]int64{} // partition → offsets of first deliveries, in arrival order
		seen     = map[string]bool{}
		calls    int
	)
	hung := make(chan struct{}, kills)
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev dispatch.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			t.Errorf("undecodable event: %v", err)
			return
		}
		mu.Lock()
		calls++
		hang := hangAt[calls]
		if inFlight[ev.Partition] {
			t.Errorf("partition %s: a second batch while one is in flight", ev.Partition)
		}
		inFlight[ev.Partition] = true
		for _, rec := range ev.Records {
			if !seen[rec.TransactionID] {
				seen[rec.TransactionID] = true
				firstOf[ev.Partition] = append(firstOf[ev.Partition], rec.Offset)
			}
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(inFlight, ev.Partition)
			mu.Unlock()
		}()
		if hang {
			hung <- struct{}{}
			<-r.Context().Done() // the dispatcher died: nobody reads the answer
			return
		}
		var fails []map[string]string
		for _, rec := range ev.Records {
			if poison[rec.TransactionID] {
				fails = append(fails, map[string]string{"itemIdentifier": rec.TransactionID})
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"batchItemFailures": fails})
	}))
	defer tg.Close()
	if _, err := e.Store.PutSubscription(ctx, queen.SubscriptionRequest{Queue: queue, ConsumerGroup: "sub",
		Target: queen.SubscriptionTarget{URL: tg.URL}}); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	store, onPass, pushed := mode(t, ctx, e, hung, &wg)
	// The reaper's passes expire the leases of killed deliveries and start
	// or wake what came due.
	wg.Go(func() { reaper.Loop(ctx, e.Store, 200*time.Millisecond, quiet, onPass) })

	// Producers: batches of 1–5 messages, in plan order per producer.
	const producers = 4
	for p := range producers {
		wg.Go(func() {
			for i := p; i < len(plan); {
				var items []queen.PushItem
				for n := 1 + int(uint64(i)*2654435761%5); n > 0 && i < len(plan); n-- {
					m := plan[i]
					items = append(items, queen.PushItem{Queue: queue, Partition: m.partition, TransactionID: m.txid,
						Payload: json.RawMessage(fmt.Sprintf(`{"poison":%t}`, m.poison))})
					i += producers
				}
				if _, err := store.Push(ctx, items); err != nil {
					t.Errorf("push: %v", err)
					return
				}
				pushed()
			}
		})
	}

	// Pulling consumers of another group on the same queue.
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				r, err := e.Store.Pop(ctx, queen.PopRequest{Queue: queue, ConsumerGroup: "pull", Batch: 10})
				if err != nil || len(r.Messages) == 0 {
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
				acks := make([]queen.Ack, len(r.Messages))
				for i, m := range r.Messages {
					acks[i] = queen.Ack{PartitionID: m.PartitionID, TransactionID: m.TransactionID,
						Status: queen.AckCompleted, ConsumerGroup: "pull", LeaseID: r.LeaseID}
				}
				if _, err := e.Store.Ack(ctx, acks); err != nil && ctx.Err() == nil {
					t.Errorf("pull ack: %v", err)
				}
			}
		})
	}

	// Done when both groups have read every message (the condition the
	// run waits for), then everything stops.
	caughtUp := func(group string) bool {
		g, err := e.Store.Group(ctx, group)
		return err == nil && len(g.Queues) == 1 && g.Queues[0].Lag == 0 && g.Queues[0].Partitions > 0
	}
	for !(caughtUp("sub") && caughtUp("pull") && pushedAll(ctx, e.Store, queue, messages)) {
		select {
		case <-ctx.Done():
			mu.Lock()
			t.Fatalf("not caught up in time: %d calls, %d records seen", calls, len(seen))
		case <-time.After(100 * time.Millisecond):
		}
	}
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for p, offs := range firstOf {
		if !slices.IsSorted(offs) {
			t.Errorf("partition %s: first deliveries out of offset order: %v", p, offs)
		}
	}
	for _, m := range plan {
		if !seen[m.txid] {
			t.Errorf("%s was never delivered to the subscription", m.txid)
		}
	}
	bg := context.Background()
	for group, want := range map[string]map[string]bool{"sub": poison, "pull": {}} {
		page, err := e.Store.ListDeadLetters(bg, queen.DLQFilter{Queue: queue, ConsumerGroup: group, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, d := range page.Messages {
			got[d.TransactionID]++
		}
		for id := range want {
			if got[id] != 1 {
				t.Errorf("group %s: %s dead-lettered %d times, want once", group, id, got[id])
			}
		}
		for id, n := range got {
			if !want[id] {
				t.Errorf("group %s: %s dead-lettered (%d), want it completed", group, id, n)
			}
		}
	}
	t.Logf("%d calls to the target, %d poison records dead-lettered", calls, len(poison))
}

var quiet = slog.New(slog.DiscardHandler)

// inProcess delivers as queen serve does: one Dispatcher, woken after each
// push and each reaper pass, killed at each hung call and started again.
func inProcess(_ *testing.T, ctx context.Context, e *pgstoretest.Env, hung <-chan struct{}, wg *sync.WaitGroup) (
	queen.Store, func(context.Context), func()) {
	var current struct {
		sync.Mutex
		d *dispatch.Dispatcher
	}
	now := func() *dispatch.Dispatcher {
		current.Lock()
		defer current.Unlock()
		return current.d
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			dctx, kill := context.WithCancel(ctx)
			d := dispatch.New(local(e.Store, quiet))
			current.Lock()
			current.d = d
			current.Unlock()
			done := make(chan struct{})
			go func() { d.Run(dctx); close(done) }()
			select {
			case <-hung:
				kill()
			case <-ctx.Done():
				kill()
			}
			<-done
		}
	})
	onPass := func(ctx context.Context) {
		if d := now(); d != nil {
			d.Due(ctx)
		}
	}
	pushed := func() {
		if d := now(); d != nil {
			d.Wake(checkedQueue)
		}
	}
	return e.Store, onPass, pushed
}

// functionRuns delivers as the dispatch function does on AWS: each Start
// is a run of its own (Lambda's asynchronous invoke), of at most runTime,
// so runs also hand over. A hung call kills the runs in flight, as a crash
// or a timeout would: their wakes stay held until they are presumed lost,
// which the test brings forward (it ages the wakes by queen.WakeStale
// instead of waiting a minute), and the reaper's pass starts the next run.
func functionRuns(t *testing.T, ctx context.Context, e *pgstoretest.Env, hung <-chan struct{}, wg *sync.WaitGroup) (
	queen.Store, func(context.Context), func()) {
	rs := &runStarter{ctx: ctx, wg: wg, runs: map[int]context.CancelFunc{}}
	var kills atomic.Int64
	t.Cleanup(func() { t.Logf("%d runs started, %d killed", rs.next, kills.Load()) })
	rs.h = &dispatch.Handler{Store: e.Store, Dispatcher: dispatch.New(local(e.Store, quiet)),
		Starter: rs, Logger: quiet, Margin: time.Second}
	w := &dispatch.Waker{Store: e.Store, Starter: rs, Logger: quiet}
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hung:
				kills.Add(rs.killAll())
				if _, err := e.Pool.Exec(ctx, `UPDATE queen.subscription_targets
					SET wake_at = wake_at - $1::int * interval '1 ms' WHERE wake_at IS NOT NULL`,
					queen.WakeStale.Milliseconds()); err != nil && ctx.Err() == nil {
					panic(err)
				}
			}
		}
	})
	onPass := func(ctx context.Context) {
		if _, err := w.StartDue(ctx); err != nil && ctx.Err() == nil {
			quiet.Warn("start due", "err", err)
		}
	}
	return dispatch.WakingStore{Store: e.Store, Waker: w}, onPass, func() {}
}

// runTime is each function run's time (its invocation's timeout).
const runTime = 1500 * time.Millisecond

// runStarter runs each started run in a goroutine, as Lambda runs an
// asynchronous invoke, and can kill the runs in flight.
type runStarter struct {
	ctx  context.Context
	wg   *sync.WaitGroup
	h    *dispatch.Handler
	mu   sync.Mutex
	next int
	runs map[int]context.CancelFunc
}

func (rs *runStarter) Start(_ context.Context, k queen.WaitKey) error {
	rctx, cancel := context.WithTimeout(rs.ctx, runTime)
	rs.mu.Lock()
	id := rs.next
	rs.next++
	rs.runs[id] = cancel
	rs.mu.Unlock()
	rs.wg.Go(func() {
		defer func() {
			rs.mu.Lock()
			delete(rs.runs, id)
			rs.mu.Unlock()
			cancel()
		}()
		_, _ = rs.h.Invoke(rctx, dispatch.RunEvent{Queue: k.Queue, ConsumerGroup: k.Group})
	})
	return nil
}

func (rs *runStarter) killAll() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, cancel := range rs.runs {
		cancel()
	}
	return int64(len(rs.runs))
}

// checkedQueue is the queue the checker uses.
const checkedQueue = "cq"

// pushedAll reports whether the queue holds n messages.
func pushedAll(ctx context.Context, st queen.Store, queue string, n int) bool {
	d, err := st.Queue(ctx, queue, queen.PartitionPage{})
	if err != nil {
		return false
	}
	var total int64
	for _, p := range d.Partitions {
		total += p.LastOffset + 1
	}
	return total == int64(n)
}
