package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/queen-serverless/queen/core/queen"
)

// PushItem is a push item on the wire, as in POST /api/v1/push ("data" is
// accepted for "payload").
type PushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	Data          json.RawMessage `json:"data"`
	TransactionID string          `json:"transactionId"`
	TraceID       string          `json:"traceId"`
}

// Item converts the wire item to the domain's.
func (it PushItem) Item() queen.PushItem {
	p := it.Payload
	if len(p) == 0 {
		p = it.Data
	}
	return queen.PushItem{Queue: it.Queue, Partition: it.Partition, Payload: p, TransactionID: it.TransactionID, TraceID: it.TraceID}
}

// pushItems converts wire items, stamping each with the verified caller
// (a producerSub in the body is not read: PushItem has no such field).
func (a *API) pushItems(r *http.Request, in []PushItem) []queen.PushItem {
	sub := ""
	if a.cfg.Identity != nil {
		sub = a.cfg.Identity(r)
	}
	out := make([]queen.PushItem, len(in))
	for i, it := range in {
		out[i] = it.Item()
		out[i].ProducerSub = sub
	}
	return out
}

// PushResult is the wire form of one push result.
type PushResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transaction_id"`
	Status        string  `json:"status"`
	MessageID     string  `json:"message_id"`
	PartitionID   string  `json:"partition_id"`
	Offset        int64   `json:"offset"`
	QueueName     string  `json:"queueName"`
	Partition     string  `json:"partition"`
	TraceID       *string `json:"trace_id"`
}

// WirePushResults converts store results to the wire form.
func WirePushResults(res []queen.PushResult) []PushResult {
	out := make([]PushResult, len(res))
	for i, r := range res {
		out[i] = PushResult{Index: r.Index, TransactionID: r.TransactionID, Status: r.Status, MessageID: r.MessageID,
			PartitionID: r.PartitionID, Offset: r.Offset, QueueName: r.Queue, Partition: r.Partition}
		if r.TraceID != "" {
			t := r.TraceID
			out[i].TraceID = &t
		}
	}
	return out
}

// PushRequest is the body of POST /api/v1/push.
type PushRequest struct {
	Items []PushItem `json:"items"`
}

func (a *API) push(w http.ResponseWriter, r *http.Request) error {
	var req PushRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Items == nil {
		return queen.Invalid("items", "is required")
	}
	if len(req.Items) == 0 { // batching clients send one when their count is a multiple of the batch size
		writeJSON(w, http.StatusCreated, []PushResult{})
		return nil
	}
	res, err := a.store.Push(r.Context(), a.pushItems(r, req.Items))
	if err != nil {
		return err
	}
	a.notify(res)
	writeJSON(w, http.StatusCreated, WirePushResults(res))
	return nil
}

// notify wakes the long-polls waiting on the queues pushed to.
func (a *API) notify(res []queen.PushResult) {
	queued := map[string]int{}
	for _, r := range res {
		if r.Status == queen.StatusQueued {
			queued[r.Queue]++
		}
	}
	for q, n := range queued {
		a.hub.pushed(q, n)
		if a.cfg.OnPush != nil {
			a.cfg.OnPush(q)
		}
	}
}
