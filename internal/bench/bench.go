// Package bench measures Queen Serverless against the workloads of
// docs/benchmarks.md,
// through the core (the Store) and through the HTTP server, next to the raw
// ceiling of plain INSERTs into a bare table on the same Postgres. It
// prints a table with progress while it runs and writes JSON plus an SVG
// chart to a results folder.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
)

// Defaults of Config.
const (
	DefaultDuration   = 5 * time.Second
	DefaultClients    = 8
	DefaultPartitions = 1000
	DefaultResultsDir = "bench-results"
	// DefaultBacklog is the backlog the consume workloads drain.
	DefaultBacklog = 150000
	// DefaultStorageMessages is how many messages D measures.
	DefaultStorageMessages = 50000
	// DefaultScalePartitions is the wide side of S.
	DefaultScalePartitions = 10000
	// DefaultReapRows is how many messages and dedup keys R clears.
	DefaultReapRows = 200000
	// DefaultReapLeases is how many expired leases R expires.
	DefaultReapLeases = 20000
)

// Payload is the message every workload pushes.
const Payload = `{"hello":"world","n":12345}`

// Config configures a run.
type Config struct {
	// URL is a migrated Postgres database the run may fill and empty.
	URL string
	// Duration of each timed workload. Default DefaultDuration.
	Duration time.Duration
	// Clients per workload. Default DefaultClients.
	Clients int
	// Partitions for random-partition workloads. Default DefaultPartitions.
	Partitions int
	// ResultsDir receives results.json and results.svg. Default DefaultResultsDir.
	ResultsDir string
	// Backlog is the backlog of C10, C100 and F5. Default DefaultBacklog.
	Backlog int
	// StorageMessages is the message count of D. Default DefaultStorageMessages.
	StorageMessages int
	// ScalePartitions is the wide side of S. Default DefaultScalePartitions.
	ScalePartitions int
	// ReapRows is the messages, and the dedup keys, R clears. Default
	// DefaultReapRows.
	ReapRows int
	// ReapLeases is the expired leases R expires. Default DefaultReapLeases.
	ReapLeases int
	// Waiters is how many consumers W keeps long-polling. Default DefaultWaiters.
	Waiters int
	// WaitWindow is how long W measures their cost. Default DefaultWaitWindow.
	WaitWindow time.Duration
	// WaitSamples is W's number of push-to-delivery samples of each kind.
	// Default DefaultWaitSamples.
	WaitSamples int
	// Only, when set, runs just the workloads named (e.g. "P1", "raw-1").
	Only []string
	// Out receives the progress table. Default os.Stdout.
	Out io.Writer
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Clients <= 0 {
		c.Clients = DefaultClients
	}
	if c.Partitions <= 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Backlog <= 0 {
		c.Backlog = DefaultBacklog
	}
	if c.StorageMessages <= 0 {
		c.StorageMessages = DefaultStorageMessages
	}
	if c.ScalePartitions <= 0 {
		c.ScalePartitions = DefaultScalePartitions
	}
	if c.ReapRows <= 0 {
		c.ReapRows = DefaultReapRows
	}
	if c.ReapLeases <= 0 {
		c.ReapLeases = DefaultReapLeases
	}
	if c.Waiters <= 0 {
		c.Waiters = DefaultWaiters
	}
	if c.WaitWindow <= 0 {
		c.WaitWindow = DefaultWaitWindow
	}
	if c.WaitSamples <= 0 {
		c.WaitSamples = DefaultWaitSamples
	}
	if c.ResultsDir == "" {
		c.ResultsDir = DefaultResultsDir
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	return c
}

// Result is one measured workload.
type Result struct {
	Name    string  `json:"name"`
	Via     string  `json:"via"` // "core", "http" or "sql"
	What    string  `json:"what"`
	Ops     int64   `json:"ops"`
	Rows    int64   `json:"rows"`
	Seconds float64 `json:"seconds"`
	// Rate is rows (messages) per second.
	Rate   float64 `json:"rate"`
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
	Value  float64 `json:"value,omitempty"` // D: bytes per message; S: ratio
	Unit   string  `json:"unit"`
	Target string  `json:"target,omitempty"`
	Pass   *bool   `json:"pass,omitempty"`
}

// Report is a whole run.
type Report struct {
	StartedAt  time.Time `json:"startedAt"`
	Clients    int       `json:"clients"`
	Partitions int       `json:"partitions"`
	DurationS  float64   `json:"durationSeconds"`
	Postgres   string    `json:"postgres"`
	Results    []Result  `json:"results"`
}

type runner struct {
	cfg    Config
	pool   *pgxpool.Pool
	store  *pgstore.Store
	http   *httpTarget
	report Report
}

// Run runs the benchmark and writes its results.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.WithDefaults()
	pcfg, err := pgstore.PoolConfig(cfg.URL)
	if err != nil {
		return Report{}, err
	}
	pcfg.MaxConns = int32(cfg.Clients*5 + 4)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return Report{}, err
	}
	defer pool.Close()
	r := &runner{cfg: cfg, pool: pool, store: pgstore.New(pool, config.Config{}.WithDefaults().Store(nil, nil))}
	r.report = Report{StartedAt: time.Now().UTC(), Clients: cfg.Clients, Partitions: cfg.Partitions, DurationS: cfg.Duration.Seconds()}
	_ = pool.QueryRow(ctx, "SHOW server_version").Scan(&r.report.Postgres)
	if r.http, err = startHTTP(r.store, cfg.Clients*5); err != nil {
		return Report{}, err
	}
	defer r.http.close()

	fmt.Fprintf(cfg.Out, "Queen Serverless benchmark: %d clients, %d partitions, %s per workload, PostgreSQL %s\n\n",
		cfg.Clients, cfg.Partitions, cfg.Duration, r.report.Postgres)
	fmt.Fprintf(cfg.Out, "%-10s %-5s %-46s %12s %9s %9s  %s\n", "workload", "via", "what", "rate", "p50 ms", "p99 ms", "target")
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"D", r.storage},
		{"raw-1", r.rawSingle},
		{"raw-100", r.rawMulti},
		{"log-1", func(ctx context.Context) error { return r.logAppend(ctx, "log-1", 1, false) }},
		{"log-100", func(ctx context.Context) error { return r.logAppend(ctx, "log-100", 100, false) }},
		{"log-100-1", func(ctx context.Context) error { return r.logAppend(ctx, "log-100-1", 100, true) }},
		{"P1", func(ctx context.Context) error { return r.push(ctx, "P1", 1, false) }},
		{"P10", func(ctx context.Context) error { return r.push(ctx, "P10", 10, false) }},
		{"P100", func(ctx context.Context) error { return r.push(ctx, "P100", 100, false) }},
		{"P100-1", func(ctx context.Context) error { return r.push(ctx, "P100-1", 100, true) }},
		{"C10", func(ctx context.Context) error { return r.consume(ctx, "C10", 10) }},
		{"C100", func(ctx context.Context) error { return r.consume(ctx, "C100", 100) }},
		{"F5", r.fanout},
		{"S", r.scale},
		{"W", r.wait},
		{"R", r.reap},
	}
	for _, s := range steps {
		if !r.selected(s.name) {
			continue
		}
		if err := s.fn(ctx); err != nil {
			return r.report, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	r.judge()
	if err := r.write(); err != nil {
		return r.report, err
	}
	return r.report, nil
}

func (r *runner) selected(name string) bool {
	if len(r.cfg.Only) == 0 {
		return true
	}
	for _, o := range r.cfg.Only {
		if o == name {
			return true
		}
	}
	return false
}

func (r *runner) add(res Result) {
	r.report.Results = append(r.report.Results, res)
	rate := fmt.Sprintf("%.0f %s", res.Rate, res.Unit)
	if res.Name == "D" || res.Name == "S" {
		rate = fmt.Sprintf("%.2f %s", res.Value, res.Unit)
	}
	if res.Name == "W" && res.Unit != "ms p50" {
		rate = fmt.Sprintf("%.1f %s", res.Rate, res.Unit)
	}
	fmt.Fprintf(r.cfg.Out, "%-10s %-5s %-46s %12s %9.2f %9.2f  %s\n", res.Name, res.Via, res.What, rate, res.P50Ms, res.P99Ms, res.Target)
}

// measure runs fn from clients goroutines for the configured duration (or
// until fn says it is done) and times each call. fn returns the rows it
// handled; 0 rows and done=true ends that client.
func (r *runner) measure(ctx context.Context, clients int, fn func(ctx context.Context, client int) (rows int, done bool, err error)) (ops, rows int64, secs float64, lat []time.Duration, err error) {
	// Operations run on ctx; the clock only stops new ones from starting, so
	// every client completes at least one operation even on a busy machine.
	deadline := time.Now().Add(r.cfg.Duration)
	var mu sync.Mutex
	var firstErr error
	var nOps, nRows atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := progress(r.cfg.Out, start, r.cfg.Duration, &nRows)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for first := true; first || time.Now().Before(deadline); first = false {
				t0 := time.Now()
				n, done, err := fn(ctx, c)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					break
				}
				if done {
					break
				}
				mine = append(mine, time.Since(t0))
				nOps.Add(1)
				nRows.Add(int64(n))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	stop()
	return nOps.Load(), nRows.Load(), time.Since(start).Seconds(), lat, firstErr
}

// progress prints a live counter on one line until stopped.
func progress(out io.Writer, start time.Time, d time.Duration, rows *atomic.Int64) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprintf(out, "\r%60s\r", "")
				return
			case <-t.C:
				el := time.Since(start)
				fmt.Fprintf(out, "\r  … %4.0f%%  %d rows, %.0f/s", 100*el.Seconds()/d.Seconds(), rows.Load(), float64(rows.Load())/el.Seconds())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func percentile(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return float64(s[i].Microseconds()) / 1000
}

func result(name, via, what string, ops, rows int64, secs float64, lat []time.Duration) Result {
	return Result{Name: name, Via: via, What: what, Ops: ops, Rows: rows, Seconds: secs,
		Rate: float64(rows) / secs, P50Ms: percentile(lat, 0.5), P99Ms: percentile(lat, 0.99), Unit: "msg/s"}
}

// ---- raw ceilings

func (r *runner) rawSingle(ctx context.Context) error {
	if _, err := r.pool.Exec(ctx, "DROP TABLE IF EXISTS bench_raw; CREATE TABLE bench_raw (partition_id int, payload jsonb, txid text)"); err != nil {
		return err
	}
	ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
		_, err := r.pool.Exec(ctx, "INSERT INTO bench_raw VALUES ($1, $2::jsonb, $3)", rand.IntN(r.cfg.Partitions), Payload, queen.NewUUIDv7())
		return 1, false, err
	})
	if err != nil {
		return err
	}
	res := result("raw-1", "sql", "single-row INSERT into a bare table", ops, rows, secs, lat)
	res.Unit = "rows/s"
	r.add(res)
	return nil
}

func (r *runner) rawMulti(ctx context.Context) error {
	if _, err := r.pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_raw (partition_id int, payload jsonb, txid text); TRUNCATE bench_raw"); err != nil {
		return err
	}
	const n = 100
	ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
		ids := make([]int32, n)
		txids := make([]string, n)
		for i := range ids {
			ids[i], txids[i] = int32(rand.IntN(r.cfg.Partitions)), queen.NewUUIDv7()
		}
		_, err := r.pool.Exec(ctx, "INSERT INTO bench_raw SELECT p, $2::jsonb, t FROM unnest($1::int[], $3::text[]) AS u(p, t)", ids, Payload, txids)
		return n, false, err
	})
	if err != nil {
		return err
	}
	res := result("raw-100", "sql", "multi-row INSERT (100 rows) into a bare table", ops, rows, secs, lat)
	res.Unit = "rows/s"
	r.add(res)
	_, err = r.pool.Exec(ctx, "DROP TABLE bench_raw")
	return err
}

// ---- the log's own floor

// logAppendSQL is the least a push can do in this design
// (docs/semantics.md §3.1.3): lock
// the partitions in one order, take the next offsets and write one segment
// per partition, into the engine's own tables and indexes, in one
// transaction. No dedup, no consumers' rows, no checks, no reply. Its items
// have no transactionIds, as P1's, P100's and P100-1's: their ids are
// derived from a seed (migration 0017), so it stores a seed and no ids,
// as a push does. A routine (PL/pgSQL, so its plans are kept, as the
// engine's are) of the benchmark's database; one message takes two
// statements, a batch one.
const logAppendSQL = `
CREATE OR REPLACE FUNCTION public.bench_log_append(p_queue text, p_parts text[], p_payloads text[], p_seed bigint)
RETURNS void LANGUAGE plpgsql SET jit = off AS $fn$  -- as the engine's routines
DECLARE
    v_num bigint;
    v_off bigint;
BEGIN
    IF cardinality(p_payloads) = 1 THEN
        UPDATE queen.partitions p SET last_offset = p.last_offset + 1, last_pushed_at = now()
        FROM queen.queues x
        WHERE x.name = p_queue AND p.queue_id = x.id AND p.name = p_parts[1]
        RETURNING p.num, p.last_offset INTO v_num, v_off;
        INSERT INTO queen.segments (partition_num, base_offset, created_at, payload, located, id_seed)
        VALUES (v_num, v_off, now(), p_payloads[1], true, p_seed);
        RETURN;
    END IF;
    WITH i AS (
        SELECT u.part, u.payload, u.o
        FROM unnest(p_parts, p_payloads) WITH ORDINALITY AS u(part, payload, o)
    ),
    l AS MATERIALIZED (
        SELECT p.id, p.num, p.name, p.last_offset
        FROM queen.partitions p JOIN queen.queues x ON x.id = p.queue_id
        WHERE x.name = p_queue AND p.name IN (SELECT i.part FROM i)
        ORDER BY p.num
        FOR NO KEY UPDATE OF p
    ),
    upd AS (
        UPDATE queen.partitions p SET last_offset = l.last_offset + c.n, last_pushed_at = now()
        FROM l JOIN (SELECT i.part, count(*) AS n FROM i GROUP BY i.part) c ON c.part = l.name
        WHERE p.id = l.id
    )
    INSERT INTO queen.segments (partition_num, base_offset, created_at, payload, payloads, located, id_seed, id_count)
    SELECT l.num, l.last_offset + 1, now(),
           CASE WHEN count(*) = 1 THEN min(i.payload) END,
           CASE WHEN count(*) > 1 THEN array_agg(i.payload ORDER BY i.o) END,
           true, p_seed, CASE WHEN count(*) > 1 THEN count(*) END
    FROM i JOIN l ON l.name = i.part
    GROUP BY l.num, l.last_offset;
END
$fn$`

// logAppend measures bench_log_append with the items P1, P100 and P100-1
// push: the rate this design allows before the engine does anything of its
// own, the ceiling those workloads are judged against next to raw-1 and
// raw-100.
func (r *runner) logAppend(ctx context.Context, name string, n int, one bool) error {
	if _, err := r.pool.Exec(ctx, logAppendSQL); err != nil {
		return err
	}
	queue := "bench-" + name
	if err := r.createPartitions(ctx, queue); err != nil { // as in the push workloads
		return err
	}
	ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
		parts, payloads := make([]string, n), make([]string, n)
		for i, it := range items(queue, n, r.cfg.Partitions, one) {
			parts[i], payloads[i] = it.Partition, Payload
		}
		_, err := r.pool.Exec(ctx, "SELECT public.bench_log_append($1, $2, $3, $4)", queue, parts, payloads, rand.Int64())
		return n, false, err
	})
	if err != nil {
		return err
	}
	what := fmt.Sprintf("bare log append, %d per push, random partitions", n)
	if one {
		what = fmt.Sprintf("bare log append, %d per push, one partition", n)
	}
	res := result(name, "sql", what, ops, rows, secs, lat)
	res.Target = "the design's ceiling for P" + strings.TrimPrefix(name, "log-")
	r.add(res)
	return nil
}

// ---- push

// createPartitions creates queue's random-partition workload partitions
// (p-0 … p-N-1) with one message each, so a timed part measures appends.
func (r *runner) createPartitions(ctx context.Context, queue string) error {
	warm := make([]queen.PushItem, r.cfg.Partitions)
	for i := range warm {
		warm[i] = queen.PushItem{Queue: queue, Partition: fmt.Sprintf("p-%d", i), Payload: json.RawMessage(Payload)}
	}
	_, err := r.store.Push(ctx, warm)
	return err
}

func items(queue string, n, partitions int, one bool) []queen.PushItem {
	out := make([]queen.PushItem, n)
	for i := range out {
		p := "p-0"
		if !one {
			p = fmt.Sprintf("p-%d", rand.IntN(partitions))
		}
		out[i] = queen.PushItem{Queue: queue, Partition: p, Payload: json.RawMessage(Payload)}
	}
	return out
}

func (r *runner) push(ctx context.Context, name string, n int, one bool) error {
	what := fmt.Sprintf("push %d per request, random partitions", n)
	if one {
		what = fmt.Sprintf("push %d per request, one partition", n)
	}
	for _, via := range []string{"core", "http"} {
		queue := fmt.Sprintf("bench-%s-%s", name, via)
		// Create the partitions first: the timed part measures appends.
		if !one {
			if err := r.createPartitions(ctx, queue); err != nil {
				return err
			}
		}
		ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
			batch := items(queue, n, r.cfg.Partitions, one)
			var err error
			if via == "core" {
				_, err = r.store.Push(ctx, batch)
			} else {
				err = r.http.push(ctx, batch)
			}
			return n, false, err
		})
		if err != nil {
			return err
		}
		r.add(result(name, via, what, ops, rows, secs, lat))
	}
	return nil
}

// fill pushes n messages into queue over partitions, untimed.
func (r *runner) fill(ctx context.Context, queue string, n, partitions int) error {
	per := n / r.cfg.Clients
	return r.eachClient(func() error {
		for done := 0; done < per; done += 500 {
			if _, err := r.store.Push(ctx, items(queue, min(500, per-done), partitions, false)); err != nil {
				return err
			}
		}
		return nil
	})
}

// eachClient runs fn on Clients goroutines at once (untimed work) and
// returns the first error any of them returned.
func (r *runner) eachClient(fn func() error) error {
	var wg sync.WaitGroup
	errs := make(chan error, r.cfg.Clients)
	for c := 0; c < r.cfg.Clients; c++ {
		wg.Go(func() {
			if err := fn(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// ---- consume

func (r *runner) consume(ctx context.Context, name string, batch int) error {
	for _, via := range []string{"core", "http"} {
		queue := fmt.Sprintf("bench-%s-%s", name, via)
		backlog := r.cfg.Backlog
		fmt.Fprintf(r.cfg.Out, "  filling a backlog of %d messages…", backlog)
		if err := r.fill(ctx, queue, backlog, r.cfg.Partitions); err != nil {
			return err
		}
		fmt.Fprintf(r.cfg.Out, "\r%60s\r", "")
		ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
			n, err := r.popAck(ctx, via, queen.PopRequest{Queue: queue, Batch: batch})
			return n, err == nil && n == 0, err
		})
		if err != nil {
			return err
		}
		r.add(result(name, via, fmt.Sprintf("pop batch %d + ack batch, queue mode", batch), ops, rows, secs, lat))
	}
	return nil
}

// popAck pops one batch and acks it whole; it returns the messages handled.
func (r *runner) popAck(ctx context.Context, via string, req queen.PopRequest) (int, error) {
	if via == "http" {
		return r.http.popAck(ctx, req)
	}
	res, err := r.store.Pop(ctx, req)
	if err != nil || len(res.Messages) == 0 {
		return 0, err
	}
	acks := make([]queen.Ack, len(res.Messages))
	for i, m := range res.Messages {
		acks[i] = queen.Ack{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: queen.AckCompleted,
			ConsumerGroup: req.ConsumerGroup, LeaseID: res.LeaseID}
	}
	_, err = r.store.Ack(ctx, acks)
	return len(res.Messages), err
}

func (r *runner) fanout(ctx context.Context) error {
	const groups = 5
	backlog := r.cfg.Backlog / 4
	queue := "bench-F5"
	fmt.Fprintf(r.cfg.Out, "  filling a backlog of %d messages…", backlog)
	if err := r.fill(ctx, queue, backlog, r.cfg.Partitions); err != nil {
		return err
	}
	fmt.Fprintf(r.cfg.Out, "\r%60s\r", "")
	ops, rows, secs, lat, err := r.measure(ctx, groups*r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
		group := fmt.Sprintf("group-%d", c%groups)
		n, err := r.popAck(ctx, "core", queen.PopRequest{Queue: queue, ConsumerGroup: group, Batch: 100})
		return n, err == nil && n == 0, err
	})
	if err != nil {
		return err
	}
	res := result("F5", "core", fmt.Sprintf("%d groups × %d clients, each group reads all", groups, r.cfg.Clients), ops, rows, secs, lat)
	res.Unit = "deliveries/s"
	r.add(res)
	return nil
}

// scale compares pop latency at 10,000 partitions with 10 partitions, in
// three rounds (a backlog everywhere; the wide queue drained and refilled;
// the same after VACUUM), each popping both queues in turn.
func (r *runner) scale(ctx context.Context) error {
	const pops = 400
	wide := r.cfg.ScalePartitions
	narrow, broad := "bench-S-10", fmt.Sprintf("bench-S-%d", wide)
	// The narrow queue holds enough for the three rounds below; the wide one
	// ~2 messages a partition, so each of its pops is a first visit.
	for _, q := range []struct {
		name         string
		parts, total int
	}{{narrow, 10, 3*pops + 30}, {broad, wide, max(3*wide, 2*pops)}} {
		fmt.Fprintf(r.cfg.Out, "  filling %d partitions…", q.parts)
		all := make([]queen.PushItem, 0, q.total)
		for i := 0; i < q.total; i++ {
			all = append(all, queen.PushItem{Queue: q.name, Partition: fmt.Sprintf("p-%d", i%q.parts), Payload: json.RawMessage(Payload)})
		}
		for len(all) > 0 {
			n := min(1000, len(all))
			if _, err := r.store.Push(ctx, all[:n]); err != nil {
				return err
			}
			all = all[n:]
		}
		fmt.Fprintf(r.cfg.Out, "\r%60s\r", "")
	}
	// Each round pops the two queues in turn, one message at a time, so both
	// see the same machine: whatever else runs (a checkpoint, autovacuum
	// after the workloads before) slows both alike.
	round := func(what string) error {
		lat10, latWide, err := r.popPaired(ctx, narrow, broad, pops)
		if err != nil {
			return err
		}
		p10, pWide := percentile(lat10, 0.5), percentile(latWide, 0.5)
		suffix := ""
		if what != "" {
			suffix = ", " + what
		}
		for _, m := range []struct {
			parts int
			lat   []time.Duration
			p50   float64
		}{{10, lat10, p10}, {wide, latWide, pWide}} {
			res := result("S", "core", fmt.Sprintf("pop p50 at %d partitions%s", m.parts, suffix), int64(pops), int64(pops), 0, m.lat)
			res.Rate, res.Unit, res.Value = m.p50, "ms p50", m.p50
			r.add(res)
		}
		ratio := fmt.Sprintf("pop p50 ratio %d / 10 partitions", wide)
		if what != "" {
			ratio = fmt.Sprintf("pop p50 ratio %d (%s) / 10", wide, what)
		}
		r.add(Result{Name: "S", Via: "core", What: ratio, Value: pWide / p10, Unit: "×", P50Ms: pWide, Target: "≤ 1.5"})
		return nil
	}
	if err := round(""); err != nil {
		return err
	}

	// Again after every one of the wide queue's partitions was consumed:
	// a pop's cost must not grow with consumed partitions.
	for drained := 0; ; {
		res, err := r.store.Pop(ctx, queen.PopRequest{Queue: broad, Batch: queen.MaxBatch, Partitions: queen.MaxPartitionsPerPop, AutoAck: true})
		if err != nil {
			return err
		}
		if len(res.Messages) == 0 {
			break
		}
		drained += len(res.Messages)
		fmt.Fprintf(r.cfg.Out, "\r  draining %d partitions: %d messages…", wide, drained)
	}
	fmt.Fprintf(r.cfg.Out, "\r%60s\r", "")
	// Once right after the drain (the dead ready rows of the drain still in
	// the scan index), and once more after the VACUUM autovacuum would run
	// within a minute (migration 0003 sets a low threshold for that table).
	for i, what := range []string{"all consumed just before", "all consumed, after VACUUM"} {
		if i == 1 {
			if _, err := r.pool.Exec(ctx, "VACUUM queen.ready"); err != nil {
				return err
			}
		}
		fresh := make([]queen.PushItem, pops)
		for j := range fresh {
			fresh[j] = queen.PushItem{Queue: broad, Partition: fmt.Sprintf("p-%d", (j*wide/pops+i)%wide), Payload: json.RawMessage(Payload)}
		}
		if _, err := r.store.Push(ctx, fresh); err != nil {
			return err
		}
		if err := round(what); err != nil {
			return err
		}
	}
	return nil
}

// popPaired times n pops of one message from each of two queues, taken in
// turn (a, b, a, b, …), each acked under its lease.
func (r *runner) popPaired(ctx context.Context, a, b string, n int) (latA, latB []time.Duration, err error) {
	for i := 0; i < n; i++ {
		for _, q := range []struct {
			name string
			lat  *[]time.Duration
		}{{a, &latA}, {b, &latB}} {
			l, err := r.popOne(ctx, q.name)
			if err != nil {
				return nil, nil, fmt.Errorf("bench S: pop %d of %d of %s: %w", i+1, n, q.name, err)
			}
			*q.lat = append(*q.lat, l)
		}
	}
	return latA, latB, nil
}

// popOne times a wildcard pop of one message from queue and acks it under
// its lease; a pop that finds nothing is an error (messages wait).
func (r *runner) popOne(ctx context.Context, queue string) (time.Duration, error) {
	t0 := time.Now()
	res, err := r.store.Pop(ctx, queen.PopRequest{Queue: queue, Batch: 1})
	if err != nil {
		return 0, err
	}
	lat := time.Since(t0)
	if len(res.Messages) == 0 {
		return 0, errors.New("found nothing while messages wait")
	}
	m := res.Messages[0]
	_, err = r.store.Ack(ctx, []queen.Ack{{PartitionID: m.PartitionID, TransactionID: m.TransactionID,
		Status: queen.AckCompleted, LeaseID: res.LeaseID}})
	return lat, err
}

// storage measures D: on-disk bytes per message beyond payload and
// transactionId while the dedup keys are live (the default window), at 10
// messages per push to one partition and at 10 per push to random
// partitions. What a queue costs is the growth of the log (segments: heap,
// TOAST and indexes) and of the dedup keys (heap and indexes) while it is
// pushed to (see storedBytes); the queues are pushed to one after the
// other. The items carry no transactionId, as in every other workload; the
// same two with ids the client made (UUIDv7s) follow, for the record: the
// engine keeps a dedup key for those, where a generated id needs none.
func (r *runner) storage(ctx context.Context) error {
	for _, c := range []struct{ spread, ids bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		queue, what, target := "bench-D", "10 per push to one partition", "≤ 120 B"
		if c.spread {
			queue, what, target = "bench-D-random", "10 per push to random partitions", "≤ 150 B"
		}
		if c.ids {
			queue, what, target = queue+"-ids", what+", client ids", "report"
		}
		before, err := r.storedBytes(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.cfg.Out, "  pushing %d messages, %s…", r.cfg.StorageMessages, what)
		if err := r.storageFill(ctx, queue, c.spread, c.ids); err != nil {
			return err
		}
		fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
		after, err := r.storedBytes(ctx)
		if err != nil {
			return err
		}
		var payload, msgs int64
		// (a derived id, migration 0017, stores nothing: u.t is NULL)
		err = r.pool.QueryRow(ctx, `SELECT coalesce(sum(octet_length(u.p) + coalesce(octet_length(u.t), 0)), 0), count(*)
			FROM queen.segments s JOIN queen.partitions p ON p.num = s.partition_num JOIN queen.queues x ON x.id = p.queue_id,
			     unnest(queen.seg_all(s.payload, s.payloads), queen.seg_all(s.txid, s.txids)) AS u(p, t)
			WHERE x.name = $1`, queue).Scan(&payload, &msgs)
		if err != nil {
			return err
		}
		per := float64(after-before-payload) / float64(msgs)
		r.add(Result{Name: "D", Via: "sql", What: fmt.Sprintf("bytes/msg beyond payload+txid, %s, dedup keys live (%d msgs)", what, msgs),
			Value: per, Unit: "B/msg", Rows: msgs, Target: target})
	}
	return nil
}

// storedBytes is the size of the log and of the dedup keys: the main fork
// of each table, its TOAST table and their indexes. It vacuums them first:
// when several backends extend a table at once, Postgres adds empty pages in
// bulk for the inserts to come, and VACUUM gives back those still empty at
// the end. Free-space and visibility maps are a fixed cost per table, not
// per message, and are left out.
func (r *runner) storedBytes(ctx context.Context) (int64, error) {
	if _, err := r.pool.Exec(ctx, "VACUUM queen.segments, queen.dedup"); err != nil {
		return 0, err
	}
	var n int64
	err := r.pool.QueryRow(ctx, `SELECT sum(pg_relation_size(c.oid))::bigint FROM pg_class c
		WHERE c.oid IN (SELECT t.oid FROM pg_class t WHERE t.oid IN ('queen.segments'::regclass, 'queen.dedup'::regclass)
		                UNION SELECT t.reltoastrelid FROM pg_class t
		                      WHERE t.oid IN ('queen.segments'::regclass, 'queen.dedup'::regclass) AND t.reltoastrelid <> 0)
		   OR c.oid IN (SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
		                WHERE t.oid IN ('queen.segments'::regclass, 'queen.dedup'::regclass)
		                   OR t.oid IN (SELECT reltoastrelid FROM pg_class
		                                WHERE oid IN ('queen.segments'::regclass, 'queen.dedup'::regclass)))`).Scan(&n)
	return n, err
}

// storageFill pushes StorageMessages messages to queue, 10 per push: each
// push to one random partition (one segment), or each item to a random one;
// with ids, each item carries a transactionId of its own.
func (r *runner) storageFill(ctx context.Context, queue string, spread, ids bool) error {
	total := int64(r.cfg.StorageMessages)
	var n atomic.Int64
	return r.eachClient(func() error {
		for n.Add(10) <= total {
			batch := items(queue, 10, r.cfg.Partitions, false)
			p := fmt.Sprintf("p-%d", rand.IntN(r.cfg.Partitions))
			for i := range batch {
				if !spread {
					batch[i].Partition = p
				}
				if ids {
					batch[i].TransactionID = queen.NewUUIDv7()
				}
			}
			if _, err := r.store.Push(ctx, batch); err != nil {
				return err
			}
		}
		return nil
	})
}

// judge compares results with the targets (docs/benchmarks.md).
func (r *runner) judge() {
	find := func(name, via string) *Result {
		for i := range r.report.Results {
			if res := &r.report.Results[i]; res.Name == name && res.Via == via {
				return res
			}
		}
		return nil
	}
	set := func(res *Result, target string, pass bool) {
		if res != nil {
			res.Target, res.Pass = target, &pass
		}
	}
	raw1, raw100 := find("raw-1", "sql"), find("raw-100", "sql")
	// ofLog says how close a push workload came to the bare log append.
	ofLog := func(p *Result, log string) string {
		l, raw := find(log, "sql"), raw100
		if log == "log-1" {
			raw = raw1
		}
		if l == nil || raw == nil {
			return ""
		}
		return fmt.Sprintf("; %s is %.0f%% of raw, this %.0f%% of %s", log, 100*l.Rate/raw.Rate, 100*p.Rate/l.Rate, log)
	}
	for _, via := range []string{"core", "http"} {
		if raw1 != nil {
			if p := find("P1", via); p != nil {
				set(p, fmt.Sprintf("≥ 60%% of raw-1 (%.0f%%%s)", 100*p.Rate/raw1.Rate, ofLog(p, "log-1")), p.Rate >= 0.6*raw1.Rate)
			}
		}
		if raw100 != nil {
			if p := find("P100", via); p != nil {
				set(p, fmt.Sprintf("≥ 20%% of raw-100 (%.0f%%%s)", 100*p.Rate/raw100.Rate, ofLog(p, "log-100")), p.Rate >= 0.2*raw100.Rate)
			}
			if p := find("P100-1", via); p != nil {
				set(p, fmt.Sprintf("≥ 40%% of raw-100 (%.0f%%%s)", 100*p.Rate/raw100.Rate, ofLog(p, "log-100-1")), p.Rate >= 0.4*raw100.Rate)
			}
		}
		if c, p := find("C100", via), find("P100", via); c != nil && p != nil {
			set(c, fmt.Sprintf("≥ P100 (%.0f%%)", 100*c.Rate/p.Rate), c.Rate >= p.Rate)
		}
	}
	// The reaper must clear each kind at least twice as fast as the best
	// push workload writes it, P1 and P100 alike: messages and keys against
	// messages pushed. A lease is taken per pop request, as a push is one
	// request, so leases go against push requests (P100: a hundredth of its
	// messages); the ratio to P100's messages is printed as well.
	if p1, p100 := find("P1", "core"), find("P100", "core"); p1 != nil && p100 != nil {
		for i := range r.report.Results {
			res := &r.report.Results[i]
			switch {
			case res.Name == "R" && res.Unit == "leases/s":
				set(res, fmt.Sprintf("≥ 2× P1 and P100 push requests (%.1f× P1, %.1f× P100; %.1f× P100's messages)",
					res.Rate/p1.Rate, res.Rate/(p100.Rate/100), res.Rate/p100.Rate),
					res.Rate >= 2*max(p1.Rate, p100.Rate/100))
			case res.Name == "R":
				set(res, fmt.Sprintf("≥ 2× P1 and P100 (%.1f× P1, %.1f× P100)", res.Rate/p1.Rate, res.Rate/p100.Rate),
					res.Rate >= 2*max(p1.Rate, p100.Rate))
			}
		}
	}
	for i := range r.report.Results {
		res := &r.report.Results[i]
		if res.Name == "S" && res.Unit == "×" {
			set(res, "≤ 1.5", res.Value <= 1.5)
		}
		if res.Name == "D" && res.Target != "report" {
			limit := 120.0
			if strings.Contains(res.What, "random") {
				limit = 150
			}
			set(res, res.Target, res.Value <= limit)
		}
		if res.Name == "W" {
			switch {
			case res.Unit == "stmt/s":
				set(res, fmt.Sprintf("≤ 1 probe per waiter per second (%.3f)", res.Value), res.Value <= 1)
			case strings.Contains(res.What, "same server"):
				set(res, "≤ 50 ms p50", res.P50Ms <= 50)
			case strings.Contains(res.What, "another server"):
				set(res, "≤ 1 s p99", res.P99Ms <= 1000)
			}
		}
	}
	fmt.Fprintf(r.cfg.Out, "\nTargets (SPEC §7):\n")
	for _, res := range r.report.Results {
		if res.Pass != nil {
			mark := "PASS"
			if !*res.Pass {
				mark = "MISS"
			}
			fmt.Fprintf(r.cfg.Out, "  %-4s %-8s %-5s %s\n", mark, res.Name, res.Via, res.Target)
		}
	}
}

func (r *runner) write() error {
	if err := os.MkdirAll(r.cfg.ResultsDir, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(r.report, "", "  ")
	if err := os.WriteFile(filepath.Join(r.cfg.ResultsDir, "results.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.cfg.ResultsDir, "results.svg"), []byte(chart(r.report)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(r.cfg.Out, "\nwrote %s and %s\n", filepath.Join(r.cfg.ResultsDir, "results.json"), filepath.Join(r.cfg.ResultsDir, "results.svg"))
	return nil
}
