package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

func TestSubscriptionModes(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "q", "old", "a", 3) // at Epoch
	e.Clock.Advance(time.Minute)
	mid := e.Clock.Now()
	pushN(t, e, "q", "old", "b", 2) // at Epoch+1m: offsets 3, 4
	e.Clock.Advance(time.Minute)

	all := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "all", Batch: 10})
	if got := offsets(all.Messages); !equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("mode all got %v, want 0..4", got)
	}
	fromTS := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "ts", Batch: 10, Mode: queen.SubscribeFrom, From: mid})
	if got := offsets(fromTS.Messages); !equal(got, []int64{3, 4}) {
		t.Fatalf("subscriptionFrom=%s got %v, want [3 4]", mid, got)
	}
	newOnly := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "new", Batch: 10, Mode: queen.SubscribeNew})
	if len(newOnly.Messages) != 0 {
		t.Fatalf("mode new got history %v", offsets(newOnly.Messages))
	}

	e.Clock.Advance(time.Minute)
	pushN(t, e, "q", "old", "c", 1)   // offset 5
	pushN(t, e, "q", "later", "d", 2) // a partition created after the subscription

	// Later pops with another mode do not change the remembered subscription.
	got := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "new", Batch: 10, Mode: queen.SubscribeAll, Partitions: 2})
	byPart := map[string][]int64{}
	for _, m := range got.Messages {
		byPart[m.Partition] = append(byPart[m.Partition], m.Offset)
	}
	if !equal(byPart["old"], []int64{5}) || !equal(byPart["later"], []int64{0, 1}) {
		t.Fatalf("mode new after new pushes got %v, want old:[5] later:[0 1]", byPart)
	}
	// Queue mode always starts at 0.
	qm := pop(t, e, queen.PopRequest{Queue: "q", Partition: "old", Batch: 10, Mode: queen.SubscribeNew})
	if len(qm.Messages) != 6 || qm.Messages[0].Offset != 0 {
		t.Fatalf("queue mode got %v, want 0..5", offsets(qm.Messages))
	}
}

// Consumers often start first: a pop of a queue that does not exist is
// empty, and a 'new' subscription made then sees what is pushed later.
func TestPopBeforeQueueExists(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	if r := pop(t, e, queen.PopRequest{Queue: "future", ConsumerGroup: "g", Mode: queen.SubscribeNew}); len(r.Messages) != 0 {
		t.Fatalf("pop of a missing queue returned %d messages", len(r.Messages))
	}
	if n := count(t, e, "SELECT count(*) FROM queen.queues"); n != 0 {
		t.Fatalf("a pop created %d queues", n)
	}
	e.Clock.Advance(time.Second)
	pushN(t, e, "future", "p", "m", 2)
	if r := pop(t, e, queen.PopRequest{Queue: "future", ConsumerGroup: "g", Batch: 5}); len(r.Messages) != 2 {
		t.Fatalf("group subscribed before the queue existed got %v, want both messages", offsets(r.Messages))
	}
}

func TestSeek(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "q", "p", "a", 3)
	e.Clock.Advance(time.Minute)
	mid := e.Clock.Now()
	pushN(t, e, "q", "p", "b", 3)
	drain := func() []int64 {
		var all []int64
		for {
			r := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 100})
			if len(r.Messages) == 0 {
				return all
			}
			all = append(all, offsets(r.Messages)...)
			mustAck(t, e, ack(r.Messages[len(r.Messages)-1], "g", r.LeaseID, queen.AckCompleted))
		}
	}
	if got := drain(); len(got) != 6 {
		t.Fatalf("first read got %v", got)
	}
	// Backwards: re-read history from the beginning.
	if _, err := e.Store.Seek(ctx, "g", "q", queen.SeekTarget{ToBeginning: true}); err != nil {
		t.Fatal(err)
	}
	if got := drain(); !equal(got, []int64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("after seek to beginning got %v", got)
	}
	// To a timestamp: the first message with created_at >= ts comes next.
	if _, err := e.Store.Seek(ctx, "g", "q", queen.SeekTarget{Timestamp: &mid}); err != nil {
		t.Fatal(err)
	}
	if got := drain(); !equal(got, []int64{3, 4, 5}) {
		t.Fatalf("after seek to %s got %v, want [3 4 5]", mid, got)
	}
	// Per partition to an offset.
	if _, err := e.Store.Seek(ctx, "g", "q", queen.SeekTarget{Offsets: map[string]int64{"p": 4}}); err != nil {
		t.Fatal(err)
	}
	if got := drain(); !equal(got, []int64{4, 5}) {
		t.Fatalf("after seek to offset 4 got %v", got)
	}
	// Seek clears a live lease; to the end skips everything.
	pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "other", Batch: 2})
	res, err := e.Store.Seek(ctx, "other", "q", queen.SeekTarget{ToEnd: true})
	if err != nil || len(res) != 1 || res[0].Committed != 5 {
		t.Fatalf("seek to end: %+v %v", res, err)
	}
	if n := count(t, e, "SELECT count(*) FROM queen.consumers WHERE lease_id IS NOT NULL"); n != 0 {
		t.Fatalf("%d leases survive a seek", n)
	}
	pushN(t, e, "q", "p", "c", 1)
	if r := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "other", Batch: 5}); !equal(offsets(r.Messages), []int64{6}) {
		t.Fatalf("after seek to end got %v, want [6]", offsets(r.Messages))
	}
	// Errors.
	if _, err := e.Store.Seek(ctx, "g", "missing", queen.SeekTarget{ToEnd: true}); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("seek on a missing queue: %v", err)
	}
	if _, err := e.Store.Seek(ctx, "g", "q", queen.SeekTarget{Offsets: map[string]int64{"nope": 1}}); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("seek of a missing partition: %v", err)
	}
	if _, err := e.Store.Seek(ctx, "g", "q", queen.SeekTarget{}); !errors.Is(err, queen.ErrInvalid) {
		t.Fatalf("seek without a target: %v", err)
	}
}

func TestDelayedProcessingAndWindowBuffer(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "delayed", queen.QueueOptions{DelayedProcessing: ptr(10)})
	pushN(t, e, "delayed", "p", "a", 1)
	e.Clock.Advance(5 * time.Second)
	pushN(t, e, "delayed", "p", "b", 1)
	if r := pop(t, e, queen.PopRequest{Queue: "delayed", Batch: 5}); len(r.Messages) != 0 {
		t.Fatalf("delayed message delivered early: %v", offsets(r.Messages))
	}
	e.Clock.Advance(6 * time.Second) // a is 11 s old, b 6 s
	r := pop(t, e, queen.PopRequest{Queue: "delayed", Batch: 5})
	if !equal(offsets(r.Messages), []int64{0}) {
		t.Fatalf("got %v, want only the old enough [0]", offsets(r.Messages))
	}

	configure(t, e, "window", queen.QueueOptions{WindowBuffer: ptr(10)})
	pushN(t, e, "window", "p", "a", 1)
	e.Clock.Advance(8 * time.Second)
	pushN(t, e, "window", "p", "b", 1)
	e.Clock.Advance(8 * time.Second) // newest message is 8 s old
	if r := pop(t, e, queen.PopRequest{Queue: "window", Batch: 5}); len(r.Messages) != 0 {
		t.Fatalf("window buffer not respected: %v", offsets(r.Messages))
	}
	e.Clock.Advance(3 * time.Second)
	if r := pop(t, e, queen.PopRequest{Queue: "window", Batch: 5}); !equal(offsets(r.Messages), []int64{0, 1}) {
		t.Fatalf("after the window got %v, want [0 1]", offsets(r.Messages))
	}
}

func TestMultiPartitionPop(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	for _, p := range []string{"a", "b", "c"} {
		pushN(t, e, "q", p, p, 4)
	}
	r := pop(t, e, queen.PopRequest{Queue: "q", Batch: 6, Partitions: 3})
	parts := map[string]int{}
	for _, m := range r.Messages {
		parts[m.Partition]++
	}
	if len(r.Messages) != 6 || len(parts) != 2 {
		t.Fatalf("partitions=3 batch=6 got %v, want 6 messages from 2 partitions (global budget)", parts)
	}
	if n := count(t, e, "SELECT count(DISTINCT lease_id) FROM queen.consumers WHERE lease_id IS NOT NULL"); n != 1 {
		t.Fatalf("%d lease ids, want one shared", n)
	}
	exp, err := e.Store.ExtendLease(ctx, r.LeaseID, 600)
	if err != nil || !exp.Equal(e.Clock.Now().Add(600*time.Second)) {
		t.Fatalf("extend: %v %v", exp, err)
	}
	if n := count(t, e, "SELECT count(*) FROM queen.consumers WHERE lease_expires_at = $1", exp); n != 2 {
		t.Fatalf("extend touched %d partition leases, want 2", n)
	}
	if _, err := e.Store.ExtendLease(ctx, "00000000-0000-0000-0000-000000000000", 10); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("extend of unknown lease: %v", err)
	}
	e.Clock.Advance(601 * time.Second)
	if _, err := e.Store.ExtendLease(ctx, r.LeaseID, 10); !errors.Is(err, queen.ErrConflict) {
		t.Fatalf("extend of expired lease: %v", err)
	}
}

// Wildcard pops are fair: with backlog everywhere, consecutive pops visit
// every partition before returning to one.
func TestWildcardPopIsFair(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	const parts = 10
	for i := 0; i < parts; i++ {
		pushN(t, e, "q", string(rune('a'+i)), "m", 3)
	}
	seen := map[string]int{}
	for round := 0; round < 2*parts; round++ {
		r := pop(t, e, queen.PopRequest{Queue: "q", Batch: 1})
		if len(r.Messages) != 1 {
			t.Fatalf("round %d: empty pop with backlog everywhere", round)
		}
		seen[r.Messages[0].Partition]++
		mustAck(t, e, ack(r.Messages[0], "", r.LeaseID, queen.AckCompleted))
	}
	for p, n := range seen {
		if n != 2 {
			t.Fatalf("partition %s served %d times in %d pops, want 2 each: %v", p, n, 2*parts, seen)
		}
	}
	// Fully consumed partitions leave the scheduling set.
	for i := 0; i < parts; i++ {
		r := pop(t, e, queen.PopRequest{Queue: "q", Batch: 10})
		if len(r.Messages) > 0 {
			mustAck(t, e, ack(r.Messages[len(r.Messages)-1], "", r.LeaseID, queen.AckCompleted))
		}
	}
	pop(t, e, queen.PopRequest{Queue: "q", Batch: 10, Partitions: parts})
	if n := count(t, e, "SELECT count(*) FROM queen.ready"); n != 0 {
		t.Fatalf("%d ready rows remain for consumed partitions", n)
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
