package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// An item pushed without a transactionId gets a generated UUIDv7 (SPEC
// §3.2), returned to the caller; the engine generates it under the
// partition's lock so that it names the message's offset, and keeps no
// dedup key for it. A user must not be able to tell: each id is a fresh
// UUIDv7, and the id sent back later as the client's own is a duplicate of
// the message it names, in that partition only, on every push path.
func TestGeneratedIdsAreUUIDv7sThatDeduplicate(t *testing.T) {
	e := pgstoretest.New(t)
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
				t.Errorf("%s sent to another partition: %+v, want it queued (SPEC §3.2)", r.TransactionID, res[0])
			}
		}
	}
}

// A message removed by retention while its id's window is open still
// makes that id a duplicate (SPEC §3.2), a generated id as any other.
func TestGeneratedIdSentBackAfterRetentionIsADuplicate(t *testing.T) {
	e := pgstoretest.New(t)
	configure(t, e, "r", queen.QueueOptions{DedupWindowSeconds: ptr(3600), RetentionSeconds: ptr(1)})
	var stored []queen.PushResult
	for _, n := range []int{1, 3} {
		items := make([]queen.PushItem, n)
		for i := range items {
			items[i] = queen.PushItem{Queue: "r", Partition: "p", Payload: payload(i)}
		}
		res, err := e.Store.Push(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, res...)
	}
	e.Clock.Advance(10 * time.Second)
	if st, err := e.Store.Reap(ctx, 100); err != nil || st.SegmentsRetained != 2 {
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

// A client may send an id in the generated form itself. Whether it names
// the offset its message lands at, names another, or names one beyond any
// offset, the id deduplicates like any other.
func TestClientIdsInTheGeneratedForm(t *testing.T) {
	e := pgstoretest.New(t)
	form := func(off string) string { return "0190f0c2-1d3e-7a1c-9b2d-" + off }
	ids := []string{
		form("400000000000"), // names offset 0, where it lands
		form("400000000005"), // names offset 5, lands at 1
		form("fffffffffffff"[:12]),
		form("40000000000g"),                   // not hex
		"0190F0C2-1D3E-7A1C-9B2D-400000000004", // upper case: not the form
	}
	for i, id := range ids {
		res, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "c", Partition: "p", Payload: payload(i), TransactionID: id}})
		if err != nil || res[0].Status != queen.StatusQueued || res[0].Offset != int64(i) {
			t.Fatalf("push %s: %+v %v, want it queued at offset %d", id, res, err, i)
		}
	}
	for i, id := range ids {
		for _, n := range []int{1, 2} { // alone and in a batch
			items := []queen.PushItem{{Queue: "c", Partition: "p", Payload: payload(i), TransactionID: id}}
			if n == 2 {
				items = append(items, queen.PushItem{Queue: "c", Partition: "p", Payload: payload(i)})
			}
			res, err := e.Store.Push(ctx, items)
			if err != nil || res[0].Status != queen.StatusDuplicate || res[0].Offset != int64(i) {
				t.Errorf("%s sent again: %+v %v, want a duplicate of offset %d", id, res, err, i)
			}
		}
	}
}

// Offsets of 2^44 and more do not fit a generated id: ids generated there
// are random, and deduplicate all the same.
func TestGeneratedIdsBeyondTheirOffsetRange(t *testing.T) {
	e := pgstoretest.New(t)
	pushN(t, e, "big", "p", "x", 1)
	const last = 1<<44 - 2
	if _, err := e.Pool.Exec(ctx, `UPDATE queen.partitions SET last_offset = $1 WHERE name = 'p'`, int64(last)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 1} {
		items := make([]queen.PushItem, n)
		for i := range items {
			items[i] = queen.PushItem{Queue: "big", Partition: "p", Payload: payload(i)}
		}
		res, err := e.Store.Push(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if !uuidV7.MatchString(r.TransactionID) {
				t.Fatalf("generated id %q at offset %d is not a UUIDv7", r.TransactionID, r.Offset)
			}
			again, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "big", Partition: "p", Payload: payload(0), TransactionID: r.TransactionID}})
			if err != nil || again[0].Status != queen.StatusDuplicate || again[0].Offset != r.Offset {
				t.Errorf("%s (offset %d) sent back: %+v %v, want a duplicate", r.TransactionID, r.Offset, again, err)
			}
		}
	}
}
