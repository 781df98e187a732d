package refmodel

import (
	"fmt"
	"time"
)

// ---------------------------------------------------------------------------
// subscriptions and cursors (§3.3)

// Subscription modes of a pop.
const (
	ModeAll  = "all"
	ModeNew  = "new"
	ModeFrom = "from"
)

// subscribe remembers the (queue, group) subscription on first use; later
// modes do not change it. "new" starts at the head at subscription time.
func (m *Model) subscribe(queueName, group, mode string, from time.Time, now time.Time) subscription {
	k := subKey{queueName, group}
	if s, ok := m.subs[k]; ok {
		return s
	}
	s := subscription{mode: ModeAll}
	if group == QueueModeGroup {
		mode = ModeAll // queue mode starts at 0
	}
	switch mode {
	case ModeNew:
		t := now
		s = subscription{mode: ModeNew, from: &t}
	case ModeFrom:
		t := from
		s = subscription{mode: ModeFrom, from: &t}
	}
	m.subs[k] = s
	return s
}

// startOffset is where a subscription starts on a partition: -1 (from the
// beginning), or just before the first message with created_at >= from,
// among the messages still stored (the head, when every stored message is
// older).
func startOffset(p *partition, s subscription) int64 {
	if s.from == nil {
		return -1
	}
	from := *s.from
	for i := len(p.segments) - 1; i >= 0; i-- {
		if p.segments[i].createdAt.Before(from) {
			return p.segments[i].last()
		}
	}
	if p.last() >= 0 && p.lastPushedAt.Before(from) {
		return p.last()
	}
	// Every stored message is at or after from: start before the oldest.
	return p.firstStored() - 1
}

func (m *Model) ensureCursor(q *queue, p *partition, group string) *cursor {
	if c := p.cursors[group]; c != nil {
		return c
	}
	s, ok := m.subs[subKey{q.name, group}]
	if !ok {
		s = subscription{mode: ModeAll}
	}
	start := startOffset(p, s)
	c := &cursor{committed: start, delivered: start}
	p.cursors[group] = c
	return c
}

// ---------------------------------------------------------------------------
// lease expiry (§3.5.8)

// expire ends an expired lease: one failed attempt of the head message,
// exactly once. Past retryLimit the head is dead-lettered; otherwise the
// head is delivered alone next time. A head removed by retention costs
// nothing: the cursor moves to just before the oldest stored message.
func (m *Model) expire(q *queue, p *partition, group string, c *cursor, now time.Time) {
	if c.lease == nil {
		return
	}
	expiredAt := c.lease.expires
	c.lease = nil
	head := c.committed + 1
	if !p.stored(head) {
		c.committed = max(c.committed, p.firstStored()-1)
		c.delivered = max(c.delivered, c.committed)
		c.attempts, c.headOnly, c.retryAt = 0, false, time.Time{}
		return
	}
	att := c.attempts + 1
	if att > q.opts.RetryLimit {
		m.deadLetter(q, p, group, head, fmt.Sprintf("lease expired (attempt %d of %d)", att, q.opts.RetryLimit+1), att, now)
		c.committed = head
		c.delivered = max(c.delivered, head)
		c.attempts, c.headOnly, c.retryAt = 0, false, time.Time{}
		return
	}
	c.attempts, c.headOnly = att, true
	c.retryAt = expiredAt.Add(time.Duration(q.opts.RetryDelay) * time.Millisecond)
}

func (m *Model) deadLetter(q *queue, p *partition, group string, off int64, errText string, attempts int, now time.Time) {
	if !p.stored(off) {
		return
	}
	msg := p.msgs[off]
	m.dlq = append(m.dlq, DeadLetter{Queue: q.name, Partition: p.name, Offset: off, TxID: msg.TxID,
		Payload: msg.Payload, TraceID: msg.TraceID, Group: group, Error: errText, Attempts: attempts,
		CreatedAt: msg.CreatedAt, FailedAt: now})
}
