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
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
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

// delivers reports whether the dispatcher delivers sub: it is enabled,
// and its target is a URL or a function this dispatcher can call.
func (d *Dispatcher) delivers(sub queen.Subscription) bool {
	return sub.Enabled && (sub.Target.URL != "" || d.cfg.Lambda != nil)
}
