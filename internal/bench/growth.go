package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
)

// Defaults of G.
const (
	// DefaultGrowthMessages is the log G stores: a size that fills and
	// measures in a few minutes on a 2-core machine (docs/benchmarks.md
	// gives the command for SPEC's size, ≥ 10 M).
	DefaultGrowthMessages = 1_000_000
	// DefaultGrowthPartitions is the partitions the stored log spreads over.
	DefaultGrowthPartitions = 100_000
	// DefaultGrowthDLQShare is the share of the stored messages the groups
	// dead-letter (SPEC: a DLQ of ≥ 1 M at 10 M).
	DefaultGrowthDLQShare = 0.1
	// DefaultGrowthSamples is the most samples of each call, per database.
	DefaultGrowthSamples = 1000
	// DefaultGrowthRounds is how often each reaper kind is timed on each
	// database; the median counts.
	DefaultGrowthRounds = 3
	// DefaultGrowthBudget is the time the samples of one call may take,
	// both databases together; each still gets growthMinSamples unless
	// its own samples took the budget.
	DefaultGrowthBudget = 15 * time.Second
)

const (
	// GrowthGroups is how many consumer groups have read a little of the
	// stored log (SPEC §7, G: 10).
	GrowthGroups = 10
	// growthDueShare is the share of the stored messages due for each
	// reaper kind (SPEC: 1 %).
	growthDueShare = 0.01
	// growthMinDue is the least due rows a kind gets at small sizes.
	growthMinDue = 100
	// growthMinSamples is the least samples of a call per database.
	growthMinSamples = 3
	// growthFillBatch is the items of one push of the fill.
	growthFillBatch = 1000
	// growthHot is the partitions, present in both databases, that the
	// push, pop and ack samples use.
	growthHot = 100
)

// The queues of G, the same in both databases. Every one has a one-second
// dedup window: dedup pruning removes keys older than the largest window
// of any queue, so one long window would keep every key.
const (
	gLog       = "bench-G-log"       // the stored log: a 7-day window, nothing due
	gRetention = "bench-G-retention" // a 1 s retention window
	gCompleted = "bench-G-completed" // a 1 s completed retention window
	gDedup     = "bench-G-dedup"     // keys of client-made ids
	gLeases    = "bench-G-leases"    // a 1 s leaseTime
	gDLQ       = "bench-G-dlq"       // a 1 s DLQ retention, when the store has one
)

// Growth describes G's stored log, as results.json records it.
type Growth struct {
	Messages    int64 `json:"messages"`
	Partitions  int   `json:"partitions"`
	Groups      int   `json:"groups"`
	DeadLetters int64 `json:"deadLetters"`
	DueRows     int   `json:"dueRows"`
	// FillSeconds and FillRate are the push of the stored log's: its
	// time and messages per second.
	FillSeconds float64 `json:"fillSeconds"`
	FillRate    float64 `json:"fillRate"`
	// DLQRetention is false when the store had no DLQ retention to time.
	DLQRetention bool `json:"dlqRetention"`
	// SettleSeconds is the time, per side (empty, stored), of the reaper
	// passes over what the fill wrote, before the measures.
	SettleSeconds [2]float64 `json:"settleSeconds"`
}

// side is one of G's two databases: with the log stored, or empty.
type side struct {
	name  string
	pool  *pgxpool.Pool
	store *pgstore.Store
	http  *httpTarget
}

// growthRun is one run of G.
type growthRun struct {
	r       *runner
	sides   [2]*side // empty, stored
	due     int
	dlqRet  bool
	rows    []Result
	closers []func()
}

// growthSideName names the sides in the order of growth.sides.
var growthSideName = [2]string{"empty", "stored"}

// growth is G: the same measures with a log of GrowthMessages stored
// (over GrowthPartitions partitions, GrowthGroups groups that have read a
// little of it, a DLQ of GrowthDLQShare of it; nothing of it due) and
// with an empty one, each in a fresh database of its own, taken in turn
// so that both see the same machine. Reported is each ratio
// stored / empty: each reaper kind's time per due row with 1 % of the
// stored messages due, and p50 (p99 too for push, pop and ack) of the
// stats pass, an idle reaper pass, the Prometheus page, the console's
// overview, the queue listing and a queue's detail, the group listing,
// push, pop, ack, a browse of one partition and a DLQ page.
func (r *runner) growth(ctx context.Context) error {
	if r.cfg.Database == nil {
		fmt.Fprintf(r.cfg.Out, "G          skipped: no way to make databases (Config.Database)\n")
		return nil
	}
	g := &growthRun{r: r, due: max(int(float64(r.cfg.GrowthMessages)*growthDueShare), growthMinDue)}
	defer g.close()
	for i, name := range growthSideName {
		s, err := g.open(ctx, name)
		if err != nil {
			return err
		}
		g.sides[i] = s
	}
	info, err := g.setup(ctx)
	if err != nil {
		return err
	}
	r.report.Growth = info
	g.measureCalls(ctx)
	if err := g.measureReaper(ctx); err != nil {
		return err
	}
	g.table(info)
	return nil
}

// open makes a fresh database through Config.Database, with a store and
// an HTTP server over it built as the run's own.
func (g *growthRun) open(ctx context.Context, name string) (*side, error) {
	u, drop, err := g.r.cfg.Database(ctx, "bench_g_"+name)
	if drop == nil {
		drop = func() {}
	}
	if err != nil {
		drop()
		return nil, fmt.Errorf("database for the %s side: %w", name, err)
	}
	s := &side{name: name}
	closeDB := func() {
		if s.http != nil {
			s.http.close()
		}
		if s.pool != nil {
			s.pool.Close()
		}
		drop()
	}
	pcfg, err := pgstore.PoolConfig(u)
	if err != nil {
		closeDB()
		return nil, err
	}
	pcfg.MaxConns = int32(g.r.cfg.Clients + 4)
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		closeDB()
		return nil, err
	}
	s.store = pgstore.New(s.pool, config.Config{}.WithDefaults().Store(nil, nil))
	if s.http, err = startHTTP(s.store, 4); err != nil {
		closeDB()
		return nil, err
	}
	g.closers = append(g.closers, closeDB)
	return s, nil
}

func (g *growthRun) close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
}

// setup configures G's queues and writes the small fixtures in both
// databases, then the stored log in one, and vacuums both, as autovacuum
// would have in a server that has run a while.
func (g *growthRun) setup(ctx context.Context) (*Growth, error) {
	out := g.r.cfg.Out
	info := &Growth{Messages: int64(g.r.cfg.GrowthMessages), Partitions: g.r.cfg.GrowthPartitions, Groups: GrowthGroups, DueRows: g.due}
	fmt.Fprintf(out, "  G: %s messages stored over %s partitions, %d groups, a DLQ of %.0f%%, %s rows due per reaper kind\n",
		thousands(info.Messages), thousands(int64(info.Partitions)), GrowthGroups, 100*g.r.cfg.GrowthDLQShare, thousands(int64(g.due)))
	for i, s := range g.sides {
		dlqRet, err := g.configure(ctx, s)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			g.dlqRet = dlqRet
		}
		if err := g.fixtures(ctx, s); err != nil {
			return nil, fmt.Errorf("%s side: fixtures: %w", s.name, err)
		}
	}
	info.DLQRetention = g.dlqRet
	stored := g.sides[1]
	secs, err := g.fill(ctx, stored)
	if err != nil {
		return nil, err
	}
	info.FillSeconds, info.FillRate = secs, float64(info.Messages)/secs
	g.r.add(Result{Name: "G", Via: "core", What: fmt.Sprintf("fill: push %d per request, random partitions", growthFillBatch),
		Ops: info.Messages / growthFillBatch, Rows: info.Messages, Seconds: secs, Rate: info.FillRate, Unit: "msg/s"})
	if info.DeadLetters, err = g.deadLetters(ctx, stored); err != nil {
		return nil, err
	}
	// The reaper's passes over what the fill wrote — the summaries' fold
	// of every partition pushed to or consumed, retention's first look at
	// each — are a cost of those writes, paid once, not of what is
	// stored; the measures come after them.
	for i, s := range g.sides {
		fmt.Fprintf(out, "  G: reaper passes over the fill, %s side…", s.name)
		t0 := time.Now()
		folded := 0
		for pass := 0; pass < 1000; pass++ {
			st, err := s.store.Reap(ctx, queen.ReapRequest{})
			if err != nil {
				return nil, err
			}
			folded += st.SummariesFolded
			if st.SummariesFolded == 0 && !st.Did() {
				break
			}
		}
		info.SettleSeconds[i] = time.Since(t0).Seconds()
		fmt.Fprintf(out, "\r%70s\r  G: reaper passes over the fill, %s side: %d partitions folded into the summaries, %.1f s\n",
			"", s.name, folded, info.SettleSeconds[i])
	}
	for _, s := range g.sides {
		fmt.Fprintf(out, "  G: VACUUM ANALYZE, %s side…", s.name)
		t0 := time.Now()
		if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "\r%70s\r  G: VACUUM ANALYZE, %s side: %.1f s\n", "", s.name, time.Since(t0).Seconds())
	}
	return info, nil
}

// configure creates G's queues on s and reports whether the store keeps
// a per-queue DLQ retention (dlqRetentionSeconds echoed back).
func (g *growthRun) configure(ctx context.Context, s *side) (bool, error) {
	for _, q := range []struct {
		name string
		opts queen.QueueOptions
	}{
		{gLog, queen.QueueOptions{RetentionSeconds: ptr(7 * 86400)}},
		{gRetention, queen.QueueOptions{RetentionSeconds: ptr(1)}},
		{gCompleted, queen.QueueOptions{CompletedRetentionSeconds: ptr(1)}},
		{gDedup, queen.QueueOptions{}},
		{gLeases, queen.QueueOptions{LeaseTime: ptr(1), RetryLimit: ptr(1000), RetryDelay: ptr(0)}},
	} {
		q.opts.DedupWindowSeconds = ptr(1)
		if _, err := s.store.Configure(ctx, queen.ConfigureRequest{Queue: q.name, Options: q.opts}); err != nil {
			return false, fmt.Errorf("%s side: configure %s: %w", s.name, q.name, err)
		}
	}
	// DLQ retention by its wire name, so that the benchmark builds
	// whether or not the store has it yet: the echo says.
	var opts queen.QueueOptions
	if err := json.Unmarshal([]byte(`{"dedupWindowSeconds":1,"dlqRetentionSeconds":1}`), &opts); err != nil {
		return false, err
	}
	q, err := s.store.Configure(ctx, queen.ConfigureRequest{Queue: gDLQ, Options: opts})
	if err != nil {
		return false, fmt.Errorf("%s side: configure %s: %w", s.name, gDLQ, err)
	}
	echo, _ := json.Marshal(q.Options)
	return strings.Contains(string(echo), `"dlqRetentionSeconds":1`), nil
}

// fixtures writes what both databases hold beside the stored log, so that
// each call asks the same of both: growthHot partitions of 10 messages
// (the push, pop and ack samples), a partition of 50 to browse, 20 dead
// letters (a full DLQ page) and GrowthGroups groups with a cursor each.
func (g *growthRun) fixtures(ctx context.Context, s *side) error {
	var batch []queen.PushItem
	add := func(part string, n int) {
		for range n {
			batch = append(batch, queen.PushItem{Queue: gLog, Partition: part, Payload: json.RawMessage(Payload)})
		}
	}
	for i := range growthHot {
		add(fmt.Sprintf("hot-%d", i), 10)
	}
	add("browse", 50)
	add("dead", 20)
	if _, err := s.store.Push(ctx, batch); err != nil {
		return err
	}
	if _, err := g.popAck(ctx, s, queen.PopRequest{Queue: gLog, Partition: "dead", ConsumerGroup: groupName(0), Batch: 20}, queen.AckDLQ); err != nil {
		return err
	}
	for k := range GrowthGroups {
		if _, err := g.popAck(ctx, s, queen.PopRequest{Queue: gLog, Partition: "browse", ConsumerGroup: groupName(k), Batch: 5}, queen.AckCompleted); err != nil {
			return err
		}
	}
	return nil
}

func groupName(k int) string { return fmt.Sprintf("g-%d", k) }

// popAck pops one batch on s and acks every message of it with status;
// it returns the messages handled.
func (g *growthRun) popAck(ctx context.Context, s *side, req queen.PopRequest, status queen.AckStatus) (int, error) {
	res, err := s.store.Pop(ctx, req)
	if err != nil || len(res.Messages) == 0 {
		return 0, err
	}
	acks := make([]queen.Ack, len(res.Messages))
	for i, m := range res.Messages {
		acks[i] = queen.Ack{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: status,
			ConsumerGroup: req.ConsumerGroup, LeaseID: res.LeaseID}
	}
	if _, err := s.store.Ack(ctx, acks); err != nil {
		return 0, err
	}
	return len(res.Messages), nil
}

// fill pushes GrowthMessages messages to gLog on s through the engine's
// push (growthFillBatch items per push, each to a random one of
// GrowthPartitions partitions, Clients pushes at once), then has the
// groups read a little of it, dead-lettering GrowthDLQShare of it. It
// returns the seconds the push took.
func (g *growthRun) fill(ctx context.Context, s *side) (float64, error) {
	total := int64(g.r.cfg.GrowthMessages)
	parts := g.r.cfg.GrowthPartitions
	var next, done atomic.Int64
	stop := fillProgress(g.r.cfg.Out, "pushing the stored log", total, &done)
	start := time.Now()
	err := g.r.eachClient(func() error {
		for {
			from := next.Add(growthFillBatch) - growthFillBatch
			if from >= total {
				return nil
			}
			n := min(growthFillBatch, total-from)
			batch := make([]queen.PushItem, n)
			for i := range batch {
				batch[i] = queen.PushItem{Queue: gLog, Partition: fmt.Sprintf("p-%d", rand.IntN(parts)), Payload: json.RawMessage(Payload)}
			}
			if _, err := s.store.Push(ctx, batch); err != nil {
				return err
			}
			done.Add(n)
		}
	})
	secs := time.Since(start).Seconds()
	stop()
	if err != nil {
		return 0, fmt.Errorf("fill: %w", err)
	}
	fmt.Fprintf(g.r.cfg.Out, "  G: pushed %s messages in %.1f s: %s msg/s\n", thousands(total), secs, thousands(int64(float64(total)/secs)))

	// The groups read a little each, in turns, dead-lettering all they
	// read: real dead letters, through the engine's ack (a few batches
	// more than the share at most).
	dead := int64(float64(total) * g.r.cfg.GrowthDLQShare)
	var left, made, turn atomic.Int64
	left.Store(dead)
	stop = fillProgress(g.r.cfg.Out, fmt.Sprintf("%d groups dead-lettering", GrowthGroups), dead, &made)
	start = time.Now()
	err = g.r.eachClient(func() error {
		for {
			have := left.Load()
			want := min(1000, have)
			if want <= 0 {
				return nil
			}
			if !left.CompareAndSwap(have, have-want) {
				continue
			}
			group := groupName(int(turn.Add(1) % GrowthGroups))
			n, err := g.popAck(ctx, s, queen.PopRequest{Queue: gLog, ConsumerGroup: group, Batch: int(want),
				Partitions: queen.MaxPartitionsPerPop}, queen.AckDLQ)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("group %s found nothing to read", group)
			}
			left.Add(want - int64(n))
			made.Add(int64(n))
		}
	})
	stop()
	if err != nil {
		return 0, fmt.Errorf("fill: dead letters: %w", err)
	}
	fmt.Fprintf(g.r.cfg.Out, "  G: %s dead letters in %.1f s\n", thousands(made.Load()), time.Since(start).Seconds())
	return secs, nil
}

// deadLetters counts s's dead letters.
func (g *growthRun) deadLetters(ctx context.Context, s *side) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM queen.dlq").Scan(&n)
	return n, err
}

// fillProgress prints "what: done of total, rate/s, ETA" on one line
// every second until stopped.
func fillProgress(out interface{ Write([]byte) (int, error) }, what string, total int64, done *atomic.Int64) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				fmt.Fprintf(out, "\r%90s\r", "")
				return
			case <-t.C:
				n := done.Load()
				rate := float64(n) / time.Since(start).Seconds()
				eta := "?"
				if rate > 0 {
					eta = (time.Duration(float64(total-n)/rate) * time.Second).Round(time.Second).String()
				}
				fmt.Fprintf(out, "\r  G: %s: %s of %s, %s/s, ETA %s   ", what, thousands(n), thousands(total), thousands(int64(rate)), eta)
			}
		}
	})
	return func() { close(stop); wg.Wait() }
}

// table prints G's figures side by side, each ratio against the target.
func (g *growthRun) table(info *Growth) {
	out := g.r.cfg.Out
	fmt.Fprintf(out, "\nG: growth, %s messages stored over %s partitions, %d groups, %s dead letters; %s due per reaper kind; filled at %s msg/s\n",
		thousands(info.Messages), thousands(int64(info.Partitions)), info.Groups, thousands(info.DeadLetters), thousands(int64(info.DueRows)),
		thousands(int64(info.FillRate)))
	fmt.Fprintf(out, "  %-62s %12s %12s %9s\n", "measure", "empty", "stored", "ratio")
	for _, res := range g.rows {
		mark := "met"
		if res.Error != "" || res.Value > TargetGrowthRatio {
			mark = "MISSED"
		}
		fmt.Fprintf(out, "  %-62s %12.3f %12.3f %8.2f×  ≤ %.1f %s", res.What, res.Empty, res.Stored, res.Value, TargetGrowthRatio, mark)
		if res.Error != "" {
			fmt.Fprintf(out, " (%s)", res.Error)
		}
		fmt.Fprintln(out)
	}
}

// thousands formats n with thousands separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
