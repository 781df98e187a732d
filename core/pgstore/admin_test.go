package pgstore_test

import (
	"errors"
	"testing"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

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
	d, err := e.Store.Queue(ctx, queue, queen.PartitionPage{})
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
	if _, err := e.Store.Queue(ctx, "q", queen.PartitionPage{}); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("deleted queue: %v", err)
	}
	if err := e.Store.DeleteQueue(ctx, "q"); !errors.Is(err, queen.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}
