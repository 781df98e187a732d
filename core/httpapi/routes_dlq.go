package httpapi

import (
	"net/http"

	"github.com/queen-serverless/queen/core/queen"
)

func (a *API) listDLQ(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := queen.DLQFilter{Queue: first(q, "queue"), ConsumerGroup: first(q, "consumerGroup"), Partition: first(q, "partition"),
		Cursor: first(q, "cursor")}
	var err error
	if f.From, err = queryTime(q, "from"); err != nil {
		return err
	}
	if f.To, err = queryTime(q, "to"); err != nil {
		return err
	}
	if f.Limit, err = queryInt(q, "limit", 100); err != nil {
		return err
	}
	if f.Limit < 1 {
		return queen.Invalid("limit", "must be between 1 and 1000")
	}
	if f.Offset, err = queryInt(q, "offset", 0); err != nil {
		return err
	}
	page, err := a.store.ListDeadLetters(r.Context(), f)
	if err != nil {
		return err
	}
	reply := map[string]any{"messages": page.Messages, "total": page.Total, "limit": f.Limit, "offset": f.Offset}
	if page.TotalCapped {
		reply["totalCapped"] = true // total is a lower bound
	}
	if page.NextCursor != "" {
		reply["nextCursor"] = page.NextCursor
	}
	writeJSON(w, http.StatusOK, reply)
	return nil
}

func (a *API) getDeadLetter(w http.ResponseWriter, r *http.Request) error {
	d, err := a.store.DeadLetters(r.Context(), r.PathValue("partitionId"), r.PathValue("transactionId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"partitionId": r.PathValue("partitionId"),
		"transactionId": r.PathValue("transactionId"), "deadLetters": d})
	return nil
}

func (a *API) retryDeadLetter(w http.ResponseWriter, r *http.Request) error {
	res, err := a.store.RetryDeadLetter(r.Context(), r.PathValue("partitionId"), r.PathValue("transactionId"),
		r.URL.Query().Get("consumerGroup"))
	if err != nil {
		return err
	}
	a.notify([]queen.PushResult{res})
	writeJSON(w, http.StatusOK, map[string]any{"retried": true, "message": WirePushResults([]queen.PushResult{res})[0]})
	return nil
}

func (a *API) deleteDeadLetter(w http.ResponseWriter, r *http.Request) error {
	n, err := a.store.DeleteDeadLetter(r.Context(), r.PathValue("partitionId"), r.PathValue("transactionId"),
		r.URL.Query().Get("consumerGroup"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": n})
	return nil
}
