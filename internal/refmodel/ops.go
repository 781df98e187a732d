package refmodel

import (
	"cmp"
	"fmt"
	"sort"
	"time"
)

// ---------------------------------------------------------------------------
// seek (§3.7.3)

// SeekTarget says where a seek moves a group's cursors; exactly one is set.
type SeekTarget struct {
	ToEnd, ToBeginning bool
	Timestamp          *time.Time
	// Offsets maps partition name to the next offset to deliver.
	Offsets map[string]int64
}

// Seek moves a group's cursors on a queue: to the end, to the beginning, to
// a timestamp (the first message with created_at >= ts becomes next), or
// per partition to an offset (clamped to the log). Seek subscribes the
// group if it was not, creates its cursors, and clears the leases and
// attempt counts of the cursors it moves. It returns the moved cursors'
// committed offsets by partition.
func (m *Model) Seek(group, queueName string, t SeekTarget, now time.Time) (map[string]int64, error) {
	group = groupOf(group)
	q := m.queues[queueName]
	if q == nil {
		return nil, fmt.Errorf("%w: queue %s", ErrNotFound, queueName)
	}
	for name := range t.Offsets {
		if q.parts[name] == nil {
			return nil, fmt.Errorf("%w: partition %s", ErrNotFound, name)
		}
	}
	m.subscribe(queueName, group, ModeAll, time.Time{}, now)
	out := map[string]int64{}
	for _, name := range sortedNames(q.parts) {
		p := q.parts[name]
		c := m.ensureCursor(q, p, group)
		var target int64
		switch {
		case t.ToEnd:
			target = p.last()
		case t.ToBeginning:
			target = -1
		case t.Timestamp != nil:
			target = startOffset(p, subscription{mode: ModeFrom, from: t.Timestamp})
		default:
			next, ok := t.Offsets[name]
			if !ok {
				continue
			}
			target = min(max(next-1, -1), p.last())
		}
		*c = cursor{committed: target, delivered: target}
		out[name] = target
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// dead letters (§3.6)

// DeadLetters returns the DLQ rows, oldest first.
func (m *Model) DeadLetters() []DeadLetter { return append([]DeadLetter(nil), m.dlq...) }

func (d DeadLetter) matches(queueName, partitionName, txid, group string) bool {
	return d.Queue == queueName && d.Partition == partitionName && d.TxID == txid && (group == "" || d.Group == group)
}

// RetryDeadLetter re-pushes the newest dead letter of an address (only
// group's when group is given) to its queue and partition under newTxID,
// and drops the address's rows, in one step. ErrNotFound when there is none.
func (m *Model) RetryDeadLetter(queueName, partitionName, txid, group, newTxID string, now time.Time) (PushResult, error) {
	var found *DeadLetter
	for i := range m.dlq {
		if m.dlq[i].matches(queueName, partitionName, txid, group) {
			found = &m.dlq[i]
		}
	}
	if found == nil {
		return PushResult{}, fmt.Errorf("%w: dead letter %s/%s", ErrNotFound, partitionName, txid)
	}
	next := m.Clone()
	res, err := next.push([]PushItem{{Queue: found.Queue, Partition: found.Partition, TxID: newTxID,
		Payload: found.Payload, TraceID: found.TraceID}}, now)
	if err != nil {
		return PushResult{}, err
	}
	next.deleteDeadLetters(queueName, partitionName, txid, group)
	*m = *next
	return res[0], nil
}

// DeleteDeadLetter drops the rows of an address (only group's when given)
// and returns how many there were.
func (m *Model) DeleteDeadLetter(queueName, partitionName, txid, group string) int {
	return m.deleteDeadLetters(queueName, partitionName, txid, group)
}

func (m *Model) deleteDeadLetters(queueName, partitionName, txid, group string) int {
	kept := m.dlq[:0:0]
	for _, d := range m.dlq {
		if !d.matches(queueName, partitionName, txid, group) {
			kept = append(kept, d)
		}
	}
	n := len(m.dlq) - len(kept)
	m.dlq = kept
	return n
}

// ---------------------------------------------------------------------------
// reaper (§3.7.11)

// ReapStats counts what a reaper pass did.
type ReapStats struct {
	LeasesExpired, DeadLettered int
	SegmentsRetained            int // removed by retentionSeconds
	SegmentsCompleted           int // removed by completedRetentionSeconds
	DeadLettersExpired          int // removed by dlqRetentionSeconds
}

// Reap does one unbounded maintenance pass: expire leases (counting the
// attempt), prune dedup keys past their window, delete segments older than
// retentionSeconds, and delete segments older than completedRetentionSeconds
// (each the model's default where the queue sets none)
// that every subscribed group has committed past — a group with no cursor
// on a partition yet counts from its subscription start, so a group whose
// subscription starts after a segment never holds it back. Dead letters
// older than their queue's dlqRetentionSeconds (the model's default where
// it sets none or was deleted) since they were dead-lettered are removed.
func (m *Model) Reap(now time.Time) ReapStats {
	var st ReapStats
	for _, qn := range sortedNames(m.queues) {
		q := m.queues[qn]
		for _, pn := range sortedNames(q.parts) {
			p := q.parts[pn]
			for _, g := range sortedNames(p.cursors) {
				c := p.cursors[g]
				if c.lease == nil || c.lease.expires.After(now) {
					continue
				}
				before := len(m.dlq)
				m.expire(q, p, g, c, now)
				st.LeasesExpired++
				st.DeadLettered += len(m.dlq) - before
			}
		}
	}
	for _, qn := range sortedNames(m.queues) {
		q := m.queues[qn]
		for _, p := range q.parts {
			for k, d := range p.dedup {
				if !d.at.After(now.Add(-secs(q.opts.DedupWindow))) {
					delete(p.dedup, k)
				}
			}
		}
		if keep := cmp.Or(q.opts.Retention, m.DefaultRetention); keep > 0 {
			cut := now.Add(-secs(keep))
			for _, p := range q.parts {
				st.SegmentsRetained += p.dropSegments(func(s segment) bool { return s.createdAt.Before(cut) })
			}
		}
		if keep := cmp.Or(q.opts.CompletedRetention, m.DefaultCompletedRetention); keep > 0 {
			cut := now.Add(-secs(keep))
			groups := m.subscribers(qn)
			if len(groups) == 0 {
				continue
			}
			for _, p := range q.parts {
				low := m.slowest(q, p, groups)
				st.SegmentsCompleted += p.dropSegments(func(s segment) bool {
					return s.createdAt.Before(cut) && s.last() <= low
				})
			}
		}
	}
	st.DeadLettersExpired = m.expireDeadLetters(now)
	return st
}

// expireDeadLetters removes the dead letters past their retention.
func (m *Model) expireDeadLetters(now time.Time) int {
	kept := m.dlq[:0]
	for _, d := range m.dlq {
		keep := m.DefaultDLQRetention
		if q := m.queues[d.Queue]; q != nil && q.opts.DLQRetention > 0 {
			keep = q.opts.DLQRetention
		}
		if keep > 0 && d.FailedAt.Before(now.Add(-secs(keep))) {
			continue
		}
		kept = append(kept, d)
	}
	n := len(m.dlq) - len(kept)
	m.dlq = kept
	return n
}

// dropSegments removes the leading segments that match and counts them.
func (p *partition) dropSegments(match func(segment) bool) int {
	n := 0
	for n < len(p.segments) && match(p.segments[n]) {
		n++
	}
	p.segments = p.segments[n:]
	return n
}

func (m *Model) subscribers(queueName string) []string {
	var out []string
	for k := range m.subs {
		if k.queue == queueName {
			out = append(out, k.group)
		}
	}
	sort.Strings(out)
	return out
}

// position is a subscribed group's position on a partition, as listings,
// lag and depth count it: its committed offset, or its subscription start
// when it has not read the partition yet — and never before the oldest
// stored message, since what retention removed cannot be read.
func (m *Model) position(q *queue, p *partition, group string) int64 {
	pos := startOffset(p, m.subs[subKey{q.name, group}])
	if c := p.cursors[group]; c != nil {
		pos = c.committed
	}
	return max(pos, p.firstStored()-1)
}

// slowest is the lowest position of groups on a partition (-1 for none).
func (m *Model) slowest(q *queue, p *partition, groups []string) int64 {
	low := int64(-1)
	for i, g := range groups {
		if pos := m.position(q, p, g); i == 0 || pos < low {
			low = pos
		}
	}
	return low
}

// ---------------------------------------------------------------------------
// observations

// Depth is the number of a queue's stored messages that some subscribed
// group has not consumed: per partition, the stored messages after the
// slowest group's position (all stored messages when no group subscribes).
// maxSize caps it (§3.7.5).
func (m *Model) Depth(queueName string) int64 {
	q := m.queues[queueName]
	if q == nil {
		return 0
	}
	groups := m.subscribers(queueName)
	var depth int64
	for _, p := range q.parts {
		depth += p.last() - max(m.slowest(q, p, groups), p.firstStored()-1)
	}
	return depth
}

// CursorState is a group's position on a partition, as listings show it.
type CursorState struct {
	Committed  int64
	LastOffset int64
	Lag        int64 // LastOffset - Committed
	Attempts   int
	// Delivered is the highest offset ever handed out to the group there
	// (acks beyond it are rejected); listings do not show it.
	Delivered int64
	LeaseID   string // "" when no lease (an expired one not yet ended counts)
	BatchEnd  int64  // -1 when no lease
	Expires   time.Time
	RetryAt   time.Time // not delivered before (retryDelay); zero when not held back
}

// Cursor returns a subscribed group's position on a partition; a group that
// has not read the partition yet is at its subscription start. ok is false
// when the group does not subscribe to the queue or the partition does not
// exist.
func (m *Model) Cursor(queueName, partitionName, group string) (CursorState, bool) {
	group = groupOf(group)
	q := m.queues[queueName]
	if q == nil || q.parts[partitionName] == nil {
		return CursorState{}, false
	}
	if _, ok := m.subs[subKey{queueName, group}]; !ok {
		return CursorState{}, false
	}
	p := q.parts[partitionName]
	st := CursorState{Committed: m.position(q, p, group), LastOffset: p.last(), BatchEnd: -1}
	st.Lag = st.LastOffset - st.Committed
	st.Delivered = st.Committed
	if c := p.cursors[group]; c != nil {
		st.Attempts, st.Delivered, st.RetryAt = c.attempts, c.delivered, c.retryAt
		if c.lease != nil {
			st.LeaseID, st.BatchEnd, st.Expires = c.lease.id, c.lease.batchEnd, c.lease.expires
		}
	}
	return st, true
}

// Groups lists the groups subscribed to a queue.
func (m *Model) Groups(queueName string) []string { return m.subscribers(queueName) }

// Partitions lists a queue's partitions by name.
func (m *Model) Partitions(queueName string) []string {
	if q := m.queues[queueName]; q != nil {
		return sortedNames(q.parts)
	}
	return nil
}

// LastOffset is a partition's highest offset, -1 when empty or unknown.
func (m *Model) LastOffset(queueName, partitionName string) int64 {
	if p := m.part(queueName, partitionName); p != nil {
		return p.last()
	}
	return -1
}

// Lag is a group's lag on a queue: the sum over partitions of
// lastOffset - position (§3.3.4: exact from offsets).
func (m *Model) Lag(group, queueName string) int64 {
	var lag int64
	for _, pn := range m.Partitions(queueName) {
		if c, ok := m.Cursor(queueName, pn, group); ok {
			lag += c.Lag
		}
	}
	return lag
}

// Log returns a partition's stored messages in offset order.
func (m *Model) Log(queueName, partitionName string) []Message {
	p := m.part(queueName, partitionName)
	if p == nil {
		return nil
	}
	return append([]Message(nil), p.msgs[p.firstStored():]...)
}

// Message returns the message at an offset, whether or not it is still
// stored (ok false when the offset was never written).
func (m *Model) Message(queueName, partitionName string, off int64) (Message, bool) {
	p := m.part(queueName, partitionName)
	if p == nil || off < 0 || off > p.last() {
		return Message{}, false
	}
	return p.msgs[off], true
}

// Options returns a queue's options (defaults for an unknown queue).
func (m *Model) Options(queueName string) Options {
	if q := m.queues[queueName]; q != nil {
		return q.opts
	}
	return DefaultOptions()
}
