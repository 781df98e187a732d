package httpapi_test

// Acknowledgements through the API: the commit rule of docs/semantics.md
// §3.5 over a call's span, stale acks, and acks of committed offsets. Every
// expected value comes from docs/semantics.md; none was taken from running
// the engine.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// §3.5: over span (2,5], [4 failed, 5 completed] gives committed = 3 (offset
// 3 is not mentioned and counts as covered); 4 is redelivered with one more
// attempt, then 5; on its retryLimit+1-th failed attempt 4 is dead-lettered
// and 5 commits.
func TestAckCommitStopsBeforeFailed(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.configure("q", map[string]any{"retryLimit": 3})
	s.pushN("q", "p", 6)

	p, ok := s.popGroup("q", "p", "g", 3, "")
	if !ok || fmt.Sprint(offsets(p)) != "[0 1 2]" {
		t.Fatalf("first pop: %v", offsets(p))
	}
	if r := s.ackBatch("g", p.LeaseID, ackOf(p, 2, "completed")); !r[0].Success || i64(r[0].Committed) != "2" {
		t.Fatalf("ack 2 completed: %+v, want committed 2", r[0])
	}
	p, ok = s.popGroup("q", "p", "g", 10, "")
	if !ok || fmt.Sprint(offsets(p)) != "[3 4 5]" {
		t.Fatalf("second pop: %v, want [3 4 5]", offsets(p))
	}
	// Failed attempt 1 of offset 4.
	r := s.ackBatch("g", p.LeaseID, ackOf(p, 4, "failed"), ackOf(p, 5, "completed"))
	for _, x := range r {
		if !x.Success || i64(x.Committed) != "3" {
			t.Errorf("span (2,5], [4 failed, 5 completed]: item %+v (committed %s), want success with committed = min(5, 4-1) = 3", x, i64(x.Committed))
		}
	}
	if c := s.committed("g", "q", "p"); c != 3 {
		t.Fatalf("span (2,5], [4 failed, 5 completed]: group reports committed %d, want 3", c)
	}

	// Offset 4 comes back with one attempt more each time; its 4th failed
	// attempt (retryLimit 3 + 1) dead-letters it. 5 commits.
	dead := false
	for attempt := 1; attempt <= 3 && !dead; attempt++ {
		p, ok = s.popGroup("q", "p", "g", 10, "")
		if !ok {
			t.Fatalf("after failed attempt %d of offset 4: pop is empty, want offset 4 redelivered", attempt)
		}
		if m := p.Messages[0]; m.Offset != 4 || m.RetryCount != attempt {
			t.Fatalf("after failed attempt %d of offset 4: pop delivers %v, head offset %d retryCount %d; want offset 4 with retryCount %d",
				attempt, offsets(p), m.Offset, m.RetryCount, attempt)
		}
		if len(p.Messages) > 1 && p.Messages[1].Offset != 5 {
			t.Fatalf("redelivery %v: want 4 then 5", offsets(p))
		}
		acks := []map[string]any{ackOf(p, 4, "failed")}
		if len(p.Messages) > 1 {
			acks = append(acks, ackOf(p, 5, "completed"))
		}
		r = s.ackBatch("g", p.LeaseID, acks...)
		want := int64(3)
		if attempt == 3 { // 4th failed attempt: dead-lettered, no stop signal left.
			dead = true
			want = 4
			if len(p.Messages) > 1 {
				want = 5
			}
		}
		for _, x := range r {
			if i64(x.Committed) != fmt.Sprint(want) || (!dead && !x.Success) {
				t.Fatalf("failed attempt %d of offset 4 (pop %v): item %+v committed %s, want %d", attempt+1, offsets(p), x, i64(x.Committed), want)
			}
		}
	}
	if s.committed("g", "q", "p") == 4 { // 5 was not in the last batch: it comes alone now.
		p, ok = s.popGroup("q", "p", "g", 10, "")
		if !ok || fmt.Sprint(offsets(p)) != "[5]" {
			t.Fatalf("after 4 is dead-lettered: pop %v, want [5]", offsets(p))
		}
		s.ackBatch("g", p.LeaseID, ackOf(p, 5, "completed"))
	}
	if c := s.committed("g", "q", "p"); c != 5 {
		t.Fatalf("after 4 is dead-lettered and 5 completed: committed %d, want 5", c)
	}
	d := s.dlq("queue=q")
	if d.Total != 1 || len(d.Messages) != 1 || d.Messages[0].Offset != 4 || d.Messages[0].ConsumerGroup != "g" {
		t.Fatalf("DLQ %+v, want exactly offset 4 of group g", d)
	}
	if _, ok := s.popGroup("q", "p", "g", 10, ""); ok {
		t.Fatal("pop after everything resolved delivered messages")
	}
}

// §3.5: over span (-1,2], [1 retry, 2 completed] gives committed = 0 (0 is
// not mentioned and counts as covered); the next pop starts at 1 with no
// attempt consumed.
func TestAckCommitStopsBeforeRetry(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.pushN("q", "p", 3)
	p, ok := s.popGroup("q", "p", "g", 3, "")
	if !ok || fmt.Sprint(offsets(p)) != "[0 1 2]" {
		t.Fatalf("pop: %v", offsets(p))
	}
	r := s.ackBatch("g", p.LeaseID, ackOf(p, 1, "retry"), ackOf(p, 2, "completed"))
	for _, x := range r {
		if !x.Success || i64(x.Committed) != "0" {
			t.Errorf("span (-1,2], [1 retry, 2 completed]: item %+v committed %s, want success with committed = min(2, 1-1) = 0", x, i64(x.Committed))
		}
	}
	if c := s.committed("g", "q", "p"); c != 0 {
		t.Fatalf("span (-1,2], [1 retry, 2 completed]: group reports committed %d, want 0", c)
	}
	p, ok = s.popGroup("q", "p", "g", 10, "")
	if !ok {
		t.Fatal("pop after retry of 1 is empty, want offset 1 redelivered")
	}
	if m := p.Messages[0]; m.Offset != 1 || m.RetryCount != 0 {
		t.Fatalf("pop after retry of 1: %v, head offset %d retryCount %d; want offset 1 with retryCount 0", offsets(p), m.Offset, m.RetryCount)
	}
}

// §3.5: no call commits past one of its own stop signals, whether or not the
// signal is applied; an acknowledged failed is never turned into a commit.
func TestStaleAckNeverCommitsPastFailed(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("q", map[string]any{"leaseTime": 1})
	s.pushN("q", "p", 3)

	a, ok := s.popGroup("q", "p", "g", 3, "")
	if !ok || fmt.Sprint(offsets(a)) != "[0 1 2]" {
		t.Fatalf("consumer A pop: %v", offsets(a))
	}
	s.env.Clock.Advance(2 * time.Second) // A's lease expires
	b, ok := s.popGroup("q", "p", "g", 3, "")
	if !ok || fmt.Sprint(offsets(b)) != "[0]" || b.Messages[0].RetryCount != 1 {
		t.Fatalf("consumer B pop after A's lease expired: %v (%+v), want the head 0 alone with retryCount 1", offsets(b), b.Messages)
	}

	// A, late and without leaseId.
	r := s.ackBatch("g", "", ackOf(a, 0, "completed"), ackOf(a, 1, "failed"), ackOf(a, 2, "completed"))
	for i, x := range r {
		if i64(x.Committed) != "0" {
			t.Errorf("stale [0 completed, 1 failed, 2 completed]: item %d %+v committed %s, want 0 (never past the failed at 1)", i, x, i64(x.Committed))
		}
		if i > 0 && x.Result == queen.ResultCommitted {
			t.Errorf("stale [0 completed, 1 failed, 2 completed]: offset %d reported %q; a failed is never turned into a commit", i, x.Result)
		}
	}
	if c := s.committed("g", "q", "p"); c != 0 {
		t.Fatalf("after stale [0 completed, 1 failed, 2 completed]: committed %d, want 0", c)
	}
	// Offset 1 is not lost: a later pop of g delivers it (once B's lease on
	// (-1,0] is out of the way).
	p, ok := s.popGroup("q", "p", "g", 10, "")
	if !ok {
		s.env.Clock.Advance(2 * time.Second)
		p, ok = s.popGroup("q", "p", "g", 10, "")
	}
	if !ok || p.Messages[0].Offset != 1 {
		t.Fatalf("pop after the stale failed of offset 1: %v (ok %v), want offset 1 delivered again", offsets(p), ok)
	}
}

// ackOfCommittedOffset checks §3.5: an ack of an offset at or below the
// cursor is a success no-op "already committed", however old the message
// and whatever the dedup window — here after more than 1,000 later
// segments.
func ackOfCommittedOffset(t *testing.T, dedupWindow int) {
	s := newClockedServer(t)
	s.configure("q", map[string]any{"dedupWindowSeconds": dedupWindow})
	first := s.pushN("q", "p", 1)[0]
	p, ok := s.popGroup("q", "p", "g", 1, "")
	if !ok {
		t.Fatal("pop empty")
	}
	s.ackBatch("g", p.LeaseID, ackOf(p, 0, "completed"))
	s.env.Clock.Advance(time.Duration(dedupWindow+1) * time.Second)
	s.reap()

	ctx := context.Background()
	const later = 1001
	for i := 0; i < later; i++ { // one segment each
		if _, err := s.env.Store.Push(ctx, []queen.PushItem{{Queue: "q", Partition: "p", Payload: json.RawMessage(fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < later; {
		res, err := s.env.Store.Pop(ctx, queen.PopRequest{Queue: "q", Partition: "p", ConsumerGroup: "g", Batch: 1000})
		if err != nil || len(res.Messages) == 0 {
			t.Fatalf("consuming the later messages: %d so far, %v", got, err)
		}
		got += len(res.Messages)
		last := res.Messages[len(res.Messages)-1]
		if _, err := s.env.Store.Ack(ctx, []queen.Ack{{PartitionID: last.PartitionID, TransactionID: last.TransactionID,
			Status: queen.AckCompleted, ConsumerGroup: "g", LeaseID: res.LeaseID}}); err != nil {
			t.Fatal(err)
		}
	}
	if c := s.committed("g", "q", "p"); c != later {
		t.Fatalf("committed %d after consuming everything, want %d", c, later)
	}

	r := s.do("POST", "/api/v1/ack", map[string]any{"transactionId": first.TransactionID, "partitionId": first.PartitionID,
		"status": "completed", "consumerGroup": "g"})
	if r.status != 200 {
		t.Fatalf("ack of committed offset 0 (dedupWindowSeconds %d, %d later segments): %d %s, want 200 already committed",
			dedupWindow, later, r.status, r.body)
	}
	var res []acked
	r.json(t, &res)
	if len(res) != 1 || !res[0].Success || res[0].Result != queen.ResultAlreadyCommitted || i64(res[0].Committed) != fmt.Sprint(later) {
		t.Fatalf("ack of committed offset 0: %+v, want success, %q, committed %d", res, queen.ResultAlreadyCommitted, later)
	}
}

func TestAckOfCommittedOffsetAfterDedupPrune(t *testing.T) {
	t.Parallel()
	ackOfCommittedOffset(t, 5)
}

func TestAckOfCommittedOffsetWithoutDedupWindow(t *testing.T) {
	t.Parallel()
	ackOfCommittedOffset(t, 0)
}
