package pgstore_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// Postgres compiles a plan to machine code (JIT) each time it runs it once
// the plan's estimated cost passes jit_above_cost, and that takes tens of
// milliseconds. A routine's generic plan estimates its probes by the size
// of the log, so on a database of a few hundred megabytes a push of 100
// messages to random partitions took ~100 ms instead of ~6 ms, nearly all
// of it compiling. The routines run with JIT off. With JIT forced for every
// plan, no statement a push, pop or ack runs inside them
// compiles any.
func TestRoutinesNeverCompileJIT(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	cfg, err := pgx.ParseConfig(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	pgstore.PoolerSafe(cfg)
	var (
		mu       sync.Mutex
		jitted   []string // plans of statements run inside a routine that were compiled
		compiled bool     // some plan was compiled
	)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if !strings.Contains(n.Message, "JIT:") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		compiled = true
		if n.Where != "" { // inside a routine
			jitted = append(jitted, n.Where+"\n"+n.Message)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Every plan of this session is compiled and reported to it, nested ones too.
	for _, q := range []string{"LOAD 'auto_explain'", "SET jit = on", "SET jit_above_cost = 0",
		"SET auto_explain.log_min_duration = 0", "SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_analyze = on", "SET auto_explain.log_level = notice"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 10)"); err != nil {
		t.Fatal(err)
	}
	if !compiled {
		t.Skip("this server compiles no plan with jit_above_cost = 0 (built without LLVM): nothing to check")
	}

	s := pgstore.New(conn, pgstore.Config{Clock: e.Clock.Now})
	gen := func(partition string) queen.PushItem {
		return queen.PushItem{Queue: "jit", Partition: partition, Payload: payload(partition)}
	}
	mine := func(partition, id string) queen.PushItem {
		return queen.PushItem{Queue: "jit", Partition: partition, Payload: payload(id), TransactionID: id}
	}
	for _, items := range [][]queen.PushItem{
		{gen("a")},                            // creates the partition: the careful way
		{gen("a")},                            // one generated id
		{gen("a"), gen("a"), gen("a")},        // a batch of generated ids
		{mine("a", "x1")},                     // one client id
		{mine("a", "x2"), mine("a", "x3")},    // a batch of client ids
		{gen("a"), gen("b"), mine("c", "x4")}, // several partitions
	} {
		if _, err := s.Push(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Pop(ctx, queen.PopRequest{Queue: "jit", ConsumerGroup: "g", Batch: 5})
	if err != nil || len(res.Messages) == 0 {
		t.Fatalf("pop: %+v %v", res, err)
	}
	last := res.Messages[len(res.Messages)-1]
	if _, err := s.Ack(ctx, []queen.Ack{{PartitionID: last.PartitionID, TransactionID: last.TransactionID,
		Status: queen.AckCompleted, ConsumerGroup: "g", LeaseID: res.LeaseID}}); err != nil {
		t.Fatal(err)
	}
	if len(jitted) > 0 {
		t.Fatalf("%d statements inside the routines were compiled to machine code; the first:\n%s", len(jitted), jitted[0])
	}
}
