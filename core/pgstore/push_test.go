package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// A push whose items all go to one partition takes push_partition (arrays
// in, offsets out, the reply rendered in Go); one that spans partitions
// takes the JSON routine. A user must not be able to tell them apart: the
// same items get the same statuses and offsets, and what a pop returns is
// what the push said it stored, under the id the push reported.
func TestOnePartitionPushAnswersAsAnyPush(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	trace := "trace-3"
	first := []queen.PushItem{
		{Payload: payload(map[string]any{"n": 1, "html": "<b>"}), TransactionID: "t1"},
		{Payload: payload([]int{2}), TransactionID: "t2"},
		{Payload: payload("again"), TransactionID: "t1"}, // repeats item 0 of this request
		{Payload: payload(3), TransactionID: "t3", TraceID: trace},
	}
	second := []queen.PushItem{
		{Payload: payload(nil), TransactionID: "t2"}, // stored by the first push
		{TransactionID: "t4"},                        // no payload: null
		{Payload: payload(5), TransactionID: "t4"},
	}
	// The model's answers (invariant 4: a repeat reports its first copy's offset).
	want := [][]struct {
		status string
		offset int64
	}{
		{{queen.StatusQueued, 0}, {queen.StatusQueued, 1}, {queen.StatusDuplicate, 0}, {queen.StatusQueued, 2}},
		{{queen.StatusDuplicate, 1}, {queen.StatusQueued, 3}, {queen.StatusDuplicate, 3}},
	}

	push := func(queue string, items []queen.PushItem, spread bool) []queen.PushResult {
		t.Helper()
		batch := make([]queen.PushItem, 0, len(items)+1)
		for _, it := range items {
			it.Queue, it.Partition = queue, "a"
			batch = append(batch, it)
		}
		if spread { // one more item elsewhere: the push spans two partitions
			batch = append(batch, queen.PushItem{Queue: queue, Partition: "b", Payload: payload(0)})
		}
		res, err := e.Store.Push(ctx, batch)
		if err != nil {
			t.Fatalf("push to %s: %v", queue, err)
		}
		return res[:len(items)]
	}

	for round, items := range [][]queen.PushItem{first, second} {
		one := push("one", items, false)
		spread := push("spread", items, true)
		for i := range items {
			w := want[round][i]
			for _, got := range []queen.PushResult{one[i], spread[i]} {
				if got.Status != w.status || got.Offset != w.offset || got.Index != i ||
					got.TransactionID != items[i].TransactionID || got.Partition != "a" {
					t.Errorf("push %d item %d (%s): got %+v, want %s at offset %d", round, i, got.Queue, got, w.status, w.offset)
				}
			}
			if one[i].TraceID != items[i].TraceID || !one[i].CreatedAt.Equal(one[0].CreatedAt) || one[i].CreatedAt.IsZero() {
				t.Errorf("push %d item %d: trace %q, createdAt %v (first item %v)", round, i, one[i].TraceID, one[i].CreatedAt, one[0].CreatedAt)
			}
		}
		if round == 0 {
			// Keep the reported ids and payloads to check what a pop returns.
			defer func(res []queen.PushResult) {
				got := pop(t, e, queen.PopRequest{Queue: "one", Partition: "a", ConsumerGroup: "g", Batch: 10})
				if len(got.Messages) != 5 {
					t.Fatalf("popped %d messages, want 5 (t1, t2, t3, t4, t5)", len(got.Messages))
				}
				wantData := []string{`{"html":"\u003cb\u003e","n":1}`, `[2]`, `3`, `null`, `"single"`}
				for i, m := range got.Messages {
					if m.Offset != int64(i) || string(m.Data) != wantData[i] {
						t.Errorf("message %d: offset %d data %s, want %d %s", i, m.Offset, m.Data, i, wantData[i])
					}
				}
				for i, r := range []queen.PushResult{res[0], res[1], res[3]} {
					if m := got.Messages[i]; m.ID != r.MessageID || m.PartitionID != r.PartitionID {
						t.Errorf("message %d popped as id %s in %s, the push said %s in %s", i, m.ID, m.PartitionID, r.MessageID, r.PartitionID)
					}
				}
				if m := got.Messages[2]; m.TraceID == nil || *m.TraceID != trace {
					t.Errorf("t3 popped with trace %v, want %q", m.TraceID, trace)
				}
				if m := got.Messages[1]; m.TraceID != nil {
					t.Errorf("t2 popped with trace %q, pushed with none", *m.TraceID)
				}
				if m := got.Messages[4]; m.TraceID == nil || *m.TraceID != "trace-single" {
					t.Errorf("t5 popped with trace %v, want %q", m.TraceID, "trace-single")
				}
			}(one)
		}
	}

	// One message per push (push_partition has a statement of its own for
	// that): a repeat of a batch's first message and of a later one, a new
	// message, and a repeat of it.
	for _, w := range []struct {
		txid   string
		status string
		offset int64
	}{{"t1", queen.StatusDuplicate, 0}, {"t3", queen.StatusDuplicate, 2}, {"t5", queen.StatusQueued, 4}, {"t5", queen.StatusDuplicate, 4}} {
		it := queen.PushItem{Payload: payload("single"), TransactionID: w.txid, TraceID: "trace-single"}
		for _, got := range []queen.PushResult{push("one", []queen.PushItem{it}, false)[0], push("spread", []queen.PushItem{it}, true)[0]} {
			if got.Status != w.status || got.Offset != w.offset || got.TransactionID != w.txid || got.CreatedAt.IsZero() {
				t.Errorf("%s pushed alone to %s: got %+v, want %s at offset %d", w.txid, got.Queue, got, w.status, w.offset)
			}
		}
	}
}

// Dedup keys are 8-byte hashes of (partition, transactionId). Two ids that
// share a hash must not be taken for each other: a push whose key matches
// a live row is a duplicate only if the message stored at that row's offset
// has its transactionId. The collision is made by hand (a row with the
// hash of "victim" that points at the message of "m0"), as a 64-bit
// collision would be.
func TestDedupHashCollisionIsNotADuplicate(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	first := pushN(t, e, "hashq", "p", "m", 1)[0]
	for _, spread := range []bool{false, true} {
		victim := fmt.Sprintf("victim-%v", spread)
		if _, err := e.Pool.Exec(ctx, `INSERT INTO queen.dedup (key, msg_offset, created_at)
			SELECT queen.dedup_key($1, $2), 0, s.created_at FROM queen.segments s JOIN queen.partitions p ON p.num = s.partition_num
			WHERE p.id = $1 AND s.base_offset = 0`,
			first.PartitionID, victim); err != nil {
			t.Fatal(err)
		}
		items := []queen.PushItem{{Queue: "hashq", Partition: "p", Payload: payload(1), TransactionID: victim}}
		if spread { // through the routine for pushes that span partitions
			items = append(items, queen.PushItem{Queue: "hashq", Partition: "q"})
		}
		for round, want := range []string{queen.StatusQueued, queen.StatusDuplicate} {
			res, err := e.Store.Push(ctx, items)
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Status != want {
				t.Fatalf("push %d of %s: %+v, want %s", round+1, victim, res[0], want)
			}
		}
	}
	again := pushN(t, e, "hashq", "p", "m", 1)[0]
	if again.Status != queen.StatusDuplicate || again.Offset != 0 {
		t.Fatalf("m-0 pushed again: %+v, want duplicate of offset 0", again)
	}
}

// A key row does not know its queue, so the reaper keeps it until it is
// past every queue's window. Invariant 4 and the model still hold for the
// queue whose window passed: once the reaper has run after a key expired,
// the key is gone, even if the window later grows; without that run, it is
// still there and the grown window takes it back.
func TestDedupKeyStaysGoneAfterTheReaperWhenTheWindowGrows(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "long", queen.QueueOptions{}) // another queue keeps the default hour
	for _, reap := range []bool{true, false} {
		queue := fmt.Sprintf("short-%v", reap)
		configure(t, e, queue, queen.QueueOptions{DedupWindowSeconds: ptr(10)})
		pushN(t, e, queue, "p", "k", 1)
		e.Clock.Advance(20 * time.Second)
		if reap {
			if _, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100}); err != nil {
				t.Fatal(err)
			}
		}
		configure(t, e, queue, queen.QueueOptions{DedupWindowSeconds: ptr(3600)})
		want := queen.StatusDuplicate
		if reap {
			want = queen.StatusQueued
		}
		if got := pushN(t, e, queue, "p", "k", 1)[0]; got.Status != want {
			t.Errorf("reaped %v, window grown from 10 s to an hour: key k pushed again is %s, want %s", reap, got.Status, want)
		}
	}
}

// The key of a segment's first message is the segment's own index entry
// (migration 0012), not a dedup row. It must behave as any key: a push made
// while the window is 0 records none, even once the window is back, and a
// key still inside its window outlives its segment's retention.
func TestFirstMessageKeysFollowTheWindow(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	one := func(queue, txid string) queen.PushResult {
		t.Helper()
		res, err := e.Store.Push(ctx, []queen.PushItem{{Queue: queue, Partition: "p", Payload: payload(1), TransactionID: txid}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	spread := func(queue, txid string) queen.PushResult { // through the routine for pushes that span partitions
		t.Helper()
		res, err := e.Store.Push(ctx, []queen.PushItem{{Queue: queue, Partition: "p", Payload: payload(1), TransactionID: txid},
			{Queue: queue, Partition: "other", Payload: payload(2)}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	for name, push := range map[string]func(string, string) queen.PushResult{"one": one, "spread": spread} {
		q := "off-" + name
		configure(t, e, q, queen.QueueOptions{DedupWindowSeconds: ptr(0)})
		first := push(q, "k")
		if again := push(q, "k"); again.Status != queen.StatusQueued {
			t.Fatalf("%s: window 0, second push of k: %+v, want queued", name, again)
		}
		e.Clock.Advance(time.Second)
		configure(t, e, q, queen.QueueOptions{DedupWindowSeconds: ptr(3600)})
		third := push(q, "k")
		if third.Status != queen.StatusQueued || third.Offset != first.Offset+2 {
			t.Fatalf("%s: k pushed while the window was 0 was taken as a key: %+v", name, third)
		}
		if dup := push(q, "k"); dup.Status != queen.StatusDuplicate || dup.Offset != third.Offset {
			t.Fatalf("%s: k pushed with the window back: %+v, want a duplicate of offset %d", name, dup, third.Offset)
		}

		q = "kept-" + name
		configure(t, e, q, queen.QueueOptions{RetentionSeconds: ptr(10), DedupWindowSeconds: ptr(60)})
		first = push(q, "k")
		e.Clock.Advance(20 * time.Second)
		if st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100}); err != nil || st.SegmentsRetained == 0 {
			t.Fatalf("%s: reap after the retention: %+v %v", name, st, err)
		}
		if n := count(t, e, `SELECT count(*) FROM queen.segments s JOIN queen.partitions p ON p.num = s.partition_num
			JOIN queen.queues x ON x.id = p.queue_id WHERE x.name = '`+q+`' AND p.name = 'p'`); n != 0 {
			t.Fatalf("%s: %d segments left after the retention", name, n)
		}
		if dup := push(q, "k"); dup.Status != queen.StatusDuplicate || dup.Offset != first.Offset {
			t.Fatalf("%s: k pushed again inside its window, its segment retained away: %+v, want a duplicate of offset %d",
				name, dup, first.Offset)
		}
		e.Clock.Advance(60 * time.Second)
		if again := push(q, "k"); again.Status != queen.StatusQueued {
			t.Fatalf("%s: k pushed again after its window: %+v, want queued", name, again)
		}
	}
}

// An ack names its message by transactionId, the lowest offset above the
// cursor holding it. With the window at 0 an id may be stored many times,
// and only the first message of each segment has a key: a key at or below
// the delivered window then does not say that no copy lies beyond it.
func TestAckOfAnUndeliveredRepeatWithoutDedup(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "nodedup", queen.QueueOptions{DedupWindowSeconds: ptr(0)})
	pushQueued(t, e, "nodedup", "a")      // offset 0, the first of its segment
	pushQueued(t, e, "nodedup", "b", "a") // offsets 1 and 2
	r := pop(t, e, queen.PopRequest{Queue: "nodedup", Batch: 2})
	if !equal(offsets(r.Messages), []int64{0, 1}) {
		t.Fatalf("popped %v, want offsets 0 and 1", offsets(r.Messages))
	}
	mustAck(t, e, ack(r.Messages[0], "", r.LeaseID, queen.AckCompleted))
	// "a" above the cursor (0) is offset 2, which was not delivered.
	_, err := e.Store.Ack(ctx, []queen.Ack{ack(r.Messages[0], "", r.LeaseID, queen.AckCompleted)})
	if !errors.Is(err, queen.ErrConflict) {
		t.Fatalf("ack of a again: %v, want a conflict (offset 2 was not delivered)", err)
	}
}

// The same with the window on: an id reused after its window is stored
// again, its key a row that the reaper prunes after the window, while the
// key of the older copy, the first message of its segment, stays with its
// segment. That older key must not pass for the newest.
func TestAckOfAnUndeliveredRepeatAfterTheReaper(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "reused", queen.QueueOptions{DedupWindowSeconds: ptr(5)})
	pushQueued(t, e, "reused", "a") // offset 0, the first of its segment
	e.Clock.Advance(10 * time.Second)
	pushQueued(t, e, "reused", "b", "a") // offsets 1 and 2: a's window has passed
	r := pop(t, e, queen.PopRequest{Queue: "reused", Batch: 2})
	if !equal(offsets(r.Messages), []int64{0, 1}) {
		t.Fatalf("popped %v, want offsets 0 and 1", offsets(r.Messages))
	}
	mustAck(t, e, ack(r.Messages[0], "", r.LeaseID, queen.AckCompleted))
	e.Clock.Advance(6 * time.Second)
	if st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100}); err != nil || st.DedupPruned == 0 {
		t.Fatalf("reap: %+v %v, want the key row of offset 2 pruned", st, err)
	}
	_, err := e.Store.Ack(ctx, []queen.Ack{ack(r.Messages[0], "", r.LeaseID, queen.AckCompleted)})
	if !errors.Is(err, queen.ErrConflict) {
		t.Fatalf("ack of a again: %v, want a conflict (offset 2 was not delivered)", err)
	}
}

// pushQueued pushes one message per transactionId to partition p of queue,
// in one request, and fails unless each is queued.
func pushQueued(t *testing.T, e *pgstoretest.Env, queue string, txids ...string) {
	t.Helper()
	items := make([]queen.PushItem, len(txids))
	for i, id := range txids {
		items[i] = queen.PushItem{Queue: queue, Partition: "p", Payload: payload(i), TransactionID: id}
	}
	pushAllQueued(t, e, items)
}

// Concurrent configure calls that toggle the window between 0 and on must
// leave dedup working once the window is on: a period without dedup that
// was never closed would hide every later first key.
func TestConcurrentWindowChangesLeaveDedupOn(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "toggled", queen.QueueOptions{DedupWindowSeconds: ptr(3600)})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				w := 3600 * ((g + i) % 2)
				if _, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "toggled",
					Options: queen.QueueOptions{DedupWindowSeconds: &w}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	configure(t, e, "toggled", queen.QueueOptions{DedupWindowSeconds: ptr(3600)})
	e.Clock.Advance(time.Second)
	pushQueued(t, e, "toggled", "k")
	res, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "toggled", Partition: "p", Payload: payload(1), TransactionID: "k"}})
	if err != nil || res[0].Status != queen.StatusDuplicate {
		t.Fatalf("k pushed twice with the window on after concurrent changes: %+v %v, want a duplicate", res, err)
	}
}

// The reaper prunes a key past the window in force when it runs. A reap
// under a long window followed by a short spell of window 0 with no reap
// in it prunes nothing: once the window is back the key is still live.
func TestWindowChangeWithoutAReapKeepsKeys(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "spell", queen.QueueOptions{DedupWindowSeconds: ptr(3600)})
	pushQueued(t, e, "spell", "a")
	e.Clock.Advance(10 * time.Second)
	if _, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100}); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(10 * time.Second)
	configure(t, e, "spell", queen.QueueOptions{DedupWindowSeconds: ptr(0)})
	e.Clock.Advance(10 * time.Second)
	configure(t, e, "spell", queen.QueueOptions{DedupWindowSeconds: ptr(3600)})
	e.Clock.Advance(10 * time.Second)
	res, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "spell", Partition: "p", Payload: payload(1), TransactionID: "a"}})
	if err != nil || res[0].Status != queen.StatusDuplicate || res[0].Offset != 0 {
		t.Fatalf("a pushed again 40 s later, window 3600 with a spell of 0 and no reap in it: %+v %v, want a duplicate of offset 0",
			res, err)
	}
}

// A batch to one partition probes its dedup keys before it locks the
// partition (push_partition). A push that commits between those probes and
// the lock must still count: here push A holds the partition's lock with
// ids t1 and t2 uncommitted while push B (t0, t2, t3) probes and then waits
// for the lock; once A commits, B must report t2 as a duplicate at A's
// offset and store only t0 and t3, right after A's messages.
func TestBatchDedupSeesAPushThatCommitsWhileItWaits(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushQueued(t, e, "race", "t-old") // the partition exists: offset 0

	tx, err := e.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := tx.Exec(ctx, `SELECT queen.push_partition('race', $1, ARRAY['t1', 't2'], ARRAY['1', '2'],
	                                   NULL, NULL, NULL, NULL)`, "p"); err != nil {
		t.Fatal(err)
	}

	type reply struct {
		res []queen.PushResult
		err error
	}
	done := make(chan reply, 1)
	go func() {
		items := []queen.PushItem{
			{Queue: "race", Partition: "p", Payload: payload(0), TransactionID: "t0"},
			{Queue: "race", Partition: "p", Payload: payload(2), TransactionID: "t2"},
			{Queue: "race", Partition: "p", Payload: payload(3), TransactionID: "t3"},
		}
		res, err := e.Store.Push(ctx, items)
		done <- reply{res, err}
	}()
	waitForPushLock(t, e) // B has probed by then
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	type got struct {
		status string
		offset int64
	}
	want := []got{{queen.StatusQueued, 3}, {queen.StatusDuplicate, 2}, {queen.StatusQueued, 4}}
	for i, w := range want {
		if g := (got{r.res[i].Status, r.res[i].Offset}); g != w {
			t.Errorf("item %d (%s): got %+v, want %+v", i, r.res[i].TransactionID, g, w)
		}
	}
	msgs := pop(t, e, queen.PopRequest{Queue: "race", Batch: 10}).Messages
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.TransactionID)
	}
	if fmt.Sprint(ids) != "[t-old t1 t2 t0 t3]" {
		t.Errorf("stored %v, want [t-old t1 t2 t0 t3]", ids)
	}
}

// pushAt pushes ids to partition p of queue at a given time through
// push_partition on pool and returns its fresh flags and offsets as text.
func pushAt(t *testing.T, q pgxQuerier, queue string, ids []string, at time.Time) (fresh, offsets string) {
	t.Helper()
	payloads := make([]string, len(ids))
	for i := range payloads {
		payloads[i] = `{}`
	}
	err := q.QueryRow(ctx, `SELECT r.fresh::text, r.offsets::text
	                        FROM queen.push_partition($1, 'p', $2::text[], $3::text[], NULL, NULL, NULL, $4::timestamptz) r`,
		queue, ids, payloads, at).Scan(&fresh, &offsets)
	if err != nil {
		t.Fatal(err)
	}
	return fresh, offsets
}

type pgxQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// waitForPushLock waits until another session's push waits for a lock.
func waitForPushLock(t *testing.T, e *pgstoretest.Env) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for count(t, e, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
	                 AND query LIKE '%push_partition%' AND pid <> pg_backend_pid()`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the push never waited for the partition's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Retention between a batch's probes and its lock (found by review): a copy
// the probes found whose segment is gone is judged as if probed under the
// lock (here: past the window of the push's final time, so not a duplicate),
// and a push committed in between whose segment is gone still counts by its
// keys.
func TestBatchDedupAcrossRetentionWhileItWaits(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	configureAt := func(e *pgstoretest.Env, opts string) {
		t.Helper()
		if _, err := e.Pool.Exec(ctx, `SELECT queen.configure('q', NULL, NULL, $1, $2)`, opts, t0); err != nil {
			t.Fatal(err)
		}
	}
	reap := func(q pgxQuerier, at time.Time) {
		t.Helper()
		var out string
		if err := q.QueryRow(ctx, `SELECT queen.reap($1, 100)::text`, at).Scan(&out); err != nil {
			t.Fatal(err)
		}
	}
	// B waits on A's lock; between B's probes and its lock, run is called
	// inside A's transaction; then A commits and B's reply is returned.
	race := func(e *pgstoretest.Env, aIDs []string, aAt time.Time, bIDs []string, bAt time.Time, run func(pgx.Tx)) (string, string) {
		t.Helper()
		tx, err := e.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // committed below
		pushAt(t, tx, "q", aIDs, aAt)
		type reply struct{ fresh, offsets string }
		done := make(chan reply, 1)
		go func() {
			f, o := pushAt(t, e.Pool, "q", bIDs, bAt)
			done <- reply{f, o}
		}()
		waitForPushLock(t, e)
		if run != nil {
			run(tx)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-done
		return r.fresh, r.offsets
	}

	t.Run("copy's segment gone, copy past the final window", func(t *testing.T) {
		e := pgstoretest.NewClocked(t)
		configureAt(e, `{"dedupWindowSeconds":60,"retentionSeconds":1}`)
		pushAt(t, e.Pool, "q", []string{"x", "y"}, t0) // offsets 0, 1
		reap(e.Pool, t0.Add(10*time.Second))           // the segment goes; y's key row stays
		// B pushes y at t0+30 (inside the window when it probes), but A's
		// push at t0+100 moves B's time, and its window starts at t0+40.
		f, o := race(e, []string{"c1", "c2"}, t0.Add(100*time.Second), []string{"y", "z"}, t0.Add(30*time.Second), nil)
		if f != "{t,t}" || o != "{4,5}" {
			t.Errorf("got fresh=%s offsets=%s, want {t,t} {4,5}: y's copy is past the window", f, o)
		}
	})
	t.Run("copy's segment gone, key still inside the window", func(t *testing.T) {
		e := pgstoretest.NewClocked(t)
		configureAt(e, `{"dedupWindowSeconds":3600,"retentionSeconds":1}`)
		pushAt(t, e.Pool, "q", []string{"x", "y"}, t0) // offsets 0, 1
		reap(e.Pool, t0.Add(10*time.Second))           // the segment goes; y's key row stays
		// semantics.md §3.2.1: an id seen within the window is a duplicate, and
		// reports its first copy's offset, whether or not retention kept
		// the message.
		f, o := pushAt(t, e.Pool, "q", []string{"y", "z"}, t0.Add(30*time.Second))
		if f != "{f,t}" || o != "{1,2}" {
			t.Errorf("got fresh=%s offsets=%s, want {f,t} {1,2}: y was pushed 30 s ago", f, o)
		}
	})
	t.Run("push in between reaped before the lock", func(t *testing.T) {
		e := pgstoretest.NewClocked(t)
		configureAt(e, `{"dedupWindowSeconds":3600,"retentionSeconds":1}`)
		pushAt(t, e.Pool, "q", []string{"old"}, t0) // offset 0
		// A stores a, b at 1, 2; its segment is reaped before B locks.
		f, o := race(e, []string{"a", "b"}, t0, []string{"b", "a", "z"}, t0.Add(20*time.Second),
			func(tx pgx.Tx) { reap(tx, t0.Add(10*time.Second)) })
		if f != "{f,f,t}" || o != "{2,1,3}" {
			t.Errorf("got fresh=%s offsets=%s, want {f,f,t} {2,1,3}: a and b were pushed just before", f, o)
		}
	})
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

func TestMaxSize(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "q", queen.QueueOptions{MaxSize: ptr[int64](3)})
	pushN(t, e, "q", "a", "a", 2)
	_, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "q", Partition: "b", Payload: payload(1)}, {Queue: "q", Partition: "b", Payload: payload(2)}})
	if !errors.Is(err, queen.ErrQueueFull) {
		t.Fatalf("push beyond maxSize: %v, want ErrQueueFull", err)
	}
	if n := count(t, e, "SELECT count(*) FROM queen.segments"); n != 1 {
		t.Fatalf("rejected push wrote segments: %d", n)
	}
	// Consuming makes room.
	r := pop(t, e, queen.PopRequest{Queue: "q", Batch: 2})
	mustAck(t, e, ack(r.Messages[1], "", r.LeaseID, queen.AckCompleted))
	if _, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "q", Partition: "b", Payload: payload(1)}, {Queue: "q", Partition: "b", Payload: payload(2)}}); err != nil {
		t.Fatalf("push after consuming: %v", err)
	}
}

func TestValidationWritesNothing(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	long := strings.Repeat("x", 256)
	bad := []struct {
		item  queen.PushItem
		field string
	}{
		{queen.PushItem{Queue: "", Payload: payload(1)}, "items[0].queue"},
		{queen.PushItem{Queue: "has space", Payload: payload(1)}, "items[0].queue"},
		{queen.PushItem{Queue: long, Payload: payload(1)}, "items[0].queue"},
		{queen.PushItem{Queue: "q", Partition: "a\x00b", Payload: payload(1)}, "items[0].partition"},
		{queen.PushItem{Queue: "q", Partition: "\xff\xfe", Payload: payload(1)}, "items[0].partition"},
		{queen.PushItem{Queue: "q", Partition: long, Payload: payload(1)}, "items[0].partition"},
		{queen.PushItem{Queue: "q", TransactionID: long, Payload: payload(1)}, "items[0].transactionId"},
		{queen.PushItem{Queue: "q", Payload: []byte(`{"a":`)}, "items[0].payload"},
		{queen.PushItem{Queue: "q", Payload: []byte("\"\xff\"")}, "items[0].payload"},
	}
	for _, b := range bad {
		_, err := e.Store.Push(ctx, []queen.PushItem{b.item})
		var fe *queen.FieldError
		if !errors.As(err, &fe) || fe.Field != b.field || !errors.Is(err, queen.ErrInvalid) {
			t.Errorf("push %+v: err %v, want invalid %s", b.item, err, b.field)
		}
	}
	if _, err := e.Store.Push(ctx, nil); !errors.Is(err, queen.ErrInvalid) {
		t.Errorf("empty push: %v", err)
	}
	for _, req := range []queen.PopRequest{{Queue: "q", Batch: -1}, {Queue: "q", Batch: queen.MaxBatch + 1}, {Queue: "bad name"}, {Queue: "q", Partitions: 1000}, {Queue: "q", Mode: "sometimes"}} {
		if _, err := e.Store.Pop(ctx, req); !errors.Is(err, queen.ErrInvalid) {
			t.Errorf("pop %+v: %v", req, err)
		}
	}
	if _, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "q", Options: queen.QueueOptions{LeaseTime: ptr(0)}}); !errors.Is(err, queen.ErrInvalid) {
		t.Errorf("configure leaseTime 0: %v", err)
	}
	if _, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "q", Options: queen.QueueOptions{EncryptionEnabled: ptr(true)}}); !errors.Is(err, queen.ErrKeyUnavailable) {
		t.Errorf("configure encryptionEnabled on a store without a key: %v, want ErrKeyUnavailable", err)
	}
	for _, table := range []string{"queues", "partitions", "segments", "dedup", "subscriptions"} {
		if n := count(t, e, "SELECT count(*) FROM queen."+table); n != 0 {
			t.Errorf("rejected requests wrote %d rows to %s", n, table)
		}
	}
}
