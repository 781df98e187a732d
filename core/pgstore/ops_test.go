package pgstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

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

// SQL metacharacters in names are just characters and round-trip exactly.
func TestNamesRoundTrip(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	queue := "q/DROP:TABLE@x.y-z_1"
	partition := `p"'); DELETE FROM queen.queues; -- ünï 🚀 \ %`
	group := `g' OR '1'='1`
	tx := `tx'";--`
	if _, err := e.Store.Push(ctx, []queen.PushItem{{Queue: queue, Partition: partition, TransactionID: tx, Payload: []byte(`"'; SELECT 1; --"`)}}); err != nil {
		t.Fatal(err)
	}
	r := pop(t, e, queen.PopRequest{Queue: queue, Partition: partition, ConsumerGroup: group})
	if len(r.Messages) != 1 || r.Messages[0].Queue != queue || r.Messages[0].Partition != partition ||
		r.Messages[0].TransactionID != tx || string(r.Messages[0].Data) != `"'; SELECT 1; --"` {
		t.Fatalf("round trip: %+v", r.Messages)
	}
	mustAck(t, e, ack(r.Messages[0], group, r.LeaseID, queen.AckCompleted))
	d, err := e.Store.Queue(ctx, queue)
	if err != nil || d.Name != queue || len(d.Partitions) != 1 || d.Partitions[0].Name != partition ||
		len(d.Groups) != 1 || d.Groups[0].Group != group || d.Groups[0].Lag != 0 {
		t.Fatalf("queue detail %+v %v", d, err)
	}
}

func TestListingsAndLag(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	q, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "q", Namespace: "ns", Options: queen.QueueOptions{LeaseTime: ptr(60), Priority: ptr(5)}})
	if err != nil || q.Options.LeaseTime != 60 || q.Options.RetryLimit != queen.DefaultRetryLimit || q.Namespace != "ns" {
		t.Fatalf("configure: %+v %v", q, err)
	}
	// Partial update keeps the other options.
	q, _ = e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "q", Options: queen.QueueOptions{RetryLimit: ptr(7)}})
	if q.Options.LeaseTime != 60 || q.Options.RetryLimit != 7 || q.Namespace != "ns" {
		t.Fatalf("partial update: %+v", q)
	}
	pushN(t, e, "q", "a", "a", 5)
	pushN(t, e, "q", "b", "b", 3)
	r := pop(t, e, queen.PopRequest{Queue: "q", Partition: "a", ConsumerGroup: "g", Batch: 2})
	mustAck(t, e, ack(r.Messages[1], "g", r.LeaseID, queen.AckCompleted))

	groups, err := e.Store.ListGroups(ctx)
	if err != nil || len(groups) != 1 || groups[0].Group != "g" || groups[0].Lag != 6 {
		t.Fatalf("groups %+v %v, want g with lag 3 (a) + 3 (b) = 6", groups, err)
	}
	g, err := e.Store.Group(ctx, "g")
	if err != nil || len(g.Queues) != 1 || len(g.Queues[0].Cursors) != 2 || g.Queues[0].Cursors[0].Lag != 3 || g.Queues[0].Cursors[0].Committed != 1 {
		t.Fatalf("group detail %+v %v", g, err)
	}
	qs, err := e.Store.ListQueues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Partitions != 2 || qs[0].Messages != 8 || qs[0].Depth != 6 {
		t.Fatalf("queues %+v %v", qs, err)
	}
	msgs, err := e.Store.Browse(ctx, queen.BrowseRequest{Queue: "q", Partition: "a", FromOffset: 3})
	if err != nil || !equal(browsedOffsets(msgs), []int64{3, 4}) {
		t.Fatalf("browse from 3: %v %v", browsedOffsets(msgs), err)
	}
	if err := e.Store.DeleteGroup(ctx, "g", "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Group(ctx, "g"); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("deleted group: %v", err)
	}
	if err := e.Store.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Queue(ctx, "q"); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("deleted queue: %v", err)
	}
	if err := e.Store.DeleteQueue(ctx, "q"); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// Migrations are idempotent and safe when several processes start at once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	if _, err := e.Pool.Exec(ctx, "DROP SCHEMA queen CASCADE"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	applied := make([]int, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := pgstore.MigrateURL(ctx, e.URL)
			errs[i], applied[i] = err, len(res.Applied)
		}()
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrator %d: %v", i, err)
		}
		total += applied[i]
	}
	if total != len(pgstore.Migrations()) {
		t.Fatalf("migrations applied %d times in all, want each once (%d)", total, len(pgstore.Migrations()))
	}
	pushN(t, e, "q", "p", "m", 1)
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
	want := queen.ReapStats{LeasesExpired: 3, DedupPruned: 3, SegmentsRetained: 3, Batches: 4, Behind: true,
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
		detail, err := e.Store.Queue(ctx, q)
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

// depth is a queue's depth as its detail reports it.
func depth(t *testing.T, e *pgstoretest.Env, queue string) int64 {
	t.Helper()
	d, err := e.Store.Queue(ctx, queue)
	if err != nil {
		t.Fatalf("queue %s: %v", queue, err)
	}
	return d.Depth
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
