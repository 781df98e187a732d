package soak

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Report is the outcome of a run; results.json holds it.
type Report struct {
	StartedAt time.Time `json:"startedAt"`
	Seed      uint64    `json:"seed"`
	Short     bool      `json:"short"`
	Postgres  string    `json:"postgres"`
	Settings  Settings  `json:"settings"`
	// P10Rate is the measured P10 push rate (messages/s through the HTTP
	// API; 0 when Config.Rate was given), TargetRate the steady rate asked
	// for and AchievedRate the one pushed.
	P10Rate      float64 `json:"p10Rate"`
	TargetRate   float64 `json:"targetRate"`
	AchievedRate float64 `json:"achievedRate"`
	// Backlog is the stored backlog (null: none).
	Backlog *BacklogReport `json:"backlog,omitempty"`
	Samples []Sample       `json:"samples"`
	// Thirds are the latencies over each third of the steady phase.
	Thirds []Third `json:"thirds"`
	// Routines compare what schema queen's routines cost per call over
	// the first and the last third, the costliest over the last third
	// first (empty when they were not timed).
	Routines         []RoutineThirds `json:"routines,omitempty"`
	LongTransactions []LongTx        `json:"longTransactions"`
	Passes           []Pass          `json:"reaperPasses"`
	Checks           []Check         `json:"checks"`
	// Lost, Gaps, Order, Dedup and Other count the violations by kind
	// (docs/testing.md, Soak); Violations describes them.
	Lost       int      `json:"lost"`
	Gaps       int      `json:"gaps"`
	Order      int      `json:"order"`
	Dedup      int      `json:"dedup"`
	Other      int      `json:"other"`
	Violations []string `json:"violations,omitempty"`
	Stats      Stats    `json:"stats"`
}

// Settings are the run's parameters.
type Settings struct {
	DurationS         float64 `json:"durationSeconds"`
	Fraction          float64 `json:"fraction"`
	Partitions        int     `json:"partitions"`
	Groups            int     `json:"groups"`
	ConsumersPerGroup int     `json:"consumersPerGroup"`
	Producers         int     `json:"producers"`
	PushItems         int     `json:"pushItems"`
	PopBatch          int     `json:"popBatch"`
	PopPartitions     int     `json:"popPartitions"`
	RetentionS        float64 `json:"retentionSeconds"`
	DedupWindowS      float64 `json:"dedupWindowSeconds"`
	LeaseTime         int     `json:"leaseTime"`
	RetryLimit        int     `json:"retryLimit"`
	PoisonEvery       int     `json:"poisonEvery"`
	ReaperIntervalS   float64 `json:"reaperIntervalSeconds"`
	SampleEveryS      float64 `json:"sampleEverySeconds"`
	LongTxEveryS      float64 `json:"longTxEverySeconds"`
	LongTxForS        float64 `json:"longTxForSeconds"`
	// Backlog (messages; 0: none) over BacklogPartitions partitions.
	Backlog           int `json:"backlog"`
	BacklogPartitions int `json:"backlogPartitions"`
}

func settingsOf(c Config) Settings {
	return Settings{DurationS: c.Duration.Seconds(), Fraction: c.Fraction, Partitions: c.Partitions, Groups: c.Groups,
		ConsumersPerGroup: c.ConsumersPerGroup, Producers: c.Producers, PushItems: c.PushItems, PopBatch: c.PopBatch,
		PopPartitions: c.PopPartitions, RetentionS: c.Retention.Seconds(), DedupWindowS: c.DedupWindow.Seconds(),
		LeaseTime: c.LeaseTime, RetryLimit: c.RetryLimit, PoisonEvery: c.PoisonEvery,
		ReaperIntervalS: c.ReaperInterval.Seconds(), SampleEveryS: c.SampleEvery.Seconds(),
		LongTxEveryS: c.LongTxEvery.Seconds(), LongTxForS: c.LongTxFor.Seconds(),
		Backlog: max(c.Backlog, 0), BacklogPartitions: c.BacklogPartitions}
}

// Third is the latency of each operation over one third of the steady
// phase.
type Third struct {
	FromS   float64                `json:"fromSeconds"`
	ToS     float64                `json:"toSeconds"`
	Latency map[string]LatencyStat `json:"latency"`
}

// RoutineThirds is one routine's calls and time per call over the first
// and the last third of the steady phase.
type RoutineThirds struct {
	Name  string  `json:"name"`
	First Routine `json:"first"`
	Last  Routine `json:"last"`
}

// perCall is the time of one call in ms, with what it called.
func (r Routine) perCall() float64 {
	if r.Calls == 0 {
		return 0
	}
	return r.MS / float64(r.Calls)
}

// Check is one of the run's pass/fail checks.
type Check struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Enforced: a failure fails the run. The short form reports the size
	// and latency checks without enforcing them.
	Enforced bool   `json:"enforced"`
	Detail   string `json:"detail"`
}

// Check names.
const (
	CheckSize     = "size plateau"
	CheckP99      = "p99"
	CheckBacklog  = "reaper catches up after each long transaction"
	CheckLost     = "nothing acknowledged lost"
	CheckPromises = "every answer as promised"
)

// Stats summarize the workload.
type Stats struct {
	Pushes, Queued                       int64
	RepeatsInWindow, RepeatsDuplicate    int64
	RepeatsPastWindow, RepeatsQueued     int64
	Pops, EmptyPops, Deliveries          int64
	Redeliveries, Abandoned              int64
	Acks, Completed, Failed, Retried     int64
	DeadLettered, AcksRefused, AcksStale int64
	// Expired counts (group, message) pairs retention removed before the
	// group got to them.
	Expired                                  int64
	MissedTicks                              int64
	DLQRows                                  int
	ReaperPasses, ReaperBehind, ReaperErrors int
}

// OK reports whether every enforced check passed.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if c.Enforced && !c.Pass {
			return false
		}
	}
	return len(r.Checks) > 0
}

// Check returns the named check (the first, for the p99 checks: use
// Checks).
func (r *Report) Check(name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name || strings.HasPrefix(c.Name, name+" ") {
			return c, true
		}
	}
	return Check{}, false
}

// Summary is the run's one-line summary.
func (r *Report) Summary() string {
	growth := "?"
	if c, ok := r.Check(CheckSize); ok {
		growth = strings.SplitN(c.Detail, " ", 2)[0]
	}
	var ratios []string
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Name, CheckP99+" ") {
			ratios = append(ratios, strings.TrimPrefix(c.Name, CheckP99+" ")+"="+strings.SplitN(c.Detail, " ", 2)[0])
		}
	}
	caught := 0
	for _, t := range r.LongTransactions {
		if t.CaughtUp != nil {
			caught++
		}
	}
	verdict := "ok"
	if !r.OK() {
		verdict = "FAILED"
	}
	return fmt.Sprintf("soak: %s rate=%.0f backlog=%d size_growth=%s p99_ratio %s caught_up=%d/%d lost=%d gaps=%d order=%d dedup=%d other=%d",
		verdict, r.AchievedRate, r.Settings.Backlog, growth, strings.Join(ratios, " "), caught, len(r.LongTransactions),
		r.Lost, r.Gaps, r.Order, r.Dedup, r.Other)
}

// write writes results.json and results.svg into dir.
func (r *Report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.svg"), []byte(chart(r)), 0o644)
}

// print prints the report, ending with the summary line.
func (r *Report) print(w io.Writer, dir string) {
	s := r.Stats
	if b := r.Backlog; b != nil {
		fmt.Fprintf(w, "\nbacklog: %d messages over %d partitions of %s, stored in %.1f s (%.0f msg/s; %d with a transactionId "+
			"of their own); %d groups read %d each (%d dead-lettered); schema queen %s with it (%s its own); "+
			"idle reaper pass %.1f ms (%.1f ms empty); at the end: %s",
			b.Messages, b.Partitions, b.Queue, b.FillS, b.FillRate, b.ClientIDs, len(b.Groups), b.ReadPerGroup, b.DeadLettered,
			fmtBytes(b.BaseBytes), fmtBytes(b.Bytes), b.IdleReapStoredMS, b.IdleReapEmptyMS, b.Intact)
	}
	fmt.Fprintf(w, "\npushes: %d answered 201, %d messages queued (%.0f msg/s of %.0f asked; %d ticks missed); "+
		"repeats inside the dedup window %d (%d duplicates), past it %d (%d queued)\n",
		s.Pushes, s.Queued, r.AchievedRate, r.TargetRate, s.MissedTicks, s.RepeatsInWindow, s.RepeatsDuplicate,
		s.RepeatsPastWindow, s.RepeatsQueued)
	fmt.Fprintf(w, "pops: %d delivered %d messages (%d redeliveries), %d empty, %d abandoned; acks: %d "+
		"(completed %d, failed %d, retry %d; %d dead-lettered; %d refused, %d stale after an expiry); DLQ rows %d; "+
		"expired before a group got to them %d\n",
		s.Pops, s.Deliveries, s.Redeliveries, s.EmptyPops, s.Abandoned, s.Acks, s.Completed, s.Failed, s.Retried,
		s.DeadLettered, s.AcksRefused, s.AcksStale, s.DLQRows, s.Expired)
	fmt.Fprintf(w, "reaper: %d passes, %d behind, %d failed\n", s.ReaperPasses, s.ReaperBehind, s.ReaperErrors)
	for i, t := range r.LongTransactions {
		caught := "NEVER"
		if t.CaughtUp != nil {
			caught = fmt.Sprintf("%.1f s after it ended", t.CaughtUpAfterS)
		}
		if t.Err != "" {
			caught = "FAILED: " + t.Err
		}
		fmt.Fprintf(w, "long transaction %d at %s: largest backlog %d/%d/%d (leases/dedup/retention), caught up %s\n",
			i+1, fmtElapsed(t.Start.Sub(r.StartedAt)), t.MaxBacklog.Leases, t.MaxBacklog.Dedup, t.MaxBacklog.Retention, caught)
	}
	for _, t := range r.Thirds {
		fmt.Fprintf(w, "third %s-%s:", fmtElapsed(time.Duration(t.FromS*1e9)), fmtElapsed(time.Duration(t.ToS*1e9)))
		for _, op := range opNames {
			l := t.Latency[op]
			fmt.Fprintf(w, "  %s p50 %.2f ms p99 %.2f ms (%d)", op, l.P50MS, l.P99MS, l.N)
		}
		fmt.Fprintln(w)
	}
	if len(r.Routines) > 0 {
		fmt.Fprintln(w, "routines, the costliest over the last third (ms per call with what they call, first third → last; calls):")
		for _, x := range r.Routines[:min(routinesPrinted, len(r.Routines))] {
			ratio := "—"
			if f := x.First.perCall(); f > 0 {
				ratio = fmt.Sprintf("%.2f×", x.Last.perCall()/f)
			}
			fmt.Fprintf(w, "  %-22s %8.3f → %8.3f ms  %6s  (%d → %d calls; %.1f s in the last third)\n", x.Name,
				x.First.perCall(), x.Last.perCall(), ratio, x.First.Calls, x.Last.Calls, x.Last.MS/1000)
		}
	}
	fmt.Fprintln(w, "checks:")
	for _, c := range r.Checks {
		mark := "PASS"
		switch {
		case !c.Pass && c.Enforced:
			mark = "FAIL"
		case !c.Pass:
			mark = "miss (not enforced)"
		case !c.Enforced:
			mark = "pass (not enforced)"
		}
		fmt.Fprintf(w, "  %-4s %s: %s\n", mark, c.Name, c.Detail)
	}
	if len(r.Violations) > 0 {
		fmt.Fprintln(w, "VIOLATIONS:")
		fmt.Fprintln(w, "  "+strings.Join(r.Violations, "\n  "))
	}
	fmt.Fprintf(w, "wrote %s and %s\n", filepath.Join(dir, "results.json"), filepath.Join(dir, "results.svg"))
	fmt.Fprintln(w, r.Summary())
}
