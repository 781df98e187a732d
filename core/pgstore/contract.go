package pgstore

import (
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// The JSON arguments the routines read, spelled by pgstore's own types:
// the domain types (core/queen) never cross into SQL, so renaming one of
// their fields for the wire format cannot silently turn a column into
// NULL. contract_test.go checks, per routine, that the keys each routine
// reads are exactly the keys these types write, and (in pgstore's tests)
// every reply decodes with exactly the keys its Go type reads.
// pushArg (one push item) and popArg are in sealing.go and store.go.

// ackArg is one acknowledgment as queen._ack reads it (also queen.transact).
type ackArg struct {
	PartitionID   string `json:"partitionId"`
	TransactionID string `json:"transactionId"`
	Status        string `json:"status"`
	Group         string `json:"group"`
	LeaseID       string `json:"leaseId,omitempty"`
	Error         string `json:"error,omitempty"`
}

func ackArgs(acks []queen.Ack) []ackArg {
	out := make([]ackArg, len(acks))
	for i, a := range acks {
		out[i] = ackArg{PartitionID: a.PartitionID, TransactionID: a.TransactionID, Status: string(a.Status),
			Group: a.ConsumerGroup, LeaseID: a.LeaseID, Error: a.Error}
	}
	return out
}

// optionsArgOf is the partial option set queen.configure reads, keyed as
// it reads them: an option absent from it keeps its current value. The
// options are the log's own and Queen's ttl, maxWaitTimeSeconds and
// retentionEnabled, as given (see queen's Normalize).
func optionsArgOf(o queen.QueueOptions) map[string]any {
	arg := map[string]any{}
	put := func(key string, set bool, v any) {
		if set {
			arg[key] = v
		}
	}
	put("leaseTime", o.LeaseTime != nil, o.LeaseTime)
	put("retryLimit", o.RetryLimit != nil, o.RetryLimit)
	put("retryDelay", o.RetryDelay != nil, o.RetryDelay)
	put("dedupWindowSeconds", o.DedupWindowSeconds != nil, o.DedupWindowSeconds)
	put("delayedProcessing", o.DelayedProcessing != nil, o.DelayedProcessing)
	put("windowBuffer", o.WindowBuffer != nil, o.WindowBuffer)
	put("maxSize", o.MaxSize != nil, o.MaxSize)
	put("retentionSeconds", o.RetentionSeconds != nil, o.RetentionSeconds)
	put("completedRetentionSeconds", o.CompletedRetentionSeconds != nil, o.CompletedRetentionSeconds)
	put("dlqRetentionSeconds", o.DLQRetentionSeconds != nil, o.DLQRetentionSeconds)
	put("encryptionEnabled", o.EncryptionEnabled != nil, o.EncryptionEnabled)
	put("priority", o.Priority != nil, o.Priority)
	put("ttl", o.TTL != nil, o.TTL)
	put("maxWaitTimeSeconds", o.MaxWaitTimeSeconds != nil, o.MaxWaitTimeSeconds)
	put("retentionEnabled", o.RetentionEnabled != nil, o.RetentionEnabled)
	return arg
}

// seekArg is the target queen.seek reads: exactly one of its fields.
type seekArg struct {
	ToEnd       bool             `json:"toEnd,omitempty"`
	ToBeginning bool             `json:"toBeginning,omitempty"`
	Timestamp   *time.Time       `json:"timestamp,omitempty"`
	Offsets     map[string]int64 `json:"offsets,omitempty"`
}

// ackRow is one per-item result of queen._ack. A rejected call's items
// carry index, ids, success, error and code; an applied call's carry the
// rest.
type ackRow struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	Success       bool   `json:"success"`
	Error         string `json:"error,omitempty"`
	Code          string `json:"code,omitempty"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	Queue         string `json:"queue,omitempty"`
	Partition     string `json:"partition,omitempty"`
	Offset        *int64 `json:"offset,omitempty"`
	Result        string `json:"result,omitempty"`
	DLQ           bool   `json:"dlq,omitempty"`
	Committed     *int64 `json:"committed,omitempty"`
	LeaseReleased bool   `json:"leaseReleased,omitempty"`
}

func ackResults(rows []ackRow) []queen.AckResult {
	if rows == nil {
		return nil
	}
	out := make([]queen.AckResult, len(rows))
	for i, r := range rows {
		out[i] = queen.AckResult{Index: r.Index, TransactionID: r.TransactionID, PartitionID: r.PartitionID,
			ConsumerGroup: r.ConsumerGroup, Queue: r.Queue, Partition: r.Partition, Offset: r.Offset,
			Success: r.Success, Error: r.Error, Code: r.Code, Result: r.Result, DLQ: r.DLQ,
			Committed: r.Committed, LeaseReleased: r.LeaseReleased}
	}
	return out
}

// ackReply is what queen.ack ({ok, results}) and queen.transact ({ok, ack,
// push}, or {ok: false, code, error} when a required lease is gone)
// return.
type ackReply struct {
	OK      bool               `json:"ok"`
	Code    string             `json:"code,omitempty"`
	Error   string             `json:"error,omitempty"`
	Results []ackRow           `json:"results,omitempty"`
	Ack     []ackRow           `json:"ack,omitempty"`
	Push    []queen.PushResult `json:"push,omitempty"`
}

// contractCheck, when set (by pgstore's tests), checks every reply against
// the Go type it is decoded into: the keys the routine writes must be the
// keys the type reads.
var contractCheck func(raw []byte, out any) error
