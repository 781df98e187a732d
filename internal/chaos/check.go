package chaos

import (
	"bytes"
	"encoding/json"
	"sort"
	"time"

	"github.com/queen-serverless/queen/internal/loadcheck"
	"github.com/queen-serverless/queen/internal/refmodel"
)

// clockSlack absorbs the difference between when the database stamped a
// time and when the client saw the request leave or the answer arrive
// (same host, same clock).
const clockSlack = 50 * time.Millisecond

// check holds the history against the final state, docs/semantics.md (§3,
// §5) and
// the reference model (internal/refmodel), and records every violation.
// groups are the engine's group names.
func (h *history) check(st *finalState, cfg Config, groups []string) {
	h.checkLog(st)
	for _, g := range groups {
		lag, ok := st.lag[g]
		switch {
		case !ok:
			h.v.Add(loadcheck.KindOther, "group %s does not read the queue", g)
		case lag != 0:
			h.v.Add(loadcheck.KindOther, "not drained: group %s still has lag %d", g, lag)
		}
		for pid := range st.parts {
			h.checkPartition(st, cfg, g, pid)
		}
	}
	if st.dlqDup > 0 {
		h.v.Add(loadcheck.KindOther, "%d dead letters are in the DLQ twice for the same group", st.dlqDup)
	}
}

// checkLog: the log of every partition holds offsets 0..last without a gap;
// every push answered 201 is at the offset it was given, with its payload;
// nothing else is in the log but pushes whose answer never came, once each.
func (h *history) checkLog(st *finalState) {
	for _, p := range sortedParts(st) {
		for off := int64(0); off <= p.last; off++ {
			m, ok := p.log[off]
			if !ok {
				h.v.Add(loadcheck.KindGap, "partition %s: offset %d missing (last offset %d)", p.name, off, p.last)
				continue
			}
			it := h.items[m.TransactionID]
			switch {
			case it == nil:
				h.v.Add(loadcheck.KindOther, "partition %s offset %d holds %s, which nobody pushed", p.name, off, m.TransactionID)
			case it.known && (it.pid != p.id || it.off != off):
				h.v.Add(loadcheck.KindOther, "partition %s offset %d holds %s, which was answered at %s offset %d: written twice",
					p.name, off, m.TransactionID, it.partition, it.off)
			case it.partition != p.name || !sameJSON(m.Data, it.payload):
				h.v.Add(loadcheck.KindOther, "partition %s offset %d holds %s %s, pushed to %s as %s", p.name, off,
					m.TransactionID, m.Data, it.partition, it.payload)
			}
		}
		for off := range p.log {
			if off > p.last {
				h.v.Add(loadcheck.KindOther, "partition %s: offset %d beyond its last offset %d", p.name, off, p.last)
			}
		}
	}
	for _, it := range sortedItems(h.items) {
		if !it.known {
			continue
		}
		p := st.parts[it.pid]
		if p == nil {
			h.v.Add(loadcheck.KindLost, "%s/%s was answered 201 at offset %d, but the partition is gone", it.partition, it.tx, it.off)
			continue
		}
		if m, ok := p.log[it.off]; !ok || m.TransactionID != it.tx {
			h.v.Add(loadcheck.KindLost, "%s/%s was answered 201 at offset %d, which the log does not hold", it.partition, it.tx, it.off)
		}
	}
}

// checkPartition replays one group's history on one partition, in the
// order consumers recorded their pops (the partition's lease serializes
// them):
//
//   - every message of the log reached the group (a pop delivered it) or
//     sits in the group's DLQ (lost otherwise);
//   - first deliveries come in offset order;
//   - an ack answered with success is never undone: no pop sent after the
//     answer delivers an offset at or below the cursor it reported, no ack
//     sent after it reports a lower cursor, every dead letter it reported
//     is in the DLQ and nothing it committed is;
//   - each ack's per-item results are what the reference model computes
//     for that batch (docs/semantics.md §3.5), and a refusal (409) comes only when the
//     lease may have expired;
//   - a delivered message is the logged one, and never beyond retryLimit.
func (h *history) checkPartition(st *finalState, cfg Config, group, pid string) {
	p := st.parts[pid]
	var parts []*popPart // this group's pops of this partition, in record order
	for _, pp := range h.pops {
		if pp.group != group {
			continue
		}
		for _, pt := range pp.parts {
			if pt.pid == pid {
				parts = append(parts, pt)
			}
		}
	}

	// The cursors that successful acks reported, by when their answer came:
	// floor(t) is the highest committed offset answered before t.
	type report struct {
		at        time.Time
		committed int64
	}
	var reports []report
	for _, pt := range parts {
		if a := pt.pop.ack; a != nil && a.outcome == ackApplied {
			if got := partResults(pt.pop, pt, a); len(got) > 0 && got[0].Committed != nil {
				reports = append(reports, report{a.back, *got[0].Committed})
			}
		}
	}
	sort.Slice(reports, func(i, j int) bool { return reports[i].at.Before(reports[j].at) })
	for i := 1; i < len(reports); i++ {
		reports[i].committed = max(reports[i].committed, reports[i-1].committed)
	}
	floor := func(t time.Time) int64 {
		i := sort.Search(len(reports), func(i int) bool { return !reports[i].at.Before(t) })
		if i == 0 {
			return -1
		}
		return reports[i-1].committed
	}

	seen := map[int64]bool{}
	maxSeen := int64(-1)
	lease := time.Duration(cfg.LeaseTime) * time.Second
	for _, pt := range parts {
		pp := pt.pop
		low := floor(pp.sent)
		for _, d := range pt.msgs {
			if d.off <= low {
				h.v.Add(loadcheck.KindLost, "group %s %s: offset %d delivered again (pop #%d) after an ack answered success with committed %d",
					group, p.name, d.off, pp.seq, low)
			}
			if m, ok := p.log[d.off]; ok && (m.TransactionID != d.tx || !sameJSON(m.Data, d.data)) {
				h.v.Add(loadcheck.KindOther, "group %s %s: offset %d delivered as %s %s, the log holds %s %s",
					group, p.name, d.off, d.tx, d.data, m.TransactionID, m.Data)
			}
			if d.retryCount > cfg.RetryLimit {
				h.v.Add(loadcheck.KindOther, "group %s %s: offset %d delivered with retryCount %d > retryLimit %d",
					group, p.name, d.off, d.retryCount, cfg.RetryLimit)
			}
			if !seen[d.off] {
				if d.off < maxSeen {
					h.v.Add(loadcheck.KindOrder, "group %s %s: offset %d first delivered (pop #%d) after offset %d",
						group, p.name, d.off, pp.seq, maxSeen)
				}
				seen[d.off] = true
				maxSeen = max(maxSeen, d.off)
			}
		}
		a := pp.ack
		if a == nil {
			continue
		}
		var got []loadcheck.AckResult
		if a.outcome == ackApplied {
			got = partResults(pp, pt, a)
		}
		switch {
		case a.first && a.outcome == ackRejected && a.back.Before(pp.sent.Add(lease-clockSlack)):
			h.v.Add(loadcheck.KindOther, "group %s %s: ack of pop #%d refused (409) %v after the pop was sent, within its %v lease",
				group, p.name, pp.seq, a.back.Sub(pp.sent).Round(time.Millisecond), lease)
		case a.first && a.outcome == ackApplied && !oldAck(pt, got) && a.sent.After(pp.back.Add(lease+clockSlack)):
			h.v.Add(loadcheck.KindOther, "group %s %s: ack of pop #%d applied although sent %v after the pop returned, past its %v lease",
				group, p.name, pp.seq, a.sent.Sub(pp.back).Round(time.Millisecond), lease)
		}
		if a.outcome != ackApplied {
			continue
		}
		if len(got) > 0 && got[0].Committed != nil && *got[0].Committed < floor(a.sent) {
			h.v.Add(loadcheck.KindLost, "group %s %s: the ack of pop #%d answered committed %d, after an earlier ack answered %d",
				group, p.name, pp.seq, *got[0].Committed, floor(a.sent))
		}
		for i, r := range got {
			_, inDLQ := st.dlq[gaddr{group, addr{pid, pt.msgs[i].off}}]
			switch {
			case r.Result == refmodel.ResultDeadLettered && !inDLQ:
				h.v.Add(loadcheck.KindLost, "group %s %s: the ack of offset %d answered dead-lettered, but the DLQ does not hold it",
					group, p.name, pt.msgs[i].off)
			case r.Result == refmodel.ResultCommitted && inDLQ:
				h.v.Add(loadcheck.KindOther, "group %s %s: the ack of offset %d answered committed, but the DLQ holds it too",
					group, p.name, pt.msgs[i].off)
			}
		}
		if msg := modelCheck(cfg, pt, a, got); msg != "" {
			h.v.Add(loadcheck.KindOther, "group %s %s pop #%d: %s", group, p.name, pp.seq, msg)
		}
	}
	for off := int64(0); off <= p.last; off++ {
		if _, ok := p.log[off]; !ok {
			continue // a gap, counted once by checkLog
		}
		if !seen[off] {
			if _, ok := st.dlq[gaddr{group, addr{pid, off}}]; !ok {
				h.v.Add(loadcheck.KindLost, "group %s %s: offset %d never delivered and not in the DLQ", group, p.name, off)
			}
		}
	}
}

// partResults are the results of one partition's items in an ack call.
func partResults(pp *pop, pt *popPart, a *ackCall) []loadcheck.AckResult {
	i := 0
	for _, q := range pp.parts {
		if q == pt {
			return a.results[i : i+len(q.msgs)]
		}
		i += len(q.msgs)
	}
	return nil
}

// modelCheck compares an applied ack's results for one partition with the
// reference model's (loadcheck.ModelAck), from the state the pop proves: the
// cursor just before the first delivered offset, the head's attempts as its
// retryCount, the lease live. One other answer is right: the old-ack no-op
// (every item "already committed", the cursor at or past the batch), when
// the cursor may have moved on without this call — after an earlier attempt
// of it went unanswered (it may have been applied, releasing the lease), or
// once the lease may have expired and another consumer took over. It returns
// "" when the results are right.
func modelCheck(cfg Config, pt *popPart, a *ackCall, got []loadcheck.AckResult) string {
	pa := partitionAck(cfg, pt)
	want, shift, err := loadcheck.ModelAck(pa)
	if err != nil {
		return err.Error()
	}
	diff := loadcheck.CompareAcks(pa, got, want, shift)
	if diff == "" {
		return ""
	}
	leaseMayBeOver := a.back.After(pt.pop.sent.Add(time.Duration(cfg.LeaseTime)*time.Second - clockSlack))
	if oldAck(pt, got) && (!a.first || leaseMayBeOver) {
		return ""
	}
	return diff
}

// oldAck reports whether results are the no-op answer to an ack of
// messages at or below the cursor (docs/semantics.md §3.5.7, old acks):
// every item "already committed", nothing dead-lettered or released, and
// one cursor at or past the batch's last offset.
func oldAck(pt *popPart, got []loadcheck.AckResult) bool {
	if len(got) == 0 || got[0].Committed == nil || *got[0].Committed < pt.msgs[len(pt.msgs)-1].off {
		return false
	}
	for _, r := range got {
		if !r.Success || r.Result != refmodel.ResultAlreadyCommitted || r.Offset != nil || r.DLQ || r.LeaseReleased ||
			r.Committed == nil || *r.Committed != *got[0].Committed {
			return false
		}
	}
	return true
}

// partitionAck is the partition's part of a pop and its ack, for the
// model.
func partitionAck(cfg Config, pt *popPart) loadcheck.PartitionAck {
	pa := loadcheck.PartitionAck{Queue: queueName, Partition: pt.name, Group: pt.pop.group, LeaseID: pt.pop.leaseID,
		LeaseTime: cfg.LeaseTime, RetryLimit: cfg.RetryLimit, Deliveries: make([]loadcheck.Delivery, len(pt.msgs))}
	for i, d := range pt.msgs {
		pa.Deliveries[i] = loadcheck.Delivery{Offset: d.off, TransactionID: d.tx, RetryCount: d.retryCount,
			Status: d.status, Error: d.errText}
	}
	return pa
}

// sameJSON compares two JSON texts ignoring insignificant whitespace.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

func sortedParts(st *finalState) []*finalPartition {
	out := make([]*finalPartition, 0, len(st.parts))
	for _, p := range st.parts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func sortedItems(m map[string]*pushItem) []*pushItem {
	out := make([]*pushItem, 0, len(m))
	for _, it := range m {
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].tx < out[j].tx })
	return out
}
