package pgstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// Every store operation once, on data that fills every list of its reply,
// so the contract check (contract_internal_test.go) sees each routine's
// reply with every nested key: a key renamed on one side only fails here.
func TestEveryReplyMatchesItsGoType(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "c", Namespace: "ns", Task: "t",
		Options: queen.QueueOptions{LeaseTime: ptr(60), RetentionSeconds: ptr(3600)}})
	must("configure", err)
	pushN(t, e, "c", "p", "m", 4)
	p := pop(t, e, queen.PopRequest{Queue: "c", Batch: 2, ConsumerGroup: "g"})
	_, err = e.Store.ExtendLease(ctx, p.LeaseID, 30)
	must("extend", err)
	_, err = e.Store.Ack(ctx, []queen.Ack{ack(p.Messages[0], "g", p.LeaseID, queen.AckCompleted),
		ack(p.Messages[1], "g", p.LeaseID, queen.AckDLQ)})
	must("ack", err)
	_, err = e.Store.Ack(ctx, []queen.Ack{{PartitionID: p.Messages[0].PartitionID, TransactionID: "nope", ConsumerGroup: "g"}})
	if err == nil {
		t.Fatal("ack of an unknown message accepted")
	}
	p2 := pop(t, e, queen.PopRequest{Queue: "c", Batch: 1, ConsumerGroup: "g"})
	_, err = e.Store.Transaction(ctx, queen.TransactionRequest{Acks: []queen.Ack{ack(p2.Messages[0], "g", p2.LeaseID, queen.AckCompleted)},
		Pushes: []queen.PushItem{{Queue: "c", Partition: "q", Payload: payload(1)}}, RequiredLeases: []string{p2.LeaseID}})
	must("transaction", err)
	_, err = e.Store.Transaction(ctx, queen.TransactionRequest{Pushes: []queen.PushItem{{Queue: "c", Payload: payload(2)}},
		RequiredLeases: []string{p2.LeaseID}})
	if err == nil {
		t.Fatal("transaction with a released lease accepted")
	}
	_, err = e.Store.Seek(ctx, "g", "c", queen.SeekTarget{Offsets: map[string]int64{"p": 1}})
	must("seek", err)
	_, err = e.Store.Seek(ctx, "g", "c", queen.SeekTarget{Offsets: map[string]int64{"nope": 1}})
	if err == nil {
		t.Fatal("seek of an unknown partition accepted")
	}
	_, err = e.Store.Browse(ctx, queen.BrowseRequest{Queue: "c"})
	must("browse", err)
	page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "c"})
	must("dlq list", err)
	if len(page.Messages) != 1 {
		t.Fatalf("dead letters: %+v", page)
	}
	d := page.Messages[0]
	_, err = e.Store.DeadLetters(ctx, d.PartitionID, d.TransactionID)
	must("dlq get", err)
	_, err = e.Store.RetryDeadLetter(ctx, d.PartitionID, d.TransactionID, "")
	must("dlq retry", err)
	_, err = e.Store.ListQueues(ctx)
	must("queues", err)
	_, err = e.Store.Queue(ctx, "c", queen.PartitionPage{})
	must("queue", err)
	_, err = e.Store.ListGroups(ctx)
	must("groups", err)
	_, err = e.Store.Group(ctx, "g")
	must("group", err)
	_, err = e.Store.Stats(ctx)
	must("stats", err)
	_, err = e.Store.SetMaintenance(ctx, queen.MaintainPop, false)
	must("set maintenance", err)
	_, err = e.Store.Maintenance(ctx)
	must("maintenance", err)
	e.Clock.Advance(2 * time.Hour)
	_, err = e.Store.Reap(ctx, queen.ReapRequest{Batch: 100})
	must("reap", err)
	must("delete group", e.Store.DeleteGroup(ctx, "g", "c"))
	must("delete queue", e.Store.DeleteQueue(ctx, "c"))
	must("ping", e.Store.Ping(ctx))
}

// The schema's column defaults are the domain's documented defaults.
func TestSchemaDefaultsAreTheDomains(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	for col, want := range map[string]int{
		"lease_time":   queen.DefaultLeaseTime,
		"retry_limit":  queen.DefaultRetryLimit,
		"dedup_window": queen.DefaultDedupWindowSeconds,
	} {
		var def string
		if err := e.Pool.QueryRow(ctx, `SELECT column_default FROM information_schema.columns
			WHERE table_schema = 'queen' AND table_name = 'queues' AND column_name = $1`, col).Scan(&def); err != nil {
			t.Fatal(err)
		}
		if def != strconv.Itoa(want) {
			t.Errorf("queues.%s defaults to %s, the domain's default is %d", col, def, want)
		}
	}
}
