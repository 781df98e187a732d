package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/queen-serverless/queen/core/queen"
)

type wireAck struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	Status        string `json:"status"`
	ConsumerGroup string `json:"consumerGroup"`
	LeaseID       string `json:"leaseId"`
	Error         string `json:"error"`
}

func (w wireAck) ack(group, lease, status string) queen.Ack {
	a := queen.Ack{PartitionID: w.PartitionID, TransactionID: w.TransactionID, Status: queen.AckStatus(w.Status),
		ConsumerGroup: w.ConsumerGroup, LeaseID: w.LeaseID, Error: w.Error}
	if a.ConsumerGroup == "" {
		a.ConsumerGroup = group
	}
	if a.LeaseID == "" {
		a.LeaseID = lease
	}
	if a.Status == "" {
		a.Status = queen.AckStatus(status)
	}
	return a
}

// AckResult is the wire form of one ack result.
type AckResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	QueueName     string  `json:"queueName,omitempty"`
	PartitionName string  `json:"partitionName,omitempty"`
	Offset        *int64  `json:"offset,omitempty"`
	Result        string  `json:"result,omitempty"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Committed     *int64  `json:"committed"`
}

func wireAcks(res []queen.AckResult) []AckResult {
	out := make([]AckResult, len(res))
	for i, r := range res {
		out[i] = AckResult{Index: r.Index, TransactionID: r.TransactionID, PartitionID: r.PartitionID, Success: r.Success,
			QueueName: r.Queue, PartitionName: r.Partition, Offset: r.Offset, Result: r.Result,
			LeaseReleased: r.LeaseReleased, DLQ: r.DLQ, Committed: r.Committed}
		if r.Error != "" {
			e := r.Error
			out[i].Error = &e
		}
	}
	return out
}

func (a *API) doAck(w http.ResponseWriter, r *http.Request, acks []queen.Ack) error {
	res, err := a.store.Ack(r.Context(), acks)
	if err != nil {
		if res != nil {
			return &resultsError{err: err, results: wireAcks(res)}
		}
		return err
	}
	writeJSON(w, http.StatusOK, wireAcks(res))
	return nil
}

func (a *API) ack(w http.ResponseWriter, r *http.Request) error {
	var req wireAck
	if err := decode(r, &req); err != nil {
		return err
	}
	return a.doAck(w, r, []queen.Ack{req.ack("", "", "")})
}

type ackBatchRequest struct {
	ConsumerGroup   string    `json:"consumerGroup"`
	LeaseID         string    `json:"leaseId"`
	Status          string    `json:"status"`
	Acknowledgments []wireAck `json:"acknowledgments"`
}

func (a *API) ackBatch(w http.ResponseWriter, r *http.Request) error {
	var req ackBatchRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	acks := make([]queen.Ack, len(req.Acknowledgments))
	for i, x := range req.Acknowledgments {
		acks[i] = x.ack(req.ConsumerGroup, req.LeaseID, req.Status)
	}
	return a.doAck(w, r, acks)
}

type txOperation struct {
	Type string `json:"type"`
	wireAck
	Items []PushItem `json:"items"`
}

type txRequest struct {
	Operations     []txOperation `json:"operations"`
	RequiredLeases []string      `json:"requiredLeases"`
}

func (a *API) transaction(w http.ResponseWriter, r *http.Request) error {
	var req txRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	var tx queen.TransactionRequest
	type slot struct {
		ack    bool
		index  int
		nItems int
	}
	slots := make([]slot, len(req.Operations))
	for i, op := range req.Operations {
		switch strings.ToLower(op.Type) {
		case "ack":
			slots[i] = slot{ack: true, index: len(tx.Acks)}
			tx.Acks = append(tx.Acks, op.ack("", "", ""))
		case "push":
			if len(op.Items) == 0 {
				return &resultsError{err: queen.Invalid("operations["+strconv.Itoa(i)+"].items", "must contain at least one item"), success: true}
			}
			slots[i] = slot{index: len(tx.Pushes), nItems: len(op.Items)}
			tx.Pushes = append(tx.Pushes, a.pushItems(r, op.Items)...)
		default:
			return &resultsError{err: queen.Invalid("operations["+strconv.Itoa(i)+"].type", "must be ack or push"), success: true}
		}
	}
	tx.RequiredLeases = req.RequiredLeases
	res, err := a.store.Transaction(r.Context(), tx)
	if err != nil {
		return &resultsError{err: err, success: true}
	}
	a.notify(res.Pushes)
	results := make([]any, len(slots))
	for i, s := range slots {
		if s.ack {
			results[i] = wireAcks(res.Acks[s.index : s.index+1])[0]
		} else {
			results[i] = WirePushResults(res.Pushes[s.index : s.index+s.nItems])
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"transactionId": queen.NewUUIDv7(), "success": true, "results": results})
	return nil
}
