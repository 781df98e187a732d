package refmodel

import (
	"fmt"
	"time"
)

// ---------------------------------------------------------------------------
// pop (§3.4)

// PopRequest asks for a leased batch.
type PopRequest struct {
	Queue string
	// Partition, when set, pops only that partition.
	Partition string
	// Chosen, for a wildcard pop (Partition empty), is the partitions the
	// engine served, in order. The model checks each.
	Chosen []string
	Group  string // "" is the queue-mode group
	Batch  int    // message budget, shared by the partitions of one pop
	// Partitions is how many partitions a wildcard pop may serve (default 1).
	Partitions int
	AutoAck    bool
	Mode       string // subscription mode for the group's first pop
	From       time.Time
	// LeaseID is the id the engine gave the lease.
	LeaseID string
}

// Delivered is one delivered message.
type Delivered struct {
	Partition  string
	Offset     int64
	TxID       string
	Payload    string
	TraceID    string
	CreatedAt  time.Time
	RetryCount int
}

// PopResult is what a pop delivered; Leased is false for autoAck or empty pops.
type PopResult struct {
	Messages     []Delivered
	Leased       bool
	LeaseExpires time.Time
}

// claimState says why a partition is or is not deliverable.
type claimState int

const (
	claimable claimState = iota
	busy                 // leased by someone else (live lease)
	consumed             // nothing after the cursor
	waiting              // windowBuffer or delayedProcessing
)

// prepare is what every claim does first, and all Touch does: create the
// cursor, end an expired lease (charging the head), skip messages removed
// by retention. It returns whether the partition can be claimed now.
func (m *Model) prepare(q *queue, p *partition, group string, now time.Time) (*cursor, claimState) {
	c := m.ensureCursor(q, p, group)
	if c.lease != nil {
		if c.lease.expires.After(now) {
			return c, busy
		}
		m.expire(q, p, group, c, now)
	}
	if c.committed >= p.last() {
		return c, consumed
	}
	if c.retryAt.After(now) {
		return c, waiting
	}
	if q.opts.WindowBuffer > 0 && p.lastPushedAt.After(now.Add(-secs(q.opts.WindowBuffer))) {
		return c, waiting
	}
	if head := c.committed + 1; head < p.firstStored() {
		// Messages up to the oldest stored one are gone: attempts count
		// against a message that exists.
		c.committed = p.firstStored() - 1
		c.delivered = max(c.delivered, c.committed)
		c.attempts, c.headOnly = 0, false
		if c.committed >= p.last() {
			return c, consumed
		}
	}
	if q.opts.DelayedProcessing > 0 && p.msgs[c.committed+1].CreatedAt.After(now.Add(-secs(q.opts.DelayedProcessing))) {
		return c, waiting
	}
	return c, claimable
}

// claim leases up to budget messages of p from committed+1 (only the head
// after an expiry), skipping nothing and stopping at the first message
// younger than delayedProcessing.
func (m *Model) claim(q *queue, p *partition, group string, budget int, req PopRequest, now time.Time) ([]Delivered, bool) {
	c, st := m.prepare(q, p, group, now)
	if st != claimable {
		return nil, false
	}
	limit := int64(budget)
	if c.headOnly {
		limit = 1
	}
	var out []Delivered
	for off := c.committed + 1; off <= p.last() && int64(len(out)) < limit; off++ {
		msg := p.msgs[off]
		if q.opts.DelayedProcessing > 0 && msg.CreatedAt.After(now.Add(-secs(q.opts.DelayedProcessing))) {
			break
		}
		rc := 0
		if off == c.committed+1 {
			rc = c.attempts
		}
		out = append(out, Delivered{Partition: p.name, Offset: off, TxID: msg.TxID, Payload: msg.Payload,
			TraceID: msg.TraceID, CreatedAt: msg.CreatedAt, RetryCount: rc})
	}
	end := out[len(out)-1].Offset
	c.delivered = max(c.delivered, end)
	if req.AutoAck {
		// At-most-once: committed inside the pop, no lease.
		c.committed, c.attempts, c.headOnly, c.retryAt = end, 0, false, time.Time{}
	} else {
		c.lease = &lease{id: req.LeaseID, batchEnd: end, expires: now.Add(secs(q.opts.LeaseTime))}
	}
	return out, true
}

// Pop applies a pop. For a wildcard pop it returns an error, and changes
// nothing, when a chosen partition was not deliverable or a deliverable
// one was left out while the pop had budget and room for it.
func (m *Model) Pop(req PopRequest, now time.Time) (PopResult, error) {
	next := m.Clone()
	res, err := next.pop(req, now)
	if err != nil {
		return PopResult{}, err
	}
	*m = *next
	return res, nil
}

func (m *Model) pop(req PopRequest, now time.Time) (PopResult, error) {
	group := groupOf(req.Group)
	if req.Batch <= 0 {
		req.Batch = 1
	}
	if req.Partitions <= 0 {
		req.Partitions = 1
	}
	// The subscription is remembered even before the queue exists.
	m.subscribe(req.Queue, group, req.Mode, req.From, now)
	q := m.queues[req.Queue]
	var res PopResult
	if q == nil {
		if len(req.Chosen) > 0 {
			return res, fmt.Errorf("pop served %v of queue %s, which does not exist", req.Chosen, req.Queue)
		}
		return res, nil
	}
	if req.Partition != "" {
		if p := q.parts[req.Partition]; p != nil {
			res.Messages, _ = m.claim(q, p, group, req.Batch, req, now)
		}
	} else {
		served := map[string]bool{}
		for _, name := range req.Chosen {
			p := q.parts[name]
			if p == nil || served[name] {
				return res, fmt.Errorf("pop served partition %q, which does not exist or came twice", name)
			}
			if len(served) >= req.Partitions || len(res.Messages) >= req.Batch {
				return res, fmt.Errorf("pop served partition %q beyond its budget (partitions=%d, batch=%d)", name, req.Partitions, req.Batch)
			}
			served[name] = true
			msgs, ok := m.claim(q, p, group, req.Batch-len(res.Messages), req, now)
			if !ok {
				return res, fmt.Errorf("pop served partition %q, which was not deliverable to %s", name, group)
			}
			res.Messages = append(res.Messages, msgs...)
		}
		// Liveness (§3.4.3): a wildcard pop returns a message whenever
		// one is deliverable, within its budget.
		if len(served) < req.Partitions && len(res.Messages) < req.Batch {
			probe := m.Clone()
			pq := probe.queues[req.Queue]
			for _, name := range sortedNames(pq.parts) {
				if served[name] {
					continue
				}
				if _, st := probe.prepare(pq, pq.parts[name], group, now); st == claimable {
					return res, fmt.Errorf("pop of %s left out partition %q, which was deliverable", group, name)
				}
			}
		}
	}
	if len(res.Messages) > 0 && !req.AutoAck {
		res.Leased = true
		res.LeaseExpires = now.Add(secs(q.opts.LeaseTime))
	}
	return res, nil
}

// Touch does to one (partition, group) what any pop that looks at it does
// before deciding whether to serve it: end an expired lease (one failed
// attempt of the head) and skip messages removed by retention. The engine
// may do this on partitions a wildcard pop then does not serve.
func (m *Model) Touch(queueName, partitionName, group string, now time.Time) {
	q := m.queues[queueName]
	if q == nil || q.parts[partitionName] == nil {
		return
	}
	if _, ok := m.subs[subKey{queueName, groupOf(group)}]; !ok {
		return
	}
	m.prepare(q, q.parts[partitionName], groupOf(group), now)
}

// ExtendLease pushes out every live partition lease held under id to at
// least now+seconds (0: the queue's leaseTime). It reports whether any was live.
func (m *Model) ExtendLease(id string, seconds int, now time.Time) bool {
	found := false
	for _, q := range m.queues {
		for _, p := range q.parts {
			for _, c := range p.cursors {
				if c.lease != nil && c.lease.id == id && c.lease.expires.After(now) {
					d := seconds
					if d == 0 {
						d = q.opts.LeaseTime
					}
					if t := now.Add(secs(d)); t.After(c.lease.expires) {
						c.lease.expires = t
					}
					found = true
				}
			}
		}
	}
	return found
}
