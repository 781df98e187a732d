package refmodel

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// The expected values below are read off docs/semantics.md (a § is one of
// its sections), never off this code.

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	t   *testing.T
	m   *Model
	now time.Time
	n   int
}

func newFixture(t *testing.T) *fixture { return &fixture{t: t, m: New(), now: t0} }

func (f *fixture) advance(d time.Duration) { f.now = f.now.Add(d) }

func (f *fixture) push(queue, part string, n int) []PushResult {
	f.t.Helper()
	items := make([]PushItem, n)
	for i := range items {
		f.n++
		items[i] = PushItem{Queue: queue, Partition: part, TxID: fmt.Sprintf("tx-%d", f.n), Payload: fmt.Sprintf(`{"n":%d}`, f.n)}
	}
	res, err := f.m.Push(items, f.now)
	if err != nil {
		f.t.Fatalf("push: %v", err)
	}
	return res
}

func (f *fixture) pop(req PopRequest) PopResult {
	f.t.Helper()
	if req.LeaseID == "" {
		f.n++
		req.LeaseID = fmt.Sprintf("lease-%d", f.n)
	}
	res, err := f.m.Pop(req, f.now)
	if err != nil {
		f.t.Fatalf("pop %+v: %v", req, err)
	}
	return res
}

func (f *fixture) ack(items ...AckItem) []AckResult {
	f.t.Helper()
	res, err := f.m.Ack(items, f.now)
	if err != nil {
		f.t.Fatalf("ack: %v (%+v)", err, res)
	}
	return res
}

func (f *fixture) committed(queue, part, group string) int64 {
	f.t.Helper()
	c, ok := f.m.Cursor(queue, part, group)
	if !ok {
		f.t.Fatalf("no cursor for %s on %s/%s", group, queue, part)
	}
	return c.Committed
}

// item acks offset off of queue/part by its transactionId.
func (f *fixture) item(queue, part, group string, off int64, status, leaseID string) AckItem {
	f.t.Helper()
	msg, ok := f.m.Message(queue, part, off)
	if !ok {
		f.t.Fatalf("no message at %s/%s %d", queue, part, off)
	}
	return AckItem{Queue: queue, Partition: part, TxID: msg.TxID, Status: status, Group: group, LeaseID: leaseID}
}

func offsetsOf(msgs []Delivered) []int64 {
	out := make([]int64, len(msgs))
	for i, d := range msgs {
		out[i] = d.Offset
	}
	return out
}

func sameOffsets(got []int64, want ...int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// "How a message moves": orders/cust-42 holds offsets 0..5; billing has
// committed 2, audit nothing.
func workedExample(t *testing.T) *fixture {
	f := newFixture(t)
	f.push("orders", "cust-42", 3)
	f.push("orders", "cust-42", 3) // segments [0..2][3..5]
	first := f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 3})
	f.ack(f.item("orders", "cust-42", "billing", 2, Completed, ""))
	if !sameOffsets(offsetsOf(first.Messages), 0, 1, 2) || f.committed("orders", "cust-42", "billing") != 2 {
		t.Fatalf("set-up: billing got %v, committed %d", offsetsOf(first.Messages), f.committed("orders", "cust-42", "billing"))
	}
	return f
}

func TestWorkedExample(t *testing.T) {
	t.Run("pop claims from committed+1 and leases the span (2,5]", func(t *testing.T) {
		f := workedExample(t)
		res := f.pop(PopRequest{Queue: "orders", Group: "billing", Batch: 10, Chosen: []string{"cust-42"}})
		if !sameOffsets(offsetsOf(res.Messages), 3, 4, 5) || !res.Leased {
			t.Fatalf("billing pop = %v leased=%v, want leased [3 4 5]", offsetsOf(res.Messages), res.Leased)
		}
		c, _ := f.m.Cursor("orders", "cust-42", "billing")
		if c.BatchEnd != 5 {
			t.Fatalf("batch_end = %d, want 5", c.BatchEnd)
		}
		// audit is unaffected: its cursor is a different row, at -1.
		audit := f.pop(PopRequest{Queue: "orders", Group: "audit", Batch: 10, Chosen: []string{"cust-42"}})
		if !sameOffsets(offsetsOf(audit.Messages), 0, 1, 2, 3, 4, 5) {
			t.Fatalf("audit pop = %v, want 0..5", offsetsOf(audit.Messages))
		}
	})
	t.Run("ack of 5 completes 3 and 4", func(t *testing.T) {
		f := workedExample(t)
		res := f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 10, LeaseID: "L"})
		r := f.ack(f.item("orders", "cust-42", "billing", 5, Completed, "L"))
		if r[0].Committed != 5 || !r[0].LeaseReleased || r[0].Result != ResultCommitted {
			t.Fatalf("ack 5 = %+v, want committed 5, lease released", r[0])
		}
		if again := f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 10}); len(again.Messages) != 0 {
			t.Fatalf("after acking 5 billing got %v", offsetsOf(again.Messages))
		}
		_ = res
	})
	t.Run("a dead consumer's lease expires and the next pop redelivers from 3", func(t *testing.T) {
		f := workedExample(t)
		f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 10})
		// Invariant 2: a second consumer of billing gets nothing meanwhile.
		if other := f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 10}); len(other.Messages) != 0 {
			t.Fatalf("second billing consumer got %v while the lease is live", offsetsOf(other.Messages))
		}
		f.advance(DefaultLeaseTime*time.Second + time.Second)
		again := f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 10})
		// §3.5.8: the expiry is one failed attempt of the head, which
		// then comes alone.
		if !sameOffsets(offsetsOf(again.Messages), 3) || again.Messages[0].RetryCount != 1 {
			t.Fatalf("after expiry got %+v, want offset 3 alone with retryCount 1", again.Messages)
		}
	})
}

// §3.5.3's example and the rule's parts.
func TestAckRule(t *testing.T) {
	span := func(t *testing.T) (*fixture, string) {
		f := workedExample(t)
		f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 10, LeaseID: "L"})
		return f, "L"
	}
	redeliveredWithAttempt := func(t *testing.T, f *fixture) {
		t.Helper()
		next := f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 10})
		if !sameOffsets(offsetsOf(next.Messages), 4, 5) || next.Messages[0].RetryCount != 1 || next.Messages[1].RetryCount != 0 {
			t.Fatalf("next pop = %+v, want 4 (retryCount 1) then 5", next.Messages)
		}
	}
	t.Run("[3 completed, 4 failed, 5 completed] commits 3", func(t *testing.T) {
		f, l := span(t)
		r := f.ack(f.item("orders", "cust-42", "billing", 3, Completed, l),
			f.item("orders", "cust-42", "billing", 4, Failed, l),
			f.item("orders", "cust-42", "billing", 5, Completed, l))
		if r[0].Committed != 3 || r[0].Result != ResultCommitted || r[1].Result != ResultRedelivered ||
			r[2].Result != ResultNotApplied || !r[0].LeaseReleased {
			t.Fatalf("results %+v", r)
		}
		redeliveredWithAttempt(t, f)
	})
	t.Run("unmentioned offsets count as covered: [4 failed, 5 completed] commits 3", func(t *testing.T) {
		f, l := span(t)
		r := f.ack(f.item("orders", "cust-42", "billing", 4, Failed, l), f.item("orders", "cust-42", "billing", 5, Completed, l))
		if r[0].Committed != 3 {
			t.Fatalf("committed = %d, want min(5, 4-1) = 3", r[0].Committed)
		}
		redeliveredWithAttempt(t, f)
	})
	t.Run("repeated failures of one message dead-letter it, not its neighbours", func(t *testing.T) {
		f, l := span(t)
		for attempt := 1; ; attempt++ {
			r := f.ack(f.item("orders", "cust-42", "billing", 4, Failed, l), f.item("orders", "cust-42", "billing", 5, Completed, l))
			if attempt <= DefaultRetryLimit {
				if r[0].Result != ResultRedelivered {
					t.Fatalf("attempt %d: %+v", attempt, r[0])
				}
			} else {
				// The (retryLimit+1)-th failed attempt dead-letters 4 and
				// the call's completed 5 then commits.
				if r[0].Result != ResultDeadLettered || !r[0].DLQ || r[0].Committed != 5 {
					t.Fatalf("attempt %d: %+v, want 4 dead-lettered and committed 5", attempt, r[0])
				}
				break
			}
			next := f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 10, LeaseID: fmt.Sprintf("L%d", attempt)})
			l = fmt.Sprintf("L%d", attempt)
			if next.Messages[0].Offset != 4 || next.Messages[0].RetryCount != attempt {
				t.Fatalf("attempt %d: redelivered %+v", attempt, next.Messages[0])
			}
		}
		dl := f.m.DeadLetters()
		if len(dl) != 1 || dl[0].Offset != 4 || dl[0].Attempts != DefaultRetryLimit+1 || dl[0].Group != "billing" {
			t.Fatalf("dlq = %+v, want only offset 4 with %d attempts", dl, DefaultRetryLimit+1)
		}
	})
	t.Run("retry consumes no attempt: fresh span (-1,2], [1 retry, 2 completed] commits 0", func(t *testing.T) {
		f := newFixture(t)
		f.push("q", "p", 3)
		f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 3, LeaseID: "L"})
		r := f.ack(f.item("q", "p", "g", 1, Retry, "L"), f.item("q", "p", "g", 2, Completed, "L"))
		if r[0].Committed != 0 {
			t.Fatalf("committed = %d, want 0", r[0].Committed)
		}
		next := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 3})
		if !sameOffsets(offsetsOf(next.Messages), 1, 2) || next.Messages[0].RetryCount != 0 {
			t.Fatalf("next pop %+v, want 1 (retryCount 0), 2", next.Messages)
		}
	})
	t.Run("at equal offset dlq beats failed beats retry", func(t *testing.T) {
		f, l := span(t)
		r := f.ack(f.item("orders", "cust-42", "billing", 3, Retry, l), f.item("orders", "cust-42", "billing", 3, DLQ, l),
			f.item("orders", "cust-42", "billing", 3, Failed, l))
		if r[0].Committed != 3 || len(f.m.DeadLetters()) != 1 {
			t.Fatalf("results %+v, dlq %+v: dlq at 3 should win and commit 3", r, f.m.DeadLetters())
		}
		f2, l2 := span(t)
		r = f2.ack(f2.item("orders", "cust-42", "billing", 3, Retry, l2), f2.item("orders", "cust-42", "billing", 3, Failed, l2))
		next := f2.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 1})
		if r[0].Committed != 2 || next.Messages[0].RetryCount != 1 {
			t.Fatalf("failed should beat retry at 3 (one attempt consumed): %+v, then %+v", r, next.Messages)
		}
	})
	t.Run("dead-letter signals above the new cursor are not applied", func(t *testing.T) {
		f, l := span(t)
		r := f.ack(f.item("orders", "cust-42", "billing", 3, Retry, l), f.item("orders", "cust-42", "billing", 4, DLQ, l))
		if r[1].Result != ResultNotApplied || len(f.m.DeadLetters()) != 0 || r[0].Committed != 2 {
			t.Fatalf("results %+v, dlq %+v", r, f.m.DeadLetters())
		}
	})
	t.Run("a partial ack below batch_end keeps the lease", func(t *testing.T) {
		f, l := span(t)
		r := f.ack(f.item("orders", "cust-42", "billing", 4, Completed, l))
		if r[0].Committed != 4 || r[0].LeaseReleased {
			t.Fatalf("%+v, want committed 4 with the lease kept", r[0])
		}
		if again := f.pop(PopRequest{Queue: "orders", Partition: "cust-42", Group: "billing", Batch: 10}); len(again.Messages) != 0 {
			t.Fatalf("partition served while its lease is live: %v", offsetsOf(again.Messages))
		}
	})
	t.Run("a wrong leaseId rejects the call and nothing moves", func(t *testing.T) {
		f, _ := span(t)
		_, err := f.m.Ack([]AckItem{f.item("orders", "cust-42", "billing", 5, Completed, "other")}, f.now)
		if !errors.Is(err, ErrRejected) || f.committed("orders", "cust-42", "billing") != 2 {
			t.Fatalf("err %v, committed %d", err, f.committed("orders", "cust-42", "billing"))
		}
	})
	t.Run("acks beyond what was delivered are rejected", func(t *testing.T) {
		f := workedExample(t)
		res, err := f.m.Ack([]AckItem{f.item("orders", "cust-42", "billing", 4, Completed, "")}, f.now)
		if !errors.Is(err, ErrRejected) || res[0].Code != CodeConflict {
			t.Fatalf("ack of undelivered 4: %v %+v", err, res)
		}
	})
	t.Run("old acks are no-ops however old", func(t *testing.T) {
		f := workedExample(t)
		old := f.item("orders", "cust-42", "billing", 0, Completed, "")
		f.advance(10 * DefaultDedupWindow * time.Second)
		f.m.Reap(f.now)
		for i := 0; i < 1100; i++ {
			f.push("orders", "cust-42", 1)
		}
		r := f.ack(old)
		if !r[0].Success || r[0].Result != ResultAlreadyCommitted || r[0].Committed != 2 {
			t.Fatalf("old ack = %+v, want an 'already committed' no-op", r[0])
		}
	})
}

// §3.5.3: no call ever commits past one of its own stop signals, whether
// or not that signal is applied.
func TestStaleFailedIsNeverACommit(t *testing.T) {
	f := newFixture(t)
	f.m.Configure("q", OptionsPatch{LeaseTime: ptr(1)})
	f.push("q", "p", 3)
	f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 3, LeaseID: "A"})
	f.advance(2 * time.Second)
	b := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 3, LeaseID: "B"})
	if !sameOffsets(offsetsOf(b.Messages), 0) || b.Messages[0].RetryCount != 1 {
		t.Fatalf("after expiry B got %+v, want the head 0 alone, retryCount 1", b.Messages)
	}
	r := f.ack(f.item("q", "p", "g", 0, Completed, ""), f.item("q", "p", "g", 1, Failed, ""), f.item("q", "p", "g", 2, Completed, ""))
	if r[0].Committed != 0 || r[0].Result != ResultCommitted || r[1].Result == ResultCommitted || r[2].Result == ResultCommitted {
		t.Fatalf("stale [0 completed, 1 failed, 2 completed] = %+v, want committed 0 and 1, 2 not committed", r)
	}
	next := f.pop(PopRequest{Queue: "q", Partition: "p", Group: "g", Batch: 3})
	if len(next.Messages) == 0 || next.Messages[0].Offset != 1 {
		t.Fatalf("offset 1 must come back, got %v", offsetsOf(next.Messages))
	}
}

// §3.5.8: after an expiry the head comes alone, and a message that
// crashes consumers is dead-lettered on its (retryLimit+1)-th attempt with
// no neighbour dead-lettered.
func TestPoisonIsolation(t *testing.T) {
	f := newFixture(t)
	f.m.Configure("q", OptionsPatch{LeaseTime: ptr(10), RetryLimit: ptr(2)})
	f.push("q", "p", 5)
	got := f.pop(PopRequest{Queue: "q", Partition: "p", Batch: 5})
	if len(got.Messages) != 5 {
		t.Fatalf("first pop %v", offsetsOf(got.Messages))
	}
	for i := 1; i <= 2; i++ {
		f.advance(11 * time.Second)
		st := f.m.Reap(f.now)
		alone := f.pop(PopRequest{Queue: "q", Partition: "p", Batch: 5})
		if st.LeasesExpired != 1 || !sameOffsets(offsetsOf(alone.Messages), 0) || alone.Messages[0].RetryCount != i {
			t.Fatalf("expiry %d: reap %+v, pop %+v", i, st, alone.Messages)
		}
	}
	f.advance(11 * time.Second)
	if st := f.m.Reap(f.now); st.DeadLettered != 1 {
		t.Fatalf("third expiry should dead-letter the head: %+v", st)
	}
	rest := f.pop(PopRequest{Queue: "q", Partition: "p", Batch: 5})
	dl := f.m.DeadLetters()
	if !sameOffsets(offsetsOf(rest.Messages), 1, 2, 3, 4) || len(dl) != 1 || dl[0].Offset != 0 || dl[0].Attempts != 3 {
		t.Fatalf("after dead-lettering 0: pop %v, dlq %+v", offsetsOf(rest.Messages), dl)
	}
}

// Invariant 4: exact, per partition, windowed.
func TestDedup(t *testing.T) {
	f := newFixture(t)
	f.m.Configure("q", OptionsPatch{DedupWindow: ptr(60)})
	items := []PushItem{{Queue: "q", Partition: "a", TxID: "k"}, {Queue: "q", Partition: "a", TxID: "k"}, {Queue: "q", Partition: "b", TxID: "k"}}
	res, _ := f.m.Push(items, f.now)
	if res[0].Duplicate || !res[1].Duplicate || res[1].Offset != 0 || res[2].Duplicate {
		t.Fatalf("results %+v: the repeat in a wins as first, b is another partition", res)
	}
	f.advance(30 * time.Second)
	res, _ = f.m.Push(items[:1], f.now)
	if !res[0].Duplicate || f.m.LastOffset("q", "a") != 0 {
		t.Fatalf("within the window: %+v", res)
	}
	f.advance(31 * time.Second)
	res, _ = f.m.Push(items[:1], f.now)
	if res[0].Duplicate || res[0].Offset != 1 {
		t.Fatalf("after the window: %+v", res)
	}
}

// Invariant 5: autoAck commits inside the pop.
func TestAutoAck(t *testing.T) {
	f := newFixture(t)
	f.push("q", "p", 3)
	res := f.pop(PopRequest{Queue: "q", Partition: "p", Batch: 2, AutoAck: true})
	if res.Leased || f.committed("q", "p", "") != 1 {
		t.Fatalf("autoAck pop leased=%v committed=%d", res.Leased, f.committed("q", "p", ""))
	}
}

// §3.3.3: "new" starts at the head at subscription time, also on
// partitions created later.
func TestSubscriptionNew(t *testing.T) {
	f := newFixture(t)
	f.push("q", "old", 2)
	f.advance(time.Second)
	if res := f.pop(PopRequest{Queue: "q", Group: "late", Mode: ModeNew}); len(res.Messages) != 0 {
		t.Fatalf("new subscriber got %v", offsetsOf(res.Messages))
	}
	f.advance(time.Second)
	f.push("q", "old", 1)
	f.push("q", "fresh", 1)
	a := f.pop(PopRequest{Queue: "q", Partition: "old", Group: "late", Mode: ModeAll})
	b := f.pop(PopRequest{Queue: "q", Partition: "fresh", Group: "late"})
	if !sameOffsets(offsetsOf(a.Messages), 2) || !sameOffsets(offsetsOf(b.Messages), 0) {
		t.Fatalf("late got %v and %v, want old's 2 and fresh's 0", offsetsOf(a.Messages), offsetsOf(b.Messages))
	}
}

// §3.7.5: maxSize counts messages that still exist.
func TestMaxSizeAfterRetention(t *testing.T) {
	f := newFixture(t)
	f.m.Configure("q", OptionsPatch{MaxSize: ptr[int64](5), Retention: ptr(10)})
	f.push("q", "p", 5)
	if _, err := f.m.Push([]PushItem{{Queue: "q", Partition: "p", TxID: "x"}}, f.now); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("6th push: %v, want queue full", err)
	}
	f.advance(11 * time.Second)
	f.m.Reap(f.now)
	if d := f.m.Depth("q"); d != 0 {
		t.Fatalf("depth after retention = %d, want 0", d)
	}
	if _, err := f.m.Push([]PushItem{{Queue: "q", Partition: "p", TxID: "x"}}, f.now); err != nil {
		t.Fatalf("push after retention: %v", err)
	}
}

// §3.7.5: a subscribed group with no cursor yet counts from its start
// for depth, and never holds back completedRetention.
func TestLateSubscriber(t *testing.T) {
	f := newFixture(t)
	f.m.Configure("q", OptionsPatch{CompletedRetention: ptr(10)})
	f.push("q", "p", 5)
	if d := f.m.Depth("q"); d != 5 {
		t.Fatalf("depth with no group = %d, want 5", d)
	}
	f.pop(PopRequest{Queue: "q", Group: "a", Batch: 10, Chosen: []string{"p"}})
	f.ack(f.item("q", "p", "a", 4, Completed, ""))
	f.advance(time.Second)
	if res := f.pop(PopRequest{Queue: "q", Group: "b", Mode: ModeNew}); len(res.Messages) != 0 {
		t.Fatalf("b got %v", offsetsOf(res.Messages))
	}
	f.push("q", "p", 2)
	if d := f.m.Depth("q"); d != 2 {
		t.Fatalf("depth = %d, want 2 (a and b both have 5, 6 to read)", d)
	}
	f.pop(PopRequest{Queue: "q", Group: "a", Batch: 10, Chosen: []string{"p"}})
	f.ack(f.item("q", "p", "a", 6, Completed, ""))
	if d := f.m.Depth("q"); d != 2 {
		t.Fatalf("depth = %d, want 2: b has not read 5 and 6", d)
	}
	f.advance(11 * time.Second)
	st := f.m.Reap(f.now)
	log := f.m.Log("q", "p")
	if st.SegmentsCompleted != 1 || len(log) != 2 || log[0].Offset != 5 {
		t.Fatalf("reap %+v left %d messages; want the first segment (0..4) gone, 5 and 6 kept for b", st, len(log))
	}
}

// §3.6.3: a retry re-pushes once and drops the row.
func TestDeadLetterRetry(t *testing.T) {
	f := newFixture(t)
	f.push("q", "p", 1)
	f.pop(PopRequest{Queue: "q", Partition: "p", Batch: 1})
	msg, _ := f.m.Message("q", "p", 0)
	f.ack(AckItem{Queue: "q", Partition: "p", TxID: msg.TxID, Status: DLQ, Error: "bad"})
	if _, err := f.m.RetryDeadLetter("q", "p", msg.TxID, "", "fresh", f.now); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.RetryDeadLetter("q", "p", msg.TxID, "", "fresh2", f.now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second retry: %v, want not found", err)
	}
	if f.m.LastOffset("q", "p") != 1 || len(f.m.DeadLetters()) != 0 {
		t.Fatalf("last offset %d, dlq %d", f.m.LastOffset("q", "p"), len(f.m.DeadLetters()))
	}
}

// §3.4.3: a wildcard pop that leaves a deliverable partition out is a
// violation the model reports.
func TestWildcardLiveness(t *testing.T) {
	f := newFixture(t)
	f.push("q", "a", 1)
	f.push("q", "b", 1)
	if _, err := f.m.Pop(PopRequest{Queue: "q", Batch: 1, LeaseID: "x"}, f.now); err == nil {
		t.Fatal("an empty wildcard pop while a and b wait was accepted")
	}
	if _, err := f.m.Pop(PopRequest{Queue: "q", Batch: 5, Partitions: 2, Chosen: []string{"a"}, LeaseID: "x"}, f.now); err == nil {
		t.Fatal("a two-partition pop that served only a was accepted")
	}
	if _, err := f.m.Pop(PopRequest{Queue: "q", Batch: 5, Partitions: 2, Chosen: []string{"b", "a"}, LeaseID: "x"}, f.now); err != nil {
		t.Fatal(err)
	}
}

// §3.7.1: a transaction applies once; a replay is refused and pushes
// nothing.
func TestTransactionOnce(t *testing.T) {
	f := newFixture(t)
	f.push("in", "p", 1)
	f.pop(PopRequest{Queue: "in", Partition: "p", Batch: 1, LeaseID: "L"})
	acks := []AckItem{f.item("in", "p", "", 0, Completed, "L")}
	pushes := []PushItem{{Queue: "out", Partition: "p", TxID: "x"}}
	if _, _, err := f.m.Transaction(acks, pushes, []string{"L"}, f.now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.m.Transaction(acks, pushes, []string{"L"}, f.now); !errors.Is(err, ErrLease) {
		t.Fatalf("replay with the lease required: %v, want refused", err)
	}
	pushes[0].TxID = "y"
	if _, _, err := f.m.Transaction(acks, pushes, nil, f.now); !errors.Is(err, ErrRejected) {
		t.Fatalf("replay without required leases: %v, want the ack refused", err)
	}
	if f.m.LastOffset("out", "p") != 0 {
		t.Fatalf("out holds %d messages, want 1", f.m.LastOffset("out", "p")+1)
	}
}

func ptr[T any](v T) *T { return &v }
