package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// spanTwoToFive leaves group g with committed = 2 and a leased span (2,5]
// over a partition holding offsets 0..7.
func spanTwoToFive(t *testing.T, retryLimit int) (*pgstoretest.Env, queen.PopResult) {
	e := pgstoretest.NewClocked(t)
	configure(t, e, "q", queen.QueueOptions{RetryLimit: ptr(retryLimit)})
	pushN(t, e, "q", "p", "m", 8)
	first := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 3})
	mustAck(t, e, ack(first.Messages[2], "g", first.LeaseID, queen.AckCompleted))
	res := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 3})
	if got := offsets(res.Messages); !equal(got, []int64{3, 4, 5}) {
		t.Fatalf("setup pop = %v, want [3 4 5]", got)
	}
	return e, res
}

type sig struct {
	off    int64
	status queen.AckStatus
}

// The clamp walk and the precedence rule, semantics.md §3.5.3.
func TestMixedAckOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retryLimit int
		signals    []sig
		committed  int64
		dlq        []int64 // offsets in the DLQ afterwards
		released   bool
		next       int64 // first offset of the next pop
		nextRetry  int   // its retryCount
	}{
		{"spec example: failed in the middle", 3, []sig{{3, queen.AckCompleted}, {4, queen.AckFailed}, {5, queen.AckCompleted}}, 3, nil, true, 4, 1},
		{"complete the last completes all", 3, []sig{{5, queen.AckCompleted}}, 5, nil, true, 6, 0},
		{"partial ack keeps the lease", 3, []sig{{3, queen.AckCompleted}, {4, queen.AckCompleted}}, 4, nil, false, -1, 0},
		{"retry at the head consumes no attempt", 3, []sig{{3, queen.AckRetry}, {4, queen.AckCompleted}}, 2, nil, true, 3, 0},
		{"dlq below a completion is applied", 3, []sig{{4, queen.AckDLQ}, {5, queen.AckCompleted}}, 5, []int64{4}, true, 6, 0},
		{"dlq above a stop is not applied", 3, []sig{{3, queen.AckRetry}, {4, queen.AckDLQ}}, 2, nil, true, 3, 0},
		{"dlq alone resolves up to it", 3, []sig{{4, queen.AckDLQ}}, 4, []int64{4}, false, -1, 0},
		{"dlq beats failed at equal offset", 3, []sig{{4, queen.AckFailed}, {4, queen.AckDLQ}}, 4, []int64{4}, false, -1, 0},
		{"failed beats retry at equal offset", 3, []sig{{3, queen.AckCompleted}, {4, queen.AckRetry}, {4, queen.AckFailed}}, 3, nil, true, 4, 1},
		{"a stop with nothing resolved keeps the cursor", 3, []sig{{4, queen.AckRetry}}, 2, nil, true, 3, 0},
		{"failed beats completed at equal offset", 3, []sig{{3, queen.AckCompleted}, {3, queen.AckFailed}}, 2, nil, true, 3, 1},
		{"lowest stop wins over a later dlq", 3, []sig{{3, queen.AckCompleted}, {4, queen.AckRetry}, {4, queen.AckFailed}, {5, queen.AckDLQ}}, 3, nil, true, 4, 1},
		{"failed without attempts left is dead-lettered", 0, []sig{{3, queen.AckFailed}, {4, queen.AckCompleted}}, 4, []int64{3}, false, -1, 0},
		{"whole batch failed loses nothing", 3, []sig{{3, queen.AckFailed}, {4, queen.AckFailed}, {5, queen.AckFailed}}, 2, nil, true, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, res := spanTwoToFive(t, tt.retryLimit)
			byOff := map[int64]queen.Message{}
			for _, m := range res.Messages {
				byOff[m.Offset] = m
			}
			var acks []queen.Ack
			for _, s := range tt.signals {
				acks = append(acks, ack(byOff[s.off], "g", res.LeaseID, s.status))
			}
			results := mustAck(t, e, acks...)
			for _, r := range results {
				if !r.Success || *r.Committed != tt.committed || r.LeaseReleased != tt.released {
					t.Fatalf("result %+v: want committed %d, leaseReleased %v", r, tt.committed, tt.released)
				}
			}
			pid := res.Messages[0].PartitionID
			if c := cursor(t, e, pid, "g"); c != tt.committed {
				t.Fatalf("committed = %d, want %d", c, tt.committed)
			}
			var dlq []int64
			rows, err := e.Pool.Query(ctx, "SELECT msg_offset FROM queen.dlq ORDER BY msg_offset")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var o int64
				_ = rows.Scan(&o)
				dlq = append(dlq, o)
			}
			if !equal(dlq, tt.dlq) {
				t.Fatalf("DLQ holds %v, want %v", dlq, tt.dlq)
			}
			next := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 1})
			if tt.next < 0 {
				if len(next.Messages) != 0 {
					t.Fatalf("lease should still be held, but the next pop got %v", offsets(next.Messages))
				}
				return
			}
			if len(next.Messages) != 1 || next.Messages[0].Offset != tt.next || next.Messages[0].RetryCount != tt.nextRetry {
				t.Fatalf("next pop = %+v, want offset %d with retryCount %d", next.Messages, tt.next, tt.nextRetry)
			}
		})
	}
}

func TestAckRejections(t *testing.T) {
	t.Parallel()
	e, res := spanTwoToFive(t, 3)
	pid := res.Messages[0].PartitionID

	cases := []struct {
		name string
		ack  queen.Ack
		want error
	}{
		{"unknown partition", queen.Ack{PartitionID: "00000000-0000-0000-0000-000000000000", TransactionID: "m-3", Status: "completed", ConsumerGroup: "g"}, queen.ErrNotFound},
		{"wrong lease", ack(res.Messages[0], "g", "00000000-0000-0000-0000-000000000001", queen.AckCompleted), queen.ErrConflict},
		{"bogus lease", ack(res.Messages[0], "g", "not-a-lease", queen.AckCompleted), queen.ErrConflict},
		{"other group never delivered", ack(res.Messages[0], "h", "", queen.AckCompleted), queen.ErrConflict},
		{"beyond what was delivered", queen.Ack{PartitionID: pid, TransactionID: "m-7", Status: "completed", ConsumerGroup: "g"}, queen.ErrConflict},
		{"bad status", queen.Ack{PartitionID: pid, TransactionID: "m-3", Status: "done", ConsumerGroup: "g"}, queen.ErrInvalid},
		{"bad partition id", queen.Ack{PartitionID: "x'; DROP TABLE queen.dlq; --", TransactionID: "m-3", Status: "completed"}, queen.ErrInvalid},
	}
	for _, c := range cases {
		if _, err := e.Store.Ack(ctx, []queen.Ack{c.ack}); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	// A batch with one bad item writes nothing.
	results, err := e.Store.Ack(ctx, []queen.Ack{
		ack(res.Messages[2], "g", res.LeaseID, queen.AckCompleted),
		{PartitionID: pid, TransactionID: "m-7", Status: "completed", ConsumerGroup: "g"}, // not delivered yet
	})
	if !errors.Is(err, queen.ErrConflict) || len(results) != 2 || results[0].Success || results[1].Success {
		t.Fatalf("batch with a bad item: err %v results %+v", err, results)
	}
	if c := cursor(t, e, pid, "g"); c != 2 {
		t.Fatalf("rejected batch moved the cursor to %d", c)
	}
	// semantics.md §3.5.7: a transactionId not found after the cursor is at or below
	// it — an "already committed" no-op; the engine never searches history.
	old, err := e.Store.Ack(ctx, []queen.Ack{{PartitionID: pid, TransactionID: "nope", Status: "completed", ConsumerGroup: "g"}})
	if err != nil || !old[0].Success || old[0].Result != queen.ResultAlreadyCommitted || *old[0].Committed != 2 {
		t.Fatalf("ack of a transactionId not after the cursor: %v %+v", err, old)
	}
	// An expired lease is rejected when named.
	e.Clock.Advance(301 * time.Second)
	if _, err := e.Store.Ack(ctx, []queen.Ack{ack(res.Messages[2], "g", res.LeaseID, queen.AckCompleted)}); !errors.Is(err, queen.ErrConflict) {
		t.Fatalf("ack under an expired lease: %v, want ErrConflict", err)
	}
}

// A message that crashes its consumers: every delivery's lease expires.
// It is delivered alone after the first expiry, dead-lettered on its
// (retryLimit+1)-th failed attempt, and its neighbours are untouched.
func TestPoisonMessageIsIsolated(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	const retryLimit = 2
	configure(t, e, "q", queen.QueueOptions{RetryLimit: ptr(retryLimit), LeaseTime: ptr(10)})
	pushN(t, e, "q", "p", "m", 5)

	// First delivery: a whole batch; the consumer crashes on offset 0.
	res := pop(t, e, queen.PopRequest{Queue: "q", Batch: 5})
	if len(res.Messages) != 5 {
		t.Fatalf("first pop got %d messages", len(res.Messages))
	}
	for attempt := 1; attempt <= retryLimit; attempt++ {
		e.Clock.Advance(11 * time.Second)
		if attempt%2 == 0 { // expiries noticed by the reaper count the same as by a pop
			if st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100}); err != nil || st.LeasesExpired != 1 {
				t.Fatalf("reap: %+v %v", st, err)
			}
		}
		res = pop(t, e, queen.PopRequest{Queue: "q", Batch: 5})
		if got := offsets(res.Messages); !equal(got, []int64{0}) || res.Messages[0].RetryCount != attempt {
			t.Fatalf("after %d expiries got %v (retryCount %v), want offset 0 alone with retryCount %d",
				attempt, got, res.Messages, attempt)
		}
	}
	// The (retryLimit+1)-th failed attempt dead-letters it.
	e.Clock.Advance(11 * time.Second)
	res = pop(t, e, queen.PopRequest{Queue: "q", Batch: 5})
	if got := offsets(res.Messages); !equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("after the poison message was dead-lettered got %v, want normal batching [1 2 3 4]", got)
	}
	page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 1 || page.Messages[0].Offset != 0 || page.Messages[0].Attempts != retryLimit+1 {
		t.Fatalf("DLQ = %+v, want only offset 0 with %d attempts", page, retryLimit+1)
	}
	// Reaping again does not count the same expiry twice.
	if st, _ := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100}); st.LeasesExpired != 0 {
		t.Fatalf("second reap expired %d leases", st.LeasesExpired)
	}
}

func TestFailedAcksCountLikeExpiries(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "q", queen.QueueOptions{RetryLimit: ptr(1)})
	pushN(t, e, "q", "p", "m", 2)
	res := pop(t, e, queen.PopRequest{Queue: "q", Batch: 2})
	mustAck(t, e, ack(res.Messages[0], "", res.LeaseID, queen.AckFailed)) // attempt 1
	e.Clock.Advance(time.Second)
	res = pop(t, e, queen.PopRequest{Queue: "q", Batch: 1})
	e.Clock.Advance(301 * time.Second) // attempt 2: expiry
	res = pop(t, e, queen.PopRequest{Queue: "q", Batch: 2})
	if got := offsets(res.Messages); !equal(got, []int64{1}) {
		t.Fatalf("after 2 failed attempts with retryLimit 1 got %v, want [1]", got)
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

func TestTransactionIsAtomic(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "in", "p", "m", 2)
	r := pop(t, e, queen.PopRequest{Queue: "in", Batch: 2})

	// A failing operation applies nothing: the ack of an unknown partition
	// keeps the push out, and vice versa a full queue keeps the ack out.
	_, err := e.Store.Transaction(ctx, queen.TransactionRequest{
		Acks:   []queen.Ack{ack(r.Messages[1], "", r.LeaseID, queen.AckCompleted), {PartitionID: "00000000-0000-0000-0000-0000000000aa", TransactionID: "nope", Status: "completed"}},
		Pushes: []queen.PushItem{{Queue: "out", Payload: payload(1)}},
	})
	if !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("transaction with a bad ack: %v", err)
	}
	configure(t, e, "full", queen.QueueOptions{MaxSize: ptr[int64](1)})
	_, err = e.Store.Transaction(ctx, queen.TransactionRequest{
		Acks:   []queen.Ack{ack(r.Messages[1], "", r.LeaseID, queen.AckCompleted)},
		Pushes: []queen.PushItem{{Queue: "full", Payload: payload(1)}, {Queue: "full", Payload: payload(2)}},
	})
	if !errors.Is(err, queen.ErrQueueFull) {
		t.Fatalf("transaction into a full queue: %v", err)
	}
	if c := cursor(t, e, r.Messages[0].PartitionID, queen.QueueModeGroup); c != -1 {
		t.Fatalf("failed transaction moved the cursor to %d", c)
	}
	if n := count(t, e, "SELECT count(*) FROM queen.queues WHERE name = 'out'"); n != 0 {
		t.Fatal("failed transaction created a queue")
	}
	_, err = e.Store.Transaction(ctx, queen.TransactionRequest{
		RequiredLeases: []string{"00000000-0000-0000-0000-000000000000"},
		Pushes:         []queen.PushItem{{Queue: "out", Payload: payload(1)}},
	})
	if !errors.Is(err, queen.ErrConflict) {
		t.Fatalf("transaction with a dead required lease: %v", err)
	}

	res, err := e.Store.Transaction(ctx, queen.TransactionRequest{
		Acks:           []queen.Ack{ack(r.Messages[1], "", r.LeaseID, queen.AckCompleted)},
		Pushes:         []queen.PushItem{{Queue: "out", Payload: payload("moved")}},
		RequiredLeases: []string{r.LeaseID},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Acks) != 1 || *res.Acks[0].Committed != 1 || len(res.Pushes) != 1 || res.Pushes[0].Status != queen.StatusQueued {
		t.Fatalf("transaction result %+v", res)
	}
}
