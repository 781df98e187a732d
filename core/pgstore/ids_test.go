package pgstore_test

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// An item pushed without a transactionId gets a generated UUIDv7 (semantics.md
// §3.2.3), returned to the caller; the engine generates it under the
// partition's lock so that it names the message's offset, and keeps no
// dedup key for it. A user must not be able to tell: each id is a fresh
// UUIDv7, and the id sent back later as the client's own is a duplicate of
// the message it names, in that partition only, on every push path.
func TestGeneratedIdsAreUUIDv7sThatDeduplicate(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	gen := func(partition string) queen.PushItem {
		return queen.PushItem{Queue: "g", Partition: partition, Payload: payload(partition)}
	}
	var stored []queen.PushResult
	for _, items := range [][]queen.PushItem{
		{gen("a")},                               // one message
		{gen("a"), gen("a"), gen("a")},           // a batch to one partition
		{gen("a"), gen("b"), gen("a"), gen("c")}, // spread over partitions
		{gen("b"), {Queue: "g", Partition: "b", Payload: payload(1), TransactionID: "mine"}, gen("b")}, // mixed
	} {
		res, err := e.Store.Push(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Status != queen.StatusQueued {
				t.Fatalf("push %d: %+v", i, r)
			}
			if items[i].TransactionID == "" {
				stored = append(stored, r)
			}
		}
	}
	seen := map[string]bool{}
	for _, r := range stored {
		if !uuidV7.MatchString(r.TransactionID) || seen[r.TransactionID] {
			t.Fatalf("generated transactionId %q: not a UUIDv7, or not unique (%v)", r.TransactionID, seen)
		}
		seen[r.TransactionID] = true
		// RFC 9562: the first 48 bits are the Unix time in milliseconds.
		var ms int64
		if _, err := fmt.Sscanf(r.TransactionID[:8]+r.TransactionID[9:13], "%x", &ms); err != nil ||
			ms != r.CreatedAt.UnixMilli() {
			t.Errorf("id %s holds time %d ms, the push's time is %d ms", r.TransactionID, ms, r.CreatedAt.UnixMilli())
		}
	}
	// Each id sent back: alone, in a batch to its partition, and in a push
	// that spans partitions, where it also goes to another partition.
	for _, r := range stored {
		again := queen.PushItem{Queue: "g", Partition: r.Partition, Payload: payload("again"), TransactionID: r.TransactionID}
		other := again
		other.Partition = "elsewhere"
		for _, items := range [][]queen.PushItem{
			{again},
			{again, {Queue: "g", Partition: r.Partition, Payload: payload("new")}},
			{other, again},
		} {
			res, err := e.Store.Push(ctx, items)
			if err != nil {
				t.Fatal(err)
			}
			i := len(items) - 1
			if items[0].Partition == r.Partition {
				i = 0
			}
			if res[i].Status != queen.StatusDuplicate || res[i].Offset != r.Offset || res[i].TransactionID != r.TransactionID {
				t.Errorf("%s sent back to %s: %+v, want a duplicate of offset %d", r.TransactionID, r.Partition, res[i], r.Offset)
			}
			if items[0].Partition == "elsewhere" && res[0].Status != queen.StatusQueued {
				t.Errorf("%s sent to another partition: %+v, want it queued (semantics.md §3.2.1)", r.TransactionID, res[0])
			}
		}
	}
}

// A message removed by retention while its id's window is open still
// makes that id a duplicate (semantics.md §3.2.1), a generated id as any other.
func TestGeneratedIdSentBackAfterRetentionIsADuplicate(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "r", queen.QueueOptions{DedupWindowSeconds: ptr(3600), RetentionSeconds: ptr(1)})
	stored := append(pushGenerated(t, e, "r", "p", 1), pushGenerated(t, e, "r", "p", 3)...)
	e.Clock.Advance(10 * time.Second)
	if st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100}); err != nil || st.SegmentsRetained != 2 {
		t.Fatalf("reap: %+v %v, want both segments removed by retention", st, err)
	}
	for _, r := range stored {
		res, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "r", Partition: "p", Payload: payload(0), TransactionID: r.TransactionID}})
		if err != nil || res[0].Status != queen.StatusDuplicate || res[0].Offset != r.Offset {
			t.Errorf("%s sent back 10 s after its push, its message gone: %+v %v, want a duplicate of offset %d",
				r.TransactionID, res, err, r.Offset)
		}
	}
	e.Clock.Advance(time.Hour)
	res, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "r", Partition: "p", Payload: payload(0), TransactionID: stored[1].TransactionID}})
	if err != nil || res[0].Status != queen.StatusQueued {
		t.Errorf("%s sent back after its window: %+v %v, want it queued", stored[1].TransactionID, res, err)
	}
}

// formID is an id in the generated form (migration 0015) that names
// offset off of partition number num, its free digits zero:
// xxxxxxxx-xxxx-7aKJ-8rrr-rrrrrrrrrrrr, K and J the number of hex digits of
// the offset and of the partition number, which end the last 15 digits.
func formID(num, off int64) string {
	n, o := strconv.FormatInt(num, 16), strconv.FormatInt(off, 16)
	digits := strings.Repeat("0", 15-len(n)-len(o)) + n + o
	return fmt.Sprintf("0190f0c2-1d3e-7a%x%x-8%s-%s", len(o), len(n), digits[:3], digits[3:])
}

// partitionNum is the number the engine gave a partition (what generated
// ids name).
func partitionNum(t *testing.T, e *pgstoretest.Env, queue, partition string) int64 {
	t.Helper()
	return count(t, e, `SELECT p.num FROM queen.partitions p JOIN queen.queues x ON x.id = p.queue_id
		WHERE x.name = $1 AND p.name = $2`, queue, partition)
}

// A client may send an id in the generated form itself. Whether it names
// the place its message lands at, another offset, another partition, or
// nothing that can be (digits that do not fit, not hex, upper case), the id
// deduplicates like any other.
func TestClientIdsInTheGeneratedForm(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "c", "p", "first", 1) // offset 0
	num := partitionNum(t, e, "c", "p")
	ids := []string{
		formID(num, 1),                               // names offset 1, where it lands
		formID(num, 9),                               // names offset 9, lands at 2
		formID(num+1, 3),                             // names another partition's offset 3
		"0190f0c2-1d3e-7aff-8000-000000000003",       // 15 + 15 digits: names nothing
		strings.Replace(formID(num, 5), "0", "g", 1), // not hex
		strings.ToUpper(formID(num, 6)),              // upper case: not the form
		formID(num, 1<<56-1),                         // an offset no partition reaches
	}
	for i, id := range ids {
		res, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "c", Partition: "p", Payload: payload(i), TransactionID: id}})
		if err != nil || res[0].Status != queen.StatusQueued || res[0].Offset != int64(i+1) {
			t.Fatalf("push %s: %+v %v, want it queued at offset %d", id, res, err, i+1)
		}
	}
	for i, id := range ids {
		for _, n := range []int{1, 2} { // alone and in a batch
			items := []queen.PushItem{{Queue: "c", Partition: "p", Payload: payload(i), TransactionID: id}}
			if n == 2 {
				items = append(items, queen.PushItem{Queue: "c", Partition: "p", Payload: payload(i)})
			}
			res, err := e.Store.Push(ctx, items)
			if err != nil || res[0].Status != queen.StatusDuplicate || res[0].Offset != int64(i+1) {
				t.Errorf("%s sent again: %+v %v, want a duplicate of offset %d", id, res, err, i+1)
			}
		}
	}
}

// Generated ids are unique across partitions too: one push to many new
// partitions, all at offset 0 in the same millisecond.
func TestGeneratedIdsOfOnePushAreDistinct(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	items := make([]queen.PushItem, 3000)
	for i := range items {
		items[i] = queen.PushItem{Queue: "wide", Partition: fmt.Sprintf("p%d", i), Payload: payload(i)}
	}
	res, err := e.Store.Push(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, r := range res {
		if j, ok := seen[r.TransactionID]; ok {
			t.Fatalf("items %d and %d (partitions %s and %s) both got %s", j, i, res[j].Partition, r.Partition, r.TransactionID)
		}
		seen[r.TransactionID] = i
	}
}

// An ack finds a message by its transactionId beyond the delivered window:
// a client id that names its own place (self-located, no key) stored after
// an older copy with a key must not pass for already committed.
// (Found by review.)
func TestAckFindsASelfLocatedCopyBeyondTheDeliveredWindow(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "q", queen.QueueOptions{DedupWindowSeconds: ptr(60)})
	pushQueued(t, e, "q", "m0")
	x := formID(partitionNum(t, e, "q", "p"), 10)
	pushQueued(t, e, "q", x) // offset 1, not where it names: a key row
	for i := 2; i < 10; i++ {
		pushQueued(t, e, "q", fmt.Sprintf("m%d", i))
	}
	e.Clock.Advance(61 * time.Second)
	pushQueued(t, e, "q", x) // past its window: stored again, at offset 10, which it names
	first := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 3})
	for _, m := range first.Messages {
		mustAck(t, e, ack(m, "g", first.LeaseID, queen.AckCompleted))
	}
	second := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 3})
	if got := offsets(second.Messages); !equal(got, []int64{3, 4, 5}) {
		t.Fatalf("second pop %v, want offsets 3..5", got)
	}
	_, err := e.Store.Ack(ctx, []queen.Ack{{PartitionID: second.Messages[0].PartitionID, TransactionID: x,
		Status: queen.AckCompleted, ConsumerGroup: "g"}})
	if !errors.Is(err, queen.ErrConflict) {
		t.Fatalf("ack of %s: %v, want a conflict (its copy at offset 10 was not delivered)", x, err)
	}
}

// A push made while the window was 0 records no key; a push whose key the
// reaper pruned under a short window keeps it out when the window grows.
// A generated id follows both rules (the model's). (Found by review.)
func TestGeneratedIdsFollowWindowChanges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		window  int
		advance time.Duration
		reap    bool
	}{
		{"pushed while the window was 0", 0, time.Second, false},
		{"key pruned under a shorter window", 60, 100 * time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := pgstoretest.NewClocked(t)
			configure(t, e, "w", queen.QueueOptions{DedupWindowSeconds: ptr(c.window)})
			res := pushGenerated(t, e, "w", "p", 1)
			e.Clock.Advance(c.advance)
			if c.reap {
				if _, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100}); err != nil {
					t.Fatal(err)
				}
			}
			e.Clock.Advance(time.Second)
			configure(t, e, "w", queen.QueueOptions{DedupWindowSeconds: ptr(3600)})
			e.Clock.Advance(time.Second)
			again, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "w", Partition: "p", Payload: payload(1), TransactionID: res[0].TransactionID}})
			if err != nil || again[0].Status != queen.StatusQueued || again[0].Offset != 1 {
				t.Fatalf("%s sent back: %+v %v, want it queued at offset 1", res[0].TransactionID, again, err)
			}
		})
	}
}

// An offset whose hex digits and the partition number's take more than 15
// does not fit a generated id: ids generated there are random, and
// deduplicate all the same.
func TestGeneratedIdsBeyondTheirOffsetRange(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "big", "p", "x", 1)
	num := int64(len(strconv.FormatInt(partitionNum(t, e, "big", "p"), 16)))
	last := int64(1)<<(4*(15-num)) - 3 // the next two fit, the third does not
	if _, err := e.Pool.Exec(ctx, `UPDATE queen.partitions SET last_offset = $1 WHERE name = 'p'`, last); err != nil {
		t.Fatal(err)
	}
	sentBack := func(res []queen.PushResult) {
		t.Helper()
		for _, r := range res {
			if !uuidV7.MatchString(r.TransactionID) {
				t.Fatalf("generated id %q at offset %d is not a UUIDv7", r.TransactionID, r.Offset)
			}
			again, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "big", Partition: r.Partition, Payload: payload(0), TransactionID: r.TransactionID}})
			if err != nil || again[0].Status != queen.StatusDuplicate || again[0].Offset != r.Offset {
				t.Errorf("%s (%s, offset %d) sent back: %+v %v, want a duplicate", r.TransactionID, r.Partition, r.Offset, again, err)
			}
		}
	}
	for _, n := range []int{3, 1} {
		sentBack(pushGenerated(t, e, "big", "p", n))
	}

	// The same in a push that spans partitions: q crosses the range in it,
	// r does not, and the log holds every id as the push returned it.
	pushN(t, e, "big", "q", "x", 1)
	pushN(t, e, "big", "r", "x", 1)
	num = int64(len(strconv.FormatInt(partitionNum(t, e, "big", "q"), 16)))
	last = int64(1)<<(4*(15-num)) - 3
	if _, err := e.Pool.Exec(ctx, `UPDATE queen.partitions SET last_offset = $1 WHERE name = 'q'`, last); err != nil {
		t.Fatal(err)
	}
	var items []queen.PushItem
	for i, part := range []string{"q", "r", "q", "q", "r", "q"} {
		items = append(items, queen.PushItem{Queue: "big", Partition: part, Payload: payload(i)})
	}
	res, err := e.Store.Push(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{last + 1, 1, last + 2, last + 3, 2, last + 4} {
		if res[i].Offset != want {
			t.Fatalf("item %d at offset %d, want %d", i, res[i].Offset, want)
		}
	}
	sentBack(res)
	for _, r := range res {
		var stored string
		if err := e.Pool.QueryRow(ctx, `SELECT txid FROM queen._message_at($1, $2)`,
			partitionNum(t, e, "big", r.Partition), r.Offset).Scan(&stored); err != nil || stored != r.TransactionID {
			t.Errorf("%s at offset %d: the log has %q (%v)", r.Partition, r.Offset, stored, err)
		}
	}
}

// The generated form, as the README and migration 0015 document it: the
// id names partition number and offset when their hex digits fit in 15
// together, and self_fits, which tells a push it may skip the key, says
// the same (a push that skipped a key for an id that names nothing would
// lose a duplicate).
func TestGeneratedIdFormNamesPartitionAndOffset(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	form := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7a([1-9a-f])([1-9a-f])-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for _, num := range []int64{1, 15, 16, 4095, 1 << 20, 1 << 40, 1<<56 - 1} {
		for _, off := range []int64{0, 1, 15, 16, 1 << 24, 1 << 44, 1<<52 - 1, 1 << 52, 1<<56 - 1, 1 << 60, 1<<63 - 1} {
			n, o := strconv.FormatInt(num, 16), strconv.FormatInt(off, 16)
			fits := len(n)+len(o) <= 15
			var id string
			var named *int64
			var selfFits bool
			if err := e.Pool.QueryRow(ctx, `SELECT x.id, queen.self_offset(x.id, $1), queen.self_fits($1, $2)
				FROM (SELECT queen.self_id(now(), $1, $2) AS id) x`, num, off).Scan(&id, &named, &selfFits); err != nil {
				t.Fatal(err)
			}
			if !uuidV7.MatchString(id) {
				t.Fatalf("partition %d offset %d: %q is not a UUIDv7", num, off, id)
			}
			m := form.FindStringSubmatch(id)
			digits := strings.ReplaceAll(id, "-", "")[17:]
			names := m != nil && m[1] == strconv.FormatInt(int64(len(o)), 16) && m[2] == strconv.FormatInt(int64(len(n)), 16) &&
				strings.HasSuffix(digits, n+o)
			if names != fits || selfFits != fits || (named != nil && *named == off) != fits {
				t.Errorf("partition %d offset %d: id %s names them %v, self_fits %v, self_offset %v; want all %v",
					num, off, id, names, selfFits, named, fits)
			}
		}
	}
}

// pushGenerated pushes n messages without transactionIds to one partition,
// in one request.
func pushGenerated(t *testing.T, e *pgstoretest.Env, queue, partition string, n int) []queen.PushResult {
	t.Helper()
	items := make([]queen.PushItem, n)
	for i := range items {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: payload(i)}
	}
	res, err := e.Store.Push(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A segment whose first message is self-located needs no first-key entry
// (migration 0015): its id is found at the offset it names. Since
// migration 0016 the pushes say which segments those are, so every path
// that writes a segment is held to it here, by counting the entries in the
// index itself: one for each segment whose first id names some other
// place or none, whoever made the id; and every id still deduplicates.
func TestSelfLocatedSegmentsHaveNoFirstKeyEntry(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	if _, err := e.Pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pageinspect"); err != nil {
		t.Skipf("counting index entries needs the pageinspect extension: %v", err)
	}
	gen := func(partition string) queen.PushItem {
		return queen.PushItem{Queue: "k", Partition: partition, Payload: payload(partition)}
	}
	mine := func(partition, id string) queen.PushItem {
		return queen.PushItem{Queue: "k", Partition: partition, Payload: payload(id), TransactionID: id}
	}
	var all []queen.PushResult
	push := func(items ...queen.PushItem) {
		t.Helper()
		all = append(all, pushAllQueued(t, e, items)...)
	}
	push(gen("a"))                  // a new partition (the careful way): no entry
	push(gen("a"))                  // one generated id (the fast way): no entry
	push(gen("a"), gen("a"))        // a batch of them: no entry
	push(mine("a", "m1"))           // one client id: an entry
	push(gen("a"), mine("a", "m2")) // mixed, a generated id first: no entry
	push(mine("a", "m3"), gen("a")) // a client id first: an entry
	num := partitionNum(t, e, "k", "a")
	next := all[len(all)-1].Offset + 1
	push(mine("a", formID(num, next)))   // a client's id that names its own place: no entry
	push(mine("a", formID(num, next+9))) // one that names another offset: an entry
	// Across partitions (_push): new partitions, then existing ones.
	push(gen("b"), mine("c", "m4"), gen("d"), mine("d", "m5")) // an entry for c
	push(gen("b"), mine("c", "m6"))                            // an entry for c
	const want = 5

	var entries int64
	if err := e.Pool.QueryRow(ctx, `
		SELECT coalesce(sum(s.live_items - CASE WHEN s.btpo_next <> 0 THEN 1 ELSE 0 END), 0)  -- less high keys
		FROM generate_series(1, (pg_relation_size('queen.segments_first_key') / current_setting('block_size')::int - 1)::int) b,
		     LATERAL bt_page_stats('queen.segments_first_key', b) s
		WHERE s.btpo_level = 0 AND s.type <> 'd'`).Scan(&entries); err != nil {
		t.Fatal(err)
	}
	if entries != want {
		t.Errorf("segments_first_key holds %d entries, want %d: one per segment whose first id does not name its place", entries, want)
	}
	for _, r := range all {
		res, err := e.Store.Push(ctx, []queen.PushItem{mine(r.Partition, r.TransactionID)})
		if err != nil || res[0].Status != queen.StatusDuplicate || res[0].Offset != r.Offset {
			t.Errorf("%s sent back to %s: %+v %v, want a duplicate of offset %d", r.TransactionID, r.Partition, res, err, r.Offset)
		}
	}
}
