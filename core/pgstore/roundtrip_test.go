package pgstore_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// TestOneRoundTripPerOperation proves section 7's "one database round trip
// per push, pop (with messages available), ack, ack batch, transaction" by
// counting what the client sends, twice over: the statements pgx runs (a
// pgx tracer) and the round trips on the wire (Sync and simple Query
// messages of the frontend protocol, read from a wrapped connection). It
// also proves the pool is safe behind a transaction-pooling proxy: exec mode,
// no named prepared statements, no SET / PREPARE / LISTEN / session advisory
// lock in any statement, and no session state left on the connection.
func TestOneRoundTripPerOperation(t *testing.T) {
	t.Parallel()
	env := pgstoretest.NewClocked(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cfg, err := pgstore.PoolConfig(env.URL)
	if err != nil {
		t.Fatalf("PoolConfig: %v", err)
	}
	if cfg.ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeExec {
		t.Errorf("PoolConfig: DefaultQueryExecMode = %v, want QueryExecModeExec", cfg.ConnConfig.DefaultQueryExecMode)
	}
	if cfg.ConnConfig.StatementCacheCapacity != 0 || cfg.ConnConfig.DescriptionCacheCapacity != 0 {
		t.Errorf("PoolConfig: statement cache %d, description cache %d; want none",
			cfg.ConnConfig.StatementCacheCapacity, cfg.ConnConfig.DescriptionCacheCapacity)
	}

	tr := &rtTracer{}
	cfg.ConnConfig.Tracer = tr
	// The wire count needs the plain protocol: with TLS the wrapped
	// connection would carry ciphertext.
	wire := &rtWire{}
	wireOK := cfg.ConnConfig.TLSConfig == nil
	for _, f := range cfg.ConnConfig.Fallbacks {
		wireOK = wireOK && f.TLSConfig == nil
	}
	if wireOK {
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &rtConn{Conn: c, w: wire}, nil
		}
	} else {
		t.Logf("TLS is configured: counting statements only, not wire messages")
	}
	// One connection, never recycled during the test, so every statement of
	// an operation is on the connection we watch and nothing reconnects.
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.HealthCheckPeriod, cfg.MaxConnIdleTime, cfg.MaxConnLifetime = time.Hour, time.Hour, time.Hour
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil { // connect now, outside any measurement
		t.Fatalf("ping: %v", err)
	}
	store := pgstore.New(pool, pgstore.Config{Clock: env.Clock.Now})

	type measured struct {
		name       string
		statements []string
		prepared   []string
		roundTrips int
		pings      int
		named      []string
		other      int // prepares, batches, copies
	}
	var all []measured
	// measure runs one operation and records what it sent. want is the
	// number of statements (and round trips) it must take.
	measure := func(name string, want int, op func() error) error {
		t.Helper()
		tr.reset()
		wire.reset()
		err := op()
		m := measured{name: name}
		m.statements, m.prepared, m.other = tr.snapshot()
		m.roundTrips, m.pings, m.named = wire.snapshot()
		all = append(all, m)
		if len(m.statements) != want || m.other != 0 {
			t.Errorf("%s: %d statements (+%d prepares/batches/copies), want %d: %q",
				name, len(m.statements), m.other, want, m.statements)
		}
		if wireOK && m.roundTrips != want {
			t.Errorf("%s: %d round trips on the wire (Sync / Query / Flush messages), want %d", name, m.roundTrips, want)
		}
		if len(m.named) > 0 {
			t.Errorf("%s: named prepared statements %q", name, m.named)
		}
		if m.pings > 0 {
			t.Logf("%s: the pool pinged the connection %d time(s) before use (not counted)", name, m.pings)
		}
		return err
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	const q, out = "rt-orders", "rt-shipments"
	items := func(part string, n int, prefix string) []queen.PushItem {
		var it []queen.PushItem
		for i := 0; i < n; i++ {
			it = append(it, queen.PushItem{Queue: q, Partition: part, TransactionID: fmt.Sprintf("%s-%d", prefix, i),
				Payload: json.RawMessage(fmt.Sprintf(`{"order":%d}`, i))})
		}
		return it
	}

	// The five operations of section 7.
	var pushed []queen.PushResult
	must("push", measure("push (4 items, 2 partitions)", 1, func() (err error) {
		pushed, err = store.Push(ctx, append(items("a", 2, "a"), items("b", 2, "b")...))
		return err
	}))
	if len(pushed) != 4 || pushed[0].Status != queen.StatusQueued {
		t.Fatalf("push results %+v", pushed)
	}
	var popA queen.PopResult
	must("pop", measure("pop (partition a, batch 2)", 1, func() (err error) {
		popA, err = store.Pop(ctx, queen.PopRequest{Queue: q, Partition: "a", Batch: 2})
		return err
	}))
	if len(popA.Messages) != 2 {
		t.Fatalf("pop of partition a returned %d messages, want 2", len(popA.Messages))
	}
	rtAck := func(m queen.Message, lease string, st queen.AckStatus) queen.Ack {
		return queen.Ack{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: st, LeaseID: lease}
	}
	must("ack", measure("ack (one message)", 1, func() error {
		_, err := store.Ack(ctx, []queen.Ack{rtAck(popA.Messages[0], popA.LeaseID, queen.AckCompleted)})
		return err
	}))
	var popB queen.PopResult
	must("pop", measure("pop (wildcard, batch 10)", 1, func() (err error) {
		popB, err = store.Pop(ctx, queen.PopRequest{Queue: q, Batch: 10})
		return err
	}))
	if len(popB.Messages) != 2 || popB.Messages[0].Partition != "b" {
		t.Fatalf("wildcard pop returned %+v, want the 2 messages of partition b", popB.Messages)
	}
	must("ack batch", measure("ack batch (2 messages)", 1, func() error {
		_, err := store.Ack(ctx, []queen.Ack{rtAck(popB.Messages[0], popB.LeaseID, queen.AckCompleted),
			rtAck(popB.Messages[1], popB.LeaseID, queen.AckCompleted)})
		return err
	}))
	must("transaction", measure("transaction (ack + push to another queue, required lease)", 1, func() error {
		_, err := store.Transaction(ctx, queen.TransactionRequest{
			Acks:           []queen.Ack{rtAck(popA.Messages[1], popA.LeaseID, queen.AckCompleted)},
			Pushes:         []queen.PushItem{{Queue: out, Partition: "a", Payload: json.RawMessage(`{"shipped":1}`)}},
			RequiredLeases: []string{popA.LeaseID},
		})
		return err
	}))

	// Multi-partition pops and rejected calls are one round trip too.
	must("push", measure("push (6 items, 3 partitions)", 1, func() error {
		_, err := store.Push(ctx, append(append(items("c", 2, "c"), items("d", 2, "d")...), items("e", 2, "e")...))
		return err
	}))
	var popM queen.PopResult
	must("pop", measure("pop (wildcard, partitions 3, batch 6)", 1, func() (err error) {
		popM, err = store.Pop(ctx, queen.PopRequest{Queue: q, Batch: 6, Partitions: 3})
		return err
	}))
	if len(popM.Messages) != 6 {
		t.Fatalf("multi-partition pop returned %d messages, want 6", len(popM.Messages))
	}
	if err := measure("ack with a bogus lease (rejected)", 1, func() error {
		_, err := store.Ack(ctx, []queen.Ack{rtAck(popM.Messages[0], queen.NewUUIDv7(), queen.AckCompleted)})
		return err
	}); !errors.Is(err, queen.ErrConflict) {
		t.Errorf("ack with a bogus lease: %v, want a conflict", err)
	}
	if err := measure("push with an invalid queue name (rejected before the database)", 0, func() error {
		_, err := store.Push(ctx, []queen.PushItem{{Queue: "bad name!", Payload: json.RawMessage(`1`)}})
		return err
	}); !errors.Is(err, queen.ErrInvalid) {
		t.Errorf("push with an invalid queue name: %v, want invalid input", err)
	}

	// Every other operation of the Store is one statement as well (the
	// package documents it).
	must("extend lease", measure("extend lease", 1, func() error {
		_, err := store.ExtendLease(ctx, popM.LeaseID, 60)
		return err
	}))
	var dlqAcks []queen.Ack
	for _, m := range popM.Messages {
		st := queen.AckCompleted
		if m.Offset == 0 {
			st = queen.AckDLQ // dead-letter the first message of each partition
		}
		a := rtAck(m, popM.LeaseID, st)
		a.Error = "round trip test"
		dlqAcks = append(dlqAcks, a)
	}
	must("ack batch with dead letters", measure("ack batch (6 messages, 3 dead-lettered)", 1, func() error {
		_, err := store.Ack(ctx, dlqAcks)
		return err
	}))
	must("pop", measure("pop (nothing available)", 1, func() error {
		res, err := store.Pop(ctx, queen.PopRequest{Queue: q, Batch: 10})
		if err == nil && len(res.Messages) != 0 {
			return fmt.Errorf("got %d messages, want none", len(res.Messages))
		}
		return err
	}))
	must("configure", measure("configure", 1, func() error {
		_, err := store.Configure(ctx, queen.ConfigureRequest{Queue: "rt-capped", Options: queen.QueueOptions{MaxSize: rtInt64(1)}})
		return err
	}))
	if err := measure("push beyond maxSize (rejected)", 1, func() error {
		_, err := store.Push(ctx, []queen.PushItem{{Queue: "rt-capped", Payload: json.RawMessage(`1`)},
			{Queue: "rt-capped", Payload: json.RawMessage(`2`)}})
		return err
	}); !errors.Is(err, queen.ErrQueueFull) {
		t.Errorf("push beyond maxSize: %v, want queue full", err)
	}
	must("seek", measure("seek", 1, func() error {
		_, err := store.Seek(ctx, "rt-audit", q, queen.SeekTarget{ToBeginning: true})
		return err
	}))
	var page queen.DLQPage
	must("list dead letters", measure("list dead letters", 1, func() (err error) {
		page, err = store.ListDeadLetters(ctx, queen.DLQFilter{Queue: q})
		return err
	}))
	if len(page.Messages) != 3 {
		t.Fatalf("dead letters: %+v, want 3", page)
	}
	d0, d1 := page.Messages[0], page.Messages[1]
	must("dead letters", measure("dead letters of an address", 1, func() error {
		_, err := store.DeadLetters(ctx, d0.PartitionID, d0.TransactionID)
		return err
	}))
	must("retry dead letter", measure("retry dead letter", 1, func() error {
		_, err := store.RetryDeadLetter(ctx, d0.PartitionID, d0.TransactionID, "")
		return err
	}))
	must("delete dead letter", measure("delete dead letter", 1, func() error {
		_, err := store.DeleteDeadLetter(ctx, d1.PartitionID, d1.TransactionID, "")
		return err
	}))
	for _, op := range []struct {
		name string
		fn   func() error
	}{
		{"list queues", func() error { _, err := store.ListQueues(ctx); return err }},
		{"queue", func() error { _, err := store.Queue(ctx, q, queen.PartitionPage{}); return err }},
		{"list groups", func() error { _, err := store.ListGroups(ctx); return err }},
		{"group", func() error { _, err := store.Group(ctx, queen.QueueModeGroup); return err }},
		{"browse", func() error {
			_, err := store.Browse(ctx, queen.BrowseRequest{Queue: q, Partition: "a", Limit: 10})
			return err
		}},
		{"stats", func() error { _, err := store.Stats(ctx); return err }},
		{"ping", func() error { return store.Ping(ctx) }},
		{"delete group", func() error { return store.DeleteGroup(ctx, "rt-audit", q) }},
		{"delete queue", func() error { return store.DeleteQueue(ctx, out) }},
	} {
		must(op.name, measure(op.name, 1, op.fn))
	}
	// A reaper pass runs each kind's batches as transactions of their own,
	// so that none holds its locks for long: one statement per kind when
	// each has caught up in its first batch.
	must("reap", measure("reap", 6, func() error { _, err := store.Reap(ctx, queen.ReapRequest{}); return err }))

	// No statement may carry session state: it would pin the connection
	// behind RDS Proxy or break behind PgBouncer in transaction mode.
	for _, m := range all {
		for _, s := range append(m.statements, m.prepared...) {
			if bad := rtSessionState(s); bad != "" {
				t.Errorf("%s: statement uses %s: %q", m.name, bad, s)
			}
		}
	}

	// Nor may the routines behind the statements leave any on the
	// connection: ask the server, on the one connection every operation ran on.
	var settings, locks, channels, prepared []string
	err = pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		for _, x := range []struct {
			dst *[]string
			sql string
		}{
			{&settings, `SELECT name || '=' || setting FROM pg_settings WHERE source = 'session'`},
			{&locks, `SELECT locktype || ' ' || mode FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'`},
			{&channels, `SELECT pg_listening_channels()`},
			{&prepared, `SELECT name FROM pg_prepared_statements`},
		} {
			rows, err := c.Query(ctx, x.sql)
			if err != nil {
				return err
			}
			*x.dst, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inspect the session: %v", err)
	}
	if len(settings) > 0 || len(locks) > 0 || len(channels) > 0 || len(prepared) > 0 {
		t.Errorf("session state left on the connection: settings %q, advisory locks %q, LISTEN channels %q, prepared statements %q",
			settings, locks, channels, prepared)
	}

	for _, m := range all {
		t.Logf("%-62s %d statement(s), %d round trip(s)", m.name, len(m.statements), m.roundTrips)
	}
}

func rtInt64(v int64) *int64 { return &v }

var (
	rtComment = regexp.MustCompile(`--[^\n]*`)
	// Session-level state, which a transaction-pooling proxy cannot carry:
	// SET (SET LOCAL is transaction-scoped but pins RDS Proxy as well),
	// PREPARE, LISTEN, session advisory locks (pg_advisory_xact_lock is
	// transaction-scoped and fine), set_config.
	rtSessionPatterns = []struct {
		what string
		re   *regexp.Regexp
	}{
		{"SET", regexp.MustCompile(`(?is)(^|;)\s*SET\s`)},
		{"RESET", regexp.MustCompile(`(?is)(^|;)\s*RESET\s`)},
		{"PREPARE", regexp.MustCompile(`(?i)\bPREPARE\b`)},
		{"LISTEN", regexp.MustCompile(`(?i)\bLISTEN\b`)},
		{"a session advisory lock", regexp.MustCompile(`(?i)\bpg_(try_)?advisory_lock(_shared)?\s*\(`)},
		{"set_config", regexp.MustCompile(`(?i)\bset_config\s*\(`)},
		{"more than one statement", regexp.MustCompile(`;\s*\S`)},
	}
)

// rtSessionState says which kind of session state a statement uses, or "".
func rtSessionState(sql string) string {
	s := rtComment.ReplaceAllString(sql, "")
	for _, p := range rtSessionPatterns {
		if p.re.MatchString(s) {
			return p.what
		}
	}
	return ""
}

// rtTracer counts what pgx runs: statements (with their text), and any
// prepare, batch or copy.
type rtTracer struct {
	mu         sync.Mutex
	statements []string
	prepared   []string // text of explicit prepares (there must be none)
	other      int
}

var (
	_ pgx.QueryTracer    = (*rtTracer)(nil)
	_ pgx.BatchTracer    = (*rtTracer)(nil)
	_ pgx.PrepareTracer  = (*rtTracer)(nil)
	_ pgx.CopyFromTracer = (*rtTracer)(nil)
)

func (r *rtTracer) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statements, r.prepared, r.other = nil, nil, 0
}

func (r *rtTracer) snapshot() ([]string, []string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.statements...), append([]string(nil), r.prepared...), r.other
}

func (r *rtTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statements = append(r.statements, d.SQL)
	return ctx
}

func (r *rtTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *rtTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.other++
	return ctx
}

func (r *rtTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statements = append(r.statements, d.SQL)
}

func (r *rtTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *rtTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.other++
	r.prepared = append(r.prepared, d.SQL)
	return ctx
}

func (r *rtTracer) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

func (r *rtTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.other++
	return ctx
}

func (r *rtTracer) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// rtWire counts the frontend messages that end a round trip: Sync (the end
// of an extended-protocol exchange), Query (a simple-protocol exchange) and
// Flush. The pool's liveness ping ("-- ping") is counted apart.
type rtWire struct {
	mu         sync.Mutex
	roundTrips int
	pings      int
	named      []string
}

func (w *rtWire) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roundTrips, w.pings, w.named = 0, 0, nil
}

func (w *rtWire) snapshot() (int, int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.roundTrips, w.pings, append([]string(nil), w.named...)
}

// rtConn parses what the client writes on one connection.
type rtConn struct {
	net.Conn
	w       *rtWire
	buf     []byte
	started bool // the startup message has been sent
}

func (c *rtConn) Write(p []byte) (int, error) {
	c.w.mu.Lock()
	c.buf = append(c.buf, p...)
	c.parse()
	c.w.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *rtConn) parse() {
	for {
		if !c.started {
			// Untyped: length, then a code (SSLRequest, GSSENCRequest,
			// CancelRequest or the protocol version of the StartupMessage).
			if len(c.buf) < 8 {
				return
			}
			n := int(binary.BigEndian.Uint32(c.buf[0:4]))
			if n < 8 || len(c.buf) < n {
				return
			}
			switch binary.BigEndian.Uint32(c.buf[4:8]) {
			case 80877103, 80877104, 80877102:
			default:
				c.started = true
			}
			c.buf = c.buf[n:]
			continue
		}
		if len(c.buf) < 5 {
			return
		}
		n := int(binary.BigEndian.Uint32(c.buf[1:5]))
		if n < 4 || len(c.buf) < 1+n {
			return
		}
		typ, body := c.buf[0], c.buf[5:1+n]
		switch typ {
		case 'S', 'H':
			c.w.roundTrips++
		case 'Q':
			if strings.TrimSpace(rtCString(body)) == "-- ping" {
				c.w.pings++
			} else {
				c.w.roundTrips++
			}
		case 'P':
			if name := rtCString(body); name != "" {
				c.w.named = append(c.w.named, name)
			}
		}
		c.buf = c.buf[1+n:]
	}
}

func rtCString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
