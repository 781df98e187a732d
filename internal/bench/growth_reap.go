package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// G: the reaper kinds, each timed per due row.

// reapKind is one kind of the reaper's work: setup makes g.due rows of it
// due on a side (a second after), done says how many a pass cleared.
type reapKind struct {
	what  string
	setup func(ctx context.Context, s *side, round int) error
	done  func(st queen.ReapStats) int
}

// measureReaper times, for each kind in turn, one reaper pass (Store.Reap,
// as the reaper runs it) that finds only that kind due, g.due rows of it,
// on both sides; GrowthRounds rounds, the median time per due row of
// each side counts. A kind that fails is reported as failed, not fatal.
func (g *growthRun) measureReaper(ctx context.Context) error {
	kinds := []reapKind{
		{what: "retention", setup: g.setupRetention, done: func(st queen.ReapStats) int { return st.SegmentsRetained }},
		{what: "completed retention", setup: g.setupCompleted, done: func(st queen.ReapStats) int { return st.SegmentsCompleted }},
		{what: "dedup pruning", setup: g.setupDedup, done: func(st queen.ReapStats) int { return st.DedupPruned }},
		{what: "lease expiry", setup: g.setupLeases, done: func(st queen.ReapStats) int { return st.LeasesExpired }},
		{what: "DLQ retention", setup: g.setupDLQ}, // counted in queen.dlq
	}
	for _, k := range kinds {
		if k.what == "DLQ retention" && !g.dlqRet {
			fmt.Fprintf(g.r.cfg.Out, "G          DLQ retention not timed: the store keeps no dlqRetentionSeconds (configure does not echo it)\n")
			continue
		}
		var perRow [2][]float64
		var rows [2]int
		problem := ""
		for round := range g.r.cfg.GrowthRounds {
			n, secs, err := g.reapRound(ctx, k, round)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				problem = err.Error()
				fmt.Fprintf(g.r.cfg.Out, "\r%110s\r", "")
				break
			}
			for i := range 2 {
				if n[i] == 0 {
					problem = fmt.Sprintf("the pass on the %s side cleared nothing", growthSideName[i])
					continue
				}
				rows[i] += n[i]
				perRow[i] = append(perRow[i], secs[i]*1e6/float64(n[i]))
			}
			fmt.Fprintf(g.r.cfg.Out, "\r%110s\r  G: %s, round %d: empty %s rows in %.0f ms, stored %s rows in %.0f ms\n", "",
				k.what, round+1, thousands(int64(n[0])), secs[0]*1000, thousands(int64(n[1])), secs[1]*1000)
		}
		e, s := median(perRow[0]), median(perRow[1])
		res := Result{Name: "G", Via: "core", What: fmt.Sprintf("%s: µs per due row (%s due)", k.what, thousands(int64(g.due))),
			Unit: "×", Ops: int64(len(perRow[1])), Rows: int64(rows[1]), Empty: e, Stored: s, Value: ratio(s, e), Error: problem}
		g.r.add(res)
		g.rows = append(g.rows, res)
	}
	return nil
}

// reapRound makes g.due rows of kind k due on both sides, waits until
// they are, and times one pass on each (which side goes first
// alternates with the round): the rows each cleared, and its seconds.
func (g *growthRun) reapRound(ctx context.Context, k reapKind, round int) (n [2]int, secs [2]float64, err error) {
	for _, s := range g.sides {
		fmt.Fprintf(g.r.cfg.Out, "\r  G: %s, round %d: making %s rows due on the %s side…   ", k.what, round+1, thousands(int64(g.due)), s.name)
		if err := k.setup(ctx, s, round); err != nil {
			return n, secs, fmt.Errorf("%s side: setup: %w", s.name, err)
		}
		// What the setup's pushes and pops changed is folded into the
		// summaries first: the timed pass finds only kind k due.
		if err := foldSummaries(ctx, s); err != nil {
			return n, secs, fmt.Errorf("%s side: fold: %w", s.name, err)
		}
	}
	fmt.Fprintf(g.r.cfg.Out, "\r%110s\r  G: %s, round %d: reaping…", "", k.what, round+1)
	select { // every window is one second long
	case <-time.After(1100 * time.Millisecond):
	case <-ctx.Done():
		return n, secs, ctx.Err()
	}
	for j := range 2 {
		i := (round + j) % 2
		s := g.sides[i]
		var before int64
		if k.done == nil {
			if before, err = g.dlqCount(ctx, s); err != nil {
				return n, secs, err
			}
		}
		t0 := time.Now()
		st, err := s.store.Reap(ctx, queen.ReapRequest{})
		secs[i] = time.Since(t0).Seconds()
		if err != nil {
			return n, secs, fmt.Errorf("%s side: reap: %w", s.name, err)
		}
		if k.done != nil {
			n[i] = k.done(st)
			continue
		}
		after, err := g.dlqCount(ctx, s)
		if err != nil {
			return n, secs, err
		}
		n[i] = int(before - after)
	}
	return n, secs, nil
}

// foldSummaries runs the reaper's summaries kind on s until it has caught
// up (a batch came back short).
func foldSummaries(ctx context.Context, s *side) error {
	const batch = 2000
	for {
		var n int
		err := s.pool.QueryRow(ctx, `SELECT (queen.reap_step(NULL, 'summaries', $1, 0, 0)->>'rows')::int`, batch).Scan(&n)
		if err != nil || n < batch {
			return err
		}
	}
}

// dlqCount counts the dead letters of gDLQ on s.
func (g *growthRun) dlqCount(ctx context.Context, s *side) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM queen.dlq WHERE queue_name = $1", gDLQ).Scan(&n)
	return n, err
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// pushDue pushes g.due messages to queue on s, 100 per push to random
// ones of Partitions partitions (as P100), or with ids: each push to one
// random partition with an id the client made for every item (as R's
// dedup fill).
func (g *growthRun) pushDue(ctx context.Context, s *side, queue string, ids bool) error {
	for done := 0; done < g.due; done += 100 {
		batch := items(queue, min(100, g.due-done), g.r.cfg.Partitions, false)
		if ids {
			p := fmt.Sprintf("p-%d", rand.IntN(g.r.cfg.Partitions))
			for i := range batch {
				batch[i].Partition, batch[i].TransactionID = p, queen.NewUUIDv7()
			}
		}
		if _, err := s.store.Push(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// drain pops everything of queue on s in queue mode and acks it with
// status.
func (g *growthRun) drain(ctx context.Context, s *side, queue string, status queen.AckStatus) error {
	for {
		n, err := g.popAck(ctx, s, queen.PopRequest{Queue: queue, Batch: 1000, Partitions: queen.MaxPartitionsPerPop}, status)
		if err != nil || n == 0 {
			return err
		}
	}
}

func (g *growthRun) setupRetention(ctx context.Context, s *side, _ int) error {
	return g.pushDue(ctx, s, gRetention, false)
}

// setupCompleted pushes the due messages and has the queue-mode group,
// the queue's only one, consume them all.
func (g *growthRun) setupCompleted(ctx context.Context, s *side, _ int) error {
	if err := g.pushDue(ctx, s, gCompleted, false); err != nil {
		return err
	}
	return g.drain(ctx, s, gCompleted, queen.AckCompleted)
}

func (g *growthRun) setupDedup(ctx context.Context, s *side, _ int) error {
	return g.pushDue(ctx, s, gDedup, true)
}

// setupLeases leases g.due partitions of gLeases, one message each: the
// first round pushes the messages, each a partition of its own; the
// leases expire a second later, and the next round leases the same heads
// again.
func (g *growthRun) setupLeases(ctx context.Context, s *side, round int) error {
	if round == 0 {
		for done := 0; done < g.due; done += 1000 {
			batch := make([]queen.PushItem, min(1000, g.due-done))
			for i := range batch {
				batch[i] = queen.PushItem{Queue: gLeases, Partition: fmt.Sprintf("l-%d", done+i), Payload: json.RawMessage(Payload)}
			}
			if _, err := s.store.Push(ctx, batch); err != nil {
				return err
			}
		}
	}
	for leased := 0; leased < g.due; {
		res, err := s.store.Pop(ctx, queen.PopRequest{Queue: gLeases, Batch: queen.MaxPartitionsPerPop, Partitions: queen.MaxPartitionsPerPop})
		if err != nil {
			return err
		}
		if len(res.Messages) == 0 {
			return fmt.Errorf("leased %d of %d partitions, then found nothing", leased, g.due)
		}
		leased += len(res.Messages)
	}
	return nil
}

// setupDLQ dead-letters g.due messages of gDLQ.
func (g *growthRun) setupDLQ(ctx context.Context, s *side, _ int) error {
	if err := g.pushDue(ctx, s, gDLQ, false); err != nil {
		return err
	}
	return g.drain(ctx, s, gDLQ, queen.AckDLQ)
}
