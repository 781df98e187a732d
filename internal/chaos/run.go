package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/internal/loadcheck"
	"github.com/queen-serverless/queen/internal/pgbouncer"
	"github.com/queen-serverless/queen/internal/pgcluster"
)

// ErrNoPgBouncer means pgbouncer is not installed.
var ErrNoPgBouncer = pgbouncer.ErrNotInstalled

// Run starts a durable PostgreSQL cluster, PgBouncer in transaction mode in
// front of it and `queen serve` (cfg.Serve) on PgBouncer; runs producers and
// consumers over HTTP while it injects faults; stops producing, drains,
// reads the final state through the API and checks it. It prints progress
// and the report to cfg.Out, ending with the summary line, and returns the
// report. An error means the run could not be set up or checked (pgbouncer
// missing: ErrNoPgBouncer); broken promises are in the report (Report.OK).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	out := cfg.Out
	began := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(out, "chaos: %5.1fs  "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
	}
	if _, err := pgbouncer.Find(); err != nil {
		return nil, err
	}
	if err := becomeSubreaper(); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	mode := fmt.Sprintf("%v of faults (a postmaster kill, a PgBouncer restart, each down up to %v, and a stall up to %v, in random order, %v-%v apart)",
		cfg.Duration, cfg.MaxDown, cfg.MaxStall, cfg.MinGap, cfg.MaxGap)
	if cfg.Short {
		mode = fmt.Sprintf("short: one postmaster kill (down %v), one PgBouncer restart (down %v), %v apart",
			cfg.MaxDown/2, cfg.MaxDown/4, cfg.MinGap)
	}
	logf("seed %d (-seed %d or CHAOS_SEED=%d replays the choices), %s", cfg.Seed, cfg.Seed, cfg.Seed, mode)
	logf("%d producers, %d groups × %d consumers, %d partitions, leaseTime %ds, retryLimit %d",
		cfg.Producers, cfg.Groups, cfg.ConsumersPerGroup, cfg.Partitions, cfg.LeaseTime, cfg.RetryLimit)

	dir, err := os.MkdirTemp("", "queen-chaos-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil { // PgBouncer may run as another user
		return nil, err
	}
	env, err := setUp(ctx, cfg, dir, logf)
	if env != nil {
		defer env.tearDown()
	}
	if err != nil {
		return nil, err
	}
	rep, err := env.run(ctx)
	if err != nil || !rep.OK() {
		if log, rerr := os.ReadFile(env.serveLog); rerr == nil {
			fmt.Fprintf(out, "queen serve's log (end):\n%s\n", pgbouncer.Tail(string(log), 4000))
		}
	}
	if err != nil {
		return nil, err
	}
	rep.write(out)
	return rep, nil
}

// env is a run's database, pooler, server and client.
type env struct {
	cfg       Config
	logf      func(string, ...any)
	cluster   *pgcluster.Cluster
	db        *database
	bouncer   *pgbouncer.Bouncer
	client    *client
	serveLog  string
	stopServe func()
}

func setUp(ctx context.Context, cfg Config, dir string, logf func(string, ...any)) (*env, error) {
	e := &env{cfg: cfg, logf: logf}
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Durable: true})
	if err != nil {
		return nil, err
	}
	e.cluster, e.db = cluster, &database{cluster: cluster}
	if err := createDatabase(ctx, cluster.URL("postgres"), "queen"); err != nil {
		return e, err
	}
	bdir := filepath.Join(dir, "pgbouncer")
	if err := os.Mkdir(bdir, 0o755); err != nil {
		return e, err
	}
	if e.bouncer, err = pgbouncer.New(bdir, cluster.URL("queen"), 10); err != nil {
		return e, err
	}
	if err := e.bouncer.Start(ctx); err != nil {
		return e, err
	}
	port, err := pgbouncer.FreePort()
	if err != nil {
		return e, err
	}
	e.serveLog = filepath.Join(dir, "serve.log")
	logFile, err := os.Create(e.serveLog)
	if err != nil {
		return e, err
	}
	vars := map[string]string{
		"DATABASE_URL":          e.bouncer.URL(),
		"QUEEN_PORT":            strconv.Itoa(port),
		"QUEEN_REAPER_INTERVAL": "1s",
	}
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var serveErr error
	done := make(chan struct{}) // closed when serve has returned serveErr
	go func() {
		defer close(done)
		serveErr = cfg.Serve(serveCtx, []string{"-key-file", filepath.Join(dir, "encryption.key")},
			func(k string) string { return vars[k] }, logFile, logFile)
	}()
	e.stopServe = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		logFile.Close()
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	e.client = newClient(base, cfg.RequestTimeout)
	if err := waitHealthy(ctx, base, done, &serveErr); err != nil {
		log, _ := os.ReadFile(e.serveLog)
		return e, fmt.Errorf("%w\n%s", err, pgbouncer.Tail(string(log), 4000))
	}
	logf("PostgreSQL (durable) in %s on port %d; PgBouncer (transaction mode) on %s; queen serve on %s",
		cluster.DataDir(), cluster.Port(), e.bouncer.URL(), base)
	return e, nil
}

func (e *env) tearDown() {
	_ = e.db.resume()
	if e.stopServe != nil {
		e.stopServe()
	}
	if e.bouncer != nil {
		_ = e.bouncer.Kill()
	}
	if e.cluster != nil {
		pid, err := e.cluster.PostmasterPID()
		_ = e.cluster.Stop()
		// Ours to reap since the last restart (a subreaper's orphan).
		for deadline := time.Now().Add(10 * time.Second); err == nil && !exited(pid) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// createDatabase creates database name.
func createDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// waitHealthy waits until the server answers /health with 200.
func waitHealthy(ctx context.Context, base string, done <-chan struct{}, serveErr *error) error {
	c := newClient(base, 5*time.Second)
	deadline := time.Now().Add(time.Minute)
	for {
		if r := c.do(ctx, "health", "GET", "/health", nil); r.Status == 200 {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("queen serve ended: %v", *serveErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("queen serve is not healthy after a minute")
		}
	}
}

// run runs the workload and the faults, then drains and checks.
func (e *env) run(ctx context.Context) (*Report, error) {
	cfg := e.cfg
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	opts := map[string]any{"queue": queueName, "options": map[string]any{"leaseTime": cfg.LeaseTime, "retryLimit": cfg.RetryLimit}}
	if r := e.client.do(ctx, "configure", "POST", "/api/v1/configure", opts); r.Status != 200 {
		return nil, fmt.Errorf("configure: %s", r)
	}

	h := newHistory()
	w := &workload{cfg: cfg, c: e.client, h: h}
	// Producers retry a push under way until it is answered, up to the
	// end of the drain; consumers run until the drain is over.
	workCtx, cancelWork := context.WithCancel(ctx)
	defer cancelWork()
	var producers, consumers sync.WaitGroup
	for i := 0; i < cfg.Producers; i++ {
		r := rand.New(rand.NewPCG(cfg.Seed, uint64(1+i)))
		producers.Go(func() { w.produce(workCtx, i, r) })
	}
	groups := groupNames(cfg.Groups)
	var engineGroups []string
	for gi, g := range groups {
		engineGroups = append(engineGroups, engineGroup(g))
		for j := 0; j < cfg.ConsumersPerGroup; j++ {
			r := rand.New(rand.NewPCG(cfg.Seed, uint64(1000+100*gi+j)))
			consumers.Go(func() { w.consume(workCtx, g, j, r) })
		}
	}

	faults := e.runFaults(ctx, rng, h)
	w.stopProducing.Store(true)
	backlog := "?"
	if q, err := e.client.queueState(ctx); err == nil {
		var lag int64
		for _, g := range q.Groups {
			lag += g.Lag
		}
		backlog = strconv.FormatInt(lag, 10)
	}
	e.logf("faults over; producers stop, consumers drain (%s messages behind, all groups)", backlog)
	drainStart := time.Now()
	drainCtx, cancelDrain := context.WithTimeout(ctx, cfg.DrainTimeout)
	defer cancelDrain()
	go func() { <-drainCtx.Done(); cancelWork() }() // the drain bounds every retry
	producers.Wait()
	drained := e.drain(drainCtx, engineGroups)
	w.stopConsuming.Store(true)
	consumers.Wait()
	if drained {
		e.logf("drained in %v", time.Since(drainStart).Round(time.Millisecond))
	} else {
		e.logf("NOT drained after %v", cfg.DrainTimeout)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	st, err := readFinalState(ctx, e.client)
	if err != nil {
		return nil, fmt.Errorf("read the final state: %w", err)
	}
	h.check(st, cfg, engineGroups)

	rep := &Report{Seed: cfg.Seed}
	calls := e.client.rec.snapshot()
	rep.tally(calls, faults)
	for _, c := range calls {
		if c.status >= 500 && c.status != 503 {
			h.v.Add(loadcheck.KindOther, "%s answered %d", c.op, c.status)
		}
	}
	for i, f := range faults {
		if f.err != nil {
			h.v.Add(loadcheck.KindOther, "fault %d (%s): %v", i+1, f.kind, f.err)
		}
		if f.recovered.IsZero() {
			h.v.Add(loadcheck.KindOther, "fault %d (%s): no request succeeded within %v after it", i+1, f.kind, cfg.RecoveryTimeout)
			rep.MaxRecovery = max(rep.MaxRecovery, cfg.RecoveryTimeout)
		}
	}
	rep.Lost, rep.Gaps, rep.Order, rep.Other = h.v.Count(loadcheck.KindLost), h.v.Count(loadcheck.KindGap), h.v.Count(loadcheck.KindOrder), h.v.Count(loadcheck.KindOther)
	rep.Violations = h.v.Describe()
	var logged int
	for _, p := range st.parts {
		logged += len(p.log)
	}
	rep.Stats = fmt.Sprintf("log: %d messages in %d partitions; DLQ: %d dead letters\n%s", logged, len(st.parts), len(st.dlq), h.stats)
	return rep, nil
}

// runFaults injects the schedule's faults, each after a gap of traffic and
// once the service has recovered from the one before, and returns them.
func (e *env) runFaults(ctx context.Context, rng *rand.Rand, h *history) []*fault {
	cfg := e.cfg
	sched := &schedule{cfg: cfg, rng: rng}
	in := &injector{db: e.db, bouncer: e.bouncer}
	start := time.Now()
	var faults []*fault
	for n := 1; ; n++ {
		gap := sched.gap()
		e.logf("traffic for %v", gap.Round(time.Millisecond))
		pause(ctx, gap)
		kind, hold, ok := sched.next(n, time.Since(start))
		if !ok || ctx.Err() != nil {
			return faults
		}
		f := &fault{n: n, kind: kind}
		faults = append(faults, f)
		in.inject(ctx, f, hold)
		if f.err != nil {
			e.logf("fault %d %s: %s after %v: FAILED: %v", n, kind, f.detail, f.end.Sub(f.start).Round(time.Millisecond), f.err)
			return faults
		}
		e.logf("fault %d %s: %s in %v", n, kind, f.detail, f.end.Sub(f.start).Round(time.Millisecond))
		w := e.client.rec.watch(f.end)
		t := time.NewTimer(cfg.RecoveryTimeout)
		select {
		case <-w.done:
			f.recovered = w.at
			e.logf("fault %d %s: recovered %v after it ended (first successful request)", n, kind, f.recovery().Round(time.Millisecond))
		case <-t.C:
			e.logf("fault %d %s: NOT recovered within %v", n, kind, cfg.RecoveryTimeout)
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// drain waits until every group has consumed every partition (lag 0).
func (e *env) drain(ctx context.Context, groups []string) bool {
	for {
		if q, err := e.client.queueState(ctx); err == nil {
			lag := map[string]int64{}
			for _, g := range q.Groups {
				lag[g.Group] = g.Lag + 1
			}
			done := true
			for _, g := range groups {
				if lag[g] != 1 {
					done = false
				}
			}
			if done {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}
