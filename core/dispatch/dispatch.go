// Package dispatch delivers subscriptions (docs/subscriptions.md): for a
// subscription's consumer group it leases one partition's batch as a pop
// does, sends it to the target as one event, and acks it in one call by
// the target's answer — completed, or failed for the records the answer
// names — so the model's rules (clamp, attempts, retryDelay, DLQ) apply
// unchanged. A target that fails as a whole ends the lease as an expiry
// would. At most one batch per (partition, group) is in flight, because
// the lease is the pop's.
package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/core/egress"
	"github.com/queen-serverless/queen/core/queen"
)

// Invoker calls a Lambda function synchronously. It returns the function's
// result payload, or an error when the call or the function failed (a
// function error, a timeout, a throttle).
type Invoker interface {
	Invoke(ctx context.Context, function string, payload []byte) ([]byte, error)
}

// Config configures a Dispatcher.
type Config struct {
	Store queen.Store
	// Fence is what URL targets may reach (config.Config.Fence). nil: a
	// fence that refuses every address.
	Fence *egress.Fence
	// HTTP posts to URL targets. Default: Fence's client, which connects
	// only where the fence allows and follows no redirect.
	HTTP *http.Client
	// Lambda invokes function targets. Without it, subscriptions with a
	// function target are left alone (nothing is leased for them).
	Lambda Invoker
	// Logger receives delivery failures. Default slog.Default().
	Logger *slog.Logger
}

// Worker names the dispatcher in a cursor's worker column.
const Worker = "queen-dispatch"

// leaseMargin is kept between the end of a target's call and its lease's
// expiry, for the ack; maxCall bounds a call when the lease cannot.
const (
	leaseMargin = time.Second
	maxCall     = 5 * time.Minute
)

// Dispatcher delivers subscriptions.
type Dispatcher struct {
	cfg Config

	mu      sync.Mutex
	running map[queen.WaitKey]*drain // subscriptions being drained
	again   map[queen.WaitKey]bool   // woken while being drained: drain once more
	pending map[string]bool          // queues woken since Run last looked
	signal  chan struct{}            // one slot: something is pending
	due     chan struct{}            // one slot: look for backlog (Due)
	wg      sync.WaitGroup

	// The subscriptions as last listed (at the first wake and every Due)
	// or told (Changed), and the queues one of them delivers: a wake of
	// another queue costs nothing.
	subs   []queen.Subscription
	queues map[string]bool
	listed bool
	told   int // Changed calls so far: a listing that overlapped one is read again
}

// New returns a Dispatcher.
func New(cfg Config) *Dispatcher {
	if cfg.Fence == nil {
		cfg.Fence = &egress.Fence{}
	}
	if cfg.HTTP == nil {
		cfg.HTTP = cfg.Fence.HTTPClient()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Dispatcher{cfg: cfg, running: map[queen.WaitKey]*drain{}, again: map[queen.WaitKey]bool{},
		pending: map[string]bool{}, signal: make(chan struct{}, 1), due: make(chan struct{}, 1)}
}

// Wake asks Run to deliver queue's subscriptions: a push to it committed.
// It never blocks, and sends no statement: a queue no subscription
// delivers is left alone, and the queues woken while Run is busy are
// looked at together when it is free.
func (d *Dispatcher) Wake(queue string) {
	d.mu.Lock()
	if d.listed && !d.queues[queue] {
		d.mu.Unlock()
		return
	}
	d.pending[queue] = true
	d.mu.Unlock()
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

// Changed tells the dispatcher of a subscription created or changed (by
// this process's API: others' are seen at the next Due), and wakes
// its queue.
func (d *Dispatcher) Changed(s queen.Subscription) {
	d.mu.Lock()
	if d.listed { // else the first listing reads it
		subs := slices.DeleteFunc(slices.Clone(d.subs), func(o queen.Subscription) bool {
			return o.Queue == s.Queue && o.ConsumerGroup == s.ConsumerGroup
		})
		d.setSubs(append(subs, s))
	}
	d.told++
	d.mu.Unlock()
	d.Wake(s.Queue)
}

// drain is a subscription being drained: cancel stops it, done is closed
// when it has stopped.
type drain struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// errGone cancels the deliveries of a subscription that was deleted.
var errGone = errors.New("the subscription was deleted")

// Gone stops delivering the subscriptions a DELETE removed — queue's
// subscription for group; "" queue: group's on every queue; "" group:
// every subscription of queue — and returns once their deliveries in
// flight have stopped (or ctx ends): no event is sent for them after it
// returns. A batch leased and not yet answered is put back (acked retry:
// no attempt counted), so the group's next reader gets it.
// Other processes' dispatchers stop at their next lease, which checks the
// subscription in its transaction.
func (d *Dispatcher) Gone(ctx context.Context, queue, group string) {
	match := func(q, g string) bool { return (queue == "" || q == queue) && (group == "" || g == group) }
	d.mu.Lock()
	if d.listed {
		d.setSubs(slices.DeleteFunc(slices.Clone(d.subs), func(s queen.Subscription) bool {
			return match(s.Queue, s.ConsumerGroup)
		}))
	}
	d.told++
	var stopping []chan struct{}
	for k, dr := range d.running {
		if match(k.Queue, k.Group) {
			dr.cancel(errGone)
			stopping = append(stopping, dr.done)
		}
	}
	d.mu.Unlock()
	for _, done := range stopping {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}

// setSubs replaces the cached subscriptions; d.mu is held.
func (d *Dispatcher) setSubs(subs []queen.Subscription) {
	d.subs, d.queues, d.listed = subs, map[string]bool{}, true
	for _, s := range subs {
		if s.Enabled && (s.Target.URL != "" || d.cfg.Lambda != nil) {
			d.queues[s.Queue] = true
		}
	}
}

// list reads the subscriptions into the cache. A listing during which
// the dispatcher was told of a change may predate it, and is read again;
// on an error, or a change during every try, the cache stays as it was.
func (d *Dispatcher) list(ctx context.Context) {
	for range 3 {
		d.mu.Lock()
		told := d.told
		d.mu.Unlock()
		subs, err := d.cfg.Store.Subscriptions(ctx)
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.Warn("dispatch: list subscriptions", "err", err)
			}
			return
		}
		d.mu.Lock()
		fresh := d.told == told
		if fresh {
			d.setSubs(subs)
		}
		d.mu.Unlock()
		if fresh {
			return
		}
	}
}

// Due asks Run to read the subscriptions again and deliver those with
// deliverable backlog it was not woken for: messages whose delay or
// retryDelay ran out, pushes of other processes. The reaper's pass calls
// it, so that idle subscriptions cost nothing beyond that pass. It never
// blocks.
func (d *Dispatcher) Due(context.Context) {
	select {
	case d.due <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends: the subscriptions of each woken queue at
// once, and after each Due those with deliverable backlog. It reads the
// subscriptions at its first wake, not before. It returns once the
// deliveries it started have ended.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.signal:
			d.mu.Lock()
			queues, listed := d.pending, d.listed
			d.pending = map[string]bool{}
			d.mu.Unlock()
			if !listed {
				d.list(ctx)
			}
			d.start(ctx, queues)
		case <-d.due:
			d.list(ctx)
			d.start(ctx, nil)
		}
	}
}

// start drains the enabled subscriptions of queues (nil: of every queue,
// those with deliverable backlog) that are not being drained already;
// those that are drain once more when done, so a push committed after
// their last pop is not left behind.
func (d *Dispatcher) start(ctx context.Context, queues map[string]bool) {
	var todo []queen.Subscription
	d.mu.Lock()
	for _, s := range d.subs {
		if s.Enabled && (queues == nil || queues[s.Queue]) && (s.Target.URL != "" || d.cfg.Lambda != nil) {
			todo = append(todo, s)
		}
	}
	d.mu.Unlock()
	if queues == nil {
		todo = d.deliverable(ctx, todo)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range todo {
		k := queen.WaitKey{Queue: s.Queue, Group: s.ConsumerGroup}
		if d.running[k] != nil {
			d.again[k] = true
			continue
		}
		dctx, cancel := context.WithCancelCause(ctx)
		dr := &drain{cancel: cancel, done: make(chan struct{})}
		d.running[k] = dr
		d.wg.Go(func() {
			defer close(dr.done)
			defer cancel(nil)
			d.drainLoop(dctx, k, s)
		})
	}
}

// deliverable keeps the subscriptions whose group a pop could serve now
// (one probe for all of them, when the store offers one).
func (d *Dispatcher) deliverable(ctx context.Context, subs []queen.Subscription) []queen.Subscription {
	p, ok := d.cfg.Store.(queen.Prober)
	if !ok || len(subs) == 0 {
		return subs
	}
	keys := make([]queen.WaitKey, len(subs))
	for i, s := range subs {
		keys[i] = queen.WaitKey{Queue: s.Queue, Group: s.ConsumerGroup}
	}
	ok2, err := p.Deliverable(ctx, keys)
	if err != nil {
		return subs
	}
	var out []queen.Subscription
	for i, s := range subs {
		if ok2[i] {
			out = append(out, s)
		}
	}
	return out
}

// drainLoop drains s, and again while it is woken meanwhile, each time as
// the subscription was last listed or told.
func (d *Dispatcher) drainLoop(ctx context.Context, k queen.WaitKey, s queen.Subscription) {
	for {
		if _, err := d.Drain(ctx, s); err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("dispatch: drain", "queue", s.Queue, "consumerGroup", s.ConsumerGroup, "err", err)
		}
		d.mu.Lock()
		i := slices.IndexFunc(d.subs, func(o queen.Subscription) bool {
			return o.Queue == k.Queue && o.ConsumerGroup == k.Group
		})
		if !d.again[k] || ctx.Err() != nil || i < 0 || !d.delivers(d.subs[i]) {
			delete(d.running, k)
			delete(d.again, k)
			d.mu.Unlock()
			return
		}
		s = d.subs[i]
		delete(d.again, k)
		d.mu.Unlock()
	}
}

// Drained is what a Drain did.
type Drained struct {
	// Settled is the messages the target settled (completed or failed by
	// its answer).
	Settled int
	// Failed is the deliveries that failed as a whole.
	Failed int
	// MaxAge is the age of the oldest record delivered, when it was
	// delivered (the subscription's iterator age).
	MaxAge time.Duration
}

// delivers reports whether the dispatcher delivers sub: it is enabled,
// and its target is a URL or a function this dispatcher can call.
func (d *Dispatcher) delivers(sub queen.Subscription) bool {
	return sub.Enabled && (sub.Target.URL != "" || d.cfg.Lambda != nil)
}

// Drain delivers sub's backlog until a pop finds nothing or ctx ends, up
// to MaxConcurrency partitions at a time. With a batch window it first
// waits that long, so that a batch can fill.
//
// It works in passes, and ends after a pass that leased nothing: within a
// pass a worker whose pop finds nothing stops, though another worker may
// be about to end a lease, so only a pass without deliveries shows that
// nothing is left. Between passes (each at most passLength) it reads the
// subscription again, and stops once it is deleted or paused. After a
// pass whose deliveries all failed as a whole (the target is down), it
// waits before the next, twice as long each time up to maxBackoff. A
// failed attempt holds its partition back (retryDelay, at least a second,
// enforced by the store whoever pops next), so Drain ends only after a
// pass that leased nothing once the shortest hold is over; a longer
// retryDelay is delivered after the reaper's next pass (Due) once it ends.
func (d *Dispatcher) Drain(ctx context.Context, sub queen.Subscription) (Drained, error) {
	return d.DrainUntil(ctx, sub, time.Time{})
}

// DrainUntil is Drain that takes no new batch after until (zero: no
// limit): the deliveries in flight then finish, bounded by ctx and their
// leases, and it returns.
func (d *Dispatcher) DrainUntil(ctx context.Context, sub queen.Subscription, until time.Time) (Drained, error) {
	var total Drained
	if sub.BatchWindowMs > 0 {
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(time.Duration(sub.BatchWindowMs) * time.Millisecond):
		}
	}
	var (
		backoff     time.Duration
		lastFailure time.Time // of the last failed attempt
	)
	for {
		p, err := d.pass(ctx, sub, until)
		total.Settled += p.settled
		total.Failed += p.failed
		total.MaxAge = max(total.MaxAge, p.maxAge)
		if err != nil || ctx.Err() != nil || past(until) {
			return total, err
		}
		if p.attempts > 0 {
			lastFailure = time.Now()
		}
		var wait time.Duration
		switch {
		case p.batches == 0 && (lastFailure.IsZero() || time.Since(lastFailure) >= minBackoff):
			return total, nil
		case p.batches == 0: // the shortest hold of a failed attempt is not over yet
			wait = minBackoff - time.Since(lastFailure)
		case p.failed > 0 && p.settled == 0:
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			wait = backoff
		default:
			backoff = 0
		}
		if wait > 0 {
			if !until.IsZero() {
				wait = min(wait, time.Until(until))
			}
			select {
			case <-ctx.Done():
				return total, nil
			case <-time.After(wait):
			}
		}
		cur, err := d.cfg.Store.Subscription(ctx, sub.Queue, sub.ConsumerGroup)
		if errors.Is(err, queen.ErrNotFound) || err == nil && (!cur.Enabled || cur.Target.URL == "" && d.cfg.Lambda == nil) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		sub = cur
	}
}

// past reports whether until is set and has passed.
func past(until time.Time) bool { return !until.IsZero() && !time.Now().Before(until) }

// The wait after a pass whose deliveries all failed as a whole, and
// between looks at a failed attempt's hold. minBackoff is a little over
// the shortest hold, so that the first look after it finds it ended.
const (
	minBackoff = time.Second + 100*time.Millisecond
	maxBackoff = time.Minute
)

// passResult is what a pass did: messages settled, batches leased,
// deliveries that failed as a whole, and the oldest record's age.
type passResult struct {
	settled, batches, failed int
	attempts                 int // deliveries that counted a failed attempt
	maxAge                   time.Duration
}

// passLength is how long a pass's workers take new batches, so that a
// subscription paused, deleted or changed under steady traffic is seen.
const passLength = time.Second

// pass runs up to MaxConcurrency workers that each deliver batches until
// a pop finds nothing or passLength is over; a delivery that fails as a
// whole ends the pass (its head is due again at once).
func (d *Dispatcher) pass(ctx context.Context, sub queen.Subscription, drainUntil time.Time) (passResult, error) {
	until := time.Now().Add(passLength)
	if !drainUntil.IsZero() && drainUntil.Before(until) {
		until = drainUntil
	}
	var (
		mu   sync.Mutex
		res  passResult
		errs []error
		wg   sync.WaitGroup
		down atomic.Bool // a delivery failed as a whole: no new batches this pass
	)
	for range max(1, sub.MaxConcurrency) {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(until) && !down.Load() {
				o, err := d.deliverOne(ctx, sub, func() { down.Store(true) })
				mu.Lock()
				res.settled += o.settled
				res.maxAge = max(res.maxAge, o.age)
				if o.leased {
					res.batches++
				}
				if o.attempted {
					res.attempts++
				}
				if o.failed {
					res.failed++
					down.Store(true)
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil || !o.leased || o.failed {
					return
				}
			}
		})
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

// delivery is what deliverOne did: messages settled, whether it leased a
// batch, whether the delivery failed as a whole, and the age of its
// oldest record when it was sent.
type delivery struct {
	settled                   int
	leased, failed, attempted bool // attempted: a failed attempt was counted
	age                       time.Duration
}

// deliverOne leases one partition's batch for sub's group and delivers it.
// failing is called when the delivery failed as a whole, before the lease
// is released.
func (d *Dispatcher) deliverOne(ctx context.Context, sub queen.Subscription, failing func()) (delivery, error) {
	target := sub.Target
	res, err := d.cfg.Store.Pop(ctx, queen.PopRequest{Queue: sub.Queue, ConsumerGroup: sub.ConsumerGroup,
		Batch: sub.BatchSize, Partitions: 1, Worker: Worker, Target: &target})
	if err != nil || len(res.Messages) == 0 {
		return delivery{}, err
	}
	body, left, err := event(sub, res, sub.MaxBatchBytes)
	if err != nil {
		return delivery{leased: true}, err
	}
	sent := res.Messages[:len(res.Messages)-left]

	// The call ends before the lease does, so that the ack finds it live.
	// A lease (nearly) over by this machine's clock — a lease of a second, a
	// clock apart from the store's — gives the call maxCall: the ack then
	// says whether the lease still held.
	deadline := time.Now().Add(maxCall)
	if res.LeaseExpiresAt != nil && time.Until(*res.LeaseExpiresAt) > 2*leaseMargin {
		deadline = res.LeaseExpiresAt.Add(-leaseMargin)
	}
	callCtx, cancel := context.WithDeadline(ctx, deadline)
	age := max(0, time.Since(res.Messages[0].CreatedAt))
	answer, callErr := d.call(callCtx, sub.Target, body)
	cancel()
	var failed map[int64]bool
	if callErr == nil {
		failed, callErr = failedItems(answer, sent)
	}
	// The batch is settled even when ctx ended meanwhile (the subscription
	// was deleted, the server is stopping), within ctx's deadline.
	sctx, cancelSettle := settleContext(ctx)
	defer cancelSettle()
	if callErr != nil {
		switch {
		case errors.Is(context.Cause(ctx), errGone):
			// Deleted: the batch goes back without an attempt counted.
			head := res.Messages[0]
			_, err := d.cfg.Store.Ack(sctx, []queen.Ack{{PartitionID: head.PartitionID, TransactionID: head.TransactionID,
				ConsumerGroup: sub.ConsumerGroup, LeaseID: res.LeaseID, Status: queen.AckRetry,
				Error: "the subscription was deleted"}})
			return delivery{leased: true}, errors.Join(ctx.Err(), err)
		case ctx.Err() != nil:
			return delivery{leased: true}, ctx.Err() // shutting down: the lease expires by itself
		}
		// Failed as a whole: the lease ends as an expiry would.
		failing()
		d.cfg.Logger.Info("dispatch: delivery failed", "queue", sub.Queue, "consumerGroup", sub.ConsumerGroup,
			"partition", res.Messages[0].Partition, "err", callErr)
		err = d.cfg.Store.ReleaseLease(sctx, res.LeaseID)
		if errors.Is(err, queen.ErrConflict) {
			err = nil // it expired meanwhile: the reaper or a pop counted the attempt
		}
		return delivery{leased: true, failed: true, attempted: true, age: age},
			errors.Join(err, d.record(sctx, sub, 0, callErr.Error()))
	}

	acks := make([]queen.Ack, 0, len(res.Messages))
	for i, m := range res.Messages {
		a := queen.Ack{PartitionID: m.PartitionID, TransactionID: m.TransactionID, ConsumerGroup: sub.ConsumerGroup,
			LeaseID: res.LeaseID, Status: queen.AckCompleted}
		switch {
		case i >= len(sent):
			a.Status = queen.AckRetry // left out of the event to fit maxBatchBytes: delivered next time
		case failed[m.Offset]:
			a.Status, a.Error = queen.AckFailed, "listed in batchItemFailures"
		}
		acks = append(acks, a)
	}
	if _, err := d.cfg.Store.Ack(sctx, acks); err != nil {
		// The lease ended before the ack (the target took too long): its
		// expiry counted an attempt, and the batch comes again.
		return delivery{leased: true, attempted: true, age: age}, errors.Join(fmt.Errorf("ack a delivered batch: %w", err),
			d.record(sctx, sub, 0, err.Error()))
	}
	return delivery{settled: len(sent), leased: true, attempted: len(failed) > 0, age: age},
		d.record(sctx, sub, len(sent), "")
}

// settleWithin bounds settling a batch whose delivery's context ended
// without a deadline.
const settleWithin = 10 * time.Second

// settleContext is ctx without its cancellation, within its deadline (or
// settleWithin): for the statements that settle a delivered batch.
func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), dl)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), settleWithin)
}

func (d *Dispatcher) record(ctx context.Context, sub queen.Subscription, settled int, why string) error {
	return d.cfg.Store.RecordDelivery(ctx, queen.Delivery{Queue: sub.Queue, ConsumerGroup: sub.ConsumerGroup,
		Settled: settled, Error: why})
}

// call sends an event to a target and returns its answer.
func (d *Dispatcher) call(ctx context.Context, t queen.SubscriptionTarget, body []byte) ([]byte, error) {
	if t.Function != "" {
		if d.cfg.Lambda == nil {
			return nil, errors.New("no Lambda client: function targets are delivered on AWS")
		}
		return d.cfg.Lambda.Invoke(ctx, t.Function, body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	// Errors name the URL with its query redacted: they are recorded as
	// the subscription's lastError.
	shown := egress.Redacted(t.URL)
	resp, err := d.cfg.HTTP.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			ue.URL = shown
		}
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", shown, err)
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, fmt.Errorf("%s answered %s: %w", shown, resp.Status, egress.ErrRedirect)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("%s answered %s", shown, resp.Status)
	case len(answer) > maxAnswerBytes:
		return nil, fmt.Errorf("%s answered more than %d bytes", shown, maxAnswerBytes)
	}
	return answer, nil
}
