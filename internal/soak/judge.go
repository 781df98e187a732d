package soak

import (
	"fmt"
	"sort"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/loadcheck"
)

// judge fills the report's statistics, thirds and checks.
func (r *runner) judge() {
	rep, cfg, h := r.rep, r.cfg, r.h
	n := &h.n
	rep.Stats = Stats{Pushes: n.pushes.Load(), Queued: n.queued.Load(),
		RepeatsInWindow: n.dupAsked.Load(), RepeatsDuplicate: n.dupGot.Load(),
		RepeatsPastWindow: n.lateAsked.Load(), RepeatsQueued: n.lateQueued.Load(),
		Pops: n.pops.Load(), EmptyPops: n.emptyPops.Load(), Deliveries: n.deliveries.Load(),
		Redeliveries: n.redeliveries.Load(), Abandoned: n.abandoned.Load(),
		Acks: n.acks.Load(), Completed: n.completed.Load(), Failed: n.failed.Load(), Retried: n.retried.Load(),
		DeadLettered: n.deadLettered.Load(), AcksRefused: n.ackRefused.Load(), AcksStale: n.ackExcused.Load(),
		Expired: n.expired.Load(), MissedTicks: n.missedTicks.Load(), DLQRows: r.nDLQ}
	for _, p := range rep.Passes {
		rep.Stats.ReaperPasses++
		if p.Stats.Behind {
			rep.Stats.ReaperBehind++
		}
		if p.Err != "" {
			rep.Stats.ReaperErrors++
		}
	}
	rep.AchievedRate = float64(rep.Stats.Queued) / cfg.Duration.Seconds()
	for i := range 3 {
		t := Third{FromS: cfg.Duration.Seconds() * float64(i) / 3, ToS: cfg.Duration.Seconds() * float64(i+1) / 3,
			Latency: map[string]LatencyStat{}}
		for op := range numOps {
			hh := r.lat.third(i, op)
			t.Latency[opNames[op]] = LatencyStat{N: hh.n, P50MS: hh.quantile(0.5), P99MS: hh.quantile(0.99)}
		}
		rep.Thirds = append(rep.Thirds, t)
	}
	rep.Routines = routineThirds(rep.Samples, cfg)
	timings := !cfg.Short
	rep.Checks = append(rep.Checks, sizeCheck(rep.Samples, r.baseBytes, cfg, timings))
	for _, op := range opNames {
		rep.Checks = append(rep.Checks, p99Check(op, rep.Thirds[0].Latency[op], rep.Thirds[2].Latency[op], timings))
	}
	r.longMu.Lock()
	rep.LongTransactions = caughtUp(r.longTxs, rep.Passes)
	r.longMu.Unlock()
	rep.Checks = append(rep.Checks, backlogCheck(rep.LongTransactions, len(cfg.longTxStarts())))

	rep.Lost, rep.Gaps, rep.Order = h.v.Count(loadcheck.KindLost), h.v.Count(loadcheck.KindGap), h.v.Count(loadcheck.KindOrder)
	rep.Dedup, rep.Other = h.v.Count(kindDedup), h.v.Count(loadcheck.KindOther)
	rep.Violations = h.v.Describe()
	rep.Checks = append(rep.Checks,
		Check{Name: CheckLost, Enforced: true, Pass: rep.Lost+rep.Gaps+rep.Order == 0,
			Detail: fmt.Sprintf("lost %d, gaps %d, order %d; %d (group, message) pairs expired by retention before the group got to them",
				rep.Lost, rep.Gaps, rep.Order, rep.Stats.Expired)},
		Check{Name: CheckPromises, Enforced: true, Pass: rep.Dedup+rep.Other == 0,
			Detail: fmt.Sprintf("dedup %d, other %d (status codes, ack results against the model, drain)", rep.Dedup, rep.Other)})
}

// sizeCheck: the total size grows by at most MaxSizeGrowth over the last
// third of the steady phase (from the first sample in it to the last). The
// growth is measured against what the traffic keeps on disk: the total
// less base, the size before the traffic started (the stored backlog, which
// is not due during the run). Whatever grows — the backlog's part too —
// counts as growth.
func sizeCheck(samples []Sample, base int64, cfg Config, enforced bool) Check {
	c := Check{Name: CheckSize, Enforced: enforced}
	from := twoThirds(samples, cfg)
	if from < 0 || len(samples) < 2 || samples[from].TotalBytes-base <= 0 {
		c.Detail = "? (no samples of the last third)"
		return c
	}
	a, b := samples[from], samples[len(samples)-1]
	growth := float64(b.TotalBytes-a.TotalBytes) / float64(a.TotalBytes-base)
	c.Pass = growth <= MaxSizeGrowth
	c.Detail = fmt.Sprintf("%+.1f%% over the last third (%s at %s, %s at %s; ≤ %+.0f%%)", 100*growth,
		fmtBytes(a.TotalBytes-base), fmtElapsed(time.Duration(a.ElapsedS*1e9)), fmtBytes(b.TotalBytes-base),
		fmtElapsed(time.Duration(b.ElapsedS*1e9)), 100*MaxSizeGrowth)
	if base > 0 {
		c.Detail += fmt.Sprintf(", beyond the %s stored before the traffic", fmtBytes(base))
	}
	return c
}

// routinesPrinted is how many routines the report prints.
const routinesPrinted = 12

// routineThirds sums each routine's calls and time over the samples of
// the first and of the last third of the steady phase (a sample holds its
// interval's), the costliest over the last third first. The first
// interval is left out: a connection reports its routines' statistics up
// to seconds late, so it also holds some of what came before the steady
// phase.
func routineThirds(samples []Sample, cfg Config) []RoutineThirds {
	third := cfg.Duration.Seconds() / 3
	slack := cfg.SampleEvery.Seconds() / 2
	by := map[string]*RoutineThirds{}
	add := func(to *Routine, r Routine) {
		to.Calls, to.MS, to.SelfMS = to.Calls+r.Calls, to.MS+r.MS, to.SelfMS+r.SelfMS
	}
	for _, s := range samples {
		first := s.ElapsedS > cfg.SampleEvery.Seconds()+slack && s.ElapsedS <= third+slack
		last := s.ElapsedS > 2*third+slack
		if !first && !last {
			continue
		}
		for name, r := range s.Routines {
			x := by[name]
			if x == nil {
				x = &RoutineThirds{Name: name}
				by[name] = x
			}
			if first {
				add(&x.First, r)
			} else {
				add(&x.Last, r)
			}
		}
	}
	out := make([]RoutineThirds, 0, len(by))
	for _, x := range by {
		out = append(out, *x)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Last.MS != out[j].Last.MS {
			return out[i].Last.MS > out[j].Last.MS
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// twoThirds is the index of the first sample of the last third (-1: none).
func twoThirds(samples []Sample, cfg Config) int {
	at := 2 * cfg.Duration.Seconds() / 3
	for i, s := range samples {
		if s.ElapsedS >= at-cfg.SampleEvery.Seconds()/2 {
			return i
		}
	}
	return -1
}

// p99Check: the last third's p99 of op is at most MaxP99Ratio times the
// first third's.
func p99Check(op string, first, last LatencyStat, enforced bool) Check {
	c := Check{Name: CheckP99 + " " + op, Enforced: enforced}
	if first.N == 0 || last.N == 0 || first.P99MS == 0 {
		c.Detail = fmt.Sprintf("? (%d and %d requests)", first.N, last.N)
		return c
	}
	ratio := last.P99MS / first.P99MS
	c.Pass = ratio <= MaxP99Ratio
	c.Detail = fmt.Sprintf("%.2f× (last third %.2f ms, first third %.2f ms; ≤ %.1f×)", ratio, last.P99MS, first.P99MS, MaxP99Ratio)
	return c
}

// caughtUp finds, for each long transaction, the largest backlog while it
// was open and until the reaper caught up, and the first pass that started
// after it ended and left nothing behind, before the next long
// transaction opened.
func caughtUp(txs []LongTx, passes []Pass) []LongTx {
	out := append([]LongTx(nil), txs...)
	for i := range out {
		t := &out[i]
		if t.Err != "" || t.End.IsZero() {
			continue
		}
		var next time.Time
		if i+1 < len(out) {
			next = out[i+1].Start
		}
		for _, p := range passes {
			if p.Start.Before(t.Start) {
				continue
			}
			if !next.IsZero() && !p.Start.Before(next) {
				break
			}
			b := p.Stats.Backlog
			t.MaxBacklog = queen.ReapBacklog{Leases: max(t.MaxBacklog.Leases, b.Leases),
				Dedup: max(t.MaxBacklog.Dedup, b.Dedup), Retention: max(t.MaxBacklog.Retention, b.Retention)}
			if !p.Start.Before(t.End) && p.caughtUp() {
				end := p.Start.Add(time.Duration(p.MS * float64(time.Millisecond)))
				t.CaughtUp, t.CaughtUpAfterS = &end, end.Sub(t.End).Seconds()
				break
			}
		}
	}
	return out
}

// backlogCheck: every scheduled long transaction ran, and the reaper
// caught up after each.
func backlogCheck(txs []LongTx, scheduled int) Check {
	c := Check{Name: CheckBacklog, Enforced: true, Pass: len(txs) == scheduled && scheduled > 0}
	var worst float64
	for _, t := range txs {
		if t.CaughtUp == nil {
			c.Pass = false
			continue
		}
		worst = max(worst, t.CaughtUpAfterS)
	}
	caught := 0
	for _, t := range txs {
		if t.CaughtUp != nil {
			caught++
		}
	}
	c.Detail = fmt.Sprintf("%d of %d long transactions (%d scheduled) followed by a pass with no backlog; the slowest after %.1f s",
		caught, len(txs), scheduled, worst)
	return c
}
