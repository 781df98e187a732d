package refmodel

import (
	"errors"
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
	DLQRetention       int   // dlqRetentionSeconds; 0: the model's default
}

// DefaultOptions are the options of a queue nobody configured.
func DefaultOptions() Options {
	return Options{LeaseTime: DefaultLeaseTime, RetryLimit: DefaultRetryLimit, DedupWindow: DefaultDedupWindow}
}

// OptionsPatch is a partial update: nil keeps the current value.
type OptionsPatch struct {
	LeaseTime, RetryLimit, RetryDelay, DedupWindow, DelayedProcessing, WindowBuffer *int
	MaxSize                                                                         *int64
	Retention, CompletedRetention, DLQRetention                                     *int
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
	// keep); DefaultDLQRetention keeps dead letters of a queue that sets
	// no dlqRetentionSeconds, or that was deleted.
	DefaultRetention, DefaultCompletedRetention, DefaultDLQRetention int

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
		DefaultDLQRetention: m.DefaultDLQRetention,
		queues:              map[string]*queue{}, subs: map[subKey]subscription{}}
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
	set(&q.opts.DLQRetention, p.DLQRetention)
	return q.opts
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
