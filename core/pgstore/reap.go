package pgstore

import (
	"context"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// The statements of these operations (sql/*.sql).
var (
	sqlReapStep    = query("reap_step")
	sqlReapBacklog = query("reap_backlog")
)

// DefaultReapBatch is the most rows of one kind one reaper transaction
// touches unless ReapRequest.Batch says otherwise: small enough that a
// batch holds its locks for milliseconds, large enough that the
// statement's fixed cost is spread thin.
const DefaultReapBatch = 2000

// reapKinds are the kinds of maintenance a reaper pass does, in the order
// it takes them (see queen.reap_step).
var reapKinds = [...]string{"leases", "dedup", "retention", "completed"}

func (s *Store) retentionDefaults() queen.RetentionDefaults {
	return queen.RetentionDefaults{Seconds: s.cfg.DefaultRetentionSeconds, CompletedSeconds: s.cfg.DefaultCompletedRetentionSeconds}
}

// Reap implements queen.Store: rounds of one batch of every kind that has
// not caught up, each batch its own transaction, until all have caught up
// (a batch came back short) or the deadline has passed.
func (s *Store) Reap(ctx context.Context, req queen.ReapRequest) (queen.ReapStats, error) {
	batch := req.Batch
	if batch <= 0 {
		batch = DefaultReapBatch
	}
	var st queen.ReapStats
	pending := reapKinds[:]
	for len(pending) > 0 {
		// Every pass does at least one round, so that even a pass whose
		// time is short moves forward.
		if st.Batches > 0 && !req.Deadline.IsZero() && !time.Now().Before(req.Deadline) {
			st.Behind = true
			break
		}
		var next []string
		for _, kind := range pending {
			// Rows is what the batch took, which can be more than it did
			// (N): a short batch has caught up.
			var r struct {
				N    int `json:"n"`
				Dead int `json:"dead"`
				Rows int `json:"rows"`
			}
			err := s.call(ctx, "reap "+kind, sqlReapStep, &r, s.now(), kind, batch,
				s.cfg.DefaultRetentionSeconds, s.cfg.DefaultCompletedRetentionSeconds)
			if err != nil {
				return st, err
			}
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
			}
			if r.Rows >= batch {
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
