package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// faultKind is one kind of fault.
type faultKind string

const (
	killPostmaster   faultKind = "kill-postmaster"   // SIGKILL, then restart on the same data directory
	restartPgBouncer faultKind = "restart-pgbouncer" // SIGKILL, then start again on the same port
	stallDatabase    faultKind = "stall-database"    // SIGSTOP the postmaster and its children, SIGCONT later
)

// fault is one injected fault and what followed.
type fault struct {
	n          int
	kind       faultKind
	detail     string
	start, end time.Time // the fault's action: from the signal to the service being back
	recovered  time.Time // end of the first successful request sent at or after end; zero: none
	err        error     // the fault could not be injected or undone
}

func (f *fault) recovery() time.Duration {
	if f.recovered.IsZero() {
		return -1
	}
	return f.recovered.Sub(f.end)
}

// injector applies faults to the database and the pooler.
type injector struct {
	db      *database
	bouncer *pgBouncer
}

func (in *injector) inject(ctx context.Context, f *fault, stall time.Duration) {
	f.start = time.Now()
	switch f.kind {
	case killPostmaster:
		pid, err := in.db.killPostmaster(ctx)
		f.detail, f.err = fmt.Sprintf("postmaster %d killed, restarted", pid), err
	case restartPgBouncer:
		if f.err = in.bouncer.kill(); f.err == nil {
			f.err = in.bouncer.start(ctx)
		}
		f.detail = "pgbouncer killed, started again"
	case stallDatabase:
		n, err := in.db.stall(ctx, stall)
		f.detail, f.err = fmt.Sprintf("%d processes stopped for %v", n, stall.Round(time.Millisecond)), err
	}
	f.end = time.Now()
}

// schedule is the order and spacing of a run's faults.
type schedule struct {
	cfg Config
	rng *rand.Rand
	// cycle holds the kinds left of the current round: each round applies
	// every kind once, in random order.
	cycle []faultKind
}

// next returns the next fault's kind and, for a stall, its length; ok is
// false when the run has had its faults.
func (s *schedule) next(n int, since time.Duration) (kind faultKind, stall time.Duration, ok bool) {
	if s.cfg.Short {
		// One kill, one pooler restart.
		switch n {
		case 1:
			return killPostmaster, 0, true
		case 2:
			return restartPgBouncer, 0, true
		}
		return "", 0, false
	}
	if since >= s.cfg.Duration {
		return "", 0, false
	}
	if len(s.cycle) == 0 {
		s.cycle = []faultKind{killPostmaster, restartPgBouncer, stallDatabase}
		s.rng.Shuffle(len(s.cycle), func(i, j int) { s.cycle[i], s.cycle[j] = s.cycle[j], s.cycle[i] })
	}
	kind, s.cycle = s.cycle[0], s.cycle[1:]
	if kind == stallDatabase {
		stall = s.cfg.MaxStall/4 + time.Duration(s.rng.Int64N(int64(s.cfg.MaxStall*3/4)+1))
	}
	return kind, stall, true
}

// gap is the traffic time before the next fault.
func (s *schedule) gap() time.Duration {
	if s.cfg.Short {
		return s.cfg.MinGap
	}
	return s.cfg.MinGap + time.Duration(s.rng.Int64N(int64(s.cfg.MaxGap-s.cfg.MinGap)+1))
}
