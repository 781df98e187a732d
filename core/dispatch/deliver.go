package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/core/egress"
	"github.com/queen-serverless/queen/core/queen"
)

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

// Drain delivers sub's backlog until a pop finds nothing or ctx ends (it
// then returns no error: a batch in flight is settled, or left to its
// lease), up to MaxConcurrency partitions at a time. With a batch window it first
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
		if ended(ctx) {
			return total, nil // what failed, failed for that: the caller ended the drain
		}
		if err != nil || past(until) {
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
		if ended(ctx) {
			return total, nil
		}
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
			if err != nil {
				d.cfg.Logger.Warn("dispatch: put back a deleted subscription's batch: its lease expires instead",
					"queue", sub.Queue, "consumerGroup", sub.ConsumerGroup, "err", err)
			}
			return delivery{leased: true}, ctx.Err()
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

// ended reports whether the caller ended a drain: ctx is done, or its
// deadline has passed. A batch is settled under a context of its own with
// ctx's deadline (settleContext), whose timer can fire, and fail the
// settling, a moment before ctx's own.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
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
