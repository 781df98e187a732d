package pgstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// The worked example of semantics.md §1.3: orders/cust-42 holds offsets 0..5,
// billing has committed 2, audit has committed nothing.
func TestWorkedExample(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) *pgstoretest.Env {
		e := pgstoretest.NewClocked(t)
		pushN(t, e, "orders", "cust-42", "m", 6)
		first := pop(t, e, queen.PopRequest{Queue: "orders", ConsumerGroup: "billing", Batch: 3})
		if got := offsets(first.Messages); !equal(got, []int64{0, 1, 2}) {
			t.Fatalf("first billing pop = %v, want [0 1 2]", got)
		}
		mustAck(t, e, ack(first.Messages[2], "billing", first.LeaseID, queen.AckCompleted))
		if c := cursor(t, e, first.Messages[0].PartitionID, "billing"); c != 2 {
			t.Fatalf("billing committed = %d, want 2", c)
		}
		return e
	}

	t.Run("ack of 5 completes 3 and 4", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		res := pop(t, e, queen.PopRequest{Queue: "orders", ConsumerGroup: "billing", Batch: 10})
		if got := offsets(res.Messages); !equal(got, []int64{3, 4, 5}) {
			t.Fatalf("pop = %v, want span (2,5] = [3 4 5]", got)
		}
		r := mustAck(t, e, ack(res.Messages[2], "billing", res.LeaseID, queen.AckCompleted))
		if *r[0].Committed != 5 || !r[0].LeaseReleased {
			t.Fatalf("ack result %+v, want committed 5 and lease released", r[0])
		}
		if again := pop(t, e, queen.PopRequest{Queue: "orders", ConsumerGroup: "billing", Batch: 10}); len(again.Messages) != 0 {
			t.Fatalf("after acking 5, billing got %v; 3 and 4 should be done", offsets(again.Messages))
		}
		// audit is unaffected: its own cursor starts at -1.
		audit := pop(t, e, queen.PopRequest{Queue: "orders", ConsumerGroup: "audit", Batch: 10})
		if got := offsets(audit.Messages); !equal(got, []int64{0, 1, 2, 3, 4, 5}) {
			t.Fatalf("audit pop = %v, want all of 0..5", got)
		}
	})

	t.Run("a dead consumer's lease expiry redelivers from 3", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		res := pop(t, e, queen.PopRequest{Queue: "orders", ConsumerGroup: "billing", Batch: 10})
		if got := offsets(res.Messages); !equal(got, []int64{3, 4, 5}) {
			t.Fatalf("pop = %v, want [3 4 5]", got)
		}
		// The consumer dies. Before expiry nobody else in billing gets anything.
		if other := pop(t, e, queen.PopRequest{Queue: "orders", ConsumerGroup: "billing", Batch: 10}); len(other.Messages) != 0 {
			t.Fatalf("second billing consumer got %v while the lease is live", offsets(other.Messages))
		}
		e.Clock.Advance(queen.DefaultLeaseTime*time.Second + time.Second)
		again := pop(t, e, queen.PopRequest{Queue: "orders", ConsumerGroup: "billing", Batch: 10})
		if len(again.Messages) == 0 || again.Messages[0].Offset != 3 {
			t.Fatalf("after expiry got %v, want redelivery from 3", offsets(again.Messages))
		}
		if again.Messages[0].RetryCount != 1 {
			t.Fatalf("retryCount = %d, want 1 (the expiry counts one attempt)", again.Messages[0].RetryCount)
		}
	})
}

// Invariant 1: offsets are contiguous from 0 per partition, in commit
// order, and created_at is monotone per partition, under concurrent pushes.
func TestInvariantOrderPerPartition(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	const writers, perWriter = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				items := []queen.PushItem{
					{Queue: "q", Partition: "p", Payload: payload(map[string]int{"w": w, "i": i})},
					{Queue: "q", Partition: "p", Payload: payload(map[string]int{"w": w, "i": i, "second": 1})},
				}
				res, err := e.Store.Push(ctx, items)
				if err != nil {
					errs <- err
					return
				}
				if res[1].Offset != res[0].Offset+1 {
					errs <- fmt.Errorf("one push got offsets %d and %d, want adjacent", res[0].Offset, res[1].Offset)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	msgs, err := e.Store.Browse(ctx, queen.BrowseRequest{Queue: "q", Partition: "p", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != writers*perWriter*2 {
		t.Fatalf("log holds %d messages, want %d", len(msgs), writers*perWriter*2)
	}
	lastPerWriter := map[float64]float64{}
	for i, m := range msgs {
		if m.Offset != int64(i) {
			t.Fatalf("message %d has offset %d: offsets must be contiguous from 0", i, m.Offset)
		}
		if i > 0 && m.CreatedAt.Before(msgs[i-1].CreatedAt) {
			t.Fatalf("created_at goes backwards at offset %d", i)
		}
		var p map[string]float64
		_ = jsonUnmarshal(m.Data, &p)
		if p["second"] == 0 {
			if last, ok := lastPerWriter[p["w"]]; ok && p["i"] <= last {
				t.Fatalf("writer %v's push %v is ordered before its push %v", p["w"], p["i"], last)
			}
			lastPerWriter[p["w"]] = p["i"]
		}
	}
}

// Invariant 2: one leased batch per (partition, group).
func TestInvariantOneLeasePerPartitionAndGroup(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "q", "a", "a", 5)
	pushN(t, e, "q", "b", "b", 5)

	first := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 2})
	second := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 2})
	third := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 2})
	if len(first.Messages) == 0 || len(second.Messages) == 0 {
		t.Fatalf("two consumers should each get a partition: %v %v", offsets(first.Messages), offsets(second.Messages))
	}
	if first.Messages[0].Partition == second.Messages[0].Partition {
		t.Fatalf("both consumers of g got partition %s", first.Messages[0].Partition)
	}
	if len(third.Messages) != 0 {
		t.Fatalf("a third consumer got %v while both partitions are leased", offsets(third.Messages))
	}
	// A specific-partition pop of a leased partition gets nothing too.
	if r := pop(t, e, queen.PopRequest{Queue: "q", Partition: "a", ConsumerGroup: "g"}); len(r.Messages) != 0 {
		t.Fatalf("pop of leased partition a returned %v", offsets(r.Messages))
	}
	// Other groups are unaffected.
	other := pop(t, e, queen.PopRequest{Queue: "q", Partition: "a", ConsumerGroup: "other", Batch: 10})
	if got := offsets(other.Messages); !equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("group other got %v, want 0..4", got)
	}
	// Queue mode competes the same way.
	qm1 := pop(t, e, queen.PopRequest{Queue: "q", Partition: "b", Batch: 1})
	qm2 := pop(t, e, queen.PopRequest{Queue: "q", Partition: "b", Batch: 1})
	if len(qm1.Messages) != 1 || len(qm2.Messages) != 0 {
		t.Fatalf("queue-mode consumers: %v then %v, want one batch then nothing", offsets(qm1.Messages), offsets(qm2.Messages))
	}
}

// Invariant 3: an ack is an offset commit; the cursor never moves backwards.
func TestInvariantAckIsOffsetCommit(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "q", "p", "m", 8)
	res := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 8})
	pid := res.Messages[0].PartitionID

	// Completing 5 completes 0..4; it keeps the lease (5 < batch_end 7).
	r := mustAck(t, e, ack(res.Messages[5], "g", res.LeaseID, queen.AckCompleted))
	if *r[0].Committed != 5 || r[0].LeaseReleased {
		t.Fatalf("ack 5: %+v, want committed 5, lease kept", r[0])
	}
	// Acking 2 afterwards is a no-op reported as such; the cursor stays.
	r = mustAck(t, e, ack(res.Messages[2], "g", res.LeaseID, queen.AckCompleted))
	if r[0].Result != queen.ResultAlreadyCommitted || *r[0].Committed != 5 {
		t.Fatalf("ack 2 after 5: %+v, want already committed at 5", r[0])
	}
	if c := cursor(t, e, pid, "g"); c != 5 {
		t.Fatalf("cursor = %d, want 5", c)
	}
	// You cannot complete an offset that was never delivered.
	pushN(t, e, "q", "p", "late", 1)
	_, err := e.Store.Ack(ctx, []queen.Ack{{PartitionID: pid, TransactionID: "late-0", Status: queen.AckCompleted, ConsumerGroup: "g"}})
	if !errors.Is(err, queen.ErrConflict) {
		t.Fatalf("ack of undelivered offset 8: err = %v, want ErrConflict", err)
	}
	if c := cursor(t, e, pid, "g"); c != 5 {
		t.Fatalf("rejected ack moved the cursor to %d", c)
	}
	// Completing batch_end releases the lease.
	r = mustAck(t, e, ack(res.Messages[7], "g", res.LeaseID, queen.AckCompleted))
	if !r[0].LeaseReleased || *r[0].Committed != 7 {
		t.Fatalf("ack 7: %+v, want committed 7 and lease released", r[0])
	}
}

// Invariant 4: dedup is exact, per partition and windowed.
func TestInvariantDedup(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	first := pushN(t, e, "q", "p", "tx", 1)[0]

	// Same key, same partition, inside the window: a duplicate, nothing written.
	e.Clock.Advance(59 * time.Minute)
	dup := pushN(t, e, "q", "p", "tx", 1)[0]
	if dup.Status != queen.StatusDuplicate || dup.Offset != first.Offset || dup.MessageID != first.MessageID {
		t.Fatalf("re-push inside window = %+v, want duplicate of %+v", dup, first)
	}
	if n := count(t, e, "SELECT coalesce(max(last_offset), -1) FROM queen.partitions"); n != 0 {
		t.Fatalf("last_offset = %d after a duplicate, want 0", n)
	}
	// Same key on another partition is not a duplicate.
	if r := pushN(t, e, "q", "other", "tx", 1)[0]; r.Status != queen.StatusQueued {
		t.Fatalf("same key, other partition: %s, want queued", r.Status)
	}
	// Within one request the first wins.
	res, err := e.Store.Push(ctx, []queen.PushItem{
		{Queue: "q", Partition: "p", TransactionID: "in", Payload: payload(1)},
		{Queue: "q", Partition: "p", TransactionID: "in", Payload: payload(2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != queen.StatusQueued || res[1].Status != queen.StatusDuplicate || res[1].Offset != res[0].Offset {
		t.Fatalf("repeated key in one request: %+v", res)
	}
	// Outside the window (default 3600 s) the key is new again.
	e.Clock.Advance(2 * time.Minute)
	if r := pushN(t, e, "q", "p", "tx", 1)[0]; r.Status != queen.StatusQueued || r.Offset != 2 {
		t.Fatalf("re-push after the window = %+v, want queued at offset 2", r)
	}
	// Window 0 disables dedup.
	configure(t, e, "nodedup", queen.QueueOptions{DedupWindowSeconds: ptr(0)})
	pushN(t, e, "nodedup", "p", "k", 1)
	if r := pushN(t, e, "nodedup", "p", "k", 1)[0]; r.Status != queen.StatusQueued || r.Offset != 1 {
		t.Fatalf("dedup disabled: %+v, want queued at 1", r)
	}
}

// Invariant 5: a leased pop plus an explicit ack can redeliver but cannot
// lose; autoAck is at-most-once.
func TestInvariantDelivery(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "q", "p", "m", 3)
	res := pop(t, e, queen.PopRequest{Queue: "q", Batch: 3})
	e.Clock.Advance(301 * time.Second)
	again := pop(t, e, queen.PopRequest{Queue: "q", Batch: 3})
	if len(again.Messages) == 0 || again.Messages[0].TransactionID != res.Messages[0].TransactionID {
		t.Fatalf("unacked message was not redelivered: %v", offsets(again.Messages))
	}

	pushN(t, e, "auto", "p", "m", 3)
	got := pop(t, e, queen.PopRequest{Queue: "auto", Batch: 3, AutoAck: true})
	if len(got.Messages) != 3 || got.LeaseID != "" {
		t.Fatalf("autoAck pop: %d messages lease %q, want 3 and no lease", len(got.Messages), got.LeaseID)
	}
	e.Clock.Advance(time.Hour)
	if r := pop(t, e, queen.PopRequest{Queue: "auto", Batch: 3}); len(r.Messages) != 0 {
		t.Fatalf("autoAck'd messages came back: %v", offsets(r.Messages))
	}
	if c := cursor(t, e, got.Messages[0].PartitionID, queen.QueueModeGroup); c != 2 {
		t.Fatalf("autoAck cursor = %d, want 2", c)
	}
}
