package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/loadcheck"
)

// The stored backlog: a queue of its own, filled before the traffic starts
// and left alone while it runs, the way a deployment keeps a week of
// messages beside the few minutes its consumers work on. Nothing of it is
// due during the run, so every housekeeping cost that grows with what is
// stored, rather than with what is due, shows in the run's checks.
const (
	// backlogQueue holds the backlog.
	backlogQueue = "soak-backlog"
	// BacklogWindow is the backlog queue's retentionSeconds and
	// dedupWindowSeconds: nothing of it is due during the run.
	BacklogWindow = 7 * 24 * time.Hour
	// backlogPushItems is the items of one fill push, backlogPushers
	// pushes at once, each to its own share of the partitions (a push
	// locks the partitions it writes: disjoint shares never wait on each
	// other).
	backlogPushItems = queen.MaxPushItems
	backlogPushers   = 4
	// backlogClientIDOneIn items carry a transactionId of the client's,
	// stored as a dedup key for the whole window; the others get a
	// generated one, which stores none (docs/internals.md §2).
	backlogClientIDOneIn = 10
	// backlogGroups consumer groups each read backlogReadShare of the
	// backlog, so that they hold cursors on it; one message in
	// backlogDeadOneIn of what they read is dead-lettered, so that the
	// DLQ holds dead letters that are not due either.
	backlogGroups    = 3
	backlogReadShare = 0.01
	backlogDeadOneIn = 10
	// backlogMaxDead bounds the dead letters of each group: the DLQ's
	// listing, which the end of the run reads, counts at most 10,000.
	backlogMaxDead = 3000
	// backlogReadBatch is the most one of those pops asks for.
	backlogReadBatch = 1000
	// backlogIdlePasses are the reaper passes timed with nothing due,
	// before the fill and after it.
	backlogIdlePasses = 5
	// backlogSettleFor bounds the reaper passes after the fill (see
	// settle); a pass counts as idle when it takes at most
	// backlogIdleFactor times an idle pass on the empty database, plus
	// backlogIdleSlack.
	backlogSettleFor  = 5 * time.Minute
	backlogIdleFactor = 2
	backlogIdleSlack  = 5 * time.Millisecond
	// backlogProgressEvery is the period of the fill's progress line.
	backlogProgressEvery = 10 * time.Second
	// backlogBrowsed is how many of its partitions the end of the run
	// reads in full through the API.
	backlogBrowsed = 50
)

// BacklogReport is what the backlog was and cost.
type BacklogReport struct {
	Queue      string `json:"queue"`
	Messages   int64  `json:"messages"`
	Partitions int    `json:"partitions"`
	// ClientIDs are the messages pushed with a transactionId of the
	// client's: the dedup keys the backlog stores.
	ClientIDs int64 `json:"clientIds"`
	// Pushes of PushItems items each, Pushers at once, took FillS seconds:
	// FillRate messages per second.
	Pushes    int     `json:"pushes"`
	PushItems int     `json:"pushItems"`
	Pushers   int     `json:"pushers"`
	FillS     float64 `json:"fillSeconds"`
	FillRate  float64 `json:"fillRate"`
	// Groups each read ReadPerGroup messages of it, DeadLettered of them
	// in all.
	Groups       []string `json:"groups"`
	ReadPerGroup int64    `json:"readPerGroup"`
	DeadLettered int64    `json:"deadLettered"`
	// FirstReap are the reaper passes after the fill until they were as
	// cheap as on the empty database (or backlogSettleFor had passed:
	// Settled false), FirstReapS their seconds, FirstReapMaxMS the
	// slowest: retention's first look at each new partition.
	FirstReap      int     `json:"firstReapPasses"`
	FirstReapS     float64 `json:"firstReapSeconds"`
	FirstReapMaxMS float64 `json:"firstReapMaxMs"`
	Settled        bool    `json:"settled"`
	// VacuumS is the VACUUM (ANALYZE) after the fill: a backlog a week
	// old has been vacuumed long ago.
	VacuumS float64 `json:"vacuumSeconds"`
	// IdleReapEmptyMS and IdleReapStoredMS are the median time of a
	// reaper pass with nothing due, on the empty database and with the
	// backlog stored (backlogIdlePasses each).
	IdleReapEmptyMS  float64 `json:"idleReapEmptyMs"`
	IdleReapStoredMS float64 `json:"idleReapStoredMs"`
	// Bytes is what the backlog added to schema queen (after the vacuum);
	// BaseBytes the schema's total then, before the traffic: the size
	// check measures the traffic's growth beyond it.
	Bytes     int64 `json:"bytes"`
	BaseBytes int64 `json:"baseBytes"`
	// Intact says what the end of the run found of it.
	Intact string `json:"intact,omitempty"`
}

func backlogPartition(i int) string { return fmt.Sprintf("b-%06d", i) }

// backlogPayload is the JSON of backlog message k of partition part.
func backlogPayload(k int64, part string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"k":%d,"p":%q,"kind":"backlog","note":"stored for a week, not due during the run"}`, k, part))
}

// backlog fills and reads the backlog; its counts per partition are what
// the end of the run holds the log to.
type backlog struct {
	r      *runner
	rep    *BacklogReport
	counts []int64 // messages pushed per partition
	read   map[string]int64
}

// fillBacklog stores the backlog: the empty database's idle reaper pass,
// the fill, the groups' reads, the reaper until it caught up, a vacuum,
// the idle pass again and the schema's size. It does nothing when
// Config.Backlog is negative.
func (r *runner) fillBacklog(ctx context.Context, sz *sizer) error {
	cfg := r.cfg
	if cfg.Backlog <= 0 {
		return nil
	}
	b := &backlog{r: r, rep: &BacklogReport{Queue: backlogQueue, Messages: int64(cfg.Backlog), Partitions: cfg.BacklogPartitions,
		PushItems: backlogPushItems, Pushers: backlogPushers}, counts: make([]int64, cfg.BacklogPartitions), read: map[string]int64{}}
	r.backlog = b
	r.rep.Backlog = b.rep
	var err error
	if b.rep.IdleReapEmptyMS, err = b.idleReap(ctx); err != nil {
		return err
	}
	_, before, err := sz.read(ctx)
	if err != nil {
		return fmt.Errorf("soak: backlog: sizes: %w", err)
	}
	w := int(BacklogWindow / time.Second)
	if _, err := r.srv.store.Configure(ctx, queen.ConfigureRequest{Queue: backlogQueue,
		Options: queen.QueueOptions{RetentionSeconds: &w, DedupWindowSeconds: &w}}); err != nil {
		return fmt.Errorf("soak: backlog: configure: %w", err)
	}
	if err := b.fill(ctx); err != nil {
		return err
	}
	if err := b.readSome(ctx); err != nil {
		return err
	}
	if err := b.settle(ctx); err != nil {
		return err
	}
	if b.rep.IdleReapStoredMS, err = b.idleReap(ctx); err != nil {
		return err
	}
	_, after, err := sz.read(ctx)
	if err != nil {
		return fmt.Errorf("soak: backlog: sizes: %w", err)
	}
	b.rep.Bytes, b.rep.BaseBytes, r.baseBytes = after-before, after, after
	r.logf("backlog: schema queen holds %s (%s of it the backlog); an idle reaper pass takes %.1f ms (%.1f ms on the empty database)",
		fmtBytes(after), fmtBytes(after-before), b.rep.IdleReapStoredMS, b.rep.IdleReapEmptyMS)
	return nil
}

// fill pushes the backlog through the engine's own push: backlogPushers
// pushes of backlogPushItems items at once, each to random partitions of
// its own share, printing progress every backlogProgressEvery.
func (b *backlog) fill(ctx context.Context) error {
	cfg := b.r.cfg
	total := int64(cfg.Backlog)
	pushers := min(backlogPushers, cfg.BacklogPartitions)
	b.rep.Pushers = pushers
	b.r.logf("backlog: storing %d messages over %d partitions of queue %s (retention and dedup window %v; "+
		"1 item in %d with a transactionId of its own): pushes of %d items, %d at once…",
		total, cfg.BacklogPartitions, backlogQueue, BacklogWindow, backlogClientIDOneIn, backlogPushItems, pushers)
	var next, done, clientIDs atomic.Int64
	var pushes atomic.Int32
	var mu sync.Mutex // b.counts
	start := time.Now()
	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	progress.Go(func() {
		t := time.NewTicker(backlogProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-progressDone:
				return
			case <-t.C:
			}
			n := done.Load()
			rate := float64(n) / time.Since(start).Seconds()
			eta := "?"
			if rate > 0 {
				eta = fmtElapsed(time.Duration(float64(total-n) / rate * float64(time.Second)))
			}
			b.r.logf("backlog: %d of %d messages (%.0f %%), %.0f msg/s, ETA %s", n, total, 100*float64(n)/float64(total), rate, eta)
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, pushers)
	for w := range pushers {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(20000+w)))
		// Pusher w writes partitions w, w+pushers, w+2·pushers, …
		share := (cfg.BacklogPartitions - w + pushers - 1) / pushers
		wg.Go(func() {
			for ctx.Err() == nil {
				from := next.Add(backlogPushItems) - backlogPushItems
				if from >= total {
					return
				}
				items := make([]queen.PushItem, min(backlogPushItems, total-from))
				parts := make([]int, len(items))
				for i := range items {
					parts[i] = w + pushers*rng.IntN(share)
					name := backlogPartition(parts[i])
					items[i] = queen.PushItem{Queue: backlogQueue, Partition: name, Payload: backlogPayload(from+int64(i), name)}
					if rng.IntN(backlogClientIDOneIn) == 0 {
						items[i].TransactionID = "backlog-" + strconv.FormatInt(from+int64(i), 10)
						clientIDs.Add(1)
					}
				}
				res, err := b.r.srv.store.Push(ctx, items)
				if err == nil && len(res) != len(items) {
					err = fmt.Errorf("%d results for %d items", len(res), len(items))
				}
				if err != nil {
					errs[w] = fmt.Errorf("soak: backlog: push: %w", err)
					return
				}
				mu.Lock()
				for i, x := range res {
					if x.Status != queen.StatusQueued {
						mu.Unlock()
						errs[w] = fmt.Errorf("soak: backlog: push: item %d answered %q", i, x.Status)
						return
					}
					b.counts[parts[i]]++
				}
				mu.Unlock()
				pushes.Add(1)
				done.Add(int64(len(items)))
			}
		})
	}
	wg.Wait()
	close(progressDone)
	progress.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.rep.FillS = time.Since(start).Seconds()
	b.rep.FillRate = float64(total) / b.rep.FillS
	b.rep.Pushes = int(pushes.Load())
	b.rep.ClientIDs = clientIDs.Load()
	b.r.logf("backlog: stored %d messages in %.1f s: %.0f msg/s (%d pushes)", total, b.rep.FillS, b.rep.FillRate, b.rep.Pushes)
	return nil
}

// readSome has each of the backlog's groups read backlogReadShare of it
// and ack what it read: completed, one message in backlogDeadOneIn
// dead-lettered.
func (b *backlog) readSome(ctx context.Context) error {
	cfg := b.r.cfg
	want := max(1, int64(backlogReadShare*float64(cfg.Backlog)))
	b.rep.ReadPerGroup = want
	start := time.Now()
	for g := range backlogGroups {
		group := fmt.Sprintf("backlog-group-%d", g+1)
		b.rep.Groups = append(b.rep.Groups, group)
		var read, dead int64
		for read < want {
			res, err := b.r.srv.store.Pop(ctx, queen.PopRequest{Queue: backlogQueue, ConsumerGroup: group,
				Batch: int(min(backlogReadBatch, want-read)), Partitions: queen.MaxPartitionsPerPop, Worker: group})
			if err != nil {
				return fmt.Errorf("soak: backlog: %s: pop: %w", group, err)
			}
			if len(res.Messages) == 0 {
				return fmt.Errorf("soak: backlog: %s found nothing to read after %d messages", group, read)
			}
			acks := make([]queen.Ack, len(res.Messages))
			for i, m := range res.Messages {
				acks[i] = queen.Ack{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: queen.AckCompleted,
					ConsumerGroup: group, LeaseID: res.LeaseID}
				if (read+int64(i))%backlogDeadOneIn == 0 && dead < backlogMaxDead {
					acks[i].Status, acks[i].Error = queen.AckDLQ, "soak: the backlog's dead letter"
					dead++
				}
			}
			out, err := b.r.srv.store.Ack(ctx, acks)
			if err != nil {
				return fmt.Errorf("soak: backlog: %s: ack: %w", group, err)
			}
			for _, a := range out {
				if a.DLQ {
					b.rep.DeadLettered++
				}
			}
			read += int64(len(res.Messages))
		}
		b.read[group] = read
	}
	b.r.logf("backlog: %d groups read %d messages each (%d dead-lettered in all) in %.1f s",
		backlogGroups, want, b.rep.DeadLettered, time.Since(start).Seconds())
	return nil
}

// settle runs reaper passes, back to back, until backlogIdlePasses of them
// in a row caught up and took no longer than an idle pass on the empty
// database (within backlogIdleFactor and backlogIdleSlack), at most
// backlogSettleFor: retention looks once at each partition a push created
// (a batch of them per pass), work a week-old backlog had done long ago.
// A pass that stays slower is a cost that grows with what is stored; the
// report shows it. Then VACUUM (ANALYZE), as autovacuum would have done
// long ago.
func (b *backlog) settle(ctx context.Context) error {
	idle := time.Duration(backlogIdleFactor*b.rep.IdleReapEmptyMS*float64(time.Millisecond)) + backlogIdleSlack
	start := time.Now()
	for quiet := 0; quiet < backlogIdlePasses; {
		if time.Since(start) > backlogSettleFor {
			break
		}
		p := reapOnce(ctx, b.r.srv.store, b.r.cfg.ReaperInterval)
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.Err != "" {
			return fmt.Errorf("soak: backlog: reaper pass: %s", p.Err)
		}
		b.rep.FirstReap++
		b.rep.FirstReapMaxMS = max(b.rep.FirstReapMaxMS, p.MS)
		quiet++
		if !p.caughtUp() || p.MS > float64(idle)/float64(time.Millisecond) {
			quiet = 0
		}
		b.rep.Settled = quiet >= backlogIdlePasses
	}
	b.rep.FirstReapS = time.Since(start).Seconds()
	if b.rep.Settled {
		b.r.logf("backlog: reaper passes as cheap as on the empty database after %d passes (%.1f s, the slowest %.0f ms)",
			b.rep.FirstReap, b.rep.FirstReapS, b.rep.FirstReapMaxMS)
	} else {
		b.r.logf("backlog: reaper passes still slower than %v after %d passes (%.1f s, the slowest %.0f ms): a cost that grows with what is stored",
			idle, b.rep.FirstReap, b.rep.FirstReapS, b.rep.FirstReapMaxMS)
	}
	start = time.Now()
	if _, err := b.r.srv.pool.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		return fmt.Errorf("soak: backlog: vacuum: %w", err)
	}
	b.rep.VacuumS = time.Since(start).Seconds()
	b.r.logf("backlog: VACUUM (ANALYZE) took %.1f s", b.rep.VacuumS)
	return nil
}

// idleReap is the median time of backlogIdlePasses reaper passes that
// find nothing due.
func (b *backlog) idleReap(ctx context.Context) (float64, error) {
	var ms []float64
	for range backlogIdlePasses {
		p := reapOnce(ctx, b.r.srv.store, b.r.cfg.ReaperInterval)
		if p.Err != "" {
			return 0, fmt.Errorf("soak: backlog: reaper pass: %s", p.Err)
		}
		ms = append(ms, p.MS)
	}
	slices.Sort(ms)
	return ms[len(ms)/2], nil
}

// check holds the backlog, after the run, to what was pushed: every
// partition's last offset, the groups' lag, a sample of partitions read
// in full and the dead letters. A message missing is lost.
func (b *backlog) check(ctx context.Context, h *history) {
	lost := func(format string, args ...any) {
		h.v.Add(loadcheck.KindLost, "backlog: "+format, args...)
	}
	q, err := loadcheck.ReadQueue(ctx, b.r.c.read, backlogQueue)
	if err != nil {
		lost("read the queue: %v", err)
		b.rep.Intact = "unread: " + err.Error()
		return
	}
	var stored int64
	byName := map[string]int64{}
	for _, p := range q.Partitions {
		stored += p.LastOffset + 1
		byName[p.Name] = p.LastOffset
	}
	short := 0
	for i, n := range b.counts {
		if n > 0 && byName[backlogPartition(i)] != n-1 {
			short++
			if short <= 5 {
				lost("partition %s ends at offset %d, %d messages were pushed", backlogPartition(i), byName[backlogPartition(i)], n)
			}
		}
	}
	for _, g := range q.Groups {
		if want := b.rep.Messages - b.read[g.Group]; g.Lag != want {
			lost("group %s lags by %d, want %d", g.Group, g.Lag, want)
		}
	}
	// A sample of partitions, read in full: every offset there.
	rng := rand.New(rand.NewPCG(b.r.cfg.Seed, 30000))
	var names []string
	for i, n := range b.counts {
		if n > 0 {
			names = append(names, backlogPartition(i))
		}
	}
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	names = names[:min(backlogBrowsed, len(names))]
	sort.Strings(names)
	browsed := int64(0)
	for _, name := range names {
		last := byName[name]
		seen := map[int64]bool{}
		err := loadcheck.ReadLog(ctx, b.r.c.read, backlogQueue, name, 0, last, func(m loadcheck.Message) {
			var p struct {
				P string `json:"p"`
			}
			if json.Unmarshal(m.Data, &p) != nil || p.P != name {
				lost("partition %s offset %d holds %s", name, m.Offset, m.Data)
			}
			seen[m.Offset] = true
		})
		if err != nil {
			lost("browse %s: %v", name, err)
			continue
		}
		if int64(len(seen)) != last+1 {
			lost("partition %s: browse found %d of its %d messages", name, len(seen), last+1)
		}
		browsed += int64(len(seen))
	}
	dead := int64(0)
	err = loadcheck.ReadDLQ(ctx, b.r.c.read, backlogQueue, func(loadcheck.DeadLetter) { dead++ })
	if err != nil {
		lost("read the DLQ: %v", err)
	} else if dead != b.rep.DeadLettered {
		lost("%d dead letters in the DLQ, %d were reported", dead, b.rep.DeadLettered)
	}
	b.rep.Intact = fmt.Sprintf("%d of %d messages stored over %d partitions (%d ending short); %d partitions read in full (%d messages); "+
		"%d of %d dead letters", stored, b.rep.Messages, len(q.Partitions), short, len(names), browsed, dead, b.rep.DeadLettered)
	b.r.logf("backlog: %s", b.rep.Intact)
}
