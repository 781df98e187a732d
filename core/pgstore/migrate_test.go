package pgstore_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// An applied migration whose text changed is refused before anything runs.
func TestMigrateRefusesChangedMigration(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	if _, err := e.Pool.Exec(ctx, `UPDATE queen.schema_migrations SET checksum = 'edited' WHERE version = '0002_types';
		UPDATE queen.schema_migrations SET checksum = 'old' WHERE version = 'routines'`); err != nil {
		t.Fatal(err)
	}
	_, err := pgstore.MigrateURL(ctx, e.URL)
	if !errors.Is(err, pgstore.ErrMigrationChanged) || !strings.Contains(err.Error(), "0002_types") {
		t.Fatalf("migrate over a changed migration: %v, want ErrMigrationChanged naming 0002_types", err)
	}
	if n := count(t, e, `SELECT count(*) FROM queen.schema_migrations WHERE version = 'routines' AND checksum = 'old'`); n != 1 {
		t.Fatal("the refused run replaced the routines")
	}
}

// A database migrated by a newer release (a rollback deploy runs the older
// migrate) is left as it is: nothing applied, routines not downgraded, and
// the run succeeds so the rollback completes.
func TestMigrateLeavesNewerDatabaseAlone(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	if _, err := e.Pool.Exec(ctx, `INSERT INTO queen.schema_migrations (version, checksum) VALUES ('9999_future', 'x');
		UPDATE queen.schema_migrations SET checksum = 'newer' WHERE version = 'routines';
		DELETE FROM queen.schema_migrations WHERE version = '0008_encryption'`); err != nil {
		t.Fatal(err)
	}
	res, err := pgstore.MigrateURL(ctx, e.URL)
	if err != nil {
		t.Fatalf("migrate a newer database: %v", err)
	}
	if !slices.Equal(res.Ahead, []string{"9999_future"}) || res.RoutinesReplaced || len(res.Applied) != 0 {
		t.Fatalf("result %+v, want ahead [9999_future], nothing applied or replaced", res)
	}
	if n := count(t, e, `SELECT count(*) FROM queen.schema_migrations WHERE version = 'routines' AND checksum = 'newer'`); n != 1 {
		t.Fatal("the newer routines were replaced")
	}
}

// The compatibility rule of sql/routines/: a deploy replaces the
// routines first and the function code after, so for a while the previous
// release's code calls the new routines. They must accept its calls.
// previousReleaseCalls are those calls, with the argument shapes of the
// release before payload encryption (push items without keyId, pops
// without keys); when a release changes a routine's contract, replace them
// with the calls of the release before it.
func TestPreviousReleaseCallsWork(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	// A populated database: queues, groups, cursors, a dead letter.
	pushN(t, e, "orders", "eu", "o", 5)
	pushN(t, e, "orders", "us", "u", 3)
	p := pop(t, e, queen.PopRequest{Queue: "orders", Partition: "eu", Batch: 2, ConsumerGroup: "billing"})
	mustAck(t, e, ack(p.Messages[0], "billing", p.LeaseID, queen.AckCompleted), ack(p.Messages[1], "billing", p.LeaseID, queen.AckDLQ))

	now := pgstoretest.Epoch.Add(time.Minute)
	call := func(sql string, args ...any) map[string]any {
		t.Helper()
		var raw []byte
		if err := e.Pool.QueryRow(ctx, sql, args...).Scan(&raw); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		if m, ok := out.(map[string]any); ok {
			return m
		}
		return map[string]any{"array": out}
	}

	pushed := call(`SELECT queen.push($1::json, $2::timestamptz)`,
		`[{"queue":"orders","partition":"eu","payload":{"n":99},"transactionId":"prev-1","traceId":"tr"},
		  {"queue":"fresh","partition":"Default","payload":[1,2],"transactionId":"prev-2"}]`, now)["array"].([]any)
	if len(pushed) != 2 || pushed[0].(map[string]any)["status"] != "queued" || pushed[0].(map[string]any)["offset"] != 5.0 {
		t.Fatalf("previous release's push: %v", pushed)
	}
	// Its generated ids (derived from a seed, not stored, since migration
	// 0017) are the ones the log delivers.
	gen := call(`SELECT queen.push($1::json, $2::timestamptz)`,
		`[{"queue":"gen","partition":"a","payload":1},{"queue":"gen","partition":"b","payload":2},
		  {"queue":"gen","partition":"a","payload":3}]`, now)["array"].([]any)
	for _, part := range []string{"a", "b"} {
		var want []any
		for _, g := range gen {
			if g.(map[string]any)["partition"] == part {
				want = append(want, g.(map[string]any)["transactionId"])
			}
		}
		got := pop(t, e, queen.PopRequest{Queue: "gen", Partition: part, Batch: 10, ConsumerGroup: "check"})
		if len(got.Messages) != len(want) {
			t.Fatalf("previous release's push to gen/%s: %v; popped %d messages", part, gen, len(got.Messages))
		}
		for i, m := range got.Messages {
			if m.TransactionID != want[i] {
				t.Fatalf("gen/%s message %d: popped transactionId %s, the previous release's push returned %v",
					part, i, m.TransactionID, want[i])
			}
		}
	}
	// The previous release's Go core pushes across partitions through
	// push_v2 (JSON in, arrays out), rendering generated ids from its seed.
	var (
		v2Nums, v2Offs []int64
		v2IDs          []*string
		v2Fresh        []bool
	)
	if err := e.Pool.QueryRow(ctx, `SELECT part_nums, offsets, txids, fresh FROM queen.push_v2($1::json, $2::timestamptz, $3)`,
		`[{"queue":"v2push","partition":"a","payload":1},{"queue":"v2push","partition":"b","payload":2,"transactionId":"mine"},
		  {"queue":"v2push","partition":"a","payload":3}]`, now, int64(77)).Scan(&v2Nums, &v2Offs, &v2IDs, &v2Fresh); err != nil ||
		!slices.Equal(v2Offs, []int64{0, 0, 1}) || !slices.Equal(v2Fresh, []bool{true, true, true}) || len(v2IDs) != 3 ||
		v2IDs[0] != nil || v2IDs[1] == nil || *v2IDs[1] != "mine" || v2IDs[2] != nil {
		t.Fatalf("previous release's push_v2: offsets %v fresh %v ids %v (%v)", v2Offs, v2Fresh, v2IDs, err)
	}
	v2 := pop(t, e, queen.PopRequest{Queue: "v2push", Partition: "a", Batch: 10, ConsumerGroup: "check"})
	if len(v2.Messages) != 2 || v2.Messages[0].TransactionID != pgstore.GeneratedID(now, v2Nums[0], 0, 77) ||
		v2.Messages[1].TransactionID != pgstore.GeneratedID(now, v2Nums[2], 1, 77) {
		t.Fatalf("previous release's push_v2 to v2push/a: popped %+v", v2.Messages)
	}
	popped := call(`SELECT queen.pop($1::json, $2::timestamptz)`,
		`{"queue":"orders","partition":"eu","group":"billing","batch":10,"partitions":1,"autoAck":false,"mode":"all"}`, now)
	msgs := popped["messages"].([]any)
	if len(msgs) != 4 || msgs[3].(map[string]any)["transactionId"] != "prev-1" {
		t.Fatalf("previous release's pop: %v", popped)
	}
	if d := msgs[3].(map[string]any)["data"].(map[string]any); d["n"] != 99.0 {
		t.Fatalf("previous release's pop data: %v", d)
	}
	lease := popped["leaseId"].(string)
	pid := msgs[0].(map[string]any)["partitionId"].(string)
	acked := call(`SELECT queen.ack($1::json, $2::timestamptz)`,
		`[{"partitionId":"`+pid+`","transactionId":"prev-1","status":"completed","group":"billing","leaseId":"`+lease+`"}]`, now)
	if acked["ok"] != true {
		t.Fatalf("previous release's ack: %v", acked)
	}
	// The previous release's Go core acks through ack_v2 (JSON in, arrays
	// out): a completed message and a dead letter with its error.
	two := pop(t, e, queen.PopRequest{Queue: "gen", Partition: "a", Batch: 10, ConsumerGroup: "v2"})
	items, _ := json.Marshal([]map[string]string{
		{"partitionId": two.Messages[0].PartitionID, "transactionId": two.Messages[0].TransactionID, "status": "completed",
			"group": "v2", "leaseId": two.LeaseID},
		{"partitionId": two.Messages[1].PartitionID, "transactionId": two.Messages[1].TransactionID, "status": "dlq",
			"group": "v2", "error": "poison"}})
	var (
		ok        bool
		results   []string
		dlqs      []bool
		committed []*int64
	)
	if err := e.Pool.QueryRow(ctx, `SELECT ok, results, dlqs, committed FROM queen.ack_v2($1::json, $2::timestamptz)`,
		string(items), now).Scan(&ok, &results, &dlqs, &committed); err != nil || !ok ||
		!slices.Equal(results, []string{"committed", "dead-lettered"}) || !slices.Equal(dlqs, []bool{false, true}) ||
		committed[1] == nil || *committed[1] != 1 {
		t.Fatalf("previous release's ack_v2: ok %v results %v dlqs %v committed %v (%v)", ok, results, dlqs, committed, err)
	}
	var dlqErr string
	if err := e.Pool.QueryRow(ctx, `SELECT error FROM queen.dlq WHERE transaction_id = $1`,
		two.Messages[1].TransactionID).Scan(&dlqErr); err != nil || dlqErr != "poison" {
		t.Fatalf("previous release's ack_v2 dead letter: error %q (%v)", dlqErr, err)
	}
	tx := call(`SELECT queen.transact($1::json, $2::json, $3::uuid[], $4::timestamptz)`,
		`[]`, `[{"queue":"results","partition":"Default","payload":{"done":true},"transactionId":"prev-3"}]`, []string{}, now)
	if tx["ok"] != true {
		t.Fatalf("previous release's transaction: %v", tx)
	}
	retried := call(`SELECT queen.dlq_retry($1::uuid, $2::text, $3::text, $4::text, $5::timestamptz)`,
		p.Messages[1].PartitionID, p.Messages[1].TransactionID, nil, "prev-4", now)
	if retried["status"] != "queued" {
		t.Fatalf("previous release's DLQ retry: %v", retried)
	}
	// extend_lease and seek raise QN404/QN409 now (seek_v2, extend_lease_v2);
	// the previous release reads statuses.
	live := pop(t, e, queen.PopRequest{Queue: "orders", Partition: "us", ConsumerGroup: "billing"})
	for _, c := range []struct {
		lease string
		want  string
	}{{live.LeaseID, "ok"}, {"7d0c5e0e-0000-4000-8000-000000000000", "unknown"}} {
		if got := call(`SELECT queen.extend_lease($1::uuid, $2::int, $3::timestamptz)`, c.lease, 30, now); got["status"] != c.want ||
			(c.want == "ok" && got["expiresAt"] == nil) {
			t.Fatalf("previous release's extend_lease of %s: %v, want status %s", c.lease, got, c.want)
		}
	}
	for _, c := range []struct {
		queue, target, want string
	}{
		{"orders", `{"toEnd":true}`, "ok"},
		{"nope", `{"toEnd":true}`, "queue_not_found"},
		{"orders", `{"offsets":{"mars":1}}`, "partition_not_found"},
	} {
		got := call(`SELECT queen.seek($1::text, $2::text, $3::json, $4::timestamptz)`, "audit", c.queue, c.target, now)
		if got["status"] != c.want || (c.want == "ok" && len(got["partitions"].([]any)) != 2) ||
			(c.want == "partition_not_found" && got["partition"] != "mars") {
			t.Fatalf("previous release's seek of %s to %s: %v, want status %s", c.queue, c.target, got, c.want)
		}
	}

	// The release before this one pushes to one partition through
	// push_partition, which returns every item's offset and id (the ids it
	// generated are derived now, migration 0017).
	var ppOffsets []int64
	var ppIDs []string
	var ppFresh []bool
	if err := e.Pool.QueryRow(ctx, `SELECT fresh, offsets, txids FROM queen.push_partition('one', 'p',
		ARRAY[NULL, 'prev-5', NULL]::text[], ARRAY['1', '2', '3'], NULL, NULL, NULL, $1::timestamptz)`, now).
		Scan(&ppFresh, &ppOffsets, &ppIDs); err != nil {
		t.Fatalf("previous release's push_partition: %v", err)
	}
	if !equal(ppFresh, []bool{true, true, true}) || !equal(ppOffsets, []int64{0, 1, 2}) || ppIDs[1] != "prev-5" {
		t.Fatalf("previous release's push_partition: %v %v %v", ppFresh, ppOffsets, ppIDs)
	}

	// What they wrote reads back through the current store.
	res := pop(t, e, queen.PopRequest{Queue: "fresh", Batch: 10})
	if len(res.Messages) != 1 || string(res.Messages[0].Data) != "[1, 2]" && string(res.Messages[0].Data) != "[1,2]" {
		t.Fatalf("current pop of the previous release's push: %+v", res.Messages)
	}
	res = pop(t, e, queen.PopRequest{Queue: "one", Batch: 10})
	if len(res.Messages) != 3 {
		t.Fatalf("current pop of the previous release's push_partition: %+v", res.Messages)
	}
	for i, m := range res.Messages {
		if m.TransactionID != ppIDs[i] || m.Offset != ppOffsets[i] {
			t.Errorf("popped %s at %d, push_partition returned %s at %d", m.TransactionID, m.Offset, ppIDs[i], ppOffsets[i])
		}
	}
}

// Migration 0014 rewrites the log: segments name their partition by
// number, and a segment of one message keeps it in scalar columns. A
// database with messages stored the old way reads the same after it: each
// message in order with its payload, transactionId and traceId, and the
// dedup keys of all of them (a segment's first, a key row) still live.
func TestMigrationToSmallSegmentsKeepsTheLog(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t) // its pool connects on first use, after the rewrite below
	conn, err := pgx.Connect(ctx, e.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The schema as 0013 left it, recorded as applied.
	script := `DROP SCHEMA queen CASCADE;
		CREATE SCHEMA queen;
		CREATE TABLE queen.schema_migrations (version text PRIMARY KEY, checksum text NOT NULL,
		                                      applied_at timestamptz NOT NULL DEFAULT now());
	`
	for _, m := range pgstore.Migrations() {
		if m.Version >= "0014" {
			break
		}
		sum := sha256.Sum256([]byte(m.SQL))
		script += m.SQL + fmt.Sprintf("\n;INSERT INTO queen.schema_migrations (version, checksum) VALUES ('%s', '%x');\n",
			m.Version, sum)
	}
	// Partition a: a segment of three messages (the last two with key rows)
	// and one of one; partition b: one of one.
	script += `
		INSERT INTO queen.queues (name, created_at, updated_at) VALUES ('old', '2026-01-01 11:59:00Z', '2026-01-01 11:59:00Z');
		INSERT INTO queen.partitions (id, queue_id, name, last_offset, last_pushed_at, created_at)
		SELECT p.id::uuid, x.id, p.name, p.last, '2026-01-01 11:59:00Z', '2026-01-01 11:59:00Z'
		FROM queen.queues x, (VALUES ('a0000000-0000-4000-8000-000000000000', 'a', 3),
		                             ('b0000000-0000-4000-8000-000000000000', 'b', 0)) AS p(id, name, last);
		INSERT INTO queen.segments (partition_id, base_offset, created_at, txids, payloads, trace_ids) VALUES
		  ('a0000000-0000-4000-8000-000000000000', 0, '2026-01-01 11:59:00Z', '{m0,m1,m2}',
		   ARRAY['{"n": 0}', '{"n": 1}', '{"n": 2}'], ARRAY['t0', NULL, 't2']),
		  ('a0000000-0000-4000-8000-000000000000', 3, '2026-01-01 11:59:01Z', '{m3}', ARRAY['{"n": 3}'], NULL),
		  ('b0000000-0000-4000-8000-000000000000', 0, '2026-01-01 11:59:02Z', '{m4}', ARRAY['"four"'], NULL);
		INSERT INTO queen.dedup (key, msg_offset, created_at)
		SELECT queen.dedup_key('a0000000-0000-4000-8000-000000000000', 'm' || o), o, '2026-01-01 11:59:00Z'
		FROM generate_series(1, 2) o;`
	if _, err := conn.PgConn().Exec(ctx, script).ReadAll(); err != nil {
		t.Fatalf("the database before 0014: %v", err)
	}
	if res, err := pgstore.MigrateURL(ctx, e.URL); err != nil || len(res.Applied) == 0 || res.Applied[0] != "0014_small_segments" {
		t.Fatalf("migrate: %+v %v", res, err)
	}

	type msg struct {
		txid, data, trace string
		off               int64
	}
	read := func(partition string) []msg {
		var out []msg
		for _, m := range pop(t, e, queen.PopRequest{Queue: "old", Partition: partition, Batch: 10}).Messages {
			tr := ""
			if m.TraceID != nil {
				tr = *m.TraceID
			}
			out = append(out, msg{m.TransactionID, string(m.Data), tr, m.Offset})
		}
		return out
	}
	wantA := []msg{{"m0", `{"n": 0}`, "t0", 0}, {"m1", `{"n": 1}`, "", 1}, {"m2", `{"n": 2}`, "t2", 2}, {"m3", `{"n": 3}`, "", 3}}
	if got := read("a"); !slices.Equal(got, wantA) {
		t.Errorf("partition a after the migration: %+v, want %+v", got, wantA)
	}
	if got, want := read("b"), []msg{{"m4", `"four"`, "", 0}}; !slices.Equal(got, want) {
		t.Errorf("partition b after the migration: %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		partition, txid string
		off             int64
	}{{"a", "m0", 0}, {"a", "m2", 2}, {"a", "m3", 3}, {"b", "m4", 0}} {
		res, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "old", Partition: c.partition, Payload: payload(1), TransactionID: c.txid}})
		if err != nil || res[0].Status != queen.StatusDuplicate || res[0].Offset != c.off {
			t.Errorf("%s pushed again to %s: %+v %v, want a duplicate of offset %d", c.txid, c.partition, res, err, c.off)
		}
	}
	if res := pushN(t, e, "old", "a", "new", 1); res[0].Status != queen.StatusQueued || res[0].Offset != 4 {
		t.Errorf("a new message after the migration: %+v, want offset 4", res)
	}
}

// A schema change that cannot get its lock — a long transaction holds the
// table — gives up after lock_timeout, lets the pushes queued behind it
// through, and tries again until the long transaction has ended; pushes
// never wait for the long transaction itself.
func TestMigrationWaitsOutALongTransaction(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	hot := []queen.PushItem{{Queue: "hot", Partition: "p", Payload: json.RawMessage(`1`)}}
	if _, err := e.Store.Push(ctx, hot); err != nil {
		t.Fatal(err)
	}
	// The long transaction: a reader of queen.partitions, as a long
	// reaper pass or report is.
	long, err := e.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Rollback(ctx) //nolint:errcheck
	if _, err := long.Exec(ctx, "SELECT count(*) FROM queen.partitions"); err != nil {
		t.Fatal(err)
	}

	var pushes atomic.Int64
	var slowest atomic.Int64 // ns
	stop := make(chan struct{})
	pushed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				pushed <- nil
				return
			default:
			}
			t0 := time.Now()
			if _, err := e.Store.Push(ctx, hot); err != nil {
				pushed <- err
				return
			}
			if d := int64(time.Since(t0)); d > slowest.Load() {
				slowest.Store(d)
			}
			pushes.Add(1)
		}
	}()

	const lockTimeout = 300 * time.Millisecond
	retries := make(chan int, 100)
	migrated := make(chan error, 1)
	var res pgstore.MigrateResult
	go func() {
		conn, err := pgx.Connect(ctx, e.URL)
		if err != nil {
			migrated <- err
			return
		}
		defer conn.Close(ctx)
		res, err = pgstore.MigrateWithExtra(ctx, conn,
			[]pgstore.Migration{{Version: "9000_test_column", SQL: "ALTER TABLE queen.partitions ADD COLUMN test_column int;"}},
			pgstore.MigrateOptions{LockTimeout: lockTimeout, Backoff: 100 * time.Millisecond,
				OnRetry: func(step string, attempt int, err error) { retries <- attempt }})
		migrated <- err
	}()

	// Five timed-out attempts (about four seconds) while pushes go on.
	var before int64
	for i := 1; i <= 5; i++ {
		select {
		case <-retries:
		case err := <-migrated:
			t.Fatalf("migrate ended while the long transaction holds the table: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("no retry within a minute")
		}
		if i == 1 {
			before = pushes.Load()
		}
	}
	if pushes.Load() == before {
		t.Error("no push completed while the migration kept trying")
	}
	if err := long.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("migrate after the long transaction ended: %v", err)
	}
	close(stop)
	if err := <-pushed; err != nil {
		t.Fatalf("push: %v", err)
	}
	if res.Retries < 5 || !slices.Equal(res.Applied, []string{"9000_test_column"}) {
		t.Errorf("result %+v, want at least 5 retries and 9000_test_column applied", res)
	}
	// Without lock_timeout the pushes would have waited behind the
	// migration for as long as the long transaction lasted (seconds).
	if d := time.Duration(slowest.Load()); d > lockTimeout+time.Second {
		t.Errorf("a push waited %v, more than lock_timeout (%v) and a second", d, lockTimeout)
	}
	t.Logf("%d pushes, slowest %v, %d retries", pushes.Load(), time.Duration(slowest.Load()), res.Retries)
}

// A batched data migration runs chunk after chunk, each in a transaction
// of its own, is recorded only when a chunk finds nothing left, and goes on
// where an earlier run stopped.
func TestBatchedMigrationResumes(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	table := pgstore.Migration{Version: "9000_test_table", SQL: `CREATE TABLE queen.test_rows (id int PRIMARY KEY, done boolean NOT NULL DEFAULT false);
		INSERT INTO queen.test_rows (id) SELECT generate_series(1, 2500);`}
	batched := pgstore.Migration{Version: "9001_test_backfill", SQL: `-- queen:batched
		UPDATE queen.test_rows SET done = true WHERE id IN (SELECT id FROM queen.test_rows WHERE NOT done ORDER BY id LIMIT 1000);`}
	conn, err := pgx.Connect(ctx, e.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := pgstore.MigrateWithExtra(ctx, conn, []pgstore.Migration{table}, pgstore.MigrateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An earlier run did a first chunk and was cut off before the end.
	if _, err := e.Pool.Exec(ctx, `UPDATE queen.test_rows SET done = true WHERE id <= 1000`); err != nil {
		t.Fatal(err)
	}
	res, err := pgstore.MigrateWithExtra(ctx, conn, []pgstore.Migration{table, batched}, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Chunks != 2 || !slices.Equal(res.Applied, []string{"9001_test_backfill"}) {
		t.Errorf("result %+v, want the 1,500 rows left done in 2 chunks and the migration recorded", res)
	}
	if n := count(t, e, `SELECT count(*) FROM queen.test_rows WHERE NOT done`); n != 0 {
		t.Errorf("%d rows left undone", n)
	}
	// Recorded: the next run does nothing.
	if res, err := pgstore.MigrateWithExtra(ctx, conn, []pgstore.Migration{table, batched}, pgstore.MigrateOptions{}); err != nil ||
		res.Chunks != 0 || len(res.Applied) != 0 {
		t.Errorf("second run: %+v %v, want nothing to do", res, err)
	}
}

// Migrations are idempotent and safe when several processes start at once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	if _, err := e.Pool.Exec(ctx, "DROP SCHEMA queen CASCADE"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	applied := make([]int, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := pgstore.MigrateURL(ctx, e.URL)
			errs[i], applied[i] = err, len(res.Applied)
		}()
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrator %d: %v", i, err)
		}
		total += applied[i]
	}
	if total != len(pgstore.Migrations()) {
		t.Fatalf("migrations applied %d times in all, want each once (%d)", total, len(pgstore.Migrations()))
	}
	pushN(t, e, "q", "p", "m", 1)
}
