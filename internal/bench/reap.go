package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// ---- R: the reaper's sustained rate per kind

// reap measures how fast one reaper pass (queen.Store.Reap, as the reaper
// function and `queen serve` run it: batch after batch until caught up)
// clears each kind of work, next to the push rates of the same run: the
// messages retention removes, the dedup keys it prunes and the expired
// leases it expires, per second. Each kind is timed alone, on work that is
// all due: ReapRows messages pushed as P100 pushes them (100 per push to
// random partitions, about one message per segment: retention's most
// rows per message), ReapRows keys of client-made ids (100 per push to one
// partition), and ReapLeases leases, one per partition. It starts from an
// empty log: the earlier workloads' queues are deleted first, so that
// their dedup windows do not hold the keys back.
func (r *runner) reap(ctx context.Context) error {
	fmt.Fprintf(r.cfg.Out, "  deleting the earlier workloads' queues…")
	qs, err := r.store.ListQueues(ctx)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if err := r.store.DeleteQueue(ctx, q.Name); err != nil {
			return err
		}
	}
	if _, err := r.store.Reap(ctx, queen.ReapRequest{}); err != nil { // their leftover keys
		return err
	}
	fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")

	// Retention: a one-second window, pushes as P100's, no dedup window:
	// in practice a queue's dedup window (an hour) ends long before its
	// retention (days), and a message removed inside its dedup window
	// would leave a key behind.
	if _, err := r.store.Configure(ctx, queen.ConfigureRequest{Queue: "bench-R-retention",
		Options: queen.QueueOptions{RetentionSeconds: ptr(1), DedupWindowSeconds: ptr(0)}}); err != nil {
		return err
	}
	if err := r.reapFill(ctx, "bench-R-retention", false); err != nil {
		return err
	}
	st, secs, err := r.timedReap(ctx)
	if err != nil {
		return err
	}
	r.add(Result{Name: "R", Via: "core", What: fmt.Sprintf("retention: messages removed (%d segments)", st.SegmentsRetained),
		Rows: int64(r.cfg.ReapRows), Ops: int64(st.Batches), Seconds: secs, Rate: float64(r.cfg.ReapRows) / secs, Unit: "msg/s"})

	// Dedup pruning: a one-second window, every item with an id of its own.
	// Keys go once past every queue's window: the retention queue's
	// (the default hour) goes with it.
	if err := r.store.DeleteQueue(ctx, "bench-R-retention"); err != nil {
		return err
	}
	if _, err := r.store.Configure(ctx, queen.ConfigureRequest{Queue: "bench-R-dedup",
		Options: queen.QueueOptions{DedupWindowSeconds: ptr(1)}}); err != nil {
		return err
	}
	if err := r.reapFill(ctx, "bench-R-dedup", true); err != nil {
		return err
	}
	if st, secs, err = r.timedReap(ctx); err != nil {
		return err
	}
	r.add(Result{Name: "R", Via: "core", What: "dedup pruning: keys removed", Rows: int64(st.DedupPruned),
		Ops: int64(st.Batches), Seconds: secs, Rate: float64(st.DedupPruned) / secs, Unit: "keys/s"})

	// Lease expiry: one lease per partition, a one-second leaseTime.
	if err := r.reapLeases(ctx, "bench-R-leases"); err != nil {
		return err
	}
	if st, secs, err = r.timedReap(ctx); err != nil {
		return err
	}
	r.add(Result{Name: "R", Via: "core", What: "lease expiry: leases expired", Rows: int64(st.LeasesExpired),
		Ops: int64(st.Batches), Seconds: secs, Rate: float64(st.LeasesExpired) / secs, Unit: "leases/s"})
	return nil
}

func ptr[T any](v T) *T { return &v }

// timedReap waits until the work just written is due (the windows are one
// second long), then times one pass without a deadline.
func (r *runner) timedReap(ctx context.Context) (queen.ReapStats, float64, error) {
	select {
	case <-time.After(1100 * time.Millisecond):
	case <-ctx.Done():
		return queen.ReapStats{}, 0, ctx.Err()
	}
	start := time.Now()
	st, err := r.store.Reap(ctx, queen.ReapRequest{})
	return st, time.Since(start).Seconds(), err
}

// reapFill pushes ReapRows messages to queue, 100 per push from every
// client: to random partitions, or (ids) each push to one random partition
// with an id the client made for every item.
func (r *runner) reapFill(ctx context.Context, queue string, ids bool) error {
	total := int64(r.cfg.ReapRows)
	var n atomic.Int64
	fmt.Fprintf(r.cfg.Out, "  pushing %d messages to %s…", total, queue)
	err := r.eachClient(func() error {
		for n.Add(100) <= total {
			batch := items(queue, 100, r.cfg.Partitions, false)
			if ids {
				p := fmt.Sprintf("p-%d", rand.IntN(r.cfg.Partitions))
				for i := range batch {
					batch[i].Partition, batch[i].TransactionID = p, queen.NewUUIDv7()
				}
			}
			if _, err := r.store.Push(ctx, batch); err != nil {
				return err
			}
		}
		return nil
	})
	fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
	return err
}

// reapLeases leaves ReapLeases leases on queue, one per partition, each
// with a one-second leaseTime.
func (r *runner) reapLeases(ctx context.Context, queue string) error {
	if _, err := r.store.Configure(ctx, queen.ConfigureRequest{Queue: queue,
		Options: queen.QueueOptions{LeaseTime: ptr(1), RetryLimit: ptr(1000)}}); err != nil {
		return err
	}
	total := r.cfg.ReapLeases
	fmt.Fprintf(r.cfg.Out, "  leasing %d partitions of %s…", total, queue)
	for done := 0; done < total; done += 1000 {
		batch := make([]queen.PushItem, min(1000, total-done))
		for i := range batch {
			batch[i] = queen.PushItem{Queue: queue, Partition: fmt.Sprintf("l-%d", done+i), Payload: json.RawMessage(Payload)}
		}
		if _, err := r.store.Push(ctx, batch); err != nil {
			return err
		}
	}
	var next atomic.Int64
	err := r.eachClient(func() error {
		for i := next.Add(1) - 1; i < int64(total); i = next.Add(1) - 1 {
			res, err := r.store.Pop(ctx, queen.PopRequest{Queue: queue, Partition: fmt.Sprintf("l-%d", i), Batch: 1})
			if err == nil && len(res.Messages) != 1 {
				err = fmt.Errorf("pop of l-%d returned %d messages", i, len(res.Messages))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
	return err
}
