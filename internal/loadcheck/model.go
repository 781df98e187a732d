package loadcheck

import (
	"fmt"
	"time"

	"github.com/queen-serverless/queen/internal/refmodel"
)

// PartitionAck is one partition's part of a pop and the batch ack a
// consumer sent for it, as a harness recorded them.
type PartitionAck struct {
	Queue, Partition, Group, LeaseID string
	// LeaseTime (seconds) and RetryLimit are the queue's options.
	LeaseTime, RetryLimit int
	// Deliveries are the messages the pop delivered, in offset order, each
	// with the outcome the ack sent for it.
	Deliveries []Delivery
}

// Delivery is one message a pop delivered and the ack item sent for it.
type Delivery struct {
	Offset        int64
	TransactionID string
	RetryCount    int
	Status, Error string
}

// committedBefore is the transactionId of the message the model commits
// to stand for the cursor.
const committedBefore = "loadcheck-committed-before"

// ModelAck runs a partition's pop and its ack through the reference model
// (internal/refmodel) from the state the pop proves: the cursor just
// before the first delivered offset, the head's attempts as its
// retryCount, the lease live. It returns the model's results for the ack.
// Offsets are shifted: model offset 0 stands for the cursor, so the
// model's offsets and cursors plus shift are the engine's.
func ModelAck(p PartitionAck) (results []refmodel.AckResult, shift int64, err error) {
	first := p.Deliveries[0]
	cursor, rc := first.Offset-1, first.RetryCount
	if rc > p.RetryLimit {
		return nil, 0, fmt.Errorf("head delivered with retryCount %d > retryLimit %d", rc, p.RetryLimit)
	}
	m := refmodel.New()
	zero := 0
	m.Configure(p.Queue, refmodel.OptionsPatch{LeaseTime: &p.LeaseTime, RetryLimit: &p.RetryLimit, DedupWindow: &zero})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := func() time.Time { now = now.Add(time.Millisecond); return now }
	var items []refmodel.PushItem
	if cursor >= 0 {
		shift = cursor
		items = append(items, refmodel.PushItem{Queue: p.Queue, Partition: p.Partition, TxID: committedBefore})
	}
	for _, d := range p.Deliveries {
		items = append(items, refmodel.PushItem{Queue: p.Queue, Partition: p.Partition, TxID: d.TransactionID})
	}
	if _, err := m.Push(items, tick()); err != nil {
		return nil, 0, fmt.Errorf("model push: %w", err)
	}
	step := func(status, tx, lease string) error {
		if _, err := m.Pop(refmodel.PopRequest{Queue: p.Queue, Partition: p.Partition, Group: p.Group, Batch: 1, LeaseID: lease}, tick()); err != nil {
			return err
		}
		_, err := m.Ack([]refmodel.AckItem{{Queue: p.Queue, Partition: p.Partition, TxID: tx, Status: status, Group: p.Group,
			LeaseID: lease}}, tick())
		return err
	}
	if cursor >= 0 {
		if err := step(refmodel.Completed, committedBefore, "setup-commit"); err != nil {
			return nil, 0, fmt.Errorf("model setup: %w", err)
		}
	}
	for i := 0; i < rc; i++ {
		if err := step(refmodel.Failed, first.TransactionID, fmt.Sprintf("setup-fail-%d", i)); err != nil {
			return nil, 0, fmt.Errorf("model setup: %w", err)
		}
	}
	res, err := m.Pop(refmodel.PopRequest{Queue: p.Queue, Partition: p.Partition, Group: p.Group, Batch: len(p.Deliveries),
		LeaseID: p.LeaseID}, tick())
	if err != nil {
		return nil, 0, fmt.Errorf("model pop: %w", err)
	}
	if len(res.Messages) != len(p.Deliveries) || res.Messages[0].RetryCount != rc {
		return nil, 0, fmt.Errorf("the model delivers %d messages where the pop delivered %d (head retryCount %d)",
			len(res.Messages), len(p.Deliveries), rc)
	}
	acks := make([]refmodel.AckItem, len(p.Deliveries))
	for i, d := range p.Deliveries {
		acks[i] = refmodel.AckItem{Queue: p.Queue, Partition: p.Partition, TxID: d.TransactionID, Status: d.Status, Group: p.Group,
			LeaseID: p.LeaseID, Error: d.Error}
	}
	out, err := m.Ack(acks, tick())
	if err != nil {
		return nil, 0, fmt.Errorf("the model refuses the ack: %w", err)
	}
	return out, shift, nil
}

// CompareAcks describes the first difference between the engine's results
// for p's ack (got) and the model's (want, from ModelAck with its shift),
// "" when they agree.
func CompareAcks(p PartitionAck, got []AckResult, want []refmodel.AckResult, shift int64) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d results, the model has %d", len(got), len(want))
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
			d := p.Deliveries[i]
			return fmt.Sprintf("ack result %d (offset %d, %s) is {success %v, result %q, offset %s, dlq %v, committed %s, leaseReleased %v}; "+
				"the model says {result %q, offset %s, dlq %v, committed %d, leaseReleased %v}",
				i, d.Offset, d.Status, r.Success, r.Result, offset, r.DLQ, committed, r.LeaseReleased,
				w.Result, wantOffset, w.DLQ, w.Committed+shift, w.LeaseReleased)
		}
	}
	return ""
}
