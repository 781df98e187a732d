package refmodel

import (
	"fmt"
	"time"
)

// ---------------------------------------------------------------------------
// push (§3.1, §3.2)

// PushItem is one message to append. TxID is required: for an item the
// client sent without one, pass the id the engine generated (UUIDv7,
// never a duplicate).
type PushItem struct {
	Queue, Partition string
	TxID             string
	Payload          string
	TraceID          string
}

// PushResult says what happened to one item, in input order.
type PushResult struct {
	Duplicate bool
	Offset    int64 // of the new message, or of the original for a duplicate
	CreatedAt time.Time
}

// Push appends items, all or nothing. A transactionId seen in the same
// partition within the queue's dedup window is a duplicate and writes
// nothing; within one request the first of a repeated key wins. Fresh items
// take the next offsets in input order; each partition gets one segment.
func (m *Model) Push(items []PushItem, now time.Time) ([]PushResult, error) {
	next := m.Clone()
	res, err := next.push(items, now)
	if err != nil {
		return nil, err
	}
	*m = *next
	return res, nil
}

func (m *Model) push(items []PushItem, now time.Time) ([]PushResult, error) {
	res := make([]PushResult, len(items))
	type fresh struct{ n int64 }
	touched := map[*partition]*fresh{}
	var order []*partition
	for i, it := range items {
		q := m.queue(it.Queue)
		p := q.parts[it.Partition]
		if p == nil {
			p = &partition{name: it.Partition, dedup: map[string]dedupKey{}, cursors: map[string]*cursor{}}
			q.parts[it.Partition] = p
		}
		// created_at is stamped under the partition's lock: monotone per
		// partition in commit order.
		ts := now
		if p.lastPushedAt.After(ts) {
			ts = p.lastPushedAt
		}
		res[i].CreatedAt = ts
		if q.opts.DedupWindow > 0 {
			if k, ok := p.dedup[it.TxID]; ok && k.at.After(ts.Add(-secs(q.opts.DedupWindow))) {
				res[i] = PushResult{Duplicate: true, Offset: k.offset, CreatedAt: ts}
				continue
			}
		}
		off := p.last() + 1
		p.msgs = append(p.msgs, Message{Offset: off, TxID: it.TxID, Payload: it.Payload, TraceID: it.TraceID, CreatedAt: ts})
		if q.opts.DedupWindow > 0 {
			// A key reused after its window points at the newest message.
			p.dedup[it.TxID] = dedupKey{offset: off, at: ts}
		}
		if touched[p] == nil {
			touched[p] = &fresh{}
			order = append(order, p)
		}
		touched[p].n++
		res[i].Offset = off
	}
	for _, p := range order {
		n := touched[p].n
		ts := p.msgs[len(p.msgs)-1].CreatedAt
		p.segments = append(p.segments, segment{base: p.last() - n + 1, n: n, createdAt: ts})
		p.lastPushedAt = ts
	}
	for _, it := range items {
		q := m.queues[it.Queue]
		if q.opts.MaxSize > 0 && m.Depth(q.name) > q.opts.MaxSize {
			return nil, fmt.Errorf("%w: queue %s", ErrQueueFull, q.name)
		}
	}
	return res, nil
}
