package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/internal/loadcheck"
)

// queueName is the queue of the steady phase; measureQueue the P10
// measurement's, deleted after it.
const (
	queueName    = "soak"
	measureQueue = "soak-p10"
)

// Shares of the workload's random choices.
const (
	// repeatOneIn pushes carry an item repeating a recent transactionId
	// (inside the dedup window); lateOneIn one repeating a transactionId
	// past the window.
	repeatOneIn = 50
	lateOneIn   = 200
	// abandonOneIn pops are never acked: their leases expire.
	abandonOneIn = 500
	// Outcomes of a first delivery, in percent: failed, then retry; the
	// rest completed. A redelivered message completes; a poison message
	// fails every time.
	failedPercent = 1
	retryPercent  = 1
	// samplePeriod is how often a producer's answer may become a sample
	// of the transactionIds to repeat.
	samplePeriod = 100 * time.Millisecond
	// pollTimeoutMS is a consumer's long-poll after an empty pop.
	pollTimeoutMS = 2000
)

// sample is a client-made transactionId a push placed, to be repeated.
type sample struct {
	part       *partState
	tx         string
	pid        string
	off        int64
	sent, back time.Time
}

// samples keeps client-made ids a push placed, in time order, for as long
// as they may be repeated.
type samples struct {
	mu   sync.Mutex
	list []sample
	last time.Time
	keep time.Duration
}

func (s *samples) add(x sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x.back.Sub(s.last) < samplePeriod {
		return
	}
	s.last = x.back
	s.list = append(s.list, x)
	i := sort.Search(len(s.list), func(i int) bool { return x.back.Sub(s.list[i].back) < s.keep })
	s.list = s.list[i:]
}

// recent picks a sample sent between lo and hi ago.
func (s *samples) recent(now time.Time, lo, hi time.Duration, rng *rand.Rand) (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fit []int
	for i, x := range s.list {
		if age := now.Sub(x.sent); age >= lo && age <= hi {
			fit = append(fit, i)
		}
	}
	if len(fit) == 0 {
		return sample{}, false
	}
	return s.list[fit[rng.IntN(len(fit))]], true
}

// old takes a sample answered at least age ago, out of the list: it is
// repeated once.
func (s *samples) old(now time.Time, age time.Duration) (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.list {
		if now.Sub(x.back) >= age {
			s.list = append(s.list[:i], s.list[i+1:]...)
			return x, true
		}
	}
	return sample{}, false
}

// workload is the producers and consumers of the steady phase.
type workload struct {
	cfg     Config
	c       *client
	h       *history
	keys    atomic.Uint64
	samples *samples

	stopConsuming atomic.Bool
}

// pace sends one tick per push due at rate messages per second until ctx
// ends, then closes ticks. A tick no producer is free for is counted as
// missed, not queued.
func (w *workload) pace(ctx context.Context, rate float64, ticks chan<- struct{}) {
	defer close(ticks)
	every := time.Duration(float64(time.Second) * float64(w.cfg.PushItems) / rate)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case ticks <- struct{}{}:
		default:
			w.h.n.missedTicks.Add(1)
		}
	}
}

// produce pushes PushItems items to random partitions per tick, half of
// them with a transactionId of their own; now and then one item repeats
// a recent id (a duplicate) or one past the dedup window (a new message).
func (w *workload) produce(ctx context.Context, ticks <-chan struct{}, rng *rand.Rand) {
	for range ticks {
		now := time.Now()
		items := make([]*sentItem, w.cfg.PushItems)
		body := struct {
			Items []loadcheck.PushItem `json:"items"`
		}{Items: make([]loadcheck.PushItem, len(items))}
		for k := range items {
			it := &sentItem{part: w.h.parts[rng.IntN(len(w.h.parts))], key: w.keys.Add(1)}
			if rng.IntN(2) == 0 {
				it.tx = "soak-" + strconv.FormatUint(it.key, 10)
			}
			if k == 0 {
				switch {
				case rng.IntN(repeatOneIn) == 0:
					if s, ok := w.samples.recent(now, time.Second, w.cfg.DedupWindow/2, rng); ok {
						it.part, it.tx, it.kind, it.orig = s.part, s.tx, itemRepeat, s
					}
				case rng.IntN(lateOneIn) == 0:
					if s, ok := w.samples.old(now, w.cfg.DedupWindow+15*time.Second); ok {
						it.part, it.tx, it.kind, it.orig = s.part, s.tx, itemLate, s
					}
				}
			}
			items[k] = it
			body.Items[k] = loadcheck.PushItem{Queue: queueName, Partition: it.part.name, Payload: payload(it.key, it.part.name),
				TransactionID: it.tx}
		}
		r := w.c.do(ctx, opPush, "POST", "/api/v1/push", body)
		if ctx.Err() != nil && r.Status == 0 {
			return
		}
		if r.Status != http.StatusCreated {
			w.h.v.Add(loadcheck.KindOther, "a push of %d items: %s", len(items), r)
			continue
		}
		var res []loadcheck.PushResult
		if err := r.Decode(&res); err != nil {
			w.h.v.Add(loadcheck.KindOther, "push: %v", err)
			continue
		}
		w.h.pushed(items, res, r)
		for i, it := range items {
			if it.kind == itemFresh && it.tx != "" && i < len(res) && res[i].Status == "queued" {
				w.samples.add(sample{part: it.part, tx: it.tx, pid: res[i].PartitionID, off: res[i].Offset, sent: r.Sent, back: r.Back})
				break
			}
		}
	}
}

// consume pops and acks for one group until stopConsuming: a pop without
// waiting (timed), a long-poll after an empty one (not timed), a pause for
// the batch's processing, then the batch ack (timed) with mixed outcomes.
// Now and then a pop is abandoned: its lease expires.
func (w *workload) consume(ctx context.Context, group string, idx int, rng *rand.Rand) {
	worker := fmt.Sprintf("%s/%d", group, idx)
	q := url.Values{"batch": {strconv.Itoa(w.cfg.PopBatch)}, "partitions": {strconv.Itoa(w.cfg.PopPartitions)},
		"consumerGroup": {group}, "workerId": {worker}}
	path := "/api/v1/pop/queue/" + queueName + "?" + q.Encode()
	q.Set("wait", "true")
	q.Set("timeout", strconv.Itoa(pollTimeoutMS))
	waitPath := "/api/v1/pop/queue/" + queueName + "?" + q.Encode()
	wait := false
	for !w.stopConsuming.Load() && ctx.Err() == nil {
		var r loadcheck.Reply
		if wait {
			r = w.c.do(ctx, noOp, "GET", waitPath, nil)
		} else {
			r = w.c.do(ctx, opPop, "GET", path, nil)
		}
		if ctx.Err() != nil && r.Status == 0 {
			return
		}
		switch r.Status {
		case http.StatusNoContent:
			w.h.n.emptyPops.Add(1)
			wait = true
			continue
		case http.StatusOK:
			wait = false
		default:
			w.h.v.Add(loadcheck.KindOther, "%s: pop: %s", worker, r)
			wait = true // a long-poll before trying again
			continue
		}
		var res loadcheck.Pop
		if err := r.Decode(&res); err != nil || len(res.Messages) == 0 {
			w.h.v.Add(loadcheck.KindOther, "%s: a pop answered 200 without messages (%v): %s", worker, err, r)
			continue
		}
		pr := w.h.popped(group, res, r)
		if rng.IntN(abandonOneIn) == 0 || pr.leaseID == "" {
			w.h.n.abandoned.Add(1)
			continue
		}
		body := loadcheck.AckBatch{ConsumerGroup: group}
		for _, pt := range pr.parts {
			for _, d := range pt.msgs {
				d.status = w.outcome(d, rng)
				if d.status == "failed" {
					d.errText = "soak: failed by " + worker
				}
				body.Acknowledgments = append(body.Acknowledgments, loadcheck.Ack{TransactionID: d.tx, PartitionID: pt.pid,
					Status: d.status, LeaseID: pr.leaseID, Error: d.errText})
			}
		}
		pause(ctx, w.cfg.Work/5+time.Duration(rng.Int64N(int64(w.cfg.Work-w.cfg.Work/5)+1)))
		a := ackCall{r: w.c.do(ctx, opAck, "POST", "/api/v1/ack/batch", body)}
		if ctx.Err() != nil && a.r.Status == 0 {
			return
		}
		if a.r.Status == http.StatusOK {
			if err := a.r.Decode(&a.results); err != nil || len(a.results) != len(body.Acknowledgments) {
				w.h.v.Add(loadcheck.KindOther, "%s: an ack of %d items: %d results (%v)", worker, len(body.Acknowledgments), len(a.results), err)
				continue
			}
		}
		w.h.acked(pr, a)
	}
}

// outcome is what a consumer makes of a delivered message: a poison
// message fails every time (and reaches the DLQ through retryLimit); a
// first delivery fails or asks for a retry now and then; a redelivery
// completes.
func (w *workload) outcome(d *delivery, rng *rand.Rand) string {
	if d.key%uint64(w.cfg.PoisonEvery) == 0 {
		return "failed"
	}
	if d.retryCount > 0 {
		return "completed"
	}
	switch r := rng.IntN(100); {
	case r < failedPercent:
		return "failed"
	case r < failedPercent+retryPercent:
		return "retry"
	}
	return "completed"
}

// pause waits d or until ctx ends: a consumer's processing, never a wait
// for an event.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
