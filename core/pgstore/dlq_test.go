package pgstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

func deadLetter(t *testing.T, e *pgstoretest.Env, queue string) queen.Message {
	t.Helper()
	r := pop(t, e, queen.PopRequest{Queue: queue, ConsumerGroup: "g", Batch: 1})
	if len(r.Messages) != 1 {
		t.Fatalf("nothing to dead-letter in %s", queue)
	}
	a := ack(r.Messages[0], "g", r.LeaseID, queen.AckDLQ)
	a.Error = "cannot parse"
	if res := mustAck(t, e, a); !res[0].DLQ {
		t.Fatalf("dlq ack result %+v", res[0])
	}
	return r.Messages[0]
}

func TestDeadLetterSurvivesRetention(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	configure(t, e, "q", queen.QueueOptions{RetentionSeconds: ptr(60)})
	if _, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "q", Partition: "p", TransactionID: "poison",
		TraceID: "trace-1", Payload: []byte(`{"b": 2, "a": [1, "x"]}`)}}); err != nil {
		t.Fatal(err)
	}
	m := deadLetter(t, e, "q")

	e.Clock.Advance(2 * time.Minute)
	st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 100})
	if err != nil || st.SegmentsRetained != 1 {
		t.Fatalf("reap: %+v %v, want the segment removed by retention", st, err)
	}
	if n := count(t, e, "SELECT count(*) FROM queen.segments"); n != 0 {
		t.Fatalf("%d segments remain", n)
	}
	page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "q", ConsumerGroup: "g"})
	if err != nil || page.Total != 1 {
		t.Fatalf("DLQ after retention: %+v %v", page, err)
	}
	d := page.Messages[0]
	if string(d.Data) != `{"b":2,"a":[1,"x"]}` || d.TransactionID != "poison" || *d.TraceID != "trace-1" ||
		*d.Error != "cannot parse" || d.Partition != "p" || d.PartitionID != m.PartitionID || d.Offset != 0 ||
		d.ConsumerGroup != "g" || !d.CreatedAt.Equal(pgstoretest.Epoch) {
		t.Fatalf("dead letter snapshot = %+v", d)
	}
}

func TestDeadLetterRetryAndDelete(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	if _, err := e.Store.Push(ctx, []queen.PushItem{
		{Queue: "q", Partition: "p", TransactionID: "t1", Payload: []byte(`{"keep":"me"}`)},
		{Queue: "q", Partition: "p", TransactionID: "t2", Payload: []byte(`2`)},
	}); err != nil {
		t.Fatal(err)
	}
	m1 := deadLetter(t, e, "q")
	m2 := deadLetter(t, e, "q")

	res, err := e.Store.RetryDeadLetter(ctx, m1.PartitionID, m1.TransactionID, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != queen.StatusQueued || res.TransactionID == "t1" || res.Offset != 2 || res.Partition != "p" {
		t.Fatalf("retry result %+v, want queued at offset 2 under a fresh transactionId", res)
	}
	if _, err := e.Store.DeadLetters(ctx, m1.PartitionID, "t1"); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("DLQ row survived its retry: %v", err)
	}
	again := pop(t, e, queen.PopRequest{Queue: "q", ConsumerGroup: "g", Batch: 1})
	if len(again.Messages) != 1 || string(again.Messages[0].Data) != `{"keep":"me"}` || again.Messages[0].TransactionID != res.TransactionID {
		t.Fatalf("re-pushed message = %+v", again.Messages)
	}
	// Retry of an address with no dead letter is a 404, and writes nothing.
	if _, err := e.Store.RetryDeadLetter(ctx, m1.PartitionID, "t1", ""); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("second retry: %v", err)
	}
	// Delete drops the row; a group filter that matches nothing is a 404.
	if _, err := e.Store.DeleteDeadLetter(ctx, m2.PartitionID, "t2", "other"); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("delete with another group: %v", err)
	}
	if n, err := e.Store.DeleteDeadLetter(ctx, m2.PartitionID, "t2", "g"); err != nil || n != 1 {
		t.Fatalf("delete: %d %v", n, err)
	}
	if page, _ := e.Store.ListDeadLetters(ctx, queen.DLQFilter{}); page.Total != 0 {
		t.Fatalf("DLQ not empty: %+v", page)
	}
}

func TestDLQListFilters(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushN(t, e, "a", "p", "m", 3)
	pushN(t, e, "b", "p", "m", 1)
	for i := 0; i < 3; i++ {
		deadLetter(t, e, "a")
		e.Clock.Advance(time.Minute)
	}
	deadLetter(t, e, "b")
	page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "a", Limit: 2})
	if err != nil || page.Total != 3 || len(page.Messages) != 2 {
		t.Fatalf("queue filter with limit: total %d len %d %v", page.Total, len(page.Messages), err)
	}
	from := pgstoretest.Epoch.Add(time.Minute)
	page, _ = e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "a", From: &from})
	if page.Total != 2 {
		t.Fatalf("from filter total %d, want 2", page.Total)
	}
	page, _ = e.Store.ListDeadLetters(ctx, queen.DLQFilter{ConsumerGroup: "nobody"})
	if page.Total != 0 || page.Messages == nil {
		t.Fatalf("group filter: %+v", page)
	}
	if _, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Limit: -1}); !errors.Is(err, queen.ErrInvalid) {
		t.Fatalf("negative limit: %v", err)
	}
}

// Dead letters are kept for their queue's dlqRetentionSeconds from when
// they were dead-lettered, or for the deployment's default (14 days) when
// it sets none — also once their queue was deleted; configure echoes the
// option and the window that applies.
func TestDeadLettersExpireByDLQRetention(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	q, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "short",
		Options: queen.QueueOptions{DLQRetentionSeconds: ptr(3600)}})
	if err != nil || q.Options.DLQRetentionSeconds != 3600 || q.Options.EffectiveDLQRetentionSeconds != 3600 {
		t.Fatalf("configure: %+v %v, want dlqRetentionSeconds 3600 echoed and in effect", q.Options, err)
	}
	q, err = e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "default"})
	if err != nil || q.Options.DLQRetentionSeconds != 0 || q.Options.EffectiveDLQRetentionSeconds != 14*24*3600 {
		t.Fatalf("configure: %+v %v, want the deployment's default of 14 days in effect", q.Options, err)
	}
	for _, queue := range []string{"short", "default", "deleted"} {
		pushN(t, e, queue, "p", queue+"-", 2)
		deadLetter(t, e, queue)
	}
	if err := e.Store.DeleteQueue(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	left := func() map[string]int {
		page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, d := range page.Messages {
			out[d.Queue]++
		}
		return out
	}

	e.Clock.Advance(3599 * time.Second)
	if st, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil || st.DeadLettersExpired != 0 {
		t.Fatalf("reap before the hour: %+v %v, want no dead letter removed", st, err)
	}
	e.Clock.Advance(2 * time.Second)
	if st, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil || st.DeadLettersExpired != 1 {
		t.Fatalf("reap after the hour: %+v %v, want short's dead letter removed", st, err)
	}
	if got := left(); got["short"] != 0 || got["default"] != 1 || got["deleted"] != 1 {
		t.Fatalf("dead letters after an hour: %v", got)
	}
	e.Clock.Advance(14 * 24 * time.Hour)
	if st, err := e.Store.Reap(ctx, queen.ReapRequest{}); err != nil || st.DeadLettersExpired != 2 {
		t.Fatalf("reap after 14 days: %+v %v, want the other two removed", st, err)
	}
	if got := left(); len(got) != 0 {
		t.Fatalf("dead letters after 14 days: %v", got)
	}
}

// A DLQ listing by queue (or of every queue) gives the exact total kept
// per queue; with any other filter it counts its total up to
// queen.MaxDLQTotal and says when there are more, so that a page of a
// large DLQ does not count it all.
func TestDLQTotalIsCapped(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	pushN(t, e, "big", "p", "m", 1)
	deadLetter(t, e, "big")
	page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "big"})
	if err != nil || page.Total != 1 || page.TotalCapped {
		t.Fatalf("one dead letter: total %d capped %v %v", page.Total, page.TotalCapped, err)
	}
	if _, err := e.Pool.Exec(ctx, `
		INSERT INTO queen.dlq (queue_name, partition_name, partition_id, msg_offset, message_id, transaction_id,
		                       payload, trace_id, consumer_group, error, attempts, created_at, failed_at, key_id)
		SELECT queue_name, partition_name, partition_id, msg_offset, message_id, transaction_id || '-' || g,
		       payload, trace_id, consumer_group, error, attempts, created_at, failed_at, key_id
		FROM queen.dlq, generate_series(1, $1::int) g`, queen.MaxDLQTotal); err != nil {
		t.Fatal(err)
	}
	for _, f := range []queen.DLQFilter{{Queue: "big", Limit: 10}, {Limit: 10}} {
		page, err = e.Store.ListDeadLetters(ctx, f)
		if err != nil || page.Total != queen.MaxDLQTotal+1 || page.TotalCapped || len(page.Messages) != 10 {
			t.Fatalf("%d dead letters, filter %+v: total %d capped %v, %d on the page, %v; want the exact total",
				queen.MaxDLQTotal+1, f, page.Total, page.TotalCapped, len(page.Messages), err)
		}
	}
	page, err = e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "big", ConsumerGroup: "g", Limit: 10})
	if err != nil || page.Total != queen.MaxDLQTotal || !page.TotalCapped || len(page.Messages) != 10 {
		t.Fatalf("%d dead letters of group g: total %d capped %v, %d on the page, %v; want the total capped at %d",
			queen.MaxDLQTotal+1, page.Total, page.TotalCapped, len(page.Messages), err, queen.MaxDLQTotal)
	}
}

// A DLQ listing pages by cursor: each full page's nextCursor starts the
// next one after its last dead letter, newest first, every dead letter
// once, the last page without a cursor; a cursor that is no nextCursor
// is refused.
func TestDLQPagesByCursor(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	for i := range 25 {
		pushN(t, e, "q", fmt.Sprintf("p%d", i%3), fmt.Sprintf("m%d-", i), 1)
		deadLetter(t, e, "q")
		e.Clock.Advance(time.Millisecond)
	}
	var seen []int64
	cursor := ""
	for pages := 1; ; pages++ {
		page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "q", Limit: 10, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != 25 {
			t.Fatalf("page %d: total %d, want 25 (the whole filter)", pages, page.Total)
		}
		for _, d := range page.Messages {
			seen = append(seen, d.ID)
		}
		if page.NextCursor == "" {
			if pages != 3 || len(page.Messages) != 5 {
				t.Fatalf("the last page is page %d with %d dead letters, want page 3 with 5", pages, len(page.Messages))
			}
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != 25 {
		t.Fatalf("the pages held %d dead letters, want 25: %v", len(seen), seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] >= seen[i-1] {
			t.Fatalf("dead letters %v are not newest first, each once", seen)
		}
	}
	if _, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Cursor: "yesterday"}); !errors.Is(err, queen.ErrInvalid) {
		t.Fatalf("cursor yesterday: %v, want ErrInvalid", err)
	}
}
