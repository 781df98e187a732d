package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// summaryWant is what a queue's summaries should read, worked out from
// what the test did (SPEC §4: lag is lastOffset - committed, summed over
// partitions; depth what the slowest group has not consumed).
type summaryWant struct {
	partitions int
	messages   int64
	depth      int64
	lag        map[string]int64 // by group
}

// checkSummaries compares every reader of the summaries with want: the
// queue listing, the queue's detail, the stats pass and the group listing.
func checkSummaries(t *testing.T, e *pgstoretest.Env, queue string, want summaryWant, when string) {
	t.Helper()
	list, err := e.Store.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, q := range list {
		if q.Name != queue {
			continue
		}
		found = true
		if q.Partitions != want.partitions || q.Messages != want.messages || q.Depth != want.depth {
			t.Errorf("%s: listed %s: %d partitions, %d messages, depth %d; want %d, %d, %d", when, queue,
				q.Partitions, q.Messages, q.Depth, want.partitions, want.messages, want.depth)
		}
	}
	if !found {
		t.Errorf("%s: %s not listed", when, queue)
	}
	detail, err := e.Store.Queue(ctx, queue, queen.PartitionPage{})
	if err != nil {
		t.Fatal(err)
	}
	if detail.Depth != want.depth {
		t.Errorf("%s: detail depth %d, want %d", when, detail.Depth, want.depth)
	}
	got := map[string]int64{}
	for _, g := range detail.Groups {
		got[g.Group] = g.Lag
	}
	if fmt.Sprint(got) != fmt.Sprint(want.lag) {
		t.Errorf("%s: detail lags %v, want %v", when, got, want.lag)
	}
	st, err := e.Store.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Depth[queue] != want.depth || st.Partitions != int64(want.partitions) {
		t.Errorf("%s: stats depth %d, partitions %d; want %d, %d", when, st.Depth[queue], st.Partitions,
			want.depth, want.partitions)
	}
	got = map[string]int64{}
	for k, v := range st.Lag {
		got[k[:len(k)-len(queue)-1]] = v
	}
	if fmt.Sprint(got) != fmt.Sprint(want.lag) {
		t.Errorf("%s: stats lags %v, want %v", when, got, want.lag)
	}
	groups, err := e.Store.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]int64{}
	for _, g := range groups {
		got[g.Group] = g.Lag
	}
	if fmt.Sprint(got) != fmt.Sprint(want.lag) {
		t.Errorf("%s: listed group lags %v, want %v", when, got, want.lag)
	}
}

// foldInSmallBatches runs the summaries' fold a few partitions at a time,
// checking after each batch that what the readers see has not moved.
func foldInSmallBatches(t *testing.T, e *pgstoretest.Env, queue string, want summaryWant, when string) {
	t.Helper()
	for i := 0; ; i++ {
		var n int
		if err := e.Pool.QueryRow(ctx, `SELECT (queen.reap_step(NULL, 'summaries', 7, 0, 0)->>'n')::int`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		checkSummaries(t, e, queue, want, fmt.Sprintf("%s, fold batch %d", when, i))
		if n == 0 {
			return
		}
		if i > 100 {
			t.Fatalf("%s: the fold does not catch up", when)
		}
	}
}

// The summaries read exactly what the log and the cursors say, before,
// during and after their fold, as groups subscribe, consume and leave.
func TestSummariesStayExact(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	const parts = 50
	var items []queen.PushItem
	for p := range parts {
		for range 2 {
			items = append(items, queen.PushItem{Queue: "q", Partition: fmt.Sprintf("p%d", p), Payload: []byte(`1`)})
		}
	}
	pushAllQueued(t, e, items)
	want := summaryWant{partitions: parts, messages: 2 * parts, depth: 2 * parts, lag: map[string]int64{}}
	checkSummaries(t, e, "q", want, "pushed")
	foldInSmallBatches(t, e, "q", want, "pushed")

	// Group a subscribes and consumes p0 (2 messages).
	pop(t, e, queen.PopRequest{Queue: "q", Partition: "p0", ConsumerGroup: "a", Batch: 2, AutoAck: true})
	want.depth, want.lag["a"] = 2*parts-2, 2*parts-2
	checkSummaries(t, e, "q", want, "a consumed p0")
	foldInSmallBatches(t, e, "q", want, "a consumed p0")

	// Group b subscribes and consumes one message of p1: p0 is held back
	// by b, p1 by a, so nothing is consumed by every group.
	pop(t, e, queen.PopRequest{Queue: "q", Partition: "p1", ConsumerGroup: "b", Batch: 1, AutoAck: true})
	want.depth, want.lag["b"] = 2*parts, 2*parts-1
	checkSummaries(t, e, "q", want, "b consumed one of p1")
	foldInSmallBatches(t, e, "q", want, "b consumed one of p1")

	// A lease and a failure do not move a cursor; a completed ack does.
	r := pop(t, e, queen.PopRequest{Queue: "q", Partition: "p2", ConsumerGroup: "a", Batch: 2})
	mustAck(t, e, ack(r.Messages[0], "a", r.LeaseID, queen.AckCompleted), ack(r.Messages[1], "a", r.LeaseID, queen.AckFailed))
	want.lag["a"]--
	checkSummaries(t, e, "q", want, "a completed one of p2")

	// More pushes, to old partitions and a new one.
	pushAllQueued(t, e, []queen.PushItem{{Queue: "q", Partition: "p0", Payload: []byte(`1`)},
		{Queue: "q", Partition: "new", Payload: []byte(`1`)}})
	want.partitions, want.messages, want.depth = parts+1, 2*parts+2, 2*parts+2
	want.lag["a"] += 2
	want.lag["b"] += 2
	checkSummaries(t, e, "q", want, "pushed again")

	// b leaves: the depth is a's alone.
	if err := e.Store.DeleteGroup(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	delete(want.lag, "b")
	want.depth = want.lag["a"]
	checkSummaries(t, e, "q", want, "b left")
	foldInSmallBatches(t, e, "q", want, "b left")

	// b comes back, from the beginning.
	pop(t, e, queen.PopRequest{Queue: "q", Partition: "p3", ConsumerGroup: "b", Batch: 1})
	want.lag["b"], want.depth = want.messages, want.messages
	checkSummaries(t, e, "q", want, "b back")
	foldInSmallBatches(t, e, "q", want, "b back")
}

// Dead letters are counted per queue as they come and go.
func TestSummariesCountDeadLetters(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	pushN(t, e, "q", "p", "m", 3)
	r := pop(t, e, queen.PopRequest{Queue: "q", Partition: "p", ConsumerGroup: "g", Batch: 3})
	mustAck(t, e, ack(r.Messages[0], "g", r.LeaseID, queen.AckDLQ), ack(r.Messages[1], "g", r.LeaseID, queen.AckDLQ),
		ack(r.Messages[2], "g", r.LeaseID, queen.AckDLQ))
	dlq := func(want int64, when string) {
		t.Helper()
		st, err := e.Store.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.DLQ["q"] != want {
			t.Errorf("%s: stats count %d dead letters in q, want %d", when, st.DLQ["q"], want)
		}
	}
	dlq(3, "three dead-lettered")
	if _, err := e.Store.RetryDeadLetter(ctx, r.Messages[0].PartitionID, r.Messages[0].TransactionID, "g"); err != nil {
		t.Fatal(err)
	}
	dlq(2, "one retried")
	if _, err := e.Store.DeleteDeadLetter(ctx, r.Messages[1].PartitionID, r.Messages[1].TransactionID, "g"); err != nil {
		t.Fatal(err)
	}
	dlq(1, "one deleted")
	if err := e.Store.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	dlq(1, "queue deleted (dead letters outlive it)")
}

// tableReads is what one transaction read of the tables a summary could
// scan (pg_stat_xact_user_tables): rows read by sequential scans and rows
// fetched through indexes.
func tableReads(t *testing.T, tx pgx.Tx) (seq, idx int64) {
	t.Helper()
	if err := tx.QueryRow(ctx, `SELECT coalesce(sum(seq_tup_read), 0)::bigint, coalesce(sum(idx_tup_fetch), 0)::bigint
		FROM pg_stat_xact_user_tables
		WHERE schemaname = 'queen' AND relname IN ('partitions', 'consumers', 'segments', 'summary_parts')`).Scan(&seq, &idx); err != nil {
		t.Fatal(err)
	}
	return seq, idx
}

// TestSummariesReadWhatChanged: with 20,000 partitions stored and folded,
// a queue's summary reads a number of rows bounded by what changed since
// the fold (ten partitions pushed to), not by what is stored.
func TestSummariesReadWhatChanged(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	parts := 20000
	if testing.Short() {
		parts = 4000
	}
	for lo := 0; lo < parts; lo += 1000 {
		var items []queen.PushItem
		for p := lo; p < lo+1000; p++ {
			items = append(items, queen.PushItem{Queue: "big", Partition: fmt.Sprintf("p%d", p), Payload: []byte(`1`)})
		}
		pushAllQueued(t, e, items)
	}
	for _, g := range []string{"a", "b"} {
		pop(t, e, queen.PopRequest{Queue: "big", Partition: "p0", ConsumerGroup: g, Batch: 1, AutoAck: true})
	}
	for {
		st, err := e.Store.Reap(ctx, queen.ReapRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if st.SummariesFolded == 0 {
			break
		}
	}
	for p := range 10 {
		pushN(t, e, "big", fmt.Sprintf("p%d", p), fmt.Sprintf("again%d", p), 1)
	}

	tx := ownTx(t, e)
	rows, err := tx.Query(ctx, `SELECT s.group_name, s.partitions, s.messages, s.lag
		FROM queen.queues x CROSS JOIN LATERAL queen.summary(x.id) s WHERE x.name = 'big' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][3]int64{}
	for rows.Next() {
		var g string
		var v [3]int64
		if err := rows.Scan(&g, &v[0], &v[1], &v[2]); err != nil {
			t.Fatal(err)
		}
		got[g] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	seq, idx := tableReads(t, tx)
	n := int64(parts)
	// (both groups consumed the first message of p0, pushed to again)
	want := map[string][3]int64{"": {n, n + 10, n + 9}, "a": {1, 0, n + 9}, "b": {1, 0, n + 9}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("summary %v, want %v", got, want)
	}
	t.Logf("a summary read %d rows by scans, %d through indexes, with %d partitions stored and 10 changed", seq, idx, parts)
	if seq != 0 || idx > 200 {
		t.Errorf("a summary read %d rows by scans and %d through indexes: want no scan and at most 200 rows for 10 changed partitions",
			seq, idx)
	}
}
