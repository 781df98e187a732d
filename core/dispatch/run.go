package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/core/reaper"
)

// RunEvent starts a dispatcher run: the dispatch function's payload.
type RunEvent struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
}

func (e RunEvent) key() queen.WaitKey { return queen.WaitKey{Queue: e.Queue, Group: e.ConsumerGroup} }

// Starter starts a dispatcher run for a subscription whose wake the
// caller holds (see queen.Wakes).
type Starter interface {
	Start(ctx context.Context, key queen.WaitKey) error
}

// FunctionStarter starts runs as asynchronous invokes of the dispatch
// function: Lambda queues the event and answers at once.
type FunctionStarter struct {
	Client   *LambdaClient
	Function string
}

// Start implements Starter.
func (s FunctionStarter) Start(ctx context.Context, key queen.WaitKey) error {
	payload, err := json.Marshal(RunEvent{Queue: key.Queue, ConsumerGroup: key.Group})
	if err != nil {
		return err
	}
	return s.Client.InvokeAsync(ctx, s.Function, payload)
}

// WakeStore is what starting runs needs of the store.
type WakeStore interface {
	queen.Wakes
	Subscriptions(ctx context.Context) ([]queen.Subscription, error)
}

// ListEvery is how long a Waker keeps its list of subscribed queues: a
// subscription created through another process is woken by this one's
// pushes from its next listing (the reaper's pass starts it meanwhile).
const ListEvery = 10 * time.Second

// Waker starts dispatcher runs for what was pushed, and for what the
// reaper finds due. A push to a queue without a subscription costs
// nothing; one to a subscribed queue costs one statement (MarkWake), and
// starts a run only for a subscription no run holds, so a busy partition
// causes one start per run, not one per push.
type Waker struct {
	Store   WakeStore
	Starter Starter
	Logger  *slog.Logger

	mu       sync.Mutex
	queues   map[string]bool // with an enabled subscription, as listed
	listedAt time.Time
}

// Pushed starts runs for the subscriptions of queues (pushed to by a
// committed transaction) that no run holds. Failures are logged: the push
// succeeded, and the reaper's pass starts what was missed.
func (w *Waker) Pushed(ctx context.Context, queues []string) {
	if subscribed := w.subscribed(ctx); subscribed != nil {
		queues = slices.DeleteFunc(slices.Clone(queues), func(q string) bool { return !subscribed[q] })
	}
	if len(queues) == 0 {
		return
	}
	keys, err := w.Store.MarkWake(ctx, queues)
	if err != nil {
		w.logger().WarnContext(ctx, "dispatch: mark wake", "queues", queues, "err", err)
		return
	}
	w.start(ctx, keys)
}

// Changed starts a run for a subscription created or changed through this
// process's API, and adds its queue to the list.
func (w *Waker) Changed(ctx context.Context, s queen.Subscription) {
	if !s.Enabled {
		return
	}
	w.mu.Lock()
	if w.queues != nil {
		w.queues[s.Queue] = true
	}
	w.mu.Unlock()
	key := queen.WaitKey{Queue: s.Queue, Group: s.ConsumerGroup}
	ok, err := w.Store.ClaimWake(ctx, key)
	if err != nil {
		w.logger().WarnContext(ctx, "dispatch: claim wake", "queue", s.Queue, "consumerGroup", s.ConsumerGroup, "err", err)
	}
	if ok {
		w.start(ctx, []queen.WaitKey{key})
	}
}

// StartDue starts a run for each subscription the store finds due (the
// reaper's safety net, queen.Wakes.DueSubscriptions) and returns how many
// it started.
func (w *Waker) StartDue(ctx context.Context) (int, error) {
	keys, err := w.Store.DueSubscriptions(ctx)
	if err != nil {
		return 0, err
	}
	return w.start(ctx, keys), nil
}

// start starts a run for each of keys, whose wakes the caller holds. A
// run that could not be started gives its wake back, so that the next
// push or reaper pass tries again. It returns how many started.
func (w *Waker) start(ctx context.Context, keys []queen.WaitKey) int {
	n := 0
	for _, k := range keys {
		err := w.Starter.Start(ctx, k)
		if err == nil {
			n++
			continue
		}
		w.logger().WarnContext(ctx, "dispatch: start a run", "queue", k.Queue, "consumerGroup", k.Group, "err", err)
		if err := w.Store.ClearWake(context.WithoutCancel(ctx), k); err != nil {
			w.logger().WarnContext(ctx, "dispatch: clear wake", "queue", k.Queue, "consumerGroup", k.Group, "err", err)
		}
	}
	return n
}

// subscribed returns the queues with an enabled subscription, listed at
// most every ListEvery; nil when it has no list (the listing failed):
// every queue may then be subscribed, and MarkWake decides.
func (w *Waker) subscribed(ctx context.Context) map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queues != nil && time.Since(w.listedAt) < ListEvery {
		return w.queues
	}
	subs, err := w.Store.Subscriptions(ctx)
	if err != nil {
		w.logger().WarnContext(ctx, "dispatch: list subscriptions", "err", err)
		return w.queues
	}
	w.queues, w.listedAt = map[string]bool{}, time.Now()
	for _, s := range subs {
		if s.Enabled {
			w.queues[s.Queue] = true
		}
	}
	return w.queues
}

func (w *Waker) logger() *slog.Logger {
	if w.Logger == nil {
		return slog.Default()
	}
	return w.Logger
}

// WakingStore is a Store whose pushes start dispatcher runs after they
// commit: Push, the pushes of a Transaction, and RetryDeadLetter. The
// long-polls' probe (queen.Prober) passes through.
type WakingStore struct {
	queen.Store
	Waker *Waker
}

// Push implements queen.Store.
func (s WakingStore) Push(ctx context.Context, items []queen.PushItem) ([]queen.PushResult, error) {
	res, err := s.Store.Push(ctx, items)
	if err == nil {
		s.Waker.Pushed(ctx, queuedQueues(res))
	}
	return res, err
}

// Transaction implements queen.Store.
func (s WakingStore) Transaction(ctx context.Context, req queen.TransactionRequest) (queen.TransactionResult, error) {
	res, err := s.Store.Transaction(ctx, req)
	if err == nil {
		s.Waker.Pushed(ctx, queuedQueues(res.Pushes))
	}
	return res, err
}

// RetryDeadLetter implements queen.Store.
func (s WakingStore) RetryDeadLetter(ctx context.Context, partitionID, transactionID, group string) (queen.PushResult, error) {
	res, err := s.Store.RetryDeadLetter(ctx, partitionID, transactionID, group)
	if err == nil {
		s.Waker.Pushed(ctx, queuedQueues([]queen.PushResult{res}))
	}
	return res, err
}

// Deliverable implements queen.Prober when the store does; otherwise every
// key may be deliverable.
func (s WakingStore) Deliverable(ctx context.Context, keys []queen.WaitKey) ([]bool, error) {
	if p, ok := s.Store.(queen.Prober); ok {
		return p.Deliverable(ctx, keys)
	}
	out := make([]bool, len(keys))
	for i := range out {
		out[i] = true
	}
	return out, nil
}

// queuedQueues are the queues of results that queued a message.
func queuedQueues(res []queen.PushResult) []string {
	var out []string
	for _, r := range res {
		if r.Status == queen.StatusQueued && !slices.Contains(out, r.Queue) {
			out = append(out, r.Queue)
		}
	}
	return out
}

// DefaultRunMargin is what a Handler's run leaves of the invocation's time
// when it stops delivering: for the acks in flight, the hand-over and the
// metrics.
const DefaultRunMargin = 5 * time.Second

// RunStore is what a run needs of the store.
type RunStore interface {
	queen.Store
	queen.Wakes
	queen.Prober
}

// Handler is the dispatch function's handler. One run delivers one
// subscription whose wake it holds: it drains the backlog, renewing the
// wake every queen.WakeRenew, until it has caught up or its time is up
// (the invocation's deadline less Margin: it then takes no new batch).
// Caught up, it clears the wake and looks at the backlog once more: a
// push committed before the clear is found by that look, one committed
// after finds the wake clear and starts the next run. Out of time, it
// starts the next run itself, which inherits the wake.
type Handler struct {
	Store RunStore
	// Dispatcher delivers; its Store is Store.
	Dispatcher *Dispatcher
	// Starter starts the next run when this one runs out of time.
	Starter Starter
	Logger  *slog.Logger
	// Metrics receives one Embedded Metric Format line per run.
	Metrics io.Writer
	// Margin: default DefaultRunMargin.
	Margin time.Duration
}

// RunReport is what one run did.
type RunReport struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
	Settled       int    `json:"settled"`
	Failed        int    `json:"failed"`
	// IteratorAgeMS is the age of the oldest record the run delivered.
	IteratorAgeMS int64 `json:"iteratorAgeMs"`
	// HandedOver is true when the run ran out of time and started the next.
	HandedOver bool  `json:"handedOver"`
	DurationMS int64 `json:"durationMs"`
}

func (r *RunReport) add(d Drained) {
	r.Settled += d.Settled
	r.Failed += d.Failed
	r.IteratorAgeMS = max(r.IteratorAgeMS, d.MaxAge.Milliseconds())
}

// Invoke runs one run for the subscription ev names.
func (h *Handler) Invoke(ctx context.Context, ev RunEvent) (RunReport, error) {
	start := time.Now()
	rep := RunReport{Queue: ev.Queue, ConsumerGroup: ev.ConsumerGroup}
	if ev.Queue == "" || ev.ConsumerGroup == "" {
		return rep, errors.New(`dispatch: the event names no subscription: want {"queue", "consumerGroup"}`)
	}
	var until time.Time
	if d, ok := ctx.Deadline(); ok {
		margin := h.Margin
		if margin <= 0 {
			margin = DefaultRunMargin
		}
		until = d.Add(-min(margin, time.Until(d)/2))
	}
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		h.renew(renewCtx, ev.key())
	}()
	err := h.run(ctx, ev.key(), until, &rep)
	stopRenewing()
	<-renewed
	rep.DurationMS = time.Since(start).Milliseconds()
	if err != nil {
		h.logger().ErrorContext(ctx, "dispatch run failed", "report", rep, "err", err)
	} else {
		h.logger().InfoContext(ctx, "dispatch run", "report", rep)
	}
	if h.Metrics != nil {
		if werr := writeEMF(h.Metrics, time.Now(), rep); werr != nil {
			h.logger().ErrorContext(ctx, "write metrics", "err", werr)
		}
	}
	return rep, err
}

// run delivers until caught up (the wake handed back) or out of time
// (handed over to the next run).
func (h *Handler) run(ctx context.Context, key queen.WaitKey, until time.Time, rep *RunReport) error {
	for {
		sub, err := h.Store.Subscription(ctx, key.Queue, key.Group)
		if errors.Is(err, queen.ErrNotFound) || err == nil && !h.Dispatcher.delivers(sub) {
			return h.Store.ClearWake(ctx, key) // deleted or paused: nothing to deliver
		}
		if err != nil {
			return err // the wake goes stale, and the reaper starts a run
		}
		d, err := h.Dispatcher.DrainUntil(ctx, sub, until)
		rep.add(d)
		if past(until) {
			if err != nil { // a call cut off at the end: its lease expires
				h.logger().WarnContext(ctx, "dispatch: run out of time", "queue", key.Queue,
					"consumerGroup", key.Group, "err", err)
			}
			return h.handOver(ctx, key, rep)
		}
		if err != nil {
			return err
		}
		if err := h.Store.ClearWake(ctx, key); err != nil {
			return err
		}
		more, err := h.Store.Deliverable(ctx, []queen.WaitKey{key})
		if err != nil || !more[0] {
			return err
		}
		claimed, err := h.Store.ClaimWake(ctx, key)
		if err != nil || !claimed {
			return err // another run holds it now
		}
	}
}

// handOverWithin bounds the hand-over, which may run after the run's
// context ended (a call in flight took the run's last moments).
const handOverWithin = 800 * time.Millisecond

// handOver starts the next run of a subscription whose run is out of
// time, with the wake renewed for it.
func (h *Handler) handOver(ctx context.Context, key queen.WaitKey, rep *RunReport) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handOverWithin)
	defer cancel()
	if _, err := h.Store.RenewWake(ctx, key); err != nil {
		return fmt.Errorf("hand over: %w", err)
	}
	if err := h.Starter.Start(ctx, key); err != nil {
		return fmt.Errorf("hand over: %w", err)
	}
	rep.HandedOver = true
	return nil
}

// renew renews the wake every queen.WakeRenew until ctx ends.
func (h *Handler) renew(ctx context.Context, key queen.WaitKey) {
	t := time.NewTicker(queen.WakeRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := h.Store.RenewWake(ctx, key); err != nil && ctx.Err() == nil {
				h.logger().WarnContext(ctx, "dispatch: renew wake", "queue", key.Queue, "consumerGroup", key.Group, "err", err)
			}
		}
	}
}

func (h *Handler) logger() *slog.Logger {
	if h.Logger == nil {
		return slog.Default()
	}
	return h.Logger
}

// writeEMF writes one CloudWatch Embedded Metric Format line for a run,
// in the reaper's namespace, without dimensions (the series the alarms
// use).
func writeEMF(w io.Writer, now time.Time, rep RunReport) error {
	return reaper.EMF(w, now, []reaper.Metric{
		{Name: MetricIteratorAge, Unit: "Milliseconds", Value: rep.IteratorAgeMS},
		{Name: MetricSettled, Unit: "Count", Value: int64(rep.Settled)},
		{Name: MetricDeliveryErrors, Unit: "Count", Value: int64(rep.Failed)},
	})
}
