package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// ---- push

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

// ---- pop

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

func queryInt(q map[string][]string, name string, def int) (int, error) {
	v := first(q, name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, queen.Invalid(name, "must be an integer")
	}
	return n, nil
}

// queryTimeout reads a long-poll's timeout in milliseconds, capped by the
// server's maximum wait before it becomes a Duration, so no value overflows:
// a timeout beyond the cap, however large (even beyond int64), waits the cap.
func queryTimeout(q map[string][]string, maxWait time.Duration) (time.Duration, error) {
	v := first(q, "timeout")
	if v == "" {
		return maxWait, nil
	}
	n, ok := new(big.Int).SetString(v, 10)
	if !ok {
		return 0, queen.Invalid("timeout", "must be an integer (milliseconds)")
	}
	if n.Sign() < 0 {
		return 0, queen.Invalid("timeout", "must not be negative")
	}
	if n.Cmp(big.NewInt(maxWait.Milliseconds())) > 0 {
		return maxWait, nil
	}
	return time.Duration(n.Int64()) * time.Millisecond, nil
}

func queryBool(q map[string][]string, name string) (bool, error) {
	v := first(q, name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, queen.Invalid(name, "must be true or false")
	}
	return b, nil
}

func first(q map[string][]string, name string) string {
	if v := q[name]; len(v) > 0 {
		return v[0]
	}
	return ""
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

// ---- ack

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

// ---- dead letters

func queryTime(q map[string][]string, name string) (*time.Time, error) {
	v := first(q, name)
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, queen.Invalid(name, "must be an RFC 3339 timestamp")
	}
	return &t, nil
}

func (a *API) listDLQ(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := queen.DLQFilter{Queue: first(q, "queue"), ConsumerGroup: first(q, "consumerGroup"), Partition: first(q, "partition")}
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
	writeJSON(w, http.StatusOK, map[string]any{"messages": page.Messages, "total": page.Total, "limit": f.Limit, "offset": f.Offset})
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

// ---- admin

type configureRequest struct {
	Queue     string          `json:"queue"`
	Namespace string          `json:"namespace"`
	Task      string          `json:"task"`
	Mode      string          `json:"mode"`
	Options   json.RawMessage `json:"options"`
}

// refusedOptions are Queen options the log does not have, with the reason.
var refusedOptions = map[string]string{
	"minPopWaitTime":              "is not supported: a pop answers as soon as it has messages (use wait=true&timeout for long polls)",
	"retentionSinkHold":           "is not supported: there is no retention sink; retention deletes segments",
	"retentionSinkHoldMaxSeconds": "is not supported: there is no retention sink; retention deletes segments",
}

// optionNames lists the options configure reads: queen.QueueOptions' JSON names.
var optionNames = func() string {
	t := reflect.TypeFor[queen.QueueOptions]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}()

// queueOptions reads configure's options, refusing names it does not know
// rather than ignoring them.
func queueOptions(raw json.RawMessage) (queen.QueueOptions, error) {
	var opts queen.QueueOptions
	if len(raw) == 0 || string(raw) == "null" {
		return opts, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&opts)
	if err == nil {
		return opts, nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return opts, queen.Invalid("options."+te.Field, "must be %s, not %s", jsonType(te.Type.Kind().String()), te.Value)
	}
	// encoding/json reports `json: unknown field "<name>"`.
	if q, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if name, uerr := strconv.Unquote(q); uerr == nil {
			if why, ok := refusedOptions[name]; ok {
				return opts, queen.Invalid("options."+name, "%s", why)
			}
			return opts, queen.Invalid("options."+name, "unknown option; the options are %s", optionNames)
		}
	}
	return opts, queen.Invalid("options", "must be a JSON object of options")
}

// PriorityNote explains why priority has no effect.
const PriorityNote = "priority is accepted for client compatibility and has no effect: partitions are drained in offset order"

// RetentionOffNote says that the queue's retention windows are kept but not
// applied.
const RetentionOffNote = "retentionEnabled is false: the retention windows are kept as given but the deployment's " +
	"default retention applies instead (effectiveRetentionSeconds and effectiveCompletedRetentionSeconds) until it is true"

func (a *API) configure(w http.ResponseWriter, r *http.Request) error {
	var req configureRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Mode != "" && req.Mode != "merge" {
		return queen.Invalid("mode", "only merge is supported: options not given keep their value")
	}
	opts, err := queueOptions(req.Options)
	if err != nil {
		return err
	}
	q, err := a.store.Configure(r.Context(), queen.ConfigureRequest{Queue: req.Queue, Namespace: req.Namespace,
		Task: req.Task, Options: opts})
	if err != nil {
		return err
	}
	out := map[string]any{"configured": true, "queue": q.Name, "namespace": q.Namespace, "task": q.Task, "options": q.Options}
	var notes []string
	if opts.Priority != nil {
		notes = append(notes, PriorityNote)
	}
	if o := q.Options; !o.RetentionEnabled && (o.RetentionSeconds > 0 || o.TTL > 0 || o.MaxWaitTimeSeconds > 0 ||
		o.CompletedRetentionSeconds > 0) {
		notes = append(notes, RetentionOffNote)
	}
	if notes != nil {
		out["notes"] = notes
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) listQueues(w http.ResponseWriter, r *http.Request) error {
	qs, err := a.store.ListQueues(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": qs})
	return nil
}

func (a *API) getQueue(w http.ResponseWriter, r *http.Request) error {
	q, err := a.store.Queue(r.Context(), r.PathValue("queue"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, q)
	return nil
}

func (a *API) deleteQueue(w http.ResponseWriter, r *http.Request) error {
	if err := a.store.DeleteQueue(r.Context(), r.PathValue("queue")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "queue": r.PathValue("queue")})
	return nil
}

func (a *API) listGroups(w http.ResponseWriter, r *http.Request) error {
	gs, err := a.store.ListGroups(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"consumerGroups": gs})
	return nil
}

func (a *API) getGroup(w http.ResponseWriter, r *http.Request) error {
	g, err := a.store.Group(r.Context(), r.PathValue("group"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, g)
	return nil
}

func (a *API) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	if err := a.store.DeleteGroup(r.Context(), r.PathValue("group"), r.PathValue("queue")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "consumerGroup": r.PathValue("group")})
	return nil
}

type seekRequest struct {
	ToEnd       bool              `json:"toEnd"`
	ToBeginning bool              `json:"toBeginning"`
	Timestamp   string            `json:"timestamp"`
	Offsets     map[string]*int64 `json:"offsets"` // a pointer: null is refused, not read as 0
}

func (a *API) seek(w http.ResponseWriter, r *http.Request) error {
	var req seekRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	t := queen.SeekTarget{ToEnd: req.ToEnd, ToBeginning: req.ToBeginning}
	if req.Offsets != nil {
		t.Offsets = make(map[string]int64, len(req.Offsets))
		for p, o := range req.Offsets {
			if o == nil {
				return queen.Invalid("offsets."+p, "must be the next offset to deliver (an integer), not null")
			}
			t.Offsets[p] = *o
		}
	}
	if req.Timestamp != "" {
		ts, err := time.Parse(time.RFC3339Nano, req.Timestamp)
		if err != nil {
			return queen.Invalid("timestamp", "must be an RFC 3339 timestamp")
		}
		t.Timestamp = &ts
	}
	res, err := a.store.Seek(r.Context(), r.PathValue("group"), r.PathValue("queue"), t)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": r.PathValue("group"),
		"queue": r.PathValue("queue"), "partitions": res})
	return nil
}

func (a *API) browse(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	req := queen.BrowseRequest{Queue: first(q, "queue"), Partition: first(q, "partition")}
	from, err := queryInt(q, "fromOffset", 0)
	if err != nil {
		return err
	}
	req.FromOffset = int64(from)
	if req.Limit, err = queryInt(q, "limit", 100); err != nil {
		return err
	}
	req.Limit = min(max(req.Limit, 1), queen.MaxBrowseLimit) // clamped, as Queen's clients expect (queenctl asks for 10000)
	msgs, err := a.store.Browse(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
	return nil
}

func (a *API) health(w http.ResponseWriter, r *http.Request) error {
	if err := a.store.Ping(r.Context()); err != nil {
		a.cfg.Logger.WarnContext(r.Context(), "health check failed", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "database": "disconnected"})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "healthy", "database": "connected"})
	return nil
}

// ---- maintenance

// MaintenanceRetryAfter is the Retry-After (seconds) of a push refused
// during maintenance.
const MaintenanceRetryAfter = 30

type maintenanceRequest struct {
	Enabled *bool `json:"enabled"`
}

// maintenanceReply is Queen's shape for mode: push (maintenanceMode, with
// popMaintenanceMode on GET) or pop (popMaintenanceMode). Pushes are
// refused rather than buffered, so nothing is ever buffered.
func maintenanceReply(mode queen.MaintenanceMode, st queen.MaintenanceState, get bool) map[string]any {
	if mode == queen.MaintainPop {
		msg := "Pop maintenance mode is off: pops deliver messages."
		if st.Pop {
			msg = "Pop maintenance mode is on: every pop returns nothing (204)."
		}
		return map[string]any{"popMaintenanceMode": st.Pop, "message": msg}
	}
	msg := "Maintenance mode is off: pushes are accepted."
	if st.Push {
		msg = fmt.Sprintf("Maintenance mode is on: pushes are refused with 503 and Retry-After: %d; nothing is buffered.", MaintenanceRetryAfter)
	}
	out := map[string]any{"maintenanceMode": st.Push, "bufferedMessages": 0, "bufferHealthy": true, "message": msg}
	if get {
		out["popMaintenanceMode"] = st.Pop
	}
	return out
}

func (a *API) getMaintenance(mode queen.MaintenanceMode) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		st, err := a.store.Maintenance(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, maintenanceReply(mode, st, true))
		return nil
	}
}

func (a *API) setMaintenance(mode queen.MaintenanceMode) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req maintenanceRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		if req.Enabled == nil {
			return queen.Invalid("enabled", "(boolean) is required")
		}
		st, err := a.store.SetMaintenance(r.Context(), mode, *req.Enabled)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, maintenanceReply(mode, st, false))
		return nil
	}
}
