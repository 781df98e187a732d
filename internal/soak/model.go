package soak

import "github.com/queen-serverless/queen/internal/loadcheck"

// modelCheck compares an applied ack's results for one partition with the
// reference model's (loadcheck.ModelAck, docs/semantics.md §3.5), from the state the
// pop proves: the cursor just before the first delivered offset, the
// head's attempts as its retryCount, the lease live. It returns "" when
// they agree. (The chaos harness holds its acks to the model the same way.)
func modelCheck(cfg Config, pr *popRecord, pt *popPart, got []loadcheck.AckResult) string {
	pa := loadcheck.PartitionAck{Queue: queueName, Partition: pt.part.name, Group: pr.group, LeaseID: pr.leaseID,
		LeaseTime: cfg.LeaseTime, RetryLimit: cfg.RetryLimit, Deliveries: make([]loadcheck.Delivery, len(pt.msgs))}
	for i, d := range pt.msgs {
		pa.Deliveries[i] = loadcheck.Delivery{Offset: d.off, TransactionID: d.tx, RetryCount: d.retryCount,
			Status: d.status, Error: d.errText}
	}
	want, shift, err := loadcheck.ModelAck(pa)
	if err != nil {
		return err.Error()
	}
	return loadcheck.CompareAcks(pa, got, want, shift)
}
