package pgstore_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// The Go core renders the ids a push generated (pgstore.GeneratedID) from
// what the push returns; pops, browsing, acks and dedup read them from the
// log (queen.gen_id). A user sees one id per message, so the two must
// agree everywhere: random places, times and seeds, and the edges of the
// form (no filler digits left, the longest filler, negative seeds, times
// before 1970 and past the 48 bits of a UUIDv7's time).
func TestGeneratedIDIsTheLogsID(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var ats []time.Time
	var nums, offs, seeds []int64
	add := func(at time.Time, num, off, s int64) {
		ats, nums, offs, seeds = append(ats, at.Truncate(time.Microsecond)), append(nums, num), append(offs, off), append(seeds, s)
	}
	for range 3000 {
		nd := 1 + rng.IntN(14)                 // hex digits of the partition number
		od := 1 + rng.IntN(15-nd)              // and of the offset: they fit
		num := 1 + rng.Int64N(1<<(4*nd)-1)     // at most nd digits
		off := rng.Int64N(1 << (4 * od))       // at most od digits
		at := time.UnixMicro(rng.Int64N(4e15)) // 1970 to ~2096
		add(at, num, off, rng.Int64()-rng.Int64())
	}
	add(time.Unix(0, 0), 1, 0, 0)
	add(time.Unix(-86400, 0), 1, 0, -1)                        // before 1970: time 0
	add(time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), 1, 1, 1) // 13 hex digits of ms
	add(time.Now(), 1<<56-1, 1<<(4*1)-1, 1<<63-1)              // 14 + 1 digits: no filler
	add(time.Now(), 1, 0, -1<<63)                              // the longest filler
	add(time.Now(), 0xabc, 0xfffffffffff, 0x5555555555555555)  // 3 + 11 digits
	rows, err := e.Pool.Query(ctx, `SELECT queen.gen_id(u.at, u.num, u.off, u.seed), queen.self_offset(queen.gen_id(u.at, u.num, u.off, u.seed), u.num)
		FROM unnest($1::timestamptz[], $2::bigint[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS u(at, num, off, seed, o)
		ORDER BY u.o`, ats, nums, offs, seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var sqlID string
		var named *int64
		if err := rows.Scan(&sqlID, &named); err != nil {
			t.Fatal(err)
		}
		goID := pgstore.GeneratedID(ats[i], nums[i], offs[i], seeds[i])
		if goID != sqlID {
			t.Errorf("at %s, partition %d, offset %d, seed %d: Go %s, SQL %s", ats[i].Format(time.RFC3339Nano),
				nums[i], offs[i], seeds[i], goID, sqlID)
		}
		if !uuidV7.MatchString(goID) || named == nil || *named != offs[i] {
			t.Errorf("%s (partition %d, offset %d): a UUIDv7 naming that offset? self_offset gives %v",
				goID, nums[i], offs[i], named)
		}
	}
	if err := rows.Err(); err != nil || i != len(ats) {
		t.Fatalf("%d of %d ids compared: %v", i, len(ats), err)
	}
}

// A message's id is derived from its address: the Go core renders it for
// pushes and pops (pgstore.MessageID), the log for dead letters
// (queen.message_id). Both must give the same id for every address.
func TestMessageIDIsTheLogsID(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var pids []string
	var offs []int64
	for i := range 2000 {
		var b [16]byte
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		pids = append(pids, fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
		offs = append(offs, []int64{0, 1, 9, 10, rng.Int64N(1 << 20), rng.Int64(), 1<<63 - 1}[i%7])
	}
	rows, err := e.Pool.Query(ctx, `SELECT queen.message_id(u.pid, u.off)::text
		FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY AS u(pid, off, o) ORDER BY u.o`, pids, offs)
	if err != nil {
		t.Fatal(err)
	}
	sqlIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(sqlIDs) != len(pids) {
		t.Fatalf("%d ids for %d addresses: %v", len(sqlIDs), len(pids), err)
	}
	for i, sqlID := range sqlIDs {
		if goID := pgstore.MessageID(pids[i], offs[i]); goID != sqlID {
			t.Errorf("partition %s, offset %d: Go %s, SQL %s", pids[i], offs[i], goID, sqlID)
		}
	}
}

// A push's generated ids are not stored (migration 0017): the log keeps one
// seed per segment. What a user sees is unchanged: each message is popped,
// browsed and acknowledged under the id its push returned, on every push
// path; a segment that also holds a client's id keeps every id.
func TestGeneratedIdsAreDerivedNotStored(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	gen := func(partition string) queen.PushItem {
		return queen.PushItem{Queue: "d", Partition: partition, Payload: payload(partition)}
	}
	mine := queen.PushItem{Queue: "d", Partition: "c", Payload: payload("mine"), TransactionID: "mine-1"}
	pushes := [][]queen.PushItem{
		{gen("a")},                               // a new partition (the careful way)
		{gen("a")},                               // one message (the fast way)
		{gen("a"), gen("a"), gen("a")},           // a batch to one partition
		{gen("b"), gen("a"), gen("b"), gen("c")}, // spread over partitions
		{gen("c"), mine, gen("c")},               // with a client's id: every id stored
	}
	byPartition := map[string][]queen.PushResult{}
	for _, items := range pushes {
		for _, r := range pushAllQueued(t, e, items) {
			byPartition[r.Partition] = append(byPartition[r.Partition], r)
		}
	}
	// a, b: no id stored; c: its first segment none, its second all three.
	if n := count(t, e, `SELECT count(*) FROM queen.segments WHERE id_seed IS NULL`); n != 1 {
		t.Errorf("%d segments store their ids, want 1 (the one with the client's id)", n)
	}
	if n := count(t, e, `SELECT count(*) FROM queen.segments WHERE id_seed IS NOT NULL
		AND (txid IS NOT NULL OR txids IS NOT NULL OR NOT located)`); n != 0 {
		t.Errorf("%d segments of derived ids store an id or are not self-located", n)
	}
	if n := count(t, e, `SELECT count(*) FROM queen.segments WHERE cardinality(txids) = 3`); n != 1 {
		t.Errorf("the segment with a client's id stores %d arrays of 3 ids, want 1", n)
	}
	for partition, pushed := range byPartition {
		browsed, err := e.Store.Browse(ctx, queen.BrowseRequest{Queue: "d", Partition: partition, Limit: 100})
		if err != nil || len(browsed) != len(pushed) {
			t.Fatalf("browse %s: %d messages %v, want %d", partition, len(browsed), err, len(pushed))
		}
		p := pop(t, e, queen.PopRequest{Queue: "d", Partition: partition, Batch: 100, ConsumerGroup: "g"})
		if len(p.Messages) != len(pushed) {
			t.Fatalf("pop %s: %d messages, want %d", partition, len(p.Messages), len(pushed))
		}
		for i, r := range pushed {
			if m := p.Messages[i]; m.TransactionID != r.TransactionID || m.Offset != r.Offset || m.ID != r.MessageID {
				t.Errorf("%s: popped %s at %d (%s), pushed %s at %d (%s)", partition, m.TransactionID, m.Offset, m.ID,
					r.TransactionID, r.Offset, r.MessageID)
			}
			if b := browsed[i]; b.TransactionID != r.TransactionID || b.Offset != r.Offset {
				t.Errorf("%s: browsed %s at %d, pushed %s at %d", partition, b.TransactionID, b.Offset, r.TransactionID, r.Offset)
			}
		}
		// Acked by id, one before the last: the cursor moves there.
		m := p.Messages[max(len(p.Messages)-2, 0)]
		if res := mustAck(t, e, ack(m, "g", p.LeaseID, queen.AckCompleted)); !res[0].Success {
			t.Errorf("ack %s of %s: %+v", m.TransactionID, partition, res[0])
		}
		if c := cursor(t, e, m.PartitionID, "g"); c != m.Offset {
			t.Errorf("%s: cursor at %d after the ack of %s at %d", partition, c, m.TransactionID, m.Offset)
		}
	}
	if n := len(byPartition["a"]) + len(byPartition["b"]) + len(byPartition["c"]); n != 12 {
		t.Fatalf("%d messages pushed, want 12", n)
	}
}
