package bench

import (
	"fmt"
	"strings"
)

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
	// push workload writes it, P1 and P100 alike, against messages pushed:
	// messages, keys, and leases, since a consumer that pops one message at
	// a time leaves a lease per message.
	if p1, p100 := find("P1", "core"), find("P100", "core"); p1 != nil && p100 != nil {
		for i := range r.report.Results {
			if res := &r.report.Results[i]; res.Name == "R" {
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
		if res.Name == "SUB" && res.Unit == "ms p50" && strings.Contains(res.What, "in process") {
			set(res, "≤ 50 ms p50", res.P50Ms <= 50)
		}
	}
	fmt.Fprintf(r.cfg.Out, "\nTargets (docs/benchmarks.md):\n")
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
