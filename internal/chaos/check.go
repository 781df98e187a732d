package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/queen-serverless/queen/internal/refmodel"
)

// clockSlack absorbs the difference between when the database stamped a
// time and when the client saw the request leave or the answer arrive
// (same host, same clock).
const clockSlack = 50 * time.Millisecond

// check holds the history against the final state, the SPEC (§3, §8) and
// the reference model (internal/refmodel), and records every violation.
// groups are the engine's group names.
func (h *history) check(st *finalState, cfg Config, groups []string) {
	h.checkLog(st)
	for _, g := range groups {
		lag, ok := st.lag[g]
		switch {
		case !ok:
			h.v.add(kindOther, "group %s does not read the queue", g)
		case lag != 0:
			h.v.add(kindOther, "not drained: group %s still has lag %d", g, lag)
		}
		for pid := range st.parts {
			h.checkPartition(st, cfg, g, pid)
		}
	}
	if st.dlqDup > 0 {
		h.v.add(kindOther, "%d dead letters are in the DLQ twice for the same group", st.dlqDup)
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
				h.v.add(kindGap, "partition %s: offset %d missing (last offset %d)", p.name, off, p.last)
				continue
			}
			it := h.items[m.TransactionID]
			switch {
			case it == nil:
				h.v.add(kindOther, "partition %s offset %d holds %s, which nobody pushed", p.name, off, m.TransactionID)
			case it.known && (it.pid != p.id || it.off != off):
				h.v.add(kindOther, "partition %s offset %d holds %s, which was answered at %s offset %d: written twice",
					p.name, off, m.TransactionID, it.partition, it.off)
			case it.partition != p.name || !sameJSON(m.Data, it.payload):
				h.v.add(kindOther, "partition %s offset %d holds %s %s, pushed to %s as %s", p.name, off,
					m.TransactionID, m.Data, it.partition, it.payload)
			}
		}
		for off := range p.log {
			if off > p.last {
				h.v.add(kindOther, "partition %s: offset %d beyond its last offset %d", p.name, off, p.last)
			}
		}
	}
	for _, it := range sortedItems(h.items) {
		if !it.known {
			continue
		}
		p := st.parts[it.pid]
		if p == nil {
			h.v.add(kindLost, "%s/%s was answered 201 at offset %d, but the partition is gone", it.partition, it.tx, it.off)
			continue
		}
		if m, ok := p.log[it.off]; !ok || m.TransactionID != it.tx {
			h.v.add(kindLost, "%s/%s was answered 201 at offset %d, which the log does not hold", it.partition, it.tx, it.off)
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
//     for that batch (SPEC §3.5), and a refusal (409) comes only when the
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
				h.v.add(kindLost, "group %s %s: offset %d delivered again (pop #%d) after an ack answered success with committed %d",
					group, p.name, d.off, pp.seq, low)
			}
			if m, ok := p.log[d.off]; ok && (m.TransactionID != d.tx || !sameJSON(m.Data, d.data)) {
				h.v.add(kindOther, "group %s %s: offset %d delivered as %s %s, the log holds %s %s",
					group, p.name, d.off, d.tx, d.data, m.TransactionID, m.Data)
			}
			if d.retryCount > cfg.RetryLimit {
				h.v.add(kindOther, "group %s %s: offset %d delivered with retryCount %d > retryLimit %d",
					group, p.name, d.off, d.retryCount, cfg.RetryLimit)
			}
			if !seen[d.off] {
				if d.off < maxSeen {
					h.v.add(kindOrder, "group %s %s: offset %d first delivered (pop #%d) after offset %d",
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
		var got []wireAckResult
		if a.outcome == ackApplied {
			got = partResults(pp, pt, a)
		}
		switch {
		case a.first && a.outcome == ackRejected && a.back.Before(pp.sent.Add(lease-clockSlack)):
			h.v.add(kindOther, "group %s %s: ack of pop #%d refused (409) %v after the pop was sent, within its %v lease",
				group, p.name, pp.seq, a.back.Sub(pp.sent).Round(time.Millisecond), lease)
		case a.first && a.outcome == ackApplied && !oldAck(pt, got) && a.sent.After(pp.back.Add(lease+clockSlack)):
			h.v.add(kindOther, "group %s %s: ack of pop #%d applied although sent %v after the pop returned, past its %v lease",
				group, p.name, pp.seq, a.sent.Sub(pp.back).Round(time.Millisecond), lease)
		}
		if a.outcome != ackApplied {
			continue
		}
		if len(got) > 0 && got[0].Committed != nil && *got[0].Committed < floor(a.sent) {
			h.v.add(kindLost, "group %s %s: the ack of pop #%d answered committed %d, after an earlier ack answered %d",
				group, p.name, pp.seq, *got[0].Committed, floor(a.sent))
		}
		for i, r := range got {
			_, inDLQ := st.dlq[gaddr{group, addr{pid, pt.msgs[i].off}}]
			switch {
			case r.Result == refmodel.ResultDeadLettered && !inDLQ:
				h.v.add(kindLost, "group %s %s: the ack of offset %d answered dead-lettered, but the DLQ does not hold it",
					group, p.name, pt.msgs[i].off)
			case r.Result == refmodel.ResultCommitted && inDLQ:
				h.v.add(kindOther, "group %s %s: the ack of offset %d answered committed, but the DLQ holds it too",
					group, p.name, pt.msgs[i].off)
			}
		}
		if msg := modelCheck(cfg, pt, a, got); msg != "" {
			h.v.add(kindOther, "group %s %s pop #%d: %s", group, p.name, pp.seq, msg)
		}
	}
	for off := int64(0); off <= p.last; off++ {
		if _, ok := p.log[off]; !ok {
			continue // a gap, counted once by checkLog
		}
		if !seen[off] {
			if _, ok := st.dlq[gaddr{group, addr{pid, off}}]; !ok {
				h.v.add(kindLost, "group %s %s: offset %d never delivered and not in the DLQ", group, p.name, off)
			}
		}
	}
}

// partResults are the results of one partition's items in an ack call.
func partResults(pp *pop, pt *popPart, a *ackCall) []wireAckResult {
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
// reference model's, from the state the pop proves: the cursor just before
// the first delivered offset, the head's attempts as its retryCount, the
// lease live. One other answer is right: the old-ack no-op (every item
// "already committed", the cursor at or past the batch), when the cursor
// may have moved on without this call — after an earlier attempt of it
// went unanswered (it may have been applied, releasing the lease), or once
// the lease may have expired and another consumer took over. It returns ""
// when the results are right.
func modelCheck(cfg Config, pt *popPart, a *ackCall, got []wireAckResult) string {
	want, shift, err := modelAck(cfg, pt)
	if err != nil {
		return err.Error()
	}
	diff := compareResults(got, want, shift)
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
// messages at or below the cursor (SPEC: old acks): every item "already
// committed", nothing dead-lettered or released, and one cursor at or past
// the batch's last offset.
func oldAck(pt *popPart, got []wireAckResult) bool {
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

// modelAck runs the partition's part of a pop and its ack through the
// model. Offsets are shifted: model offset 0 stands for the cursor.
func modelAck(cfg Config, pt *popPart) ([]refmodel.AckResult, int64, error) {
	first := pt.msgs[0]
	cursor, rc := first.off-1, first.retryCount
	if rc > cfg.RetryLimit {
		return nil, 0, fmt.Errorf("head delivered with retryCount %d > retryLimit %d", rc, cfg.RetryLimit)
	}
	m := refmodel.New()
	zero := 0
	m.Configure(queueName, refmodel.OptionsPatch{LeaseTime: &cfg.LeaseTime, RetryLimit: &cfg.RetryLimit, DedupWindow: &zero})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := func() time.Time { now = now.Add(time.Millisecond); return now }
	group := pt.pop.group
	var items []refmodel.PushItem
	shift := int64(0)
	const before = "chaos-committed-before"
	if cursor >= 0 {
		shift = cursor
		items = append(items, refmodel.PushItem{Queue: queueName, Partition: pt.name, TxID: before})
	}
	for _, d := range pt.msgs {
		items = append(items, refmodel.PushItem{Queue: queueName, Partition: pt.name, TxID: d.tx, Payload: string(d.data)})
	}
	if _, err := m.Push(items, tick()); err != nil {
		return nil, 0, fmt.Errorf("model push: %w", err)
	}
	step := func(status, tx, lease string) error {
		if _, err := m.Pop(refmodel.PopRequest{Queue: queueName, Partition: pt.name, Group: group, Batch: 1, LeaseID: lease}, tick()); err != nil {
			return err
		}
		_, err := m.Ack([]refmodel.AckItem{{Queue: queueName, Partition: pt.name, TxID: tx, Status: status, Group: group,
			LeaseID: lease}}, tick())
		return err
	}
	if cursor >= 0 {
		if err := step(refmodel.Completed, before, "setup-commit"); err != nil {
			return nil, 0, fmt.Errorf("model setup: %w", err)
		}
	}
	for i := 0; i < rc; i++ {
		if err := step(refmodel.Failed, first.tx, fmt.Sprintf("setup-fail-%d", i)); err != nil {
			return nil, 0, fmt.Errorf("model setup: %w", err)
		}
	}
	res, err := m.Pop(refmodel.PopRequest{Queue: queueName, Partition: pt.name, Group: group, Batch: len(pt.msgs),
		LeaseID: pt.pop.leaseID}, tick())
	if err != nil {
		return nil, 0, fmt.Errorf("model pop: %w", err)
	}
	if len(res.Messages) != len(pt.msgs) || res.Messages[0].RetryCount != rc {
		return nil, 0, fmt.Errorf("the model delivers %d messages (head retryCount %d) where the pop delivered %d (%d)",
			len(res.Messages), res.Messages[0].RetryCount, len(pt.msgs), rc)
	}
	acks := make([]refmodel.AckItem, len(pt.msgs))
	for i, d := range pt.msgs {
		acks[i] = refmodel.AckItem{Queue: queueName, Partition: pt.name, TxID: d.tx, Status: d.status, Group: group,
			LeaseID: pt.pop.leaseID, Error: d.errText}
	}
	out, err := m.Ack(acks, tick())
	if err != nil {
		return nil, 0, fmt.Errorf("the model refuses the ack: %w", err)
	}
	return out, shift, nil
}

// compareResults describes the first difference between the engine's and
// the model's results, "" when they agree.
func compareResults(got []wireAckResult, want []refmodel.AckResult, shift int64) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d results, the model has %d", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		committed, offset := "nil", "nil"
		if r.Committed != nil {
			committed = fmt.Sprint(*r.Committed)
		}
		if r.Offset != nil {
			offset = fmt.Sprint(*r.Offset)
		}
		wantOffset := "nil"
		if w.Offset != nil {
			wantOffset = fmt.Sprint(*w.Offset + shift)
		}
		if !r.Success || r.Result != w.Result || r.DLQ != w.DLQ || r.LeaseReleased != w.LeaseReleased ||
			committed != fmt.Sprint(w.Committed+shift) || offset != wantOffset {
			return fmt.Sprintf("ack result %d is {success %v, result %q, offset %s, dlq %v, committed %s, leaseReleased %v}; "+
				"the model says {result %q, offset %s, dlq %v, committed %d, leaseReleased %v}",
				i, r.Success, r.Result, offset, r.DLQ, committed, r.LeaseReleased,
				w.Result, wantOffset, w.DLQ, w.Committed+shift, w.LeaseReleased)
		}
	}
	return ""
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
