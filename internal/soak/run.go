package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/internal/loadcheck"
)

// Run runs the soak on cfg.URL's database: it stores the backlog, measures
// the P10 push rate,
// runs the steady phase (pushes at a fraction of it, the groups consuming,
// the reaper loop, the long transactions, a sample every SampleEvery),
// drains, reads the final state through the API, checks it, and writes
// results.json and results.svg to cfg.ResultsDir. It prints progress and
// the report to cfg.Out, ending with the summary line. An error means the
// run could not be set up or finished; failed checks are in the report
// (Report.OK).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, began: time.Now(), lat: newLatencies()}
	r.rep = &Report{StartedAt: r.began.UTC(), Seed: cfg.Seed, Short: cfg.Short, Settings: settingsOf(cfg)}
	r.logf("seed %d (-seed %d or SOAK_SEED=%d replays the choices; timing still varies)", cfg.Seed, cfg.Seed, cfg.Seed)

	if err := trackRoutines(ctx, cfg.URL); err != nil {
		r.logf("routines not timed (track_functions needs a superuser): %v", err)
	}
	srv, err := startServer(ctx, cfg.URL, cfg)
	if err != nil {
		return nil, fmt.Errorf("soak: start the server: %w", err)
	}
	defer srv.close()
	r.srv = srv
	_ = srv.pool.QueryRow(ctx, "SHOW server_version").Scan(&r.rep.Postgres)
	r.c = newClient(srv.base, cfg.RequestTimeout, 4*(cfg.Producers+cfg.Groups*cfg.ConsumersPerGroup), r.lat)
	sz, err := newSizer(ctx, cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("soak: sizes: %w", err)
	}
	defer sz.close()

	if err := r.fillBacklog(ctx, sz); err != nil {
		return nil, err
	}
	if err := r.measure(ctx); err != nil {
		return nil, err
	}
	if err := r.steady(ctx, sz); err != nil {
		return nil, err
	}
	r.judge()
	if err := r.rep.write(cfg.ResultsDir); err != nil {
		return r.rep, err
	}
	r.rep.print(cfg.Out, cfg.ResultsDir)
	return r.rep, nil
}

// runner is one run's state.
type runner struct {
	cfg   Config
	began time.Time
	rep   *Report
	srv   *server
	c     *client
	lat   *latencies
	h     *history
	w     *workload
	reap  *reaperLoop
	// backlog is the stored backlog (nil: none); baseBytes the size of
	// schema queen before the traffic, with the backlog stored.
	backlog   *backlog
	baseBytes int64

	longOpen  atomic.Bool
	longMu    sync.Mutex
	longTxs   []LongTx
	groups    []string
	start     time.Time // of the steady phase
	steadyEnd time.Time
	nDLQ      int
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Out, "soak: %7s  "+format+"\n", append([]any{fmtElapsed(time.Since(r.began))}, args...)...)
}

func fmtElapsed(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// measure measures the P10 push rate (10 items per push to random
// partitions, DefaultMeasureClients at once, for MeasureFor) on a queue
// of its own, deletes that queue, and sets the steady rate.
func (r *runner) measure(ctx context.Context) error {
	cfg := r.cfg
	rate := cfg.Rate
	if rate == 0 {
		r.logf("measuring the P10 push rate for %v (%d clients, 10 items per push, %d partitions)…",
			cfg.MeasureFor, DefaultMeasureClients, cfg.Partitions)
		var msgs atomic.Int64
		var failed atomic.Value
		start := time.Now()
		deadline := start.Add(cfg.MeasureFor)
		var wg sync.WaitGroup
		for i := range DefaultMeasureClients {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(9000+i)))
			wg.Go(func() {
				for time.Now().Before(deadline) && ctx.Err() == nil {
					items := make([]loadcheck.PushItem, 10)
					for k := range items {
						p := partitionName(rng.IntN(cfg.Partitions))
						items[k] = loadcheck.PushItem{Queue: measureQueue, Partition: p, Payload: payload(1, p)}
					}
					res := r.c.do(ctx, noOp, "POST", "/api/v1/push", map[string]any{"items": items})
					if res.Status != http.StatusCreated {
						failed.Store(fmt.Errorf("soak: measure: push: %s", res))
						return
					}
					msgs.Add(int64(len(items)))
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r.rep.P10Rate = float64(msgs.Load()) / time.Since(start).Seconds()
		rate = cfg.Fraction * r.rep.P10Rate
		if res := r.c.do(ctx, noOp, "DELETE", "/api/v1/resources/queues/"+measureQueue, nil); res.Status >= 300 {
			return fmt.Errorf("soak: delete the measurement's queue: %s", res)
		}
		r.logf("P10: %.0f msg/s through the HTTP API; steady rate %.0f %% of it", r.rep.P10Rate, 100*cfg.Fraction)
	}
	if cfg.MaxRate > 0 && rate > cfg.MaxRate {
		r.logf("steady rate capped at %.0f msg/s", cfg.MaxRate)
		rate = cfg.MaxRate
	}
	r.rep.TargetRate = rate
	return nil
}

// steady runs the steady phase, the drain and the final checks of the
// history.
func (r *runner) steady(ctx context.Context, sz *sizer) error {
	cfg := r.cfg
	opts := map[string]any{"queue": queueName, "options": map[string]any{
		"leaseTime": cfg.LeaseTime, "retryLimit": cfg.RetryLimit,
		"dedupWindowSeconds": int(cfg.DedupWindow / time.Second), "retentionSeconds": int(cfg.Retention / time.Second)}}
	if res := r.c.do(ctx, noOp, "POST", "/api/v1/configure", opts); res.Status != http.StatusOK {
		return fmt.Errorf("soak: configure: %s", res)
	}
	for i := 1; i <= cfg.Groups; i++ {
		r.groups = append(r.groups, fmt.Sprintf("group-%d", i))
	}
	r.h = newHistory(cfg, r.groups)
	r.w = &workload{cfg: cfg, c: r.c, h: r.h, samples: &samples{keep: cfg.DedupWindow + time.Minute}}
	r.reap = &reaperLoop{store: r.srv.store, interval: cfg.ReaperInterval}

	r.logf("steady phase: %v at %.0f msg/s (%d per push, %d producers) to %d partitions; %d groups × %d consumers "+
		"(pop batch %d over up to %d partitions); retention %v, dedup window %v, leaseTime %ds, retryLimit %d, "+
		"1 message in %d poison; reaper every %v; a %v REPEATABLE READ transaction at %v",
		cfg.Duration, r.rep.TargetRate, cfg.PushItems, cfg.Producers, cfg.Partitions, cfg.Groups, cfg.ConsumersPerGroup,
		cfg.PopBatch, cfg.PopPartitions, cfg.Retention, cfg.DedupWindow, cfg.LeaseTime, cfg.RetryLimit,
		cfg.PoisonEvery, cfg.ReaperInterval, cfg.LongTxFor, cfg.longTxStarts())

	reapCtx, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	var reaperDone sync.WaitGroup
	reaperDone.Go(func() { r.reap.run(reapCtx) })

	consumeCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var consumers sync.WaitGroup
	for gi, g := range r.groups {
		for j := range cfg.ConsumersPerGroup {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(1000+100*gi+j)))
			consumers.Go(func() { r.w.consume(consumeCtx, g, j, rng) })
		}
	}

	r.start = time.Now()
	r.steadyEnd = r.start.Add(cfg.Duration)
	r.lat.begin(r.start, cfg.Duration)
	produceCtx, stopProducing := context.WithDeadline(ctx, r.steadyEnd)
	defer stopProducing()
	ticks := make(chan struct{}, cfg.Producers)
	var producers sync.WaitGroup
	producers.Go(func() { r.w.pace(produceCtx, r.rep.TargetRate, ticks) })
	for i := range cfg.Producers {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(1+i)))
		producers.Go(func() { r.w.produce(ctx, ticks, rng) })
	}

	var longDone sync.WaitGroup
	longDone.Go(func() { r.longTransactions(produceCtx) })

	r.sampleLoop(ctx, sz)
	producers.Wait()
	longDone.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}

	r.logf("steady phase over; producers stopped, the groups drain")
	r.drain(ctx) // a group's lag is checked in the final state
	r.w.stopConsuming.Store(true)
	consumers.Wait()
	// The reaper runs until the drain is over: passes after the last long
	// transaction count for its check.
	stopReaper()
	reaperDone.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	r.rep.Passes = r.reap.all()

	final, err := r.readFinal(ctx)
	if err != nil {
		return fmt.Errorf("soak: read the final state: %w", err)
	}
	r.h.final(final)
	r.nDLQ = final.nDLQ
	if r.backlog != nil {
		r.backlog.check(ctx, r.h)
	}
	return nil
}

// longTransactions holds a long transaction open at each scheduled start.
func (r *runner) longTransactions(ctx context.Context) {
	for _, at := range r.cfg.longTxStarts() {
		pause(ctx, time.Until(r.start.Add(at)))
		if ctx.Err() != nil {
			return
		}
		tx := holdLongTx(ctx, r.cfg.URL, r.cfg.LongTxFor, func(t time.Time) {
			r.longOpen.Store(true)
			r.logf("long transaction opened (REPEATABLE READ, read queen.segments), held %v", r.cfg.LongTxFor)
		})
		r.longOpen.Store(false)
		if tx.Err != "" {
			r.logf("long transaction: %s", tx.Err)
		} else {
			r.logf("long transaction ended after %v", tx.End.Sub(tx.Start).Round(time.Millisecond))
		}
		r.longMu.Lock()
		r.longTxs = append(r.longTxs, tx)
		r.longMu.Unlock()
	}
}

// sampleLoop records a sample at the start of the steady phase, every
// SampleEvery, and at its end.
func (r *runner) sampleLoop(ctx context.Context, sz *sizer) {
	var lastQueued int64
	lastAt := r.start
	for k := 0; ; k++ {
		at := r.start.Add(time.Duration(k) * r.cfg.SampleEvery)
		if at.After(r.steadyEnd) {
			at = r.steadyEnd
		}
		pause(ctx, time.Until(at))
		if ctx.Err() != nil {
			return
		}
		s := r.sample(ctx, sz, lastAt)
		queued := r.h.n.queued.Load()
		if el := s.At.Sub(lastAt).Seconds(); k > 0 && el > 0 {
			s.PushRate = float64(queued-lastQueued) / el
		}
		lastQueued, lastAt = queued, s.At
		r.rep.Samples = append(r.rep.Samples, s)
		r.progress(s)
		if !at.Before(r.steadyEnd) {
			return
		}
	}
}

func (r *runner) sample(ctx context.Context, sz *sizer, since time.Time) Sample {
	s := Sample{At: time.Now(), LongTxOpen: r.longOpen.Load(), Latency: map[string]LatencyStat{}, Lag: map[string]int64{}}
	s.ElapsedS = s.At.Sub(r.start).Seconds()
	rels, total, err := sz.read(ctx)
	if err != nil {
		s.Err = err.Error()
	}
	s.Relations, s.TotalBytes = rels, total
	if s.Routines, err = sz.readRoutines(ctx); err != nil && s.Err == "" {
		s.Err = err.Error()
	}
	for _, rel := range rels {
		s.DeadTuples += rel.DeadTuples
	}
	for _, p := range r.reap.since(since) {
		s.Passes++
		if p.Err != "" {
			s.ReapErrors++
		}
		if p.Stats.Behind {
			s.Behind++
		}
		b := p.Stats.Backlog
		s.Backlog.Leases, s.Backlog.Dedup, s.Backlog.Retention = max(s.Backlog.Leases, b.Leases),
			max(s.Backlog.Dedup, b.Dedup), max(s.Backlog.Retention, b.Retention)
	}
	for op, h := range r.lat.take() {
		s.Latency[opNames[op]] = LatencyStat{N: h.n, P50MS: h.quantile(0.5), P99MS: h.quantile(0.99)}
	}
	if q, err := r.queueState(ctx); err == nil {
		for _, g := range q.Groups {
			s.Lag[g.Group] = g.Lag
		}
	} else if s.Err == "" {
		s.Err = err.Error()
	}
	return s
}

// progress prints one sample's line.
func (r *runner) progress(s Sample) {
	var top []string
	for _, rel := range s.Relations {
		if rel.Kind == "table" && rel.TotalBytes >= s.TotalBytes/10 {
			top = append(top, fmt.Sprintf("%s %s", rel.Name, fmtBytes(rel.TotalBytes)))
		}
	}
	long := ""
	if s.LongTxOpen {
		long = "  [long transaction open]"
	}
	lat := func(op string) string {
		l := s.Latency[op]
		return fmt.Sprintf("%s %.1f/%.1f", op, l.P50MS, l.P99MS)
	}
	r.logf("t=%s  %.0f msg/s  size %s %v  dead %d  backlog %d/%d/%d (behind %d of %d passes, %d failed)  "+
		"p50/p99 ms %s %s %s  lag %d%s",
		fmtElapsed(time.Duration(s.ElapsedS*float64(time.Second))), s.PushRate, fmtBytes(s.TotalBytes), top, s.DeadTuples,
		s.Backlog.Leases, s.Backlog.Dedup, s.Backlog.Retention, s.Behind, s.Passes, s.ReapErrors,
		lat("push"), lat("pop"), lat("ack"), s.totalLag(), long)
}

// queueState reads the queue's partitions and groups.
func (r *runner) queueState(ctx context.Context) (loadcheck.Queue, error) {
	return loadcheck.ReadQueue(ctx, r.c.read, queueName)
}

// drain waits until every group has consumed every partition (lag 0), at
// most DrainTimeout.
func (r *runner) drain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.DrainTimeout)
	defer cancel()
	start := time.Now()
	for {
		if q, err := r.queueState(ctx); err == nil {
			lag := map[string]int64{}
			for _, g := range q.Groups {
				lag[g.Group] = g.Lag + 1
			}
			done := true
			for _, g := range r.groups {
				if lag[g] != 1 {
					done = false
				}
			}
			if done {
				r.logf("drained in %v", time.Since(start).Round(time.Millisecond))
				return
			}
		}
		select {
		case <-ctx.Done():
			r.logf("NOT drained after %v", r.cfg.DrainTimeout)
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// finalState is what the server shows after the drain, the reaper
// stopped, read through the API.
type finalState struct {
	at   time.Time
	last map[string]int64 // by partition name
	lag  map[string]int64 // by group
	// log holds the messages browsed from each partition, by offset: from
	// a little before the retention window to the end.
	log map[string]map[int64]loadcheck.Message
	// from is the first offset browsed per partition.
	from map[string]int64
	dlq  map[deadAddr]bool
	nDLQ int
}

// readFinal reads the partitions, the recent part of every log (browse)
// and every dead letter.
func (r *runner) readFinal(ctx context.Context) (*finalState, error) {
	st := &finalState{at: time.Now(), last: map[string]int64{}, lag: map[string]int64{},
		log: map[string]map[int64]loadcheck.Message{}, from: map[string]int64{}, dlq: map[deadAddr]bool{}}
	q, err := r.queueState(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range q.Groups {
		st.lag[g.Group] = g.Lag
	}
	// Browse from a little before the window: the messages that must be
	// there and some that may be.
	browseFrom := st.at.Add(-r.cfg.Retention - 30*time.Second).UnixNano()
	for _, p := range q.Partitions {
		st.last[p.Name] = p.LastOffset
		ps := r.h.byName[p.Name]
		if ps == nil {
			continue
		}
		from := r.h.firstSentAfter(ps, browseFrom)
		st.from[p.Name] = from
		msgs := map[int64]loadcheck.Message{}
		st.log[p.Name] = msgs
		if err := loadcheck.ReadLog(ctx, r.c.read, queueName, p.Name, from, p.LastOffset,
			func(m loadcheck.Message) { msgs[m.Offset] = m }); err != nil {
			return nil, err
		}
	}
	err = loadcheck.ReadDLQ(ctx, r.c.read, queueName, func(m loadcheck.DeadLetter) {
		k := deadAddr{m.ConsumerGroup, m.PartitionID, m.Offset}
		if st.dlq[k] {
			r.h.v.Add(loadcheck.KindOther, "group %s: offset %d of %s is in the DLQ twice", m.ConsumerGroup, m.Offset, m.PartitionID)
		}
		st.dlq[k] = true
		st.nDLQ++
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}
