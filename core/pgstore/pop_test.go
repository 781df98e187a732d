package pgstore_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// semantics.md §3.4.3: a wildcard pop's cost must not grow with the number of fully
// consumed partitions. Cost here is what the database touches — the shared
// buffers one pop reads, from EXPLAIN (ANALYZE, BUFFERS) — which, unlike
// time, does not depend on the machine's load. Right after thousands of
// partitions were consumed (their ready rows deleted, their index entries
// dead until VACUUM), a pop of a queue with fresh messages must touch about
// what a pop of a 10-partition queue touches.
func TestWildcardPopCostIgnoresConsumedPartitions(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	const wide = 3000
	items := make([]queen.PushItem, 0, wide)
	for p := 0; p < wide; p++ {
		items = append(items, queen.PushItem{Queue: "wide", Partition: fmt.Sprintf("p-%d", p), Payload: payload(p)})
	}
	for len(items) > 0 {
		n := min(1000, len(items))
		if _, err := e.Store.Push(ctx, items[:n]); err != nil {
			t.Fatal(err)
		}
		items = items[n:]
	}
	// Drain it with the widest pops there are.
	for drained := 0; ; {
		r := pop(t, e, queen.PopRequest{Queue: "wide", Batch: queen.MaxBatch, Partitions: queen.MaxPartitionsPerPop, AutoAck: true})
		if len(r.Messages) == 0 {
			if drained != wide {
				t.Fatalf("drained %d of %d messages", drained, wide)
			}
			break
		}
		drained += len(r.Messages)
	}
	for p := 0; p < wide; p += wide / 20 {
		pushN(t, e, "wide", fmt.Sprintf("p-%d", p), "fresh", 2)
	}
	for p := 0; p < 10; p++ {
		pushN(t, e, "narrow", fmt.Sprintf("p-%d", p), "m", 5)
	}
	for p := 0; p < 10; p++ { // the group's first visit of each partition is behind it
		r := pop(t, e, queen.PopRequest{Queue: "narrow", Batch: 1})
		mustAck(t, e, ack(r.Messages[0], "", r.LeaseID, queen.AckCompleted))
	}

	conn, err := e.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	hits := regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`)
	// buffers pops the queue n times in one transaction, rolled back, and
	// returns the buffers the last pop touched (the first ones plan).
	buffers := func(queue string, n int) int {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var last int
		for i := 0; i < n; i++ {
			var plan []string
			rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT * FROM queen.pop_v2(json_build_object('queue', $1::text, 'batch', 1), $2)`,
				queue, e.Clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			last = -1
			for _, line := range plan {
				if m := hits.FindStringSubmatch(line); m != nil {
					h, _ := strconv.Atoi(m[1])
					r, _ := strconv.Atoi("0" + m[2])
					last = h + r
					break
				}
			}
			if last < 0 {
				t.Fatalf("no buffer counts in %q", plan)
			}
		}
		return last
	}
	narrow := buffers("narrow", 4)
	drained := buffers("wide", 4)
	t.Logf("buffers per pop: 10 partitions %d, %d partitions just consumed %d", narrow, wide, drained)
	if drained > narrow+narrow/4 {
		t.Fatalf("a pop after %d partitions were consumed touches %d buffers, a pop of 10 partitions %d: its cost grows with consumed partitions",
			wide, drained, narrow)
	}
}

// Deleting a group or a queue leaves nothing of where its wildcard pops
// had got to.
func TestDeletesForgetTheRound(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "q", "a", "a", 2)
	pushN(t, e, "q", "b", "b", 2)
	for _, g := range []string{"g", "h"} {
		if r := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: g}); len(r.Messages) != 1 {
			t.Fatalf("group %s: %d messages", g, len(r.Messages))
		}
	}
	rounds := func() int64 { return count(t, e, "SELECT count(*) FROM queen.ready_cursor") }
	if n := rounds(); n != 2 {
		t.Fatalf("%d round positions after two groups' pops, want 2", n)
	}
	if err := e.Store.DeleteGroup(ctx, "g", "q"); err != nil {
		t.Fatal(err)
	}
	if n := rounds(); n != 1 {
		t.Fatalf("%d round positions after deleting g, want h's", n)
	}
	if err := e.Store.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if n := rounds(); n != 0 {
		t.Fatalf("%d round positions after deleting the queue", n)
	}
}

// Partitions leased by other consumers never use up a wildcard pop's scan:
// with 64 live leases a fresh partition is still found.
func TestWildcardPopPassesLeasedPartitions(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	for i := 0; i < 70; i++ {
		pushN(t, e, "q", fmt.Sprintf("p%02d", i), "a", 1)
	}
	for i := 0; i < 70; i++ {
		if r := pop(t, e, queen.PopRequest{Queue: "q"}); len(r.Messages) != 1 {
			t.Fatalf("pop %d: %d messages", i, len(r.Messages))
		}
	}
	pushN(t, e, "q", "fresh", "b", 1)
	r := pop(t, e, queen.PopRequest{Queue: "q"})
	if len(r.Messages) != 1 || r.Messages[0].Partition != "fresh" {
		t.Fatalf("with 70 live leases the wildcard pop got %v; partition fresh has a message", r.Messages)
	}
}
