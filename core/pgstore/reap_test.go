package pgstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

func TestReaperRetentionAndDedup(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "done", queen.QueueOptions{CompletedRetentionSeconds: ptr(60), DedupWindowSeconds: ptr(30)})
	pushN(t, e, "done", "p", "a", 2)
	pushN(t, e, "done", "p", "b", 2)
	r := pop(t, e, queen.PopRequest{Queue: "done", ConsumerGroup: "g1", Batch: 2})
	mustAck(t, e, ack(r.Messages[1], "g1", r.LeaseID, queen.AckCompleted))
	r = pop(t, e, queen.PopRequest{Queue: "done", ConsumerGroup: "g2", Batch: 4})
	mustAck(t, e, ack(r.Messages[3], "g2", r.LeaseID, queen.AckCompleted))

	e.Clock.Advance(45 * time.Second)
	st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100})
	// Four keys, of which the two of the segments' first messages are
	// their segments' (they leave with them): two key rows to prune.
	if err != nil || st.DedupPruned != 2 || st.SegmentsCompleted != 0 {
		t.Fatalf("reap at 45 s: %+v %v, want 2 dedup key rows pruned and nothing completed yet", st, err)
	}
	if res := pushN(t, e, "done", "p", "a", 1); res[0].Status != queen.StatusQueued {
		t.Fatalf("key after its window: %s", res[0].Status)
	}
	e.Clock.Advance(30 * time.Second)
	st, err = e.Store.Reap(ctx, queen.ReapRequest{Batch: 100})
	if err != nil || st.SegmentsCompleted != 1 {
		t.Fatalf("reap at 75 s: %+v %v, want only the segment both groups committed", st, err)
	}
	// Caught up, and idempotent.
	st, _ = e.Store.Reap(ctx, queen.ReapRequest{Batch: 100})
	if st.Did() || st.Behind {
		t.Fatalf("second reap did work: %+v", st)
	}
}

// A reaper pass whose time is up stops after a round of one batch of each
// kind and says what it left; the next pass catches up on all of it.
func TestReaperPassLeavesBacklogAndCatchesUp(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "busy", queen.QueueOptions{LeaseTime: ptr(10), RetentionSeconds: ptr(60), DedupWindowSeconds: ptr(30)})
	for i := range 8 {
		part := fmt.Sprintf("p%d", i)
		// Three client-made ids: the segment holds the first key, two key
		// rows go to the dedup table.
		pushN(t, e, "busy", part, "k"+part, 3)
		if r := pop(t, e, queen.PopRequest{Queue: "busy", Partition: part, ConsumerGroup: "g", Batch: 3}); len(r.Messages) != 3 {
			t.Fatalf("pop %s: %d messages", part, len(r.Messages))
		}
	}
	// Every lease expired, every key past its window, every segment past
	// its retention: 8 leases, 16 key rows, 8 segments.
	e.Clock.Advance(61 * time.Second)

	st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 3, Deadline: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// (and the summaries' first batch folds in three of the partitions
	// pushed to)
	want := queen.ReapStats{LeasesExpired: 3, DedupPruned: 3, SegmentsRetained: 3, SummariesFolded: 3, Batches: 6, Behind: true,
		Backlog: queen.ReapBacklog{Leases: 5, Dedup: 13, Retention: 5}}
	if st != want {
		t.Fatalf("pass out of time:\n got %+v\nwant %+v", st, want)
	}

	st, err = e.Store.Reap(ctx, queen.ReapRequest{Batch: 3})
	if err != nil || st.Behind || st.Backlog != (queen.ReapBacklog{}) ||
		st.LeasesExpired != 5 || st.DedupPruned != 13 || st.SegmentsRetained != 5 {
		t.Fatalf("pass without a deadline: %+v %v, want the rest done and nothing left", st, err)
	}
	if d := depth(t, e, "busy"); d != 0 {
		t.Errorf("depth after retention %d, want 0", d)
	}
	if res := pushN(t, e, "busy", "p0", "kp0", 1); res[0].Status != queen.StatusQueued {
		t.Errorf("a key past its window still deduplicates: %s", res[0].Status)
	}
}

// A queue that sets no retention, or turns it off, keeps its messages for
// the deployment's default; one that sets its own keeps them for that.
func TestDeploymentDefaultRetention(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	cfg := pgstoretest.StoreConfig()
	cfg.Clock = e.Clock.Now
	cfg.DefaultRetentionSeconds = 100
	e.Store = pgstore.New(e.Pool, cfg)

	configure(t, e, "own", queen.QueueOptions{RetentionSeconds: ptr(1000)})
	configure(t, e, "off", queen.QueueOptions{RetentionSeconds: ptr(10), RetentionEnabled: ptr(false)})
	for _, q := range []string{"unset", "own", "off"} {
		pushN(t, e, q, "p", "x", 2)
		detail, err := e.Store.Queue(ctx, q, queen.PartitionPage{})
		if err != nil {
			t.Fatal(err)
		}
		want := 100
		if q == "own" {
			want = 1000
		}
		if got := detail.Options.EffectiveRetentionSeconds; got != want {
			t.Errorf("%s: effectiveRetentionSeconds %d, want %d", q, got, want)
		}
	}
	e.Clock.Advance(99 * time.Second)
	if st, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil || st.SegmentsRetained != 0 {
		t.Fatalf("reap at 99 s: %+v %v, want nothing retained", st, err)
	}
	e.Clock.Advance(2 * time.Second)
	if st, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil || st.SegmentsRetained != 2 {
		t.Fatalf("reap at 101 s: %+v %v, want the segments of unset and off retained", st, err)
	}
	for q, want := range map[string]int64{"unset": 0, "off": 0, "own": 2} {
		if d := depth(t, e, q); d != want {
			t.Errorf("%s: depth %d, want %d", q, d, want)
		}
	}
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

// Lease batches run side by side, in one pass and in passes that overlap,
// and beside pops that notice the same expiries: each expired lease is one
// failed attempt of its head, counted once (semantics.md §3.5.8). The head
// comes back alone, after the retryDelay counted from the lease's end
// (§3.4.4), and is dead-lettered on its (retryLimit+1)-th failed attempt,
// its neighbour untouched.
func TestConcurrentLeaseBatchesExpireEachLeaseOnce(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	const parts, passes = 200, 4
	configure(t, e, "q", queen.QueueOptions{LeaseTime: ptr(10), RetryLimit: ptr(1), RetryDelay: ptr(5000)})
	var items []queen.PushItem
	for i := range parts {
		for j := range 2 {
			items = append(items, queen.PushItem{Queue: "q", Partition: fmt.Sprintf("p%d", i), Payload: payload(j)})
		}
	}
	pushAllQueued(t, e, items)
	popAll := func(want []int64, retryCount int) {
		t.Helper()
		for i := range parts {
			r := pop(t, e, queen.PopRequest{Queue: "q", Partition: fmt.Sprintf("p%d", i), Batch: 2})
			if !equal(offsets(r.Messages), want) || r.Messages[0].RetryCount != retryCount {
				t.Fatalf("p%d: got %+v, want offsets %v, the first with retryCount %d", i, r.Messages, want, retryCount)
			}
		}
	}
	// reapAll runs overlapping passes, each with side by side batches of 7
	// leases, while race pops every partition at the same time.
	reapAll := func(race func(i int)) queen.ReapStats {
		t.Helper()
		stats := make([]queen.ReapStats, passes)
		errs := make([]error, passes)
		var wg sync.WaitGroup
		for k := range passes {
			wg.Go(func() { stats[k], errs[k] = e.Store.Reap(ctx, queen.ReapRequest{Batch: 7}) })
		}
		if race != nil {
			for i := range parts {
				wg.Go(func() { race(i) })
			}
		}
		wg.Wait()
		var sum queen.ReapStats
		for k, st := range stats {
			if errs[k] != nil {
				t.Fatalf("pass %d: %v", k, errs[k])
			}
			sum.LeasesExpired += st.LeasesExpired
			sum.DeadLettered += st.DeadLettered
		}
		return sum
	}

	// A first delivery of both messages; every consumer dies.
	popAll([]int64{0, 1}, 0)
	e.Clock.Advance(11 * time.Second)
	if st := reapAll(nil); st.LeasesExpired != parts || st.DeadLettered != 0 {
		t.Fatalf("first expiry: %d leases expired, %d dead-lettered, want %d and 0", st.LeasesExpired, st.DeadLettered, parts)
	}
	if st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 7}); err != nil || st.LeasesExpired != 0 {
		t.Fatalf("reap after the expiries: %+v %v, want nothing left to expire", st, err)
	}
	// One attempt counted: the head alone, once the retryDelay after the
	// lease's end (10 s + 5 s) has passed.
	if r := pop(t, e, queen.PopRequest{Queue: "q", Batch: 2}); len(r.Messages) != 0 {
		t.Fatalf("pop inside the retryDelay got %+v, want nothing", r.Messages)
	}
	e.Clock.Advance(4 * time.Second)
	popAll([]int64{0}, 1)

	// The second failed attempt (retryLimit 1) dead-letters the head,
	// whether the reaper or the pop notices the expiry; the neighbour comes
	// next, on its first attempt.
	e.Clock.Advance(11 * time.Second)
	popped := make([][]queen.Message, parts)
	popErrs := make([]error, parts)
	st := reapAll(func(i int) {
		r, err := e.Store.Pop(ctx, queen.PopRequest{Queue: "q", Partition: fmt.Sprintf("p%d", i), Batch: 2})
		popped[i], popErrs[i] = r.Messages, err
	})
	if st.LeasesExpired > parts || st.DeadLettered != st.LeasesExpired {
		t.Fatalf("second expiry: %d leases expired, %d dead-lettered, want as many, at most %d",
			st.LeasesExpired, st.DeadLettered, parts)
	}
	for i := range parts {
		if popErrs[i] != nil {
			t.Fatalf("p%d: pop beside the reaper: %v", i, popErrs[i])
		}
		if len(popped[i]) == 0 {
			// It found the cursor held by a batch: the partition was busy.
			popped[i] = pop(t, e, queen.PopRequest{Queue: "q", Partition: fmt.Sprintf("p%d", i), Batch: 2}).Messages
		}
		if m := popped[i]; !equal(offsets(m), []int64{1}) || m[0].RetryCount != 0 {
			t.Fatalf("p%d after its head was dead-lettered: got %+v, want offset 1 on its first attempt", i, m)
		}
	}
	if n := count(t, e, "SELECT count(*) FROM queen.dlq WHERE msg_offset = 0 AND attempts = 2"); n != parts {
		t.Fatalf("%d heads dead-lettered after 2 attempts, want %d", n, parts)
	}
	if n := count(t, e, "SELECT count(*) FROM queen.dlq"); n != parts {
		t.Fatalf("%d dead letters, want %d", n, parts)
	}
}

// segmentReads is what one transaction did to queen.segments: sequential
// scans, rows fetched through indexes, rows deleted (the backend's own
// statistics of the transaction, pg_stat_xact_user_tables).
type segmentReads struct{ SeqScans, IndexFetches, Deleted int64 }

// TestRetentionReadsWhatIsDue: with a million segments stored that are
// not due (a week's window) beside a thousand that are (a minute's), a
// retention batch deletes exactly the due ones and reads a number of
// segment rows bounded by what is due, never the stored log (no scan of
// the table, no walk of the partitions that have nothing due).
func TestRetentionReadsWhatIsDue(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	const parts = 1000
	perPart := 1000 // a million stored segments
	if testing.Short() {
		perPart = 100
	}
	configure(t, e, "long", queen.QueueOptions{RetentionSeconds: ptr(7 * 24 * 3600)})
	configure(t, e, "short", queen.QueueOptions{RetentionSeconds: ptr(60)})
	var items []queen.PushItem
	for p := range parts {
		items = append(items, queen.PushItem{Queue: "long", Partition: fmt.Sprintf("p%d", p), Payload: []byte(`{"n":1}`)})
	}
	if _, err := e.Store.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	// Each long partition's one segment, repeated at the next offsets as
	// its later pushes would have written it.
	if _, err := e.Pool.Exec(ctx, `
		INSERT INTO queen.segments
		SELECT (jsonb_populate_record(s, jsonb_build_object('base_offset', s.base_offset + g))).*
		FROM queen.segments s
		JOIN queen.partitions p ON p.num = s.partition_num
		JOIN queen.queues x ON x.id = p.queue_id AND x.name = 'long'
		CROSS JOIN generate_series(1, $1::int - 1) g`, perPart); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE queen.partitions p SET last_offset = $1::int - 1
		FROM queen.queues x WHERE x.id = p.queue_id AND x.name = 'long'`, perPart); err != nil {
		t.Fatal(err)
	}
	// A first pass looks once at every partition pushed to since the
	// last (a cost of the writes, not of what is stored).
	if _, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil {
		t.Fatal(err)
	}
	const due = 1000 // ten segments in each of a hundred partitions
	for round := range 10 {
		for i := range due / 10 {
			pushN(t, e, "short", fmt.Sprintf("s%d", i), fmt.Sprintf("r%d-", round), 1)
		}
	}
	e.Clock.Advance(61 * time.Second)

	tx := ownTx(t, e)
	var res struct{ N, Rows int }
	if err := tx.QueryRow(ctx, `SELECT (r->>'n')::int, (r->>'rows')::int
		FROM queen.reap_step($1, 'retention', 2000, 0, 0) r`, e.Clock.Now()).Scan(&res.N, &res.Rows); err != nil {
		t.Fatal(err)
	}
	var reads segmentReads
	if err := tx.QueryRow(ctx, `SELECT seq_scan, coalesce(idx_tup_fetch, 0), n_tup_del
		FROM pg_stat_xact_user_tables WHERE schemaname = 'queen' AND relname = 'segments'`).Scan(
		&reads.SeqScans, &reads.IndexFetches, &reads.Deleted); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res.N != due || reads.Deleted != due {
		t.Errorf("the batch deleted %d segments (%d by the statistics), want the %d due", res.N, reads.Deleted, due)
	}
	// Each due segment is read once, and in each partition a segment or
	// two more.
	t.Logf("retention read %+v of queen.segments", reads)
	if limit := int64(due + 2*due/10); reads.SeqScans != 0 || reads.IndexFetches > limit {
		t.Errorf("retention read %+v of queen.segments for %d due segments among %d stored: "+
			"want no scan and at most %d rows", reads, due, parts*perPart, limit)
	}
	var long, short int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE x.name = 'long'), count(*) FILTER (WHERE x.name = 'short')
		FROM queen.segments s JOIN queen.partitions p ON p.num = s.partition_num JOIN queen.queues x ON x.id = p.queue_id`).Scan(&long, &short); err != nil {
		t.Fatal(err)
	}
	if long != parts*perPart || short != 0 {
		t.Errorf("after the batch: %d long segments (want %d), %d short (want 0)", long, parts*perPart, short)
	}
}

// Partitions pushed to since retention last looked are looked at first;
// a batch full of first looks is not taken for caught up, so one pass
// still reaches the due segments behind a burst of new partitions.
func TestRetentionIsNotHeldUpByNewPartitions(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "long", queen.QueueOptions{RetentionSeconds: ptr(7 * 24 * 3600)})
	configure(t, e, "short", queen.QueueOptions{RetentionSeconds: ptr(60)})
	for i := range 3 {
		pushN(t, e, "short", fmt.Sprintf("s%d", i), "", 1)
	}
	// Looked at once: their oldest segment's time is known.
	if st, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil || st.SegmentsRetained != 0 {
		t.Fatalf("reap before anything is due: %+v %v", st, err)
	}
	e.Clock.Advance(61 * time.Second)
	var items []queen.PushItem
	for p := range 50 {
		items = append(items, queen.PushItem{Queue: "long", Partition: fmt.Sprintf("p%d", p), Payload: []byte(`1`)})
	}
	if _, err := e.Store.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 4})
	if err != nil || st.SegmentsRetained != 3 {
		t.Fatalf("one pass with batches of 4 behind 50 new partitions: %+v %v, want the 3 due segments removed", st, err)
	}
}

// Completed retention goes round the partitions old enough, from where
// its last batch stopped: partitions a group holds back (it stopped
// reading them) cost a batch of visits per pass, and the due segments of
// a partition the group consumed behind them are all deleted within a
// round, also when they take several batches.
func TestCompletedRetentionGoesRound(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "cq", queen.QueueOptions{CompletedRetentionSeconds: ptr(60)})
	for i := range 30 {
		pushN(t, e, "cq", fmt.Sprintf("held%02d", i), fmt.Sprintf("h%d-", i), 1)
	}
	for i := range 50 {
		pushN(t, e, "cq", "done", fmt.Sprintf("d%d-", i), 1) // fifty segments
	}
	r := pop(t, e, queen.PopRequest{Queue: "cq", Partition: "done", ConsumerGroup: "g", Batch: 50})
	if len(r.Messages) != 50 {
		t.Fatalf("pop done: %d messages", len(r.Messages))
	}
	mustAck(t, e, ack(r.Messages[49], "g", r.LeaseID, queen.AckCompleted))
	// The other partitions g holds back: it never reads them.
	if _, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil { // first looks
		t.Fatal(err)
	}
	e.Clock.Advance(61 * time.Second)
	deleted := 0
	for pass := 1; pass <= 4 && deleted < 50; pass++ {
		st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 10})
		if err != nil {
			t.Fatal(err)
		}
		deleted += st.SegmentsCompleted
		t.Logf("pass %d: %+v", pass, st)
	}
	if deleted != 50 {
		t.Fatalf("four passes of batches of 10 behind 30 held-back partitions deleted %d of the 50 consumed segments", deleted)
	}
	if n := count(t, e, "SELECT count(*) FROM queen.segments"); n != 30 {
		t.Fatalf("%d segments left, want the 30 held back", n)
	}
}
