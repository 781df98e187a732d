package pgstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// Partitions leased by other consumers never use up a wildcard pop's scan:
// with 64 live leases a fresh partition is still found.
func TestWildcardPopPassesLeasedPartitions(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	for i := 0; i < 70; i++ {
		pushN(t, e, "q", fmt.Sprintf("p%02d", i), "a", 1)
	}
	for i := 0; i < 70; i++ {
		if r := pop(t, e, queen.PopRequest{Queue: "q"}); len(r.Messages) != 1 {
			t.Fatalf("pop %d: %d messages", i, len(r.Messages))
		}
	}
	pushN(t, e, "q", "fresh", "b", 1)
	r := pop(t, e, queen.PopRequest{Queue: "q"})
	if len(r.Messages) != 1 || r.Messages[0].Partition != "fresh" {
		t.Fatalf("with 70 live leases the wildcard pop got %v; partition fresh has a message", r.Messages)
	}
}

// A consumer whose lease expired cannot end the lease of the consumer that
// now holds the head by sending retry/failed for a later offset.
func TestStaleStopSignalKeepsTheLiveLease(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "q", "p", "m", 5)
	a := pop(t, e, queen.PopRequest{Queue: "q", Batch: 5})
	e.Clock.Advance(301 * time.Second)
	b := pop(t, e, queen.PopRequest{Queue: "q", Batch: 5})
	if !equal(offsets(b.Messages), []int64{0}) {
		t.Fatalf("after expiry got %v, want [0]", offsets(b.Messages))
	}
	res := mustAck(t, e, ack(a.Messages[3], "", "", queen.AckRetry))
	if res[0].LeaseReleased || res[0].Result != queen.ResultNotApplied {
		t.Fatalf("stale retry: %+v, want not applied and the live lease kept", res[0])
	}
	if c := pop(t, e, queen.PopRequest{Queue: "q", Batch: 5}); len(c.Messages) != 0 {
		t.Fatalf("offset 0 was leased twice: %v", offsets(c.Messages))
	}
	mustAck(t, e, ack(b.Messages[0], "", b.LeaseID, queen.AckCompleted))
}

// After retention removes the head, failed attempts count against the
// oldest surviving message, which is dead-lettered on schedule.
func TestRetentionGapKeepsAttemptCounting(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "q", queen.QueueOptions{RetentionSeconds: ptr(60), RetryLimit: ptr(1)})
	pushN(t, e, "q", "p", "old", 3) // offsets 0..2
	e.Clock.Advance(50 * time.Second)
	pushN(t, e, "q", "p", "new", 1) // offset 3
	e.Clock.Advance(20 * time.Second)
	if _, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; attempt < 2; attempt++ {
		r := pop(t, e, queen.PopRequest{Queue: "q", Partition: "p"})
		if len(r.Messages) != 1 || r.Messages[0].Offset != 3 || r.Messages[0].RetryCount != attempt {
			t.Fatalf("attempt %d: %+v, want offset 3 with retryCount %d", attempt, r.Messages, attempt)
		}
		mustAck(t, e, ack(r.Messages[0], "", r.LeaseID, queen.AckFailed))
	}
	if n := count(t, e, "SELECT count(*) FROM queen.dlq WHERE msg_offset = 3"); n != 1 {
		t.Fatalf("offset 3 failed twice with retryLimit 1: %d dead letters, want 1", n)
	}
	// An expiry whose head was removed charges nobody and moves on.
	pushN(t, e, "q", "p2", "x", 2)
	r := pop(t, e, queen.PopRequest{Queue: "q", Partition: "p2", Batch: 2})
	e.Clock.Advance(301 * time.Second) // lease gone, and retention removes both messages
	pushN(t, e, "q", "p2", "y", 1)
	if _, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil {
		t.Fatal(err)
	}
	r = pop(t, e, queen.PopRequest{Queue: "q", Partition: "p2"})
	if !equal(offsets(r.Messages), []int64{2}) || r.Messages[0].RetryCount != 0 {
		t.Fatalf("after the expired head was removed got %+v, want offset 2 fresh", r.Messages)
	}
	if n := count(t, e, "SELECT count(*) FROM queen.dlq WHERE partition_name = 'p2'"); n != 0 {
		t.Fatalf("%d dead letters for removed messages", n)
	}
}

// A push that races the deletion of one of its queues fails or succeeds
// whole; it never reports fewer results than items.
func TestPushRacingQueueDeletion(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	pushN(t, e, "q1", "p", "a", 1)
	pushN(t, e, "q2", "p", "a", 1)
	tx, err := e.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := tx.QueryRow(ctx, "SELECT queen.delete_queue('q2')").Scan(&ok); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res []queen.PushResult
	go func() {
		var err error
		res, err = e.Store.Push(ctx, []queen.PushItem{
			{Queue: "q1", Partition: "p", Payload: payload(1), TransactionID: "b1"},
			{Queue: "q2", Partition: "p", Payload: payload(2), TransactionID: "b2"}})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || len(res) != 2 || res[1].Status != queen.StatusQueued {
		t.Fatalf("push after the concurrent delete: %v %+v, want both queued (q2 recreated)", err, res)
	}
	if n := count(t, e, "SELECT count(*) FROM queen.segments"); n != 3 {
		t.Fatalf("%d segments, want 3 (q1 twice, the new q2 once)", n)
	}
}

func TestSubscriptionFromTheFutureIsRejected(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	_, err := e.Store.Pop(ctx, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Mode: queen.SubscribeFrom, From: pgstoretest.Epoch.Add(time.Hour)})
	if !errors.Is(err, queen.ErrInvalid) {
		t.Fatalf("future subscriptionFrom: %v, want ErrInvalid", err)
	}
}
