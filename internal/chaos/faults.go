package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/queen-serverless/queen/internal/pgbouncer"
)

// faultKind is one kind of fault.
type faultKind string

const (
	killPostmaster   faultKind = "kill-postmaster"   // SIGKILL, down a while, restart on the same data directory
	restartPgBouncer faultKind = "restart-pgbouncer" // SIGKILL, down a while, start again on the same port
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
	bouncer *pgbouncer.Bouncer
}

// inject applies f; hold is how long the database or the pooler stays
// down (a kill) or stopped (a stall).
func (in *injector) inject(ctx context.Context, f *fault, hold time.Duration) {
	f.start = time.Now()
	switch f.kind {
	case killPostmaster:
		pid, err := in.db.killPostmaster(ctx, hold)
		f.detail, f.err = fmt.Sprintf("postmaster %d killed, down %v, restarted", pid, hold.Round(time.Millisecond)), err
	case restartPgBouncer:
		if f.err = in.bouncer.Kill(); f.err == nil {
			pause(ctx, hold)
			f.err = in.bouncer.Start(ctx)
		}
		f.detail = fmt.Sprintf("pgbouncer killed, down %v, started again", hold.Round(time.Millisecond))
	case stallDatabase:
		n, err := in.db.stall(ctx, hold)
		f.detail, f.err = fmt.Sprintf("%d processes stopped for %v", n, hold.Round(time.Millisecond)), err
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

// next returns the next fault's kind and how long it holds the database
// or the pooler down or stopped; ok is false when the run has had its
// faults.
func (s *schedule) next(n int, since time.Duration) (kind faultKind, hold time.Duration, ok bool) {
	if s.cfg.Short {
		// One kill, one pooler restart.
		switch n {
		case 1:
			return killPostmaster, s.cfg.MaxDown / 2, true
		case 2:
			return restartPgBouncer, s.cfg.MaxDown / 4, true
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
		return kind, s.cfg.MaxStall/4 + time.Duration(s.rng.Int64N(int64(s.cfg.MaxStall*3/4)+1)), true
	}
	return kind, time.Duration(s.rng.Int64N(int64(s.cfg.MaxDown) + 1)), true
}

// gap is the traffic time before the next fault.
func (s *schedule) gap() time.Duration {
	if s.cfg.Short {
		return s.cfg.MinGap
	}
	return s.cfg.MinGap + time.Duration(s.rng.Int64N(int64(s.cfg.MaxGap-s.cfg.MinGap)+1))
}
