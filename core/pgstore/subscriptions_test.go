package pgstore_test

import (
	"errors"
	"testing"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// A subscription takes the documented defaults (docs/subscriptions.md §5),
// a new definition replaces the options but keeps its counters and
// creation time, and deleting it leaves the group's cursors.
func TestSubscriptionDefinitionAndCounters(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	s, err := e.Store.PutSubscription(ctx, queen.SubscriptionRequest{Queue: "orders", ConsumerGroup: "billing",
		Target: queen.SubscriptionTarget{URL: "http://127.0.0.1:1/hook"}})
	if err != nil {
		t.Fatal(err)
	}
	want := queen.Subscription{Queue: "orders", ConsumerGroup: "billing",
		Target:    queen.SubscriptionTarget{URL: "http://127.0.0.1:1/hook"},
		BatchSize: 10, MaxBatchBytes: 6 << 20, BatchWindowMs: 0, MaxConcurrency: 10, Enabled: true,
		CreatedAt: pgstoretest.Epoch, UpdatedAt: pgstoretest.Epoch}
	if !s.CreatedAt.Equal(want.CreatedAt) || !s.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("times %v %v, want the store's clock %v", s.CreatedAt, s.UpdatedAt, pgstoretest.Epoch)
	}
	s.CreatedAt, s.UpdatedAt = want.CreatedAt, want.UpdatedAt
	if s.Queue != want.Queue || s.Target != want.Target || s.BatchSize != want.BatchSize ||
		s.MaxBatchBytes != want.MaxBatchBytes || s.BatchWindowMs != 0 || s.MaxConcurrency != want.MaxConcurrency ||
		!s.Enabled || s.Delivered != 0 || s.LastError != nil || s.LastDeliveryAt != nil {
		t.Fatalf("created %+v, want %+v", s, want)
	}

	if err := e.Store.RecordDelivery(ctx, queen.Delivery{Queue: "orders", ConsumerGroup: "billing", Settled: 7}); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.RecordDelivery(ctx, queen.Delivery{Queue: "orders", ConsumerGroup: "billing", Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(10e9)
	batch, off := 50, false
	s, err = e.Store.PutSubscription(ctx, queen.SubscriptionRequest{Queue: "orders", ConsumerGroup: "billing",
		Target:    queen.SubscriptionTarget{Function: "arn:aws:lambda:eu-west-1:123456789012:function:bill"},
		BatchSize: &batch, Enabled: &off})
	if err != nil {
		t.Fatal(err)
	}
	if s.Target.URL != "" || s.Target.Function == "" || s.BatchSize != 50 || s.MaxConcurrency != 10 || s.Enabled ||
		s.Delivered != 7 || s.LastError == nil || *s.LastError != "boom" || s.LastDeliveryAt == nil ||
		!s.CreatedAt.Equal(pgstoretest.Epoch) || !s.UpdatedAt.Equal(pgstoretest.Epoch.Add(10e9)) {
		t.Fatalf("redefined %+v", s)
	}

	pushN(t, e, "orders", "p", "tx", 2)
	r := pop(t, e, queen.PopRequest{Queue: "orders", Partition: "p", ConsumerGroup: "billing"})
	mustAck(t, e, ack(r.Messages[0], "billing", r.LeaseID, queen.AckCompleted))
	if err := e.Store.DeleteSubscription(ctx, "orders", "billing"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Subscription(ctx, "orders", "billing"); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("after delete: %v, want not found", err)
	}
	if err := e.Store.DeleteSubscription(ctx, "orders", "billing"); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("second delete: %v, want not found", err)
	}
	r = pop(t, e, queen.PopRequest{Queue: "orders", Partition: "p", ConsumerGroup: "billing"})
	if len(r.Messages) != 1 || r.Messages[0].TransactionID != "tx-1" {
		t.Fatalf("the group's cursor did not survive the subscription: %+v", r.Messages)
	}
}

// Bad definitions are refused and write nothing.
func TestSubscriptionBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	url := queen.SubscriptionTarget{URL: "https://example.com/hook"}
	zero, big := 0, 6<<20+1
	for name, req := range map[string]queen.SubscriptionRequest{
		"no queue":        {ConsumerGroup: "g", Target: url},
		"no group":        {Queue: "q", Target: url},
		"no target":       {Queue: "q", ConsumerGroup: "g"},
		"two targets":     {Queue: "q", ConsumerGroup: "g", Target: queen.SubscriptionTarget{URL: url.URL, Function: "f"}},
		"relative url":    {Queue: "q", ConsumerGroup: "g", Target: queen.SubscriptionTarget{URL: "/hook"}},
		"ftp url":         {Queue: "q", ConsumerGroup: "g", Target: queen.SubscriptionTarget{URL: "ftp://example.com/"}},
		"batch 0":         {Queue: "q", ConsumerGroup: "g", Target: url, BatchSize: &zero},
		"over 6 MB":       {Queue: "q", ConsumerGroup: "g", Target: url, MaxBatchBytes: &big},
		"concurrency 0":   {Queue: "q", ConsumerGroup: "g", Target: url, MaxConcurrency: &zero},
		"unroutable name": {Queue: "q", ConsumerGroup: "a//b", Target: url},
	} {
		_, err := e.Store.PutSubscription(ctx, req)
		var fe *queen.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a field error", name, err)
		}
	}
	if subs, err := e.Store.Subscriptions(ctx); err != nil || len(subs) != 0 {
		t.Fatalf("subscriptions after bad input: %+v %v", subs, err)
	}
}

// Deleting a queue or a group deletes its subscriptions.
func TestSubscriptionsGoWithTheirQueueAndGroup(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	url := queen.SubscriptionTarget{URL: "https://example.com/hook"}
	for _, k := range [][2]string{{"q1", "g1"}, {"q1", "g2"}, {"q2", "g1"}} {
		if _, err := e.Store.PutSubscription(ctx, queen.SubscriptionRequest{Queue: k[0], ConsumerGroup: k[1], Target: url}); err != nil {
			t.Fatal(err)
		}
	}
	pushN(t, e, "q1", "p", "tx", 1)
	if err := e.Store.DeleteQueue(ctx, "q1"); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.DeleteGroup(ctx, "g1", ""); err != nil {
		t.Fatal(err)
	}
	if subs, err := e.Store.Subscriptions(ctx); err != nil || len(subs) != 0 {
		t.Fatalf("left: %+v %v", subs, err)
	}
}

// Releasing a lease is a lease expiry (the model document: an expired
// lease counts a failed attempt, and the head comes back alone), and a
// lease can be released once.
func TestReleasedLeaseIsAnExpiry(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	if _, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "q", Options: queen.QueueOptions{RetryLimit: ptr(1)}}); err != nil {
		t.Fatal(err)
	}
	pushN(t, e, "q", "p", "tx", 3)
	r := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 3})
	if err := e.Store.ReleaseLease(ctx, r.LeaseID); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.ReleaseLease(ctx, r.LeaseID); !errors.Is(err, queen.ErrConflict) {
		t.Fatalf("second release: %v, want a conflict", err)
	}
	r = pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 3})
	if len(r.Messages) != 1 || r.Messages[0].TransactionID != "tx-0" || r.Messages[0].RetryCount != 1 {
		t.Fatalf("after release: %+v, want tx-0 alone with one attempt counted", r.Messages)
	}
	// retryLimit 1: the second failed attempt dead-letters the head.
	if err := e.Store.ReleaseLease(ctx, r.LeaseID); err != nil {
		t.Fatal(err)
	}
	page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "q"})
	if err != nil || len(page.Messages) != 1 || page.Messages[0].TransactionID != "tx-0" {
		t.Fatalf("DLQ %+v %v, want tx-0", page, err)
	}
	r = pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 3})
	if got := offsets(r.Messages); len(got) != 2 || got[0] != 1 {
		t.Fatalf("after the dead letter: offsets %v, want 1 and 2", got)
	}
}
