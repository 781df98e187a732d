package bench

import (
	"fmt"
	"testing"
)

// Each target of SPEC §7, at its number and just past it: the numbers
// here are SPEC's, written out, not judge.go's constants, so that a
// target that drifts from SPEC fails here.
func TestJudgeHoldsEachTargetToSPEC(t *testing.T) {
	const eps = 1e-6
	// A run whose anchors are round numbers: log-1 1,000/s, log-100
	// 10,000/s, log-100-1 50,000/s; raw ceilings far above, as they are.
	base := func() []Result {
		return []Result{
			{Name: "raw-1", Via: "sql", Rate: 8000},
			{Name: "raw-100", Via: "sql", Rate: 250000},
			{Name: "log-1", Via: "sql", Rate: 1000},
			{Name: "log-100", Via: "sql", Rate: 10000},
			{Name: "log-100-1", Via: "sql", Rate: 50000},
		}
	}
	type check struct {
		name string
		res  []Result // added to the base run; the last is judged
		pass bool
	}
	var checks []check
	edge := func(name string, at func(v float64) []Result, limit float64, atLeast bool) {
		below, above := limit*(1-eps), limit*(1+eps)
		if limit == 0 {
			below, above = -1, 1
		}
		checks = append(checks,
			check{fmt.Sprintf("%s at %g", name, limit), at(limit), true},
			check{fmt.Sprintf("%s just below %g", name, limit), at(below), !atLeast},
			check{fmt.Sprintf("%s just above %g", name, limit), at(above), atLeast})
	}
	for _, via := range []string{"core", "http"} {
		// P1 ≥ 75 % of log-1, P100 ≥ 90 % of log-100, P100-1 ≥ 100 % of log-100-1.
		edge("P1 "+via, func(v float64) []Result { return []Result{{Name: "P1", Via: via, Rate: v}} }, 750, true)
		edge("P100 "+via, func(v float64) []Result { return []Result{{Name: "P100", Via: via, Rate: v}} }, 9000, true)
		edge("P100-1 "+via, func(v float64) []Result { return []Result{{Name: "P100-1", Via: via, Rate: v}} }, 50000, true)
		// C100 ≥ P100's rate, the same via.
		edge("C100 "+via, func(v float64) []Result {
			return []Result{{Name: "P100", Via: via, Rate: 9000}, {Name: "C100", Via: via, Rate: v}}
		}, 9000, true)
	}
	// R ≥ 2× the best push rate of the run, whichever push workload and via
	// that is.
	for _, best := range []string{"P1", "P10", "P100", "P100-1"} {
		edge("R against "+best, func(v float64) []Result {
			run := []Result{{Name: "P1", Via: "core", Rate: 100}, {Name: "P10", Via: "core", Rate: 200},
				{Name: "P100", Via: "core", Rate: 300}, {Name: "P100-1", Via: "http", Rate: 400}}
			for i := range run {
				if run[i].Name == best {
					run[i].Rate = 1000
				}
			}
			return append(run, Result{Name: "R", Via: "core", What: "retention", Rate: v, Unit: "msg/s"})
		}, 2000, true)
	}
	// S: ratio ≤ 1.5.
	edge("S", func(v float64) []Result { return []Result{{Name: "S", Via: "core", Value: v, Unit: "×"}} }, 1.5, false)
	// D: ≤ 120 B at batch 10 to one partition, ≤ 150 B with random partitions.
	edge("D one partition", func(v float64) []Result {
		return []Result{{Name: "D", Via: "sql", What: "bytes/msg, 10 per push to one partition", Value: v, Target: "≤ 120 B"}}
	}, 120, false)
	edge("D random", func(v float64) []Result {
		return []Result{{Name: "D", Via: "sql", What: "bytes/msg, 10 per push to random partitions", Value: v, Target: "≤ 150 B"}}
	}, 150, false)
	// W: ≤ 1 probe per waiter per second; delivery ≤ 50 ms p50 in process,
	// ≤ 1 s p99 across processes.
	edge("W probes", func(v float64) []Result {
		return []Result{{Name: "W", Via: "http", What: "200 idle long-polls: statements/s", Value: v, Unit: "stmt/s"}}
	}, 1, false)
	edge("W same server", func(v float64) []Result {
		return []Result{{Name: "W", Via: "http", What: "push-to-delivery, push through the same server", P50Ms: v, Unit: "ms p50"}}
	}, 50, false)
	edge("W another server", func(v float64) []Result {
		return []Result{{Name: "W", Via: "http", What: "push-to-delivery, push through another server", P99Ms: v, Unit: "ms p50"}}
	}, 1000, false)
	// SUB: push-to-invoke ≤ 50 ms p50 in process; idle subscriptions cost
	// nothing beyond the reaper.
	edge("SUB in process", func(v float64) []Result {
		return []Result{{Name: "SUB", Via: "core", What: "push-to-invoke, in process", P50Ms: v, Unit: "ms p50"}}
	}, 50, false)
	edge("SUB idle", func(v float64) []Result {
		return []Result{{Name: "SUB", Via: "core", What: "103 idle subscriptions: statements/s", Ops: int64(v), Unit: "stmt/s"}}
	}, 0, false)
	// G: every ratio stored / empty ≤ 1.5, and a figure that could not be
	// measured misses.
	edge("G", func(v float64) []Result {
		return []Result{{Name: "G", Via: "core", What: "retention: µs per due row", Value: v, Unit: "×"}}
	}, 1.5, false)
	checks = append(checks, check{"G failed", []Result{{Name: "G", Via: "core", What: "stats pass", Value: 1, Unit: "×", Error: "failed"}}, false})

	for _, c := range checks {
		rep := Report{Results: append(base(), c.res...)}
		judge(&rep)
		got := rep.Results[len(rep.Results)-1]
		if got.Pass == nil {
			t.Errorf("%s: not judged", c.name)
			continue
		}
		if *got.Pass != c.pass {
			t.Errorf("%s: pass = %v, want %v (target %q)", c.name, *got.Pass, c.pass, got.Target)
		}
	}
}

// What SPEC §7 leaves as "report" is never judged, and a push target whose
// anchor did not run is not judged either.
func TestJudgeReportsTheRest(t *testing.T) {
	rep := Report{Results: []Result{
		{Name: "raw-1", Via: "sql", Rate: 8000},
		{Name: "P1", Via: "core", Rate: 10},
		{Name: "P10", Via: "core", Rate: 10},
		{Name: "C10", Via: "core", Rate: 10},
		{Name: "F5", Via: "core", Rate: 10},
		{Name: "D", Via: "sql", What: "10 per push to one partition, client ids", Value: 1e6, Target: "report"},
		{Name: "W", Via: "sql", What: "200 idle long-polls: database CPU", Value: 100, Unit: "% of a core"},
		{Name: "SUB", Via: "core", What: "delivered at batch 10, 1,000 partitions", Rate: 1, Unit: "msg/s"},
		{Name: "G", Via: "core", What: "fill", Rate: 1, Unit: "msg/s"},
	}}
	judge(&rep)
	for _, r := range rep.Results {
		if r.Pass != nil {
			t.Errorf("%s %s (%s) judged: %s", r.Name, r.Via, r.What, r.Target)
		}
	}
}
