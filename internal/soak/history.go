package soak

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/internal/loadcheck"
)

// clockSlack absorbs the difference between when the database stamped a
// time and when the client saw the request leave or the answer arrive
// (same host, same clock), and the reaper's rounding.
const clockSlack = time.Second

// The history keeps what the checks need of every message in a few bytes
// each (a 30-minute run pushes millions): per partition, per offset, the
// message's key and transactionId hash and when its push was sent; per
// (partition, group), how far first deliveries got and the cursors recent
// acks reported. Deliveries and acks are checked as they come back.

// rec is what a push answered 201 placed at an offset.
type rec struct {
	key  uint64 // the payload's key; 0: no push was answered with this offset (yet)
	tx   uint64 // hash of the transactionId
	sent int64  // when the push was sent (Unix ns): the message's createdAt is not earlier
}

// ackReport is a cursor a successful ack answered, and when.
type ackReport struct {
	at        time.Time
	committed int64
}

// skip is a run of offsets first delivery went past without delivering
// them, and when the pop that did it answered: only retention may explain
// it (checked at the end, when every push has been answered).
type skip struct {
	from, to int64
	at       time.Time
}

// reportsKept bounds the ack reports kept per (partition, group): a pop is
// answered long before this many acks of its partition and group follow.
const reportsKept = 16

// cursorState is one group's progress on one partition.
type cursorState struct {
	maxSeen int64 // highest offset delivered (-1: none)
	reports [reportsKept]ackReport
	nReport int
	skips   []skip
}

// floor is the highest cursor an ack answered before t (-1: none).
func (c *cursorState) floor(t time.Time) int64 {
	f := int64(-1)
	for i := 0; i < min(c.nReport, reportsKept); i++ {
		if r := c.reports[i]; r.at.Before(t) {
			f = max(f, r.committed)
		}
	}
	return f
}

func (c *cursorState) report(at time.Time, committed int64) {
	c.reports[c.nReport%reportsKept] = ackReport{at, committed}
	c.nReport++
}

// early is a delivery seen before the answer of the push that placed it.
type early struct {
	group   string
	off     int64
	key, tx uint64
}

// partState is one partition: its log as the pushes were answered, and
// each group's progress on it.
type partState struct {
	mu     sync.Mutex
	name   string
	id     string
	recs   []rec
	groups []cursorState
	early  []early
}

// history is what the clients were told, kept for the checks.
type history struct {
	cfg    Config
	groups []string
	parts  []*partState
	byName map[string]*partState

	idMu sync.Mutex
	byID map[string]*partState

	deadMu sync.Mutex
	dead   map[deadAddr]bool // dead letters ack results reported

	v loadcheck.Violations
	n counters
}

// kindDedup is the kind of violation, beside loadcheck's, of a repeat
// inside the dedup window accepted, or one past it refused.
const kindDedup = "dedup"

type deadAddr struct {
	group, pid string
	off        int64
}

// counters summarize the workload.
type counters struct {
	pushes, queued, dupAsked, dupGot, lateAsked, lateQueued                atomic.Int64
	pops, emptyPops, deliveries, redeliveries, abandoned                   atomic.Int64
	acks, completed, failed, retried, deadLettered, ackRefused, ackExcused atomic.Int64
	expired, missedTicks                                                   atomic.Int64
}

func newHistory(cfg Config, groups []string) *history {
	h := &history{cfg: cfg, groups: groups, byName: map[string]*partState{}, byID: map[string]*partState{},
		dead: map[deadAddr]bool{}}
	for i := 0; i < cfg.Partitions; i++ {
		p := &partState{name: partitionName(i), groups: make([]cursorState, len(groups))}
		for g := range p.groups {
			p.groups[g].maxSeen = -1
		}
		h.parts = append(h.parts, p)
		h.byName[p.name] = p
	}
	return h
}

func partitionName(i int) string { return fmt.Sprintf("p-%04d", i) }

func (h *history) groupIndex(g string) int {
	for i, n := range h.groups {
		if n == g {
			return i
		}
	}
	return -1
}

func hashTx(tx string) uint64 {
	f := fnv.New64a()
	_, _ = f.Write([]byte(tx))
	return f.Sum64()
}

// payload is the JSON of the message with key in partition part.
func payload(key uint64, part string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"k":%d,"p":%q}`, key, part))
}

// payloadKey reads the key of a payload (0 when it has none).
func payloadKey(data json.RawMessage) uint64 {
	var p struct {
		K uint64 `json:"k"`
	}
	_ = json.Unmarshal(data, &p)
	return p.K
}

// Kinds of push item.
const (
	itemFresh  = iota // a new message
	itemRepeat        // the transactionId of a recent message, same partition, inside the dedup window
	itemLate          // the transactionId of a message past the dedup window, same partition
)

// sentItem is one item of a push as the producer sent it.
type sentItem struct {
	part *partState
	key  uint64
	tx   string // "" for an id the engine generates
	kind int
	orig sample // itemRepeat: the message repeated
}

// pushed checks a push's 201 results and records the messages placed.
func (h *history) pushed(items []*sentItem, res []loadcheck.PushResult, r loadcheck.Reply) {
	h.n.pushes.Add(1)
	if len(res) != len(items) {
		h.v.Add(loadcheck.KindOther, "a push of %d items got %d results", len(items), len(res))
		return
	}
	for i, it := range items {
		got := res[i]
		if got.Index != i || got.Partition != it.part.name || (it.tx != "" && got.TransactionID != it.tx) || got.TransactionID == "" {
			h.v.Add(loadcheck.KindOther, "push result %d %+v does not describe item %s/%q", i, got, it.part.name, it.tx)
			continue
		}
		switch it.kind {
		case itemRepeat:
			h.n.dupAsked.Add(1)
			if got.Status != "duplicate" || got.Offset != it.orig.off || got.PartitionID != it.orig.pid {
				h.v.Add(kindDedup, "%s/%s pushed again %v after it was answered at offset %d: %s at offset %d",
					it.part.name, it.tx, r.Sent.Sub(it.orig.sent).Round(time.Millisecond), it.orig.off, got.Status, got.Offset)
				continue
			}
			h.n.dupGot.Add(1)
			continue
		case itemLate:
			h.n.lateAsked.Add(1)
			if got.Status != "queued" {
				h.v.Add(kindDedup, "%s/%s pushed again %v after its push was answered (window %v): %s, not queued",
					it.part.name, it.tx, r.Sent.Sub(it.orig.back).Round(time.Millisecond), h.cfg.DedupWindow, got.Status)
				continue
			}
			h.n.lateQueued.Add(1)
		default:
			if got.Status != "queued" {
				h.v.Add(loadcheck.KindOther, "a fresh item %s/%s came back %q", it.part.name, got.TransactionID, got.Status)
				continue
			}
		}
		h.n.queued.Add(1)
		h.place(it.part, got.PartitionID, got.Offset, rec{key: it.key, tx: hashTx(got.TransactionID), sent: r.Sent.UnixNano()})
	}
}

// place records the message a 201 placed at off, and checks the
// deliveries of it seen before.
func (h *history) place(p *partState, pid string, off int64, m rec) {
	h.learnID(p, pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	if off < 0 {
		h.v.Add(loadcheck.KindOther, "%s: a push was answered with offset %d", p.name, off)
		return
	}
	for int64(len(p.recs)) <= off {
		p.recs = append(p.recs, rec{})
	}
	if p.recs[off].key != 0 {
		h.v.Add(loadcheck.KindOther, "%s: offset %d given to two pushes (keys %d and %d)", p.name, off, p.recs[off].key, m.key)
		return
	}
	p.recs[off] = m
	keep := p.early[:0]
	for _, e := range p.early {
		if e.off != off {
			keep = append(keep, e)
			continue
		}
		if e.key != m.key || e.tx != m.tx {
			h.v.Add(loadcheck.KindOther, "group %s %s: offset %d was delivered as key %d, its push was answered with key %d",
				e.group, p.name, off, e.key, m.key)
		}
	}
	p.early = keep
}

func (h *history) learnID(p *partState, pid string) {
	h.idMu.Lock()
	defer h.idMu.Unlock()
	if q, ok := h.byID[pid]; ok && q != p {
		h.v.Add(loadcheck.KindOther, "partition id %s names %s and %s", pid, q.name, p.name)
		return
	}
	h.byID[pid] = p
	if p.id == "" {
		p.id = pid
	} else if p.id != pid {
		h.v.Add(loadcheck.KindOther, "%s has two ids: %s and %s", p.name, p.id, pid)
	}
}

// delivery is one delivered message and the outcome its consumer chose.
type delivery struct {
	off        int64
	tx         string
	key        uint64
	retryCount int
	status     string
	errText    string
}

// popPart is the messages of one partition in a pop.
type popPart struct {
	part *partState
	pid  string
	msgs []*delivery
}

// popRecord is a pop that delivered messages.
type popRecord struct {
	group   string
	leaseID string
	r       loadcheck.Reply
	parts   []*popPart
}

// popped checks a pop's deliveries as they come: content, no redelivery
// at or below a cursor an ack answered before the pop was sent, first
// deliveries in offset order (a run of offsets passed over is kept for the
// end), retryCount within retryLimit.
func (h *history) popped(group string, res loadcheck.Pop, r loadcheck.Reply) *popRecord {
	h.n.pops.Add(1)
	gi := h.groupIndex(group)
	pr := &popRecord{group: group, r: r}
	if res.LeaseID == nil || *res.LeaseID == "" {
		h.v.Add(loadcheck.KindOther, "group %s: a pop delivered %d messages without a lease", group, len(res.Messages))
	} else {
		pr.leaseID = *res.LeaseID
	}
	var cur *popPart
	for _, m := range res.Messages {
		p := h.byName[m.Partition]
		if p == nil {
			h.v.Add(loadcheck.KindOther, "group %s: a pop delivered partition %q, which nobody pushed to", group, m.Partition)
			continue
		}
		if cur == nil || cur.part != p {
			for _, q := range pr.parts {
				if q.part == p {
					h.v.Add(loadcheck.KindOrder, "group %s: a pop delivered partition %s in two runs", group, p.name)
				}
			}
			cur = &popPart{part: p, pid: m.PartitionID}
			pr.parts = append(pr.parts, cur)
		} else if last := cur.msgs[len(cur.msgs)-1].off; m.Offset != last+1 {
			h.v.Add(loadcheck.KindOrder, "group %s: a pop delivered offsets %d then %d of %s", group, last, m.Offset, p.name)
		}
		cur.msgs = append(cur.msgs, &delivery{off: m.Offset, tx: m.TransactionID, key: payloadKey(m.Data), retryCount: m.RetryCount})
		h.learnID(p, m.PartitionID)
	}
	h.n.deliveries.Add(int64(len(res.Messages)))
	for _, pt := range pr.parts {
		h.checkDelivered(group, gi, pt, r)
	}
	return pr
}

func (h *history) checkDelivered(group string, gi int, pt *popPart, r loadcheck.Reply) {
	p := pt.part
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := &p.groups[gi]
	floor := cs.floor(r.Sent)
	for _, d := range pt.msgs {
		txh := hashTx(d.tx)
		switch {
		case d.off < int64(len(p.recs)) && p.recs[d.off].key != 0:
			if m := p.recs[d.off]; m.key != d.key || m.tx != txh {
				h.v.Add(loadcheck.KindOther, "group %s %s: offset %d delivered as key %d (%s), its push was answered with key %d",
					group, p.name, d.off, d.key, d.tx, m.key)
			}
		default:
			p.early = append(p.early, early{group: group, off: d.off, key: d.key, tx: txh})
		}
		if d.off <= floor {
			h.v.Add(loadcheck.KindLost, "group %s %s: offset %d delivered again after an ack answered committed %d",
				group, p.name, d.off, floor)
		}
		if d.retryCount > h.cfg.RetryLimit {
			h.v.Add(loadcheck.KindOther, "group %s %s: offset %d delivered with retryCount %d > retryLimit %d",
				group, p.name, d.off, d.retryCount, h.cfg.RetryLimit)
		}
		if d.off <= cs.maxSeen {
			h.n.redeliveries.Add(1)
			continue
		}
		if d.off > cs.maxSeen+1 {
			cs.skips = append(cs.skips, skip{from: cs.maxSeen + 1, to: d.off - 1, at: r.Back})
		}
		cs.maxSeen = d.off
	}
}

// mayBeExpired reports whether retention may have removed the message at
// off by t: its push was sent at least the retention before t (slack
// allowed). A message whose rec is unknown is not.
func (h *history) mayBeExpired(p *partState, off int64, t time.Time) bool {
	if off < 0 || off >= int64(len(p.recs)) || p.recs[off].key == 0 {
		return false
	}
	return time.Unix(0, p.recs[off].sent).Add(h.cfg.Retention).Before(t.Add(clockSlack))
}

// ackCall is the batch ack of one pop.
type ackCall struct {
	r       loadcheck.Reply
	results []loadcheck.AckResult
}

// acked checks an ack's answer: success for every item, per-item results
// the reference model's, no cursor below one answered before, and keeps
// the dead letters it reported for the final check. A 409 is right only
// once the lease may have expired, a 404 only once retention may have
// removed a message of the call.
func (h *history) acked(pr *popRecord, a ackCall) {
	h.n.acks.Add(1)
	gi := h.groupIndex(pr.group)
	mayBeExpired := func() bool {
		for _, pt := range pr.parts {
			pt.part.mu.Lock()
			gone := h.mayBeExpired(pt.part, pt.msgs[0].off, a.r.Back)
			pt.part.mu.Unlock()
			if gone {
				return true
			}
		}
		return false
	}
	switch {
	case a.r.Status == 200:
	case a.r.Status == 409 && !a.r.Back.Before(pr.r.Sent.Add(time.Duration(h.cfg.LeaseTime)*time.Second-clockSlack)):
		h.n.ackExcused.Add(1)
		return
	case (a.r.Status == 404 || a.r.Status == 409) && mayBeExpired():
		h.n.ackExcused.Add(1)
		return
	default:
		h.n.ackRefused.Add(1)
		h.v.Add(loadcheck.KindOther, "group %s: an ack of %d partitions sent %v after its pop: %s", pr.group, len(pr.parts),
			a.r.Sent.Sub(pr.r.Back).Round(time.Millisecond), a.r)
		return
	}
	i := 0
	for _, pt := range pr.parts {
		got := a.results[i : i+len(pt.msgs)]
		i += len(pt.msgs)
		h.checkAcked(pr, gi, pt, a, got)
	}
}

func (h *history) checkAcked(pr *popRecord, gi int, pt *popPart, a ackCall, got []loadcheck.AckResult) {
	p := pt.part
	committed := int64(-1)
	for j, res := range got {
		d := pt.msgs[j]
		if !res.Success {
			h.v.Add(loadcheck.KindOther, "group %s %s: the ack of offset %d answered 200 without success: %+v", pr.group, p.name, d.off, res)
		}
		if res.Committed != nil {
			committed = max(committed, *res.Committed)
		}
		switch d.status {
		case "completed":
			h.n.completed.Add(1)
		case "failed":
			h.n.failed.Add(1)
		case "retry":
			h.n.retried.Add(1)
		}
		if res.DLQ {
			h.n.deadLettered.Add(1)
			h.deadMu.Lock()
			h.dead[deadAddr{pr.group, pt.pid, d.off}] = true
			h.deadMu.Unlock()
		}
	}
	p.mu.Lock()
	cs := &p.groups[gi]
	if f := cs.floor(a.r.Sent); committed < f {
		h.v.Add(loadcheck.KindLost, "group %s %s: an ack answered committed %d after an earlier ack answered %d",
			pr.group, p.name, committed, f)
	}
	cs.report(a.r.Back, committed)
	gone := h.mayBeExpired(p, pt.msgs[0].off, a.r.Back)
	p.mu.Unlock()
	if gone {
		return // retention may have removed messages under the lease: the model would not know
	}
	if msg := modelCheck(h.cfg, pr, pt, got); msg != "" {
		h.v.Add(loadcheck.KindOther, "group %s %s: %s", pr.group, p.name, msg)
	}
}

// firstSentAfter is the lowest offset of p from which on every push
// answered was sent at or after t (Unix ns), or is not known.
func (h *history) firstSentAfter(p *partState, t int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := len(p.recs)
	for i > 0 && (p.recs[i-1].key == 0 || p.recs[i-1].sent >= t) {
		i--
	}
	return int64(i)
}

// final holds the history against the final state (docs/semantics.md §3
// and §5, and the
// retention rule of the soak; docs/testing.md):
//
//   - every group reads the queue and is drained (lag 0);
//   - each partition's offsets 0..last were each answered to exactly one
//     push (gaps), and every delivery matched its push;
//   - every message whose push was sent less than the retention before
//     the final read is in the log, with its transactionId and payload;
//   - every message reached every group (first deliveries in offset
//     order) unless retention may have removed it before the group got to
//     it: its push was sent at least the retention before the pop that
//     passed over it, or before the final read (counted as expired);
//   - every dead letter an ack reported is in that group's DLQ.
func (h *history) final(st *finalState) {
	for _, g := range h.groups {
		lag, ok := st.lag[g]
		switch {
		case !ok:
			h.v.Add(loadcheck.KindOther, "group %s does not read the queue", g)
		case lag != 0:
			h.v.Add(loadcheck.KindOther, "not drained: group %s still has lag %d", g, lag)
		}
	}
	for _, p := range h.parts {
		h.finalPartition(st, p)
	}
	for a := range h.dead {
		if !st.dlq[a] {
			h.v.Add(loadcheck.KindLost, "group %s: the ack of offset %d of %s answered dead-lettered, but the DLQ does not hold it",
				a.group, a.off, a.pid)
		}
	}
}

func (h *history) finalPartition(st *finalState, p *partState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := st.last[p.name]
	if !ok {
		if len(p.recs) > 0 {
			h.v.Add(loadcheck.KindLost, "%s: %d offsets were answered, but the queue has no such partition", p.name, len(p.recs))
		}
		return
	}
	for off := int64(0); off <= last; off++ {
		if off >= int64(len(p.recs)) || p.recs[off].key == 0 {
			h.v.Add(loadcheck.KindGap, "%s: offset %d (last %d) was answered to no push", p.name, off, last)
		}
	}
	if n := int64(len(p.recs)); n-1 > last {
		h.v.Add(loadcheck.KindLost, "%s: offset %d was answered, but the last offset is %d", p.name, n-1, last)
	}
	for _, e := range p.early {
		h.v.Add(loadcheck.KindOther, "group %s %s: offset %d was delivered, and no push was answered with it", e.group, p.name, e.off)
	}
	msgs := st.log[p.name]
	for off, m := range msgs {
		if off >= int64(len(p.recs)) || p.recs[off].key == 0 {
			continue // a gap, counted above
		}
		if rc := p.recs[off]; payloadKey(m.Data) != rc.key || hashTx(m.TransactionID) != rc.tx {
			h.v.Add(loadcheck.KindOther, "%s: the log holds %s %s at offset %d, its push was answered with key %d",
				p.name, m.TransactionID, m.Data, off, rc.key)
		}
	}
	for off := st.from[p.name]; off <= last && off < int64(len(p.recs)); off++ {
		if p.recs[off].key == 0 {
			continue
		}
		if _, ok := msgs[off]; !ok && !h.mayBeExpired(p, off, st.at) {
			h.v.Add(loadcheck.KindLost, "%s: offset %d was answered 201 %v before the final read, within the retention of %v, "+
				"and the log does not hold it", p.name, off, st.at.Sub(time.Unix(0, p.recs[off].sent)).Round(time.Second), h.cfg.Retention)
		}
	}
	for gi, g := range h.groups {
		cs := &p.groups[gi]
		for _, s := range cs.skips {
			for off := s.from; off <= s.to; off++ {
				switch {
				case off >= int64(len(p.recs)) || p.recs[off].key == 0:
					// a gap, counted above
				case h.mayBeExpired(p, off, s.at):
					h.n.expired.Add(1)
				default:
					h.v.Add(loadcheck.KindLost, "group %s %s: offset %d never delivered: a pop %v after its push went past it, "+
						"within the retention of %v", g, p.name, off, s.at.Sub(time.Unix(0, p.recs[off].sent)).Round(time.Millisecond),
						h.cfg.Retention)
				}
			}
		}
		for off := cs.maxSeen + 1; off <= last; off++ {
			if off >= int64(len(p.recs)) || p.recs[off].key == 0 {
				continue // a gap, counted above
			}
			if h.mayBeExpired(p, off, st.at) {
				h.n.expired.Add(1)
				continue
			}
			h.v.Add(loadcheck.KindLost, "group %s %s: offset %d never delivered", g, p.name, off)
		}
	}
}
