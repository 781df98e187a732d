package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// scale compares pop latency at 10,000 partitions with 10 partitions, in
// three rounds (a backlog everywhere; the wide queue drained and refilled;
// the same after VACUUM), each popping both queues in turn.
func (r *runner) scale(ctx context.Context) error {
	const pops = 400
	wide := r.cfg.ScalePartitions
	narrow, broad := "bench-S-10", fmt.Sprintf("bench-S-%d", wide)
	// The narrow queue holds enough for the three rounds below; the wide one
	// ~2 messages a partition, so each of its pops is a first visit.
	for _, q := range []struct {
		name         string
		parts, total int
	}{{narrow, 10, 3*pops + 30}, {broad, wide, max(3*wide, 2*pops)}} {
		fmt.Fprintf(r.cfg.Out, "  filling %d partitions…", q.parts)
		all := make([]queen.PushItem, 0, q.total)
		for i := 0; i < q.total; i++ {
			all = append(all, queen.PushItem{Queue: q.name, Partition: fmt.Sprintf("p-%d", i%q.parts), Payload: json.RawMessage(Payload)})
		}
		for len(all) > 0 {
			n := min(1000, len(all))
			if _, err := r.store.Push(ctx, all[:n]); err != nil {
				return err
			}
			all = all[n:]
		}
		fmt.Fprintf(r.cfg.Out, "\r%60s\r", "")
	}
	// Each round pops the two queues in turn, one message at a time, so both
	// see the same machine: whatever else runs (a checkpoint, autovacuum
	// after the workloads before) slows both alike.
	round := func(what string) error {
		lat10, latWide, err := r.popPaired(ctx, narrow, broad, pops)
		if err != nil {
			return err
		}
		p10, pWide := percentile(lat10, 0.5), percentile(latWide, 0.5)
		suffix := ""
		if what != "" {
			suffix = ", " + what
		}
		for _, m := range []struct {
			parts int
			lat   []time.Duration
			p50   float64
		}{{10, lat10, p10}, {wide, latWide, pWide}} {
			res := result("S", "core", fmt.Sprintf("pop p50 at %d partitions%s", m.parts, suffix), int64(pops), int64(pops), 0, m.lat)
			res.Rate, res.Unit, res.Value = m.p50, "ms p50", m.p50
			r.add(res)
		}
		ratio := fmt.Sprintf("pop p50 ratio %d / 10 partitions", wide)
		if what != "" {
			ratio = fmt.Sprintf("pop p50 ratio %d (%s) / 10", wide, what)
		}
		r.add(Result{Name: "S", Via: "core", What: ratio, Value: pWide / p10, Unit: "×", P50Ms: pWide, Target: "≤ 1.5"})
		return nil
	}
	if err := round(""); err != nil {
		return err
	}

	// Again after every one of the wide queue's partitions was consumed:
	// a pop's cost must not grow with consumed partitions.
	for drained := 0; ; {
		res, err := r.store.Pop(ctx, queen.PopRequest{Queue: broad, Batch: queen.MaxBatch, Partitions: queen.MaxPartitionsPerPop, AutoAck: true})
		if err != nil {
			return err
		}
		if len(res.Messages) == 0 {
			break
		}
		drained += len(res.Messages)
		fmt.Fprintf(r.cfg.Out, "\r  draining %d partitions: %d messages…", wide, drained)
	}
	fmt.Fprintf(r.cfg.Out, "\r%60s\r", "")
	// Once right after the drain (the dead ready rows of the drain still in
	// the scan index), and once more after the VACUUM autovacuum would run
	// within a minute (migration 0003 sets a low threshold for that table).
	for i, what := range []string{"all consumed just before", "all consumed, after VACUUM"} {
		if i == 1 {
			if _, err := r.pool.Exec(ctx, "VACUUM queen.ready"); err != nil {
				return err
			}
		}
		fresh := make([]queen.PushItem, pops)
		for j := range fresh {
			fresh[j] = queen.PushItem{Queue: broad, Partition: fmt.Sprintf("p-%d", (j*wide/pops+i)%wide), Payload: json.RawMessage(Payload)}
		}
		if _, err := r.store.Push(ctx, fresh); err != nil {
			return err
		}
		if err := round(what); err != nil {
			return err
		}
	}
	return nil
}

// popPaired times n pops of one message from each of two queues, taken in
// turn (a, b, a, b, …), each acked under its lease.
func (r *runner) popPaired(ctx context.Context, a, b string, n int) (latA, latB []time.Duration, err error) {
	for i := 0; i < n; i++ {
		for _, q := range []struct {
			name string
			lat  *[]time.Duration
		}{{a, &latA}, {b, &latB}} {
			l, err := r.popOne(ctx, q.name)
			if err != nil {
				return nil, nil, fmt.Errorf("bench S: pop %d of %d of %s: %w", i+1, n, q.name, err)
			}
			*q.lat = append(*q.lat, l)
		}
	}
	return latA, latB, nil
}

// popOne times a wildcard pop of one message from queue and acks it under
// its lease; a pop that finds nothing is an error (messages wait).
func (r *runner) popOne(ctx context.Context, queue string) (time.Duration, error) {
	t0 := time.Now()
	res, err := r.store.Pop(ctx, queen.PopRequest{Queue: queue, Batch: 1})
	if err != nil {
		return 0, err
	}
	lat := time.Since(t0)
	if len(res.Messages) == 0 {
		return 0, errors.New("found nothing while messages wait")
	}
	m := res.Messages[0]
	_, err = r.store.Ack(ctx, []queen.Ack{{PartitionID: m.PartitionID, TransactionID: m.TransactionID,
		Status: queen.AckCompleted, LeaseID: res.LeaseID}})
	return lat, err
}
