package soak

import (
	"fmt"
	"time"

	"github.com/queen-serverless/queen/internal/refmodel"
)

// modelCheck compares an applied ack's results for one partition with the
// reference model's (internal/refmodel, SPEC §3.5), from the state the pop
// proves: the cursor just before the first delivered offset, the head's
// attempts as its retryCount, the lease live. It returns "" when they
// agree. (The chaos harness holds its acks to the model the same way.)
func modelCheck(cfg Config, pr *popRecord, pt *popPart, got []wireAckResult) string {
	want, shift, err := modelAck(cfg, pr, pt)
	if err != nil {
		return err.Error()
	}
	for i, r := range got {
		w := want[i]
		committed, offset, wantOffset := "nil", "nil", "nil"
		if r.Committed != nil {
			committed = fmt.Sprint(*r.Committed)
		}
		if r.Offset != nil {
			offset = fmt.Sprint(*r.Offset)
		}
		if w.Offset != nil {
			wantOffset = fmt.Sprint(*w.Offset + shift)
		}
		if !r.Success || r.Result != w.Result || r.DLQ != w.DLQ || r.LeaseReleased != w.LeaseReleased ||
			committed != fmt.Sprint(w.Committed+shift) || offset != wantOffset {
			return fmt.Sprintf("ack result %d (offset %d, %s) is {result %q, offset %s, dlq %v, committed %s, leaseReleased %v}; "+
				"the model says {result %q, offset %s, dlq %v, committed %d, leaseReleased %v}",
				i, pt.msgs[i].off, pt.msgs[i].status, r.Result, offset, r.DLQ, committed, r.LeaseReleased,
				w.Result, wantOffset, w.DLQ, w.Committed+shift, w.LeaseReleased)
		}
	}
	return ""
}

// modelAck runs the partition's part of a pop and its ack through the
// model. Offsets are shifted: model offset 0 stands for the cursor.
func modelAck(cfg Config, pr *popRecord, pt *popPart) ([]refmodel.AckResult, int64, error) {
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
	name, group := pt.part.name, pr.group
	var items []refmodel.PushItem
	shift := int64(0)
	const before = "soak-committed-before"
	if cursor >= 0 {
		shift = cursor
		items = append(items, refmodel.PushItem{Queue: queueName, Partition: name, TxID: before})
	}
	for _, d := range pt.msgs {
		items = append(items, refmodel.PushItem{Queue: queueName, Partition: name, TxID: d.tx})
	}
	if _, err := m.Push(items, tick()); err != nil {
		return nil, 0, fmt.Errorf("model push: %w", err)
	}
	step := func(status, tx, lease string) error {
		if _, err := m.Pop(refmodel.PopRequest{Queue: queueName, Partition: name, Group: group, Batch: 1, LeaseID: lease}, tick()); err != nil {
			return err
		}
		_, err := m.Ack([]refmodel.AckItem{{Queue: queueName, Partition: name, TxID: tx, Status: status, Group: group,
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
	res, err := m.Pop(refmodel.PopRequest{Queue: queueName, Partition: name, Group: group, Batch: len(pt.msgs),
		LeaseID: pr.leaseID}, tick())
	if err != nil {
		return nil, 0, fmt.Errorf("model pop: %w", err)
	}
	if len(res.Messages) != len(pt.msgs) || res.Messages[0].RetryCount != rc {
		return nil, 0, fmt.Errorf("the model delivers %d messages where the pop delivered %d (head retryCount %d)",
			len(res.Messages), len(pt.msgs), rc)
	}
	acks := make([]refmodel.AckItem, len(pt.msgs))
	for i, d := range pt.msgs {
		acks[i] = refmodel.AckItem{Queue: queueName, Partition: name, TxID: d.tx, Status: d.status, Group: group,
			LeaseID: pr.leaseID, Error: d.errText}
	}
	out, err := m.Ack(acks, tick())
	if err != nil {
		return nil, 0, fmt.Errorf("the model refuses the ack: %w", err)
	}
	return out, shift, nil
}
