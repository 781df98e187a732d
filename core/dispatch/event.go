package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// Event is what a target receives: one partition's batch, records in
// offset order (docs/subscriptions.md §2).
type Event struct {
	Queue         string   `json:"queue"`
	Partition     string   `json:"partition"`
	PartitionID   string   `json:"partitionId"`
	ConsumerGroup string   `json:"consumerGroup"`
	LeaseID       string   `json:"leaseId"`
	Records       []Record `json:"records"`
}

// Record is one message of an event.
type Record struct {
	Offset        int64           `json:"offset"`
	TransactionID string          `json:"transactionId"`
	MessageID     string          `json:"messageId"`
	Payload       json.RawMessage `json:"payload"`
	CreatedAt     time.Time       `json:"createdAt"`
	RetryCount    int             `json:"retryCount"`
	TraceID       *string         `json:"traceId"`
	ProducerSub   *string         `json:"producerSub"`
}

// Result is a target's answer, Lambda's partial-batch response.
type Result struct {
	BatchItemFailures []ItemFailure `json:"batchItemFailures"`
}

// ItemFailure names a failed record by its transactionId or its offset
// (a JSON string or number).
type ItemFailure struct {
	ItemIdentifier json.RawMessage `json:"itemIdentifier"`
}

// event builds the event of a popped batch: its first records, as many as
// fit in maxBytes of JSON (always at least one), and the number left out.
func event(sub queen.Subscription, res queen.PopResult, maxBytes int) ([]byte, int, error) {
	msgs := res.Messages
	ev := Event{Queue: msgs[0].Queue, Partition: msgs[0].Partition, PartitionID: msgs[0].PartitionID,
		ConsumerGroup: sub.ConsumerGroup, LeaseID: res.LeaseID, Records: make([]Record, 0, len(msgs))}
	for _, m := range msgs {
		ev.Records = append(ev.Records, Record{Offset: m.Offset, TransactionID: m.TransactionID, MessageID: m.ID,
			Payload: m.Data, CreatedAt: m.CreatedAt, RetryCount: m.RetryCount, TraceID: m.TraceID,
			ProducerSub: m.ProducerSub})
	}
	for {
		body, err := json.Marshal(ev)
		if err != nil {
			return nil, 0, err
		}
		if len(body) <= maxBytes || len(ev.Records) == 1 {
			return body, len(msgs) - len(ev.Records), nil
		}
		// Drop about the share that is over, at least one record.
		keep := len(ev.Records) * maxBytes / len(body)
		ev.Records = ev.Records[:max(1, min(keep, len(ev.Records)-1))]
	}
}

// errNotAResult is a target's answer that is not a partial-batch response.
var errNotAResult = errors.New(`the answer is not empty, null nor one {"batchItemFailures": [...]}`)

// failedItems reads a target's answer: the offsets of the records it
// names as failed. An empty answer, null or an object without failures
// fails none. Anything else fails the whole batch: more than one JSON
// value, a value that is not an object, an error payload, and — as in
// Lambda's own partial-batch contract — an identifier that names no
// record of the batch. An itemIdentifier that is a JSON string names a
// transactionId, one that is a JSON number an offset.
func failedItems(answer []byte, recs []queen.Message) (map[int64]bool, error) {
	failed := map[int64]bool{}
	answer = bytes.TrimSpace(answer)
	if len(answer) == 0 || string(answer) == "null" {
		return failed, nil
	}
	if msg, ok := errorPayload(answer); ok {
		// A function's error, answered with 200 (the emulator's invoke URL).
		return nil, fmt.Errorf("the target failed: %s", msg)
	}
	var res Result
	dec := json.NewDecoder(bytes.NewReader(answer))
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotAResult, err)
	}
	if rest := bytes.TrimSpace(answer[dec.InputOffset():]); len(rest) > 0 {
		return nil, fmt.Errorf("%w: more follows the first JSON value: %.80q", errNotAResult, rest)
	}
	// A transactionId repeated in the batch (dedup off, or past its
	// window) names its first record: the failure stops the cursor there.
	byID := make(map[string]int64, len(recs))
	for _, m := range recs {
		if _, seen := byID[m.TransactionID]; !seen {
			byID[m.TransactionID] = m.Offset
		}
	}
	for _, f := range res.BatchItemFailures {
		var id string
		if err := json.Unmarshal(f.ItemIdentifier, &id); err == nil {
			off, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("%w: itemIdentifier %s is the transactionId of no record of the batch",
					errNotAResult, f.ItemIdentifier)
			}
			failed[off] = true
			continue
		}
		var n json.Number
		if err := json.Unmarshal(f.ItemIdentifier, &n); err != nil {
			return nil, fmt.Errorf("%w: itemIdentifier %s is neither a string (a transactionId) nor a number (an offset)",
				errNotAResult, f.ItemIdentifier)
		}
		off, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || !slices.ContainsFunc(recs, func(m queen.Message) bool { return m.Offset == off }) {
			return nil, fmt.Errorf("%w: itemIdentifier %s is the offset of no record of the batch", errNotAResult, f.ItemIdentifier)
		}
		failed[off] = true
	}
	return failed, nil
}
