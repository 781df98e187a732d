package chaos

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of a run.
type Report struct {
	Seed   uint64
	Faults []FaultReport
	// Requests counts every HTTP request the workload and the checks made;
	// DuringFaults those that overlapped a fault or the time until the
	// service had recovered from it.
	Requests, DuringFaults int
	// FiveXX counts 5xx answers, Status503 the 503s among them; NoAnswer
	// counts requests that got none (connection error, client timeout).
	FiveXX, Status503, NoAnswer int
	// MaxRecovery is the longest recovery of any fault.
	MaxRecovery time.Duration
	// Lost counts acknowledged writes that did not hold: pushes answered
	// 201 missing from the log or never delivered to a group (and not in
	// its DLQ), acks answered success and then undone. Gaps counts offsets
	// missing from a partition's log; Order first deliveries out of offset
	// order. Other counts every other broken promise (a 5xx but 503, a
	// result that is not the model's, a fault the service did not recover
	// from, …).
	Lost, Gaps, Order, Other int
	// Violations describes the broken promises, by kind.
	Violations []string
	// Stats summarizes the workload.
	Stats string
}

// FaultReport is one fault.
type FaultReport struct {
	Kind, Detail string
	// Down is how long the fault's action took (kill to restarted, stop to
	// continue); Recovery from then to the end of the first successful
	// request sent after it, -1 when none came.
	Down, Recovery time.Duration
	// Requests, FiveXX, Status503 and NoAnswer count the requests that
	// overlapped the fault and its recovery.
	Requests, FiveXX, Status503, NoAnswer int
	Err                                   string
}

// OK reports whether the run kept every promise.
func (r *Report) OK() bool { return r.Lost == 0 && r.Gaps == 0 && r.Order == 0 && r.Other == 0 }

// Summary is the run's one-line summary.
func (r *Report) Summary() string {
	return fmt.Sprintf("chaos: faults=%d requests=%d 5xx=%d max_recovery_ms=%d lost=%d gaps=%d order=%d",
		len(r.Faults), r.Requests, r.FiveXX, r.MaxRecovery.Milliseconds(), r.Lost, r.Gaps, r.Order)
}

// write prints the report, ending with the summary line.
func (r *Report) write(w io.Writer) {
	fmt.Fprintln(w, "\nfaults:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "#\tkind\tdown\trequests\t5xx\t503\tno answer\trecovery\t")
	for i, f := range r.Faults {
		rec := "NONE"
		if f.Recovery >= 0 {
			rec = fmtMS(f.Recovery)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t\n", i+1, f.Kind, fmtMS(f.Down), f.Requests, f.FiveXX, f.Status503, f.NoAnswer, rec)
	}
	tw.Flush()
	fmt.Fprintf(w, "requests: %d (%d during faults); 5xx: %d (503: %d, other: %d); no answer: %d; max recovery %s\n",
		r.Requests, r.DuringFaults, r.FiveXX, r.Status503, r.FiveXX-r.Status503, r.NoAnswer, fmtMS(r.MaxRecovery))
	if r.Stats != "" {
		fmt.Fprintln(w, r.Stats)
	}
	if len(r.Violations) > 0 {
		fmt.Fprintln(w, "VIOLATIONS:")
		fmt.Fprintln(w, "  "+strings.Join(r.Violations, "\n  "))
	} else {
		fmt.Fprintln(w, "every push answered 201 is in the log at its offset and reached every group or its DLQ; "+
			"no offset gaps; first deliveries in order; no successful ack undone; every ack result is the model's")
	}
	if r.Other > 0 {
		fmt.Fprintf(w, "chaos: FAILED: %d broken promises besides losses, gaps and order (above)\n", r.Other)
	}
	fmt.Fprintln(w, r.Summary())
}

func fmtMS(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// tally fills the request counts of the report and of each fault.
func (r *Report) tally(calls []call, faults []*fault) {
	r.Requests = len(calls)
	for _, c := range calls {
		switch {
		case c.status == 0:
			r.NoAnswer++
		case c.status >= 500:
			r.FiveXX++
			if c.status == 503 {
				r.Status503++
			}
		}
	}
	for _, f := range faults {
		fr := FaultReport{Kind: string(f.kind), Detail: f.detail, Down: f.end.Sub(f.start), Recovery: f.recovery()}
		if f.err != nil {
			fr.Err = f.err.Error()
		}
		r.Faults = append(r.Faults, fr)
		r.MaxRecovery = max(r.MaxRecovery, fr.Recovery)
	}
	for _, c := range calls {
		during := false
		for i, f := range faults {
			until := f.recovered
			if until.IsZero() {
				until = c.end // never recovered: everything after counts
			}
			if c.start.After(until) || c.end.Before(f.start) {
				continue
			}
			during = true
			fr := &r.Faults[i]
			fr.Requests++
			switch {
			case c.status == 0:
				fr.NoAnswer++
			case c.status >= 500:
				fr.FiveXX++
				if c.status == 503 {
					fr.Status503++
				}
			}
		}
		if during {
			r.DuringFaults++
		}
	}
}
