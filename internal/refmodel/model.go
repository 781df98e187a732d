package refmodel

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// QueueModeGroup is the group of consumers that name none (§3.3.2).
const QueueModeGroup = "__QUEUE_MODE__"

// Option defaults (§3.7.4).
const (
	DefaultLeaseTime   = 300
	DefaultRetryLimit  = 3
	DefaultDedupWindow = 3600
)

// Errors an operation returns; when it does, it changed nothing.
var (
	// ErrQueueFull: the push would take a queue beyond its maxSize (§3.7.5).
	ErrQueueFull = errors.New("queue full")
	// ErrNotFound: no such queue, partition or dead letter.
	ErrNotFound = errors.New("not found")
	// ErrRejected: an ack call with at least one invalid item (see AckResult).
	ErrRejected = errors.New("ack rejected")
)

// Options are a queue's options, in seconds where they are durations.
type Options struct {
	LeaseTime          int
	RetryLimit         int
	RetryDelay         int // milliseconds a failed attempt holds its partition back
	DedupWindow        int // 0 disables dedup
	DelayedProcessing  int
	WindowBuffer       int
	MaxSize            int64 // 0: no cap
	Retention          int   // retentionSeconds; 0: keep
	CompletedRetention int   // completedRetentionSeconds; 0: keep
}

// DefaultOptions are the options of a queue nobody configured.
func DefaultOptions() Options {
	return Options{LeaseTime: DefaultLeaseTime, RetryLimit: DefaultRetryLimit, DedupWindow: DefaultDedupWindow}
}

// OptionsPatch is a partial update: nil keeps the current value.
type OptionsPatch struct {
	LeaseTime, RetryLimit, RetryDelay, DedupWindow, DelayedProcessing, WindowBuffer *int
	MaxSize                                                                         *int64
	Retention, CompletedRetention                                                   *int
}

// Message is one logged message.
type Message struct {
	Offset    int64
	TxID      string
	Payload   string
	TraceID   string
	CreatedAt time.Time
}

type segment struct {
	base      int64
	n         int64
	createdAt time.Time
}

func (s segment) last() int64 { return s.base + s.n - 1 }

type dedupKey struct {
	offset int64
	at     time.Time
}

type lease struct {
	id       string
	batchEnd int64
	expires  time.Time
}

// cursor is the one row per (partition, group) of §3.3.1.
type cursor struct {
	committed int64 // last completed offset, -1 = none
	delivered int64 // highest offset ever handed out to the group
	attempts  int   // failed attempts of the head, offset committed+1
	headOnly  bool  // after a lease expiry the head is delivered alone
	lease     *lease
	// retryAt: after a failed attempt (an applied retry or failed stop
	// signal, or an expired lease that charged one) the partition is not
	// delivered to the group before retryAt = the attempt's end + retryDelay.
	retryAt time.Time
}

type partition struct {
	name         string
	msgs         []Message // every offset ever written, index = offset
	segments     []segment // the stored ones, in offset order
	lastPushedAt time.Time
	dedup        map[string]dedupKey
	cursors      map[string]*cursor
}

func (p *partition) last() int64 { return int64(len(p.msgs)) - 1 }

// firstStored is the lowest offset still stored (last+1 when none is).
func (p *partition) firstStored() int64 {
	if len(p.segments) == 0 {
		return p.last() + 1
	}
	return p.segments[0].base
}

func (p *partition) stored(off int64) bool { return off >= p.firstStored() && off <= p.last() }

type queue struct {
	name  string
	opts  Options
	parts map[string]*partition
}

type subscription struct {
	mode string     // "all", "new" or "from"
	from *time.Time // nil for "all"
}

type subKey struct{ queue, group string }

// DeadLetter is a row of the dead-letter table (§3.6.1).
type DeadLetter struct {
	Queue, Partition string
	Offset           int64
	TxID             string
	Payload          string
	TraceID          string
	Group            string
	Error            string
	Attempts         int
	CreatedAt        time.Time
	FailedAt         time.Time
}

// Model is the whole state. The zero value is not usable; call New.
type Model struct {
	// DefaultRetention and DefaultCompletedRetention are the deployment's
	// windows, in seconds, for a queue that sets none of that kind (0:
	// keep).
	DefaultRetention, DefaultCompletedRetention int

	queues map[string]*queue
	subs   map[subKey]subscription
	dlq    []DeadLetter
}

// New returns an empty model.
func New() *Model {
	return &Model{queues: map[string]*queue{}, subs: map[subKey]subscription{}}
}

// Clone returns a deep copy.
func (m *Model) Clone() *Model {
	c := &Model{DefaultRetention: m.DefaultRetention, DefaultCompletedRetention: m.DefaultCompletedRetention,
		queues: map[string]*queue{}, subs: map[subKey]subscription{}}
	for k, s := range m.subs {
		c.subs[k] = s
	}
	c.dlq = append([]DeadLetter(nil), m.dlq...)
	for qn, q := range m.queues {
		nq := &queue{name: q.name, opts: q.opts, parts: map[string]*partition{}}
		for pn, p := range q.parts {
			np := &partition{name: p.name, msgs: append([]Message(nil), p.msgs...),
				segments: append([]segment(nil), p.segments...), lastPushedAt: p.lastPushedAt,
				dedup: map[string]dedupKey{}, cursors: map[string]*cursor{}}
			for k, v := range p.dedup {
				np.dedup[k] = v
			}
			for g, cr := range p.cursors {
				cc := *cr
				if cr.lease != nil {
					l := *cr.lease
					cc.lease = &l
				}
				np.cursors[g] = &cc
			}
			nq.parts[pn] = np
		}
		c.queues[qn] = nq
	}
	return c
}

func (m *Model) queue(name string) *queue {
	q := m.queues[name]
	if q == nil {
		q = &queue{name: name, opts: DefaultOptions(), parts: map[string]*partition{}}
		m.queues[name] = q
	}
	return q
}

func (m *Model) part(queueName, name string) *partition {
	if q := m.queues[queueName]; q != nil {
		return q.parts[name]
	}
	return nil
}

// ---------------------------------------------------------------------------
// configure

// Configure creates the queue if needed and applies the options given
// (§3.7.4: a partial update; omitted options keep their value).
func (m *Model) Configure(queueName string, p OptionsPatch) Options {
	q := m.queue(queueName)
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&q.opts.LeaseTime, p.LeaseTime)
	set(&q.opts.RetryLimit, p.RetryLimit)
	set(&q.opts.RetryDelay, p.RetryDelay)
	set(&q.opts.DedupWindow, p.DedupWindow)
	set(&q.opts.DelayedProcessing, p.DelayedProcessing)
	set(&q.opts.WindowBuffer, p.WindowBuffer)
	if p.MaxSize != nil {
		q.opts.MaxSize = *p.MaxSize
	}
	set(&q.opts.Retention, p.Retention)
	set(&q.opts.CompletedRetention, p.CompletedRetention)
	return q.opts
}

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

func groupOf(g string) string {
	if g == "" {
		return QueueModeGroup
	}
	return g
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
