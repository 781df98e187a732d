package refmodel

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Ack outcomes (§3.5.2).
const (
	Completed = "completed"
	Failed    = "failed"
	Retry     = "retry"
	DLQ       = "dlq"
)

// Ack results, per item.
const (
	ResultCommitted        = "committed"
	ResultAlreadyCommitted = "already committed"
	ResultDeadLettered     = "dead-lettered"
	ResultRedelivered      = "redelivered"
	ResultNotApplied       = "not applied"
)

// Codes of a rejected item.
const (
	CodeNotFound = "not_found"
	CodeConflict = "conflict"
	CodeSkipped  = "skipped" // valid, but another item of the call was rejected
)

// AckItem reports the outcome of one delivered message.
type AckItem struct {
	Queue, Partition string
	TxID             string
	Status           string // Completed, Failed, Retry or DLQ
	Group            string // "" is the queue-mode group
	LeaseID          string // optional; when given it must be the live lease
	Error            string // stored with a dead letter
}

// AckResult says what happened to one item, in input order.
type AckResult struct {
	Success bool
	// Result is one of the Result* constants when Success.
	Result string
	// Offset is the message's offset when the call found it after the cursor.
	Offset *int64
	// DLQ: this item dead-lettered its message (status dlq or failed).
	DLQ bool
	// Committed is the cursor after the call.
	Committed int64
	// LeaseReleased: the call ended the partition's lease.
	LeaseReleased bool
	// Code and Error say why an item was rejected.
	Code, Error string
}

type resolvedItem struct {
	AckItem
	idx    int
	offset int64 // -1: not found after the cursor
}

// Ack applies one call's acknowledgements atomically (§3.5).
//
// An item is rejected, and then the whole call changes nothing, when its
// partition does not exist, its group has no cursor there, its message lies
// beyond what was delivered to the group, or it names a lease that is not
// the partition's live lease. A transactionId that is not among the stored
// messages after the cursor is at or below it: a no-op success ("already
// committed"). Finding it looks only at the unconsumed span.
//
// Per (partition, group), with cursor C, the call's signals above C are,
// by offset, the strongest status given for it (dlq beats failed beats
// retry beats completed):
//
//   - resolutions: completed; dlq; failed whose attempt would exceed
//     retryLimit (it is dead-lettered);
//   - stop signals: retry; failed with attempts left; and a retry or failed
//     beyond the live lease's batch_end, which another consumer holds — it
//     is declined (not applied) but still stops the call.
//
// highestResolved H and lowestStop L give
//
//	committed = max(C, min(H, L − 1))
//
// Dead-letter signals at or below the new cursor are applied; those above
// it are not. A stop signal at the new head sets the head's attempts (a
// failed consumes one). The lease is released when the cursor reaches
// batch_end or an applied stop signal ends the batch.
//
// Worked example (§3.5.3): span (2,5], [3 completed, 4 failed, 5 completed]
// with attempts left: H = 5, L = 4, committed = min(5, 3) = 3; offset 4
// comes back with one more attempt, then 5. [4 failed, 5 completed] gives
// the same: offset 3, unmentioned, is covered.
func (m *Model) Ack(items []AckItem, now time.Time) ([]AckResult, error) {
	return m.ack(items, now, false)
}

// ack is Ack; strict (the acks of a transaction) also rejects an item at or
// below the cursor, so that a transaction applied twice fails instead of
// repeating its pushes.
func (m *Model) ack(items []AckItem, now time.Time, strict bool) ([]AckResult, error) {
	res := make([]AckResult, len(items))
	resolved := make([]resolvedItem, len(items))
	rejected := false
	for i, it := range items {
		it.Group = groupOf(it.Group)
		resolved[i] = resolvedItem{AckItem: it, idx: i, offset: -1}
		p := m.part(it.Queue, it.Partition)
		if p == nil {
			res[i] = AckResult{Code: CodeNotFound, Error: "partition not found"}
			rejected = true
			continue
		}
		c := p.cursors[it.Group]
		if c == nil {
			// A subscribed group that has not read the partition yet is at
			// its subscription start.
			if _, ok := m.subs[subKey{it.Queue, it.Group}]; !ok {
				res[i] = AckResult{Code: CodeConflict, Error: fmt.Sprintf("message not delivered to consumer group %s", it.Group)}
				rejected = true
				continue
			}
			start := startOffset(p, m.subs[subKey{it.Queue, it.Group}])
			c = &cursor{committed: start, delivered: start}
		}
		off := findAfterCursor(p, c.committed, it.TxID)
		resolved[i].offset = off
		switch {
		case off < 0 && strict:
			res[i] = AckResult{Code: CodeConflict, Error: "already committed or unknown: a transaction acks each message once"}
			rejected = true
		case off < 0:
			// At or below the cursor, however old: nothing to check.
		case it.LeaseID != "" && (c.lease == nil || c.lease.id != it.LeaseID || !c.lease.expires.After(now)):
			// Named first: after a seek the message may no longer count as
			// delivered, but what the caller must learn is that its lease
			// is gone.
			res[i] = AckResult{Code: CodeConflict, Error: "invalid or expired lease"}
			rejected = true
		case off > c.delivered:
			res[i] = AckResult{Code: CodeConflict, Error: fmt.Sprintf("message not delivered to consumer group %s", it.Group)}
			rejected = true
		case strict && it.LeaseID == "" && (it.Status == Retry || it.Status == Failed) &&
			(c.lease == nil || !c.lease.expires.After(now)):
			// A transaction reports a failure on a live delivery, once: the
			// first report released the lease, so a repeat is refused
			// instead of charging the attempt again.
			res[i] = AckResult{Code: CodeConflict, Error: ErrNoLiveDelivery}
			rejected = true
		}
	}
	if rejected {
		for i := range res {
			if res[i].Code == "" {
				res[i] = AckResult{Code: CodeSkipped, Error: "not applied: another item of this call was rejected"}
			}
		}
		return res, ErrRejected
	}

	// One cursor at a time, in a fixed order (the result does not depend on it).
	type unitKey struct{ queue, partition, group string }
	units := map[unitKey][]resolvedItem{}
	var keys []unitKey
	for _, r := range resolved {
		k := unitKey{r.Queue, r.Partition, r.Group}
		if _, ok := units[k]; !ok {
			keys = append(keys, k)
		}
		units[k] = append(units[k], r)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.queue != b.queue {
			return a.queue < b.queue
		}
		if a.partition != b.partition {
			return a.partition < b.partition
		}
		return a.group < b.group
	})
	for _, k := range keys {
		q := m.queues[k.queue]
		p := q.parts[k.partition]
		u := m.applyUnit(q, p, k.group, units[k], now)
		for _, r := range units[k] {
			res[r.idx] = u.result(r)
		}
	}
	return res, nil
}

// findAfterCursor is the lowest stored offset above committed holding txid,
// or -1.
func findAfterCursor(p *partition, committed int64, txid string) int64 {
	for off := max(committed+1, p.firstStored()); off <= p.last(); off++ {
		if p.msgs[off].TxID == txid {
			return off
		}
	}
	return -1
}

// signal is the strongest status one call gives one offset.
type signal struct {
	offset   int64
	status   string
	failed   bool   // some item at this offset said failed
	errText  string // the error stored with a dead letter
	attempts int    // attempts if dead-lettered, or of the head if a failed stop
	kind     signalKind
}

type signalKind int

const (
	resolution signalKind = iota // completed, or dead-lettered
	deadLetter                   // a resolution that copies the message to the DLQ
	stopSignal                   // retry or failed with attempts left
	declined                     // a stop signal beyond another consumer's live lease
)

var strength = map[string]int{Completed: 1, Retry: 2, Failed: 3, DLQ: 4}

// unitOutcome is what one call did to one (partition, group).
type unitOutcome struct {
	oldCommitted, committed int64
	deadLettered            map[int64]bool
	appliedStop             int64 // -1 when none
	released                bool
}

func (u unitOutcome) result(r resolvedItem) AckResult {
	out := AckResult{Success: true, Committed: u.committed, LeaseReleased: u.released}
	if r.offset < 0 {
		out.Result = ResultAlreadyCommitted
		return out
	}
	off := r.offset
	out.Offset = &off
	switch {
	case u.deadLettered[off]:
		out.Result = ResultDeadLettered
		out.DLQ = r.Status == DLQ || r.Status == Failed
	case off <= u.committed:
		out.Result = ResultCommitted
	case off == u.appliedStop:
		out.Result = ResultRedelivered
	default:
		out.Result = ResultNotApplied
	}
	return out
}

func (m *Model) applyUnit(q *queue, p *partition, group string, items []resolvedItem, now time.Time) unitOutcome {
	c := p.cursors[group]
	if c == nil {
		// Not read yet: every item is at or below the start, a no-op.
		pos := m.position(q, p, group)
		return unitOutcome{oldCommitted: pos, committed: pos, appliedStop: -1}
	}
	live := c.lease != nil && c.lease.expires.After(now)

	// The strongest signal per offset above the cursor; the error text is
	// the first dlq item's, else the first failed item's.
	byOffset := map[int64]*signal{}
	var offs []int64
	for _, r := range items {
		if r.offset < 0 {
			continue
		}
		s := byOffset[r.offset]
		if s == nil {
			s = &signal{offset: r.offset}
			byOffset[r.offset] = s
			offs = append(offs, r.offset)
		}
		if strength[r.Status] > strength[s.status] {
			s.status = r.Status
		}
		if r.Status == Failed {
			s.failed = true
		}
	}
	for _, want := range []string{DLQ, Failed} {
		for _, r := range items {
			if s := byOffset[r.offset]; r.offset >= 0 && s.errText == "" && r.Status == want && r.Error != "" {
				s.errText = r.Error
			}
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })

	highestResolved, lowestStop := int64(-1), int64(-1)
	hasResolved, hasStop := false, false
	for _, off := range offs {
		s := byOffset[off]
		headAttempts := 0
		if off == c.committed+1 {
			headAttempts = c.attempts
		}
		beyondLiveLease := live && off > c.lease.batchEnd
		switch {
		case s.status == Completed:
			s.kind = resolution
		case s.status == DLQ:
			s.kind, s.attempts = deadLetter, headAttempts
			if s.failed {
				s.attempts++
			}
		case beyondLiveLease:
			// A retry or failed from a consumer whose lease is gone must not
			// end another consumer's lease, nor be turned into a commit.
			s.kind = declined
		case s.status == Failed && headAttempts+1 > q.opts.RetryLimit:
			s.kind, s.attempts = deadLetter, headAttempts+1
		default:
			s.kind = stopSignal
			if s.status == Failed {
				s.attempts = headAttempts + 1
			}
		}
		switch s.kind {
		case resolution, deadLetter:
			highestResolved, hasResolved = off, true
		case stopSignal, declined:
			if !hasStop {
				lowestStop, hasStop = off, true
			}
		}
	}

	newCommitted := c.committed
	if hasResolved {
		newCommitted = highestResolved
	}
	if hasStop && lowestStop-1 < newCommitted {
		newCommitted = lowestStop - 1
	}
	newCommitted = max(newCommitted, c.committed)

	// The result reports the cursor as listings show it: never before the
	// oldest stored message (what retention removed cannot be read).
	out := unitOutcome{oldCommitted: c.committed, committed: max(newCommitted, p.firstStored()-1),
		deadLettered: map[int64]bool{}, appliedStop: -1}
	for _, off := range offs {
		if s := byOffset[off]; s.kind == deadLetter && off <= newCommitted {
			out.deadLettered[off] = true
			m.deadLetter(q, p, group, off, s.errText, s.attempts, now)
		}
	}
	var stop *signal
	if hasStop && byOffset[lowestStop].kind == stopSignal {
		stop = byOffset[lowestStop]
		out.appliedStop = lowestStop
	}

	switch {
	case stop != nil && stop.offset == newCommitted+1 && stop.status == Failed:
		c.attempts = stop.attempts
	case newCommitted > c.committed:
		c.attempts = 0
	}
	if newCommitted > c.committed {
		c.headOnly = false
	}
	switch {
	case stop != nil: // retryDelay: the redelivery waits
		c.retryAt = now.Add(time.Duration(q.opts.RetryDelay) * time.Millisecond)
	case newCommitted > c.committed:
		c.retryAt = time.Time{}
	}
	c.committed = newCommitted
	c.delivered = max(c.delivered, newCommitted)
	if c.lease != nil && (stop != nil || newCommitted >= c.lease.batchEnd) {
		c.lease = nil
		out.released = true
	}
	return out
}

// ErrLease: a transaction's required lease is not live.
var ErrLease = errors.New("invalid or expired lease")

// ErrNoLiveDelivery is the refusal of a transaction's retry or failed ack
// without a leaseId when no live lease holds its message.
const ErrNoLiveDelivery = "no live lease holds the message: a transaction reports a retry or failure once, " +
	"while the delivery it reports on is leased"

// Transaction applies acks and pushes atomically (§3.7.1): every
// required lease must be live, the acks are strict (see ack), then the
// pushes are appended. On any error nothing changes.
func (m *Model) Transaction(acks []AckItem, pushes []PushItem, requiredLeases []string, now time.Time) ([]AckResult, []PushResult, error) {
	for _, id := range requiredLeases {
		if !m.leaseLive(id, now) {
			return nil, nil, fmt.Errorf("%w %s", ErrLease, id)
		}
	}
	next := m.Clone()
	var ackRes []AckResult
	if len(acks) > 0 {
		r, err := next.ack(acks, now, true)
		if err != nil {
			return r, nil, err
		}
		ackRes = r
	}
	var pushRes []PushResult
	if len(pushes) > 0 {
		r, err := next.push(pushes, now)
		if err != nil {
			return nil, nil, err
		}
		pushRes = r
	}
	*m = *next
	return ackRes, pushRes, nil
}

func (m *Model) leaseLive(id string, now time.Time) bool {
	for _, q := range m.queues {
		for _, p := range q.parts {
			for _, c := range p.cursors {
				if c.lease != nil && c.lease.id == id && c.lease.expires.After(now) {
					return true
				}
			}
		}
	}
	return false
}
