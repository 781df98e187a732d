package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/internal/loadcheck"
)

// workload is the producers and consumers of a run.
type workload struct {
	cfg Config
	c   *client
	h   *history

	// stopProducing ends the producers between pushes (a push under way
	// is retried until it is answered); stopConsuming ends the consumers
	// between pops.
	stopProducing, stopConsuming atomic.Bool
}

func partitionName(i int) string { return fmt.Sprintf("p%02d", i) }

// groupNames are the groups of a run: "" (queue mode) and named ones.
func groupNames(n int) []string {
	out := []string{""}
	for i := 1; i < n; i++ {
		out = append(out, fmt.Sprintf("group-%d", i))
	}
	return out
}

// engineGroup is how the engine names a group.
func engineGroup(g string) string {
	if g == "" {
		return queueModeGroup
	}
	return g
}

// pause waits d or until ctx ends: a client's backoff or pacing, never a
// wait for an event.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// backoff is a client's wait before its n-th retry: 50 ms doubling to
// 800 ms, with jitter.
func backoff(n int, rng *rand.Rand) time.Duration {
	d := 50 * time.Millisecond << min(n-1, 4)
	return d/2 + time.Duration(rng.Int64N(int64(d)))
}

// produce pushes batches of 1-8 messages to random partitions until
// stopProducing, retrying each push with the same transactionIds until it
// is answered 201 (duplicates then say an earlier attempt was written) or
// ctx ends.
func (w *workload) produce(ctx context.Context, id int, rng *rand.Rand) {
	for seq := 0; !w.stopProducing.Load() && ctx.Err() == nil; {
		n := 1 + rng.IntN(8)
		items := make([]*pushItem, n)
		body := struct {
			Items []loadcheck.PushItem `json:"items"`
		}{Items: make([]loadcheck.PushItem, n)}
		for k := range items {
			tx := fmt.Sprintf("c%d-%d", id, seq)
			payload, _ := json.Marshal(map[string]any{"producer": id, "seq": seq, "tx": tx})
			seq++
			items[k] = &pushItem{tx: tx, partition: partitionName(rng.IntN(w.cfg.Partitions)), payload: payload}
			body.Items[k] = loadcheck.PushItem{Queue: queueName, Partition: items[k].partition, Payload: payload, TransactionID: tx}
		}
		w.h.sendPush(items)
		for attempt := 1; ; attempt++ {
			r := w.c.do(ctx, "push", "POST", "/api/v1/push", body)
			if r.Status == 201 {
				var res []loadcheck.PushResult
				if err := r.Decode(&res); err != nil {
					w.h.v.Add(loadcheck.KindOther, "push: %v", err)
				} else {
					w.h.pushed(items, res, attempt)
				}
				break
			}
			if r.Status != 0 && r.Status < 500 {
				// Refused: nothing was written, and a valid push must not be.
				w.h.v.Add(loadcheck.KindOther, "push of %d valid items refused: %s", n, r)
				break
			}
			if ctx.Err() != nil {
				w.h.gaveUp(items)
				return
			}
			w.h.mu.Lock()
			w.h.stats.pushRetries++
			w.h.mu.Unlock()
			pause(ctx, backoff(attempt, rng))
		}
		pause(ctx, time.Duration(20+rng.IntN(60))*time.Millisecond)
	}
}

// consume pops and acks for one group until stopConsuming: random batch
// sizes, sometimes several partitions at once, mixed outcomes (mostly
// completed; failed, retry and dlq; messages that failed before fail more
// often, so retryLimit is reached), and now and then an abandoned lease.
func (w *workload) consume(ctx context.Context, group string, idx int, rng *rand.Rand) {
	name := engineGroup(group)
	worker := fmt.Sprintf("%s/%d", name, idx)
	failures := 0 // in a row: the backoff grows
	for !w.stopConsuming.Load() && ctx.Err() == nil {
		batch, parts := 1+rng.IntN(10), 1
		if rng.IntN(4) == 0 {
			parts = 2 + rng.IntN(2)
		}
		q := url.Values{"batch": {strconv.Itoa(batch)}, "partitions": {strconv.Itoa(parts)},
			"wait": {"true"}, "timeout": {"1000"}, "workerId": {worker}}
		if group != "" {
			q.Set("consumerGroup", group)
		}
		r := w.c.do(ctx, "pop", "GET", "/api/v1/pop/queue/"+queueName+"?"+q.Encode(), nil)
		switch {
		case r.Status == 204:
			failures = 0
			continue
		case r.Status == 200:
			failures = 0
		case r.Status == 0 || r.Status >= 500:
			failures++
			pause(ctx, backoff(failures, rng))
			continue
		default:
			w.h.v.Add(loadcheck.KindOther, "%s: pop refused: %s", worker, r)
			failures++
			pause(ctx, backoff(failures, rng))
			continue
		}
		var res loadcheck.Pop
		if err := r.Decode(&res); err != nil || len(res.Messages) == 0 {
			w.h.v.Add(loadcheck.KindOther, "%s: pop answered 200 without messages (%v): %s", worker, err, r)
			continue
		}
		p := w.h.recordPop(name, worker, r, res, batch, parts)
		w.chooseOutcomes(p, rng)
		if rng.IntN(100) < 2 || p.leaseID == "" {
			w.h.recordAck(p, nil) // abandoned: the lease expires
			continue
		}
		w.h.recordAck(p, w.ack(ctx, group, p, rng))
	}
}

func (w *workload) chooseOutcomes(p *pop, rng *rand.Rand) {
	for _, pt := range p.parts {
		for _, d := range pt.msgs {
			r := rng.IntN(100)
			switch {
			case d.retryCount > 0 && r < 35:
				d.status = "failed"
			case d.retryCount > 0 && r < 40:
				d.status = "retry"
			case r < 2:
				d.status = "dlq"
			case r < 8:
				d.status = "failed"
			case r < 12:
				d.status = "retry"
			default:
				d.status = "completed"
			}
			if d.status == "failed" || d.status == "dlq" {
				d.errText = fmt.Sprintf("chaos %s by %s", d.status, p.consumer)
			}
		}
	}
}

// ack sends the pop's batch ack, resending it after no answer or a 5xx
// while the lease may still be live. A resent ack whose earlier attempt
// was applied finds its messages committed or its lease released.
func (w *workload) ack(ctx context.Context, group string, p *pop, rng *rand.Rand) *ackCall {
	body := loadcheck.AckBatch{ConsumerGroup: group}
	for _, pt := range p.parts {
		for _, d := range pt.msgs {
			body.Acknowledgments = append(body.Acknowledgments, loadcheck.Ack{TransactionID: d.tx, PartitionID: pt.pid,
				Status: d.status, LeaseID: p.leaseID, Error: d.errText})
		}
	}
	a := &ackCall{}
	leaseEnd := p.back.Add(time.Duration(w.cfg.LeaseTime) * time.Second)
	for {
		a.attempts++
		r := w.c.do(ctx, "ack", "POST", "/api/v1/ack/batch", body)
		switch {
		case r.Status == 200:
			if err := r.Decode(&a.results); err != nil {
				w.h.v.Add(loadcheck.KindOther, "%s: ack: %v", p.consumer, err)
				return a
			}
			if len(a.results) != len(body.Acknowledgments) {
				w.h.v.Add(loadcheck.KindOther, "%s: ack of %d items got %d results", p.consumer, len(body.Acknowledgments), len(a.results))
				return a
			}
			a.outcome = ackApplied
		case r.Status == 409:
			a.outcome = ackRejected
		case r.Status == 0 || r.Status >= 500:
			if time.Now().Before(leaseEnd) && ctx.Err() == nil {
				pause(ctx, backoff(a.attempts, rng))
				continue
			}
			return a
		default:
			w.h.v.Add(loadcheck.KindOther, "%s: ack refused: %s", p.consumer, r)
			return a
		}
		a.first, a.sent, a.back = a.attempts == 1, r.Sent, r.Back
		return a
	}
}
