package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// The statements of these operations (sql/*.sql).
var (
	sqlReapStep    = query("reap_step")
	sqlReapBacklog = query("reap_backlog")
	sqlReapDLQ     = query("reap_dlq")
)

// DefaultReapBatch is the most rows of one kind one reaper transaction
// touches unless ReapRequest.Batch says otherwise: small enough that a
// batch holds its locks for milliseconds, large enough that the
// statement's fixed cost is spread thin.
const DefaultReapBatch = 2000

// ReapConns is the most lease batches Reap runs at once, each a
// transaction on a connection of its own, once a first batch came back
// full; never more than the pool's size (pgxpool MaxConns), so a pool of
// one runs them one after another. Batches take disjoint rows
// (queen._reap_leases). A batch is mostly the database's CPU, so more
// batches than the database has cores add nothing (docs/benchmarks.md,
// R, on 2 cores).
const ReapConns = 2

// reapKinds are the kinds of maintenance a reaper pass does, in the order
// it takes them (see queen.reap_step).
var reapKinds = [...]string{"leases", "dedup", "retention", "completed", "dlq", "summaries"}

// reapResult is what one batch (queen.reap_step) did: N rows done, Dead
// heads dead-lettered, and Rows, what it took, which can be more than it
// did: a batch that took fewer rows than asked has caught up.
type reapResult struct {
	N    int `json:"n"`
	Dead int `json:"dead"`
	Rows int `json:"rows"`
}

func (s *Store) retentionDefaults() queen.RetentionDefaults {
	return queen.RetentionDefaults{Seconds: s.cfg.DefaultRetentionSeconds, CompletedSeconds: s.cfg.DefaultCompletedRetentionSeconds,
		DLQSeconds: s.cfg.DefaultDLQRetentionSeconds}
}

// Reap implements queen.Store: rounds of one batch of every kind that has
// not caught up, each batch its own transaction, until all have caught up
// (a batch came back short) or the deadline has passed. Lease expiry,
// once its first batch came back full, runs reapConns batches at once in
// each later round: an idle pass still costs one statement per kind.
func (s *Store) Reap(ctx context.Context, req queen.ReapRequest) (queen.ReapStats, error) {
	batch := req.Batch
	if batch <= 0 {
		batch = DefaultReapBatch
	}
	var st queen.ReapStats
	pending := reapKinds[:]
	for round := 0; len(pending) > 0; round++ {
		// Every pass does at least one round, so that even a pass whose
		// time is short moves forward.
		if round > 0 && !req.Deadline.IsZero() && !time.Now().Before(req.Deadline) {
			st.Behind = true
			break
		}
		var next []string
		for _, kind := range pending {
			n := 1
			if kind == "leases" && round > 0 {
				n = s.reapConns()
			}
			rs, err := s.reapBatches(ctx, kind, batch, n)
			full := true
			for _, r := range rs {
				st.Batches++
				switch kind {
				case "leases":
					st.LeasesExpired += r.N
					st.DeadLettered += r.Dead
				case "dedup":
					st.DedupPruned += r.N
				case "retention":
					st.SegmentsRetained += r.N
				case "completed":
					st.SegmentsCompleted += r.N
				case "dlq":
					st.DeadLettersExpired += r.N
				case "summaries":
					st.SummariesFolded += r.N
				}
				// Side by side batches take disjoint rows: one that
				// came back short found no more to take.
				full = full && r.Rows >= batch
			}
			if err != nil {
				return st, err
			}
			if full {
				next = append(next, kind)
			}
		}
		pending = next
	}
	if st.Behind {
		err := s.call(ctx, "reap backlog", sqlReapBacklog, &st.Backlog, s.now(),
			s.cfg.DefaultRetentionSeconds, s.cfg.DefaultCompletedRetentionSeconds, queen.MaxBacklogCount)
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// reapConns is how many lease batches Reap runs at once: ReapConns, at
// most the pool's size; one on a single connection.
func (s *Store) reapConns() int {
	pool, _ := pgxOf(s.db)
	if pool == nil {
		return 1
	}
	return max(1, min(ReapConns, int(pool.Config().MaxConns)))
}

// reapBatches runs n batches of kind at once and returns those that
// completed, with the errors of the others.
func (s *Store) reapBatches(ctx context.Context, kind string, batch, n int) ([]reapResult, error) {
	step := func() (reapResult, error) {
		var r reapResult
		if kind == "dlq" {
			var n int64
			err := s.call(ctx, "reap dlq", sqlReapDLQ, &n, s.now(), batch, s.cfg.DefaultDLQRetentionSeconds)
			r.N, r.Rows = int(n), int(n)
			return r, err
		}
		err := s.call(ctx, "reap "+kind, sqlReapStep, &r, s.now(), kind, batch,
			s.cfg.DefaultRetentionSeconds, s.cfg.DefaultCompletedRetentionSeconds)
		return r, err
	}
	if n == 1 {
		r, err := step()
		if err != nil {
			return nil, err
		}
		return []reapResult{r}, nil
	}
	rs := make([]reapResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { rs[i], errs[i] = step() })
	}
	wg.Wait()
	var done []reapResult
	for i, r := range rs {
		if errs[i] == nil {
			done = append(done, r)
		}
	}
	return done, errors.Join(errs...)
}
