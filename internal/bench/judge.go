package bench

import (
	"fmt"
	"strings"
)

// The targets of SPEC §7, as docs/benchmarks.md states them. Each push
// target is a share of the bare log append of the same run (log-1,
// log-100, log-100-1: the least a push can do in this design); the raw
// INSERT ceilings are reported beside them for scale, never judged.
const (
	// TargetP1OfLog1 is the least share of log-1 that P1 reaches.
	TargetP1OfLog1 = 0.75
	// TargetP100OfLog100 is the least share of log-100 that P100 reaches.
	TargetP100OfLog100 = 0.90
	// TargetP100x1OfLog100x1 is the least share of log-100-1 that P100-1
	// reaches.
	TargetP100x1OfLog100x1 = 1.00
	// TargetC100OfP100 is the least share of P100's rate (same via) that
	// C100 reaches.
	TargetC100OfP100 = 1.00
	// TargetScaleRatio is the most S's pop p50 at 10,000 partitions may be,
	// as a multiple of its p50 at 10.
	TargetScaleRatio = 1.5
	// TargetBytesOnePartition and TargetBytesRandom are the most bytes per
	// message D may store beyond payload and transactionId, at batch 10 to
	// one partition and with random partitions, dedup keys live.
	TargetBytesOnePartition = 120
	TargetBytesRandom       = 150
	// TargetProbesPerWaiter is the most statements W's idle long-polls may
	// cost per waiter per second.
	TargetProbesPerWaiter = 1
	// TargetDeliveryP50Ms and TargetDeliveryP99Ms bound W's push-to-delivery
	// latency: p50 in process, p99 across processes.
	TargetDeliveryP50Ms = 50
	TargetDeliveryP99Ms = 1000
	// TargetReapOfBestPush is the least multiple of the run's best push
	// rate (any of P1, P10, P100, P100-1, either via) that R sustains for
	// each kind.
	TargetReapOfBestPush = 2
	// TargetSubscriptionP50Ms bounds SUB's push-to-invoke p50 in process.
	TargetSubscriptionP50Ms = 50
	// TargetSubscriptionIdleStatements is what idle subscriptions may cost
	// the dispatcher beyond the reaper's pass: nothing.
	TargetSubscriptionIdleStatements = 0
	// TargetGrowthRatio is the most any of G's figures with the log stored
	// may be, as a multiple of the same figure with an empty one.
	TargetGrowthRatio = 1.5
)

// pushWorkloads are the workloads whose rates R is held to.
var pushWorkloads = []string{"P1", "P10", "P100", "P100-1"}

// judge compares results with the targets of SPEC §7 (docs/benchmarks.md)
// and prints them.
func (r *runner) judge() {
	judge(&r.report)
	fmt.Fprintf(r.cfg.Out, "\nTargets (docs/benchmarks.md):\n")
	for _, res := range r.report.Results {
		if res.Pass != nil {
			mark := "PASS"
			if !*res.Pass {
				mark = "MISS"
			}
			fmt.Fprintf(r.cfg.Out, "  %-4s %-8s %-5s %s%s\n", mark, res.Name, res.Via, whatOf(res), res.Target)
		}
	}
}

// whatOf names a result in the targets list where its name and via do not
// tell it from its neighbours.
func whatOf(res Result) string {
	switch res.Name {
	case "P1", "P100", "P100-1", "C100":
		return ""
	}
	return res.What + ": "
}

// judge sets Target and Pass of each result that has a target.
func judge(rep *Report) {
	find := func(name, via string) *Result {
		for i := range rep.Results {
			if res := &rep.Results[i]; res.Name == name && res.Via == via {
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
	pct := func(a, b float64) string { return fmt.Sprintf("%.0f%%", 100*a/b) }

	// Pushes: a share of the bare log append of the same run.
	for _, t := range []struct {
		push, log, raw string
		share          float64
	}{
		{"P1", "log-1", "raw-1", TargetP1OfLog1},
		{"P100", "log-100", "raw-100", TargetP100OfLog100},
		{"P100-1", "log-100-1", "raw-100", TargetP100x1OfLog100x1},
	} {
		l, raw := find(t.log, "sql"), find(t.raw, "sql")
		for _, via := range []string{"core", "http"} {
			p := find(t.push, via)
			if p == nil {
				continue
			}
			target := fmt.Sprintf("≥ %.0f%% of %s", 100*t.share, t.log)
			if l == nil {
				p.Target = target + " (not run)"
				continue
			}
			note := pct(p.Rate, l.Rate)
			if raw != nil {
				note += fmt.Sprintf("; %s is %s of %s, this %s", t.log, pct(l.Rate, raw.Rate), t.raw, pct(p.Rate, raw.Rate))
			}
			set(p, fmt.Sprintf("%s (%s)", target, note), p.Rate >= t.share*l.Rate)
		}
	}
	for _, via := range []string{"core", "http"} {
		if c, p := find("C100", via), find("P100", via); c != nil && p != nil {
			set(c, fmt.Sprintf("≥ P100 (%s)", pct(c.Rate, p.Rate)), c.Rate >= TargetC100OfP100*p.Rate)
		}
	}

	// The reaper clears each kind at least twice as fast as the best push
	// workload of the run writes (SPEC §7, R), in messages pushed:
	// messages, keys, and leases, since a consumer that pops one message at
	// a time leaves a lease per message.
	var best *Result
	for _, name := range pushWorkloads {
		for _, via := range []string{"core", "http"} {
			if p := find(name, via); p != nil && (best == nil || p.Rate > best.Rate) {
				best = p
			}
		}
	}
	for i := range rep.Results {
		res := &rep.Results[i]
		switch {
		case res.Name == "R" && best != nil:
			set(res, fmt.Sprintf("≥ %d× the best push, %s %s (%.1f×)", TargetReapOfBestPush, best.Name, best.Via, res.Rate/best.Rate),
				res.Rate >= TargetReapOfBestPush*best.Rate)
		case res.Name == "S" && res.Unit == "×":
			set(res, fmt.Sprintf("≤ %.1f", TargetScaleRatio), res.Value <= TargetScaleRatio)
		case res.Name == "D" && res.Target != "report":
			limit := float64(TargetBytesOnePartition)
			if strings.Contains(res.What, "random") {
				limit = TargetBytesRandom
			}
			set(res, fmt.Sprintf("≤ %.0f B", limit), res.Value <= limit)
		case res.Name == "W" && res.Unit == "stmt/s":
			set(res, fmt.Sprintf("≤ %d probe per waiter per second (%.3f)", TargetProbesPerWaiter, res.Value),
				res.Value <= TargetProbesPerWaiter)
		case res.Name == "W" && strings.Contains(res.What, "same server"):
			set(res, fmt.Sprintf("≤ %d ms p50", TargetDeliveryP50Ms), res.P50Ms <= TargetDeliveryP50Ms)
		case res.Name == "W" && strings.Contains(res.What, "another server"):
			set(res, fmt.Sprintf("≤ %d ms p99", TargetDeliveryP99Ms), res.P99Ms <= TargetDeliveryP99Ms)
		case res.Name == "SUB" && res.Unit == "ms p50" && strings.Contains(res.What, "in process"):
			set(res, fmt.Sprintf("≤ %d ms p50", TargetSubscriptionP50Ms), res.P50Ms <= TargetSubscriptionP50Ms)
		case res.Name == "SUB" && res.Unit == "stmt/s":
			set(res, "nothing beyond the reaper's pass", res.Ops <= TargetSubscriptionIdleStatements)
		case res.Name == "G" && res.Unit == "×":
			target := fmt.Sprintf("≤ %.1f", TargetGrowthRatio)
			if res.Error != "" {
				target += " (" + res.Error + ")"
			}
			set(res, target, res.Error == "" && res.Value <= TargetGrowthRatio)
		}
	}
}
