package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

func subscribe(t *testing.T, e *pgstoretest.Env, queue, group string, enabled bool) {
	t.Helper()
	if _, err := e.Store.PutSubscription(context.Background(), queen.SubscriptionRequest{Queue: queue,
		ConsumerGroup: group, Target: queen.SubscriptionTarget{URL: "http://127.0.0.1:1/"}, Enabled: &enabled}); err != nil {
		t.Fatal(err)
	}
}

// A push wakes each enabled subscription of its queue once: until the run
// it started clears the wake, or the wake goes stale (the run died), later
// pushes start nothing (docs/subscriptions.md §8).
func TestMarkWakeStartsOneRunPerSubscription(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	ctx := context.Background()
	subscribe(t, e, "orders", "billing", true)
	subscribe(t, e, "orders", "audit", true)
	subscribe(t, e, "orders", "paused", false)
	subscribe(t, e, "other", "billing", true)

	got, err := e.Store.MarkWake(ctx, []string{"orders", "nobody"})
	want := []queen.WaitKey{{Queue: "orders", Group: "audit"}, {Queue: "orders", Group: "billing"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("first mark = %v, %v; want %v (enabled subscriptions of orders)", got, err, want)
	}
	if got, err := e.Store.MarkWake(ctx, []string{"orders"}); err != nil || len(got) != 0 {
		t.Fatalf("second mark = %v, %v; want none: the runs are live", got, err)
	}
	if ok, err := e.Store.ClaimWake(ctx, queen.WaitKey{Queue: "orders", Group: "billing"}); err != nil || ok {
		t.Fatalf("claim of a live wake = %v, %v; want false", ok, err)
	}

	// A run renews its wake; one not renewed for WakeStale is lost.
	e.Clock.Advance(queen.WakeStale / 2)
	if ok, err := e.Store.RenewWake(ctx, queen.WaitKey{Queue: "orders", Group: "billing"}); err != nil || !ok {
		t.Fatalf("renew = %v, %v; want true", ok, err)
	}
	e.Clock.Advance(queen.WakeStale/2 + time.Second)
	got, err = e.Store.MarkWake(ctx, []string{"orders"})
	if want := []queen.WaitKey{{Queue: "orders", Group: "audit"}}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("mark after audit's wake went stale = %v, %v; want %v", got, err, want)
	}

	// A run that caught up clears its wake; the next push starts a run.
	billing := queen.WaitKey{Queue: "orders", Group: "billing"}
	if err := e.Store.ClearWake(ctx, billing); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.Store.RenewWake(ctx, billing); err != nil || ok {
		t.Fatalf("renew of a cleared wake = %v, %v; want false", ok, err)
	}
	if ok, err := e.Store.ClaimWake(ctx, billing); err != nil || !ok {
		t.Fatalf("claim of a cleared wake = %v, %v; want true", ok, err)
	}
	if ok, err := e.Store.ClaimWake(ctx, queen.WaitKey{Queue: "orders", Group: "paused"}); err != nil || ok {
		t.Fatalf("claim of a paused subscription = %v, %v; want false", ok, err)
	}
}

// The reaper starts what a pop could serve and no run holds: a group that
// never read the queue, and a backlog whose retryDelay has run out; not a
// subscription with nothing to deliver, a live wake, or a paused one.
func TestDueSubscriptionsAreWhatAPopCouldServe(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	ctx := context.Background()
	configure(t, e, "orders", queen.QueueOptions{RetryDelay: ptr(10_000)})
	subscribe(t, e, "orders", "fresh", true)
	subscribe(t, e, "orders", "live", true)
	subscribe(t, e, "orders", "paused", false)
	subscribe(t, e, "empty", "idle", true)
	if due, err := e.Store.DueSubscriptions(ctx); err != nil || len(due) != 0 {
		t.Fatalf("due with nothing pushed = %v, %v; want none", due, err)
	}
	pushN(t, e, "orders", "p", "m", 2)
	if _, err := e.Store.ClaimWake(ctx, queen.WaitKey{Queue: "orders", Group: "live"}); err != nil {
		t.Fatal(err)
	}
	due, err := e.Store.DueSubscriptions(ctx)
	if want := []queen.WaitKey{{Queue: "orders", Group: "fresh"}}; err != nil || !slices.Equal(due, want) {
		t.Fatalf("due = %v, %v; want %v", due, err, want)
	}
	if due, err := e.Store.DueSubscriptions(ctx); err != nil || len(due) != 0 {
		t.Fatalf("due again = %v, %v; want none: the first call marked it", due, err)
	}

	// fresh's run fails its head: retryDelay holds the partition back.
	r := pop(t, e, queen.PopRequest{Queue: "orders", ConsumerGroup: "fresh", Batch: 10})
	mustAck(t, e, ack(r.Messages[0], "fresh", r.LeaseID, queen.AckFailed))
	if err := e.Store.ClearWake(ctx, queen.WaitKey{Queue: "orders", Group: "fresh"}); err != nil {
		t.Fatal(err)
	}
	if due, err := e.Store.DueSubscriptions(ctx); err != nil || len(due) != 0 {
		t.Fatalf("due inside retryDelay = %v, %v; want none", due, err)
	}
	e.Clock.Advance(11 * time.Second)
	due, err = e.Store.DueSubscriptions(ctx)
	if want := []queen.WaitKey{{Queue: "orders", Group: "fresh"}}; err != nil || !slices.Equal(due, want) {
		t.Fatalf("due after retryDelay = %v, %v; want %v", due, err, want)
	}
}
