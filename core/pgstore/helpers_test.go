package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

var ctx = context.Background()

func payload(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// pushN pushes n messages to queue/partition with transaction ids prefix-0..n-1.
func pushN(t *testing.T, e *pgstoretest.Env, queue, partition, prefix string, n int) []queen.PushResult {
	t.Helper()
	items := make([]queen.PushItem, n)
	for i := range items {
		items[i] = queen.PushItem{Queue: queue, Partition: partition, Payload: payload(map[string]any{"n": i}),
			TransactionID: fmt.Sprintf("%s-%d", prefix, i)}
	}
	res, err := e.Store.Push(ctx, items)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	return res
}

// pushAllQueued pushes items in one request and fails the test unless
// every one of them is queued.
func pushAllQueued(t *testing.T, e *pgstoretest.Env, items []queen.PushItem) []queen.PushResult {
	t.Helper()
	res, err := e.Store.Push(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != queen.StatusQueued {
			t.Fatalf("item %d of %+v: %+v, want it queued", i, items, r)
		}
	}
	return res
}

func pop(t *testing.T, e *pgstoretest.Env, req queen.PopRequest) queen.PopResult {
	t.Helper()
	res, err := e.Store.Pop(ctx, req)
	if err != nil {
		t.Fatalf("pop %+v: %v", req, err)
	}
	return res
}

func offsets(msgs []queen.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Offset
	}
	return out
}

func ack(m queen.Message, group, lease string, status queen.AckStatus) queen.Ack {
	return queen.Ack{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: status,
		ConsumerGroup: group, LeaseID: lease}
}

func mustAck(t *testing.T, e *pgstoretest.Env, acks ...queen.Ack) []queen.AckResult {
	t.Helper()
	res, err := e.Store.Ack(ctx, acks)
	if err != nil {
		t.Fatalf("ack: %v (results %+v)", err, res)
	}
	return res
}

func configure(t *testing.T, e *pgstoretest.Env, queue string, o queen.QueueOptions) {
	t.Helper()
	if _, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: queue, Options: o}); err != nil {
		t.Fatalf("configure: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// cursor reads a group's committed offset on a partition.
func cursor(t *testing.T, e *pgstoretest.Env, partitionID, group string) int64 {
	t.Helper()
	var c int64
	err := e.Pool.QueryRow(ctx, "SELECT committed FROM queen.consumers WHERE partition_id = $1::uuid AND group_name = $2",
		partitionID, group).Scan(&c)
	if err != nil {
		t.Fatalf("cursor: %v", err)
	}
	return c
}

func count(t *testing.T, e *pgstoretest.Env, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := e.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func browsedOffsets(msgs []queen.BrowsedMessage) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Offset
	}
	return out
}

// depth is a queue's depth as its detail reports it.
func depth(t *testing.T, e *pgstoretest.Env, queue string) int64 {
	t.Helper()
	d, err := e.Store.Queue(ctx, queue, queen.PartitionPage{})
	if err != nil {
		t.Fatalf("queue %s: %v", queue, err)
	}
	return d.Depth
}

// ownTx begins a transaction on a connection of its own, so that the
// statistics it reads (pg_stat_xact_user_tables) are its own statements'
// only. It is rolled back and closed when the test ends (a commit first
// is fine).
func ownTx(t *testing.T, e *pgstoretest.Env) pgx.Tx {
	t.Helper()
	conn, err := pgx.Connect(ctx, e.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	return tx
}
