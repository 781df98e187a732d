package httpapi

import (
	"net/http"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

type wireMessage struct {
	queen.Message
	LeaseID       *string `json:"leaseId"`
	ConsumerGroup *string `json:"consumerGroup"`
}

type popResponse struct {
	Success       bool          `json:"success"`
	Queue         string        `json:"queue"`
	Partition     string        `json:"partition"`
	PartitionID   string        `json:"partitionId"`
	LeaseID       *string       `json:"leaseId"`
	ConsumerGroup *string       `json:"consumerGroup"`
	Messages      []wireMessage `json:"messages"`
}

func (a *API) pop(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	req := queen.PopRequest{Queue: r.PathValue("queue"), Partition: r.PathValue("partition"),
		ConsumerGroup: first(q, "consumerGroup"), Worker: first(q, "workerId")}
	var err error
	if req.Batch, err = queryInt(q, "batch", 1); err != nil {
		return err
	}
	if req.Batch == 0 {
		return queen.Invalid("batch", "must be between 1 and %d", queen.MaxBatch)
	}
	if req.Partitions, err = queryInt(q, "partitions", 1); err != nil {
		return err
	}
	if req.Partitions == 0 {
		return queen.Invalid("partitions", "must be between 1 and %d", queen.MaxPartitionsPerPop)
	}
	if req.AutoAck, err = queryBool(q, "autoAck"); err != nil {
		return err
	}
	wait, err := queryBool(q, "wait")
	if err != nil {
		return err
	}
	timeout, err := queryTimeout(q, a.cfg.MaxWait)
	if err != nil {
		return err
	}
	if req.Mode, req.From, err = queen.ParseSubscription(first(q, "subscriptionMode"), first(q, "subscriptionFrom")); err != nil {
		return err
	}
	// The store validates the request (the domain's rules, one place);
	// a long poll's first pop does so before it waits.
	var res queen.PopResult
	if wait {
		res, err = a.popWait(r, req, timeout)
	} else {
		res, err = a.store.Pop(r.Context(), req)
	}
	if err != nil {
		return err
	}
	if len(res.Messages) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, wirePop(res))
	return nil
}

func wirePop(res queen.PopResult) popResponse {
	var lease *string
	if res.LeaseID != "" {
		lease = &res.LeaseID
	}
	// Consumers that name no group are the queue-mode group, named on the
	// wire as Queen names it.
	group := &res.ConsumerGroup
	if *group == "" {
		group = new(queen.QueueModeGroup)
	}
	out := popResponse{Success: true, Queue: res.Messages[0].Queue, Partition: res.Messages[0].Partition,
		PartitionID: res.Messages[0].PartitionID, LeaseID: lease, ConsumerGroup: group,
		Messages: make([]wireMessage, len(res.Messages))}
	for i, m := range res.Messages {
		out.Messages[i] = wireMessage{Message: m, LeaseID: lease, ConsumerGroup: group}
	}
	return out
}

// popWait long-polls: it pops until something is deliverable, the wait
// (capped by Config.MaxWait and the request's own deadline) passes, or the
// client goes away. Between pops it waits in the API's hub (wait.go): a
// push through this API wakes it at once, pushes elsewhere within a probe
// interval.
func (a *API) popWait(r *http.Request, req queen.PopRequest, wait time.Duration) (queen.PopResult, error) {
	ctx := r.Context()
	if wait > a.cfg.MaxWait {
		wait = a.cfg.MaxWait
	}
	deadline := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(deadline) {
		deadline = d.Add(-time.Second) // leave time to answer before the Lambda deadline
	}
	w := a.hub.add(queen.WaitKey{Queue: req.Queue, Group: req.ConsumerGroup})
	defer a.hub.remove(w)
	for {
		res, err := a.store.Pop(ctx, req)
		if err != nil {
			return res, err
		}
		if len(res.Messages) > 0 {
			a.hub.remove(w)
			a.hub.wake(w.key, 1) // there may be more: the next waiter looks
			return res, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return res, nil
		}
		if a.hub.probe == nil {
			left = min(left, a.cfg.PollInterval) // a store without a probe is polled
		}
		timer := time.NewTimer(left)
		select {
		case <-ctx.Done():
			timer.Stop()
			return res, nil
		case <-w.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

type extendRequest struct {
	Seconds *int `json:"seconds"`
}

func (a *API) extendLease(w http.ResponseWriter, r *http.Request) error {
	var req extendRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	seconds := 0 // Queen's clients send {}: renew by the queue's leaseTime
	if req.Seconds != nil {
		if *req.Seconds < 1 || *req.Seconds > queen.MaxLeaseSeconds {
			return queen.Invalid("seconds", "must be between 1 and %d; omit it to renew by the queue's leaseTime",
				queen.MaxLeaseSeconds)
		}
		seconds = *req.Seconds
	}
	exp, err := a.store.ExtendLease(r.Context(), r.PathValue("leaseId"), seconds)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"leaseId": r.PathValue("leaseId"), "expiresAt": exp,
		"newExpiresAt": exp, "success": true})
	return nil
}
