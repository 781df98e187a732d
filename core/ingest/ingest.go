// Package ingest feeds the push function from its event sources
// (docs/semantics.md §4).
// One Lambda handler takes every event the push function can receive and
// tells them apart by their JSON shape:
//
//   - API Gateway HTTP API requests (payload 2.0) go to the HTTP API.
//   - SQS events: one message per record. The body is a push item
//     ({queue, partition, payload, transactionId, traceId}) or a raw payload,
//     whose queue and partition come from the message attributes "queue" and
//     "partition" or the configured defaults. The transactionId defaults to the
//     SQS messageId, so a redelivered record is a duplicate, not a second
//     message. Failed records are returned as partial batch failures.
//   - SNS events: likewise, from the SNS message and its attributes;
//     transactionId = MessageId.
//   - EventBridge events: payload = detail, the configured default queue, the
//     partition from a configured detail field (else the default partition),
//     transactionId = the event id.
//   - Direct invocations with {"items":[…]}: the HTTP push, returning the
//     same result array.
package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/queen"
)

// Kind is the kind of an event.
type Kind int

// Event kinds.
const (
	KindUnknown Kind = iota
	KindHTTP
	KindSQS
	KindSNS
	KindEventBridge
	KindDirect
)

var kindNames = [...]string{"unknown", "http", "sqs", "sns", "eventbridge", "direct"}

// String returns the kind's name, for logs.
func (k Kind) String() string { return kindNames[k] }

// ErrUnknownEvent is returned for an event of no known shape.
var ErrUnknownEvent = errors.New(`unrecognised event: expected an API Gateway HTTP API request (payload 2.0), ` +
	`an SQS, SNS or EventBridge event, or {"items":[…]}`)

// Detect tells the kind of an event from its JSON.
func Detect(raw []byte) Kind {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return KindUnknown
	}
	if recs, ok := top["Records"]; ok {
		var rs []map[string]json.RawMessage
		if err := json.Unmarshal(recs, &rs); err != nil || len(rs) == 0 {
			return KindUnknown
		}
		src := stringField(rs[0], "eventSource")
		if src == "" {
			src = stringField(rs[0], "EventSource")
		}
		switch src {
		case "aws:sqs":
			return KindSQS
		case "aws:sns":
			return KindSNS
		}
		return KindUnknown
	}
	if _, ok := top["routeKey"]; ok && stringField(top, "version") == "2.0" {
		return KindHTTP
	}
	if _, ok := top["detail-type"]; ok {
		if _, ok := top["detail"]; ok {
			return KindEventBridge
		}
	}
	if _, ok := top["items"]; ok {
		return KindDirect
	}
	return KindUnknown
}

func stringField(m map[string]json.RawMessage, name string) string {
	var s string
	if raw, ok := m[name]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// Config configures a Handler.
type Config struct {
	// DefaultQueue is the queue of messages that name none; EventBridge
	// events always go there.
	DefaultQueue string
	// DefaultPartition is the partition of messages that name none. Default
	// queen.DefaultPartition.
	DefaultPartition string
	// PartitionField names the EventBridge detail field holding the
	// partition; a dotted path reaches into nested objects.
	PartitionField string
	// Logger receives a line per event. Default slog.Default().
	Logger *slog.Logger
}

// HTTPHandler serves API Gateway HTTP API requests.
type HTTPHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Handler is the push function's handler.
type Handler struct {
	store queen.Store
	http  HTTPHandler
	cfg   Config
}

// New returns a Handler pushing to store and serving HTTP requests with
// http.
func New(store queen.Store, http HTTPHandler, cfg Config) *Handler {
	if cfg.DefaultPartition == "" {
		cfg.DefaultPartition = queen.DefaultPartition
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{store: store, http: http, cfg: cfg}
}

// Invoke handles one event of any kind: the function's Lambda handler.
func (h *Handler) Invoke(ctx context.Context, raw json.RawMessage) (any, error) {
	switch Detect(raw) {
	case KindHTTP:
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("decode API Gateway request: %w", err)
		}
		return h.http(ctx, ev)
	case KindSQS:
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("decode SQS event: %w", err)
		}
		return h.SQS(ctx, ev)
	case KindSNS:
		var ev events.SNSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("decode SNS event: %w", err)
		}
		return h.SNS(ctx, ev)
	case KindEventBridge:
		var ev events.EventBridgeEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("decode EventBridge event: %w", err)
		}
		return h.EventBridge(ctx, ev)
	case KindDirect:
		return h.Direct(ctx, raw)
	}
	return nil, ErrUnknownEvent
}

// SQS pushes one message per record and reports the records that failed,
// for SQS to redeliver (the event source mapping needs
// ReportBatchItemFailures). A record fails when it cannot be turned into a
// valid push item or its push fails; duplicates (redeliveries) succeed. On
// a FIFO queue every record after the first failure fails too, so order
// holds; those already pushed come back as duplicates.
func (h *Handler) SQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	items := make([]queen.PushItem, len(ev.Records))
	errs := make([]error, len(ev.Records))
	for i, rec := range ev.Records {
		items[i], errs[i] = h.sqsItem(rec)
	}
	res := h.push(ctx, items, errs)
	var out events.SQSEventResponse
	fifo := false
	for i, rec := range ev.Records {
		fifo = fifo || strings.HasSuffix(rec.EventSourceARN, ".fifo")
		if errs[i] != nil || (fifo && len(out.BatchItemFailures) > 0) {
			out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	logOutcome(ctx, h, KindSQS, ev.Records, res, errs, func(r events.SQSMessage) string { return r.MessageId })
	return out, nil
}

// SNS pushes one message per record. SNS invokes asynchronously and retries
// a failed invocation, so any failure fails the invocation; the retry is
// safe, as the records already pushed come back as duplicates.
func (h *Handler) SNS(ctx context.Context, ev events.SNSEvent) ([]httpapi.PushResult, error) {
	items := make([]queen.PushItem, len(ev.Records))
	errs := make([]error, len(ev.Records))
	for i, rec := range ev.Records {
		items[i], errs[i] = h.snsItem(rec.SNS)
	}
	res := h.push(ctx, items, errs)
	logOutcome(ctx, h, KindSNS, ev.Records, res, errs, func(r events.SNSEventRecord) string { return r.SNS.MessageID })
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return httpapi.WirePushResults(res), nil
}

// EventBridge pushes the event's detail to the default queue.
func (h *Handler) EventBridge(ctx context.Context, ev events.EventBridgeEvent) ([]httpapi.PushResult, error) {
	if h.cfg.DefaultQueue == "" {
		return nil, errors.New("EventBridge event: no queue configured (set QUEEN_DEFAULT_QUEUE)")
	}
	payload := ev.Detail
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = json.RawMessage("null")
	}
	it := queen.PushItem{
		Queue:         h.cfg.DefaultQueue,
		Partition:     h.eventPartition(payload),
		Payload:       payload,
		TransactionID: ev.ID,
	}
	errs := []error{nil}
	res := h.push(ctx, []queen.PushItem{it}, errs)
	logOutcome(ctx, h, KindEventBridge, []events.EventBridgeEvent{ev}, res, errs, func(e events.EventBridgeEvent) string { return e.ID })
	if errs[0] != nil {
		return nil, errs[0]
	}
	return httpapi.WirePushResults(res), nil
}

// eventPartition reads the configured partition field of an EventBridge
// detail: a string as is, a number or boolean as its JSON text, anything
// else (missing, null, object, array) the default partition.
func (h *Handler) eventPartition(detail json.RawMessage) string {
	if h.cfg.PartitionField == "" {
		return h.cfg.DefaultPartition
	}
	cur := detail
	for _, key := range strings.Split(h.cfg.PartitionField, ".") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil {
			return h.cfg.DefaultPartition
		}
		next, ok := obj[key]
		if !ok {
			return h.cfg.DefaultPartition
		}
		cur = next
	}
	var s string
	if err := json.Unmarshal(cur, &s); err == nil && s != "" {
		return s
	}
	var v any
	if err := json.Unmarshal(cur, &v); err == nil {
		switch v.(type) {
		case float64, bool:
			return string(bytes.TrimSpace(cur))
		}
	}
	return h.cfg.DefaultPartition
}

// DirectRequest is a direct invocation: the body of POST /api/v1/push.
type DirectRequest struct {
	Items []Item `json:"items"`
}

// Item is a push item on the wire, as in POST /api/v1/push.
type Item = httpapi.PushItem

// Direct handles {"items":[…]} like POST /api/v1/push: all or nothing, the
// same validation and the same result array.
func (h *Handler) Direct(ctx context.Context, raw json.RawMessage) ([]httpapi.PushResult, error) {
	var req DirectRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&req); err != nil {
		return nil, queen.Invalid("items", "malformed: %v", err)
	}
	if len(req.Items) == 0 && req.Items != nil { // as POST /api/v1/push: nothing to write
		return []httpapi.PushResult{}, nil
	}
	items := make([]queen.PushItem, len(req.Items))
	for i, it := range req.Items {
		items[i] = it.Item()
	}
	res, err := h.store.Push(ctx, items)
	if err != nil {
		return nil, err
	}
	h.cfg.Logger.InfoContext(ctx, "pushed", "source", KindDirect.String(), "items", len(res), "duplicates", countDuplicates(res))
	return httpapi.WirePushResults(res), nil
}

// push pushes the items whose errs entry is nil, in one transaction when
// it can, and returns the results by index (zero where the item failed,
// with errs set). When the batch is rejected for a reason other than an
// unavailable database (one item's queue is full, say), it pushes the items
// one by one so one bad item does not fail the others.
func (h *Handler) push(ctx context.Context, items []queen.PushItem, errs []error) []queen.PushResult {
	results := make([]queen.PushResult, len(items))
	var batch []queen.PushItem
	var index []int
	for i, it := range items {
		if errs[i] != nil {
			continue
		}
		// Validate each item alone, so an invalid one fails alone.
		if _, err := queen.NormalizePush([]queen.PushItem{it}); err != nil {
			errs[i] = unindex(err)
			continue
		}
		batch = append(batch, it)
		index = append(index, i)
	}
	if len(batch) == 0 {
		return results
	}
	res, err := h.store.Push(ctx, batch)
	if err == nil {
		for j, r := range res {
			results[index[j]] = r
		}
		return results
	}
	if len(batch) == 1 || errors.Is(err, queen.ErrUnavailable) || ctx.Err() != nil {
		for _, i := range index {
			errs[i] = err
		}
		return results
	}
	for _, i := range index {
		res, err := h.store.Push(ctx, []queen.PushItem{items[i]})
		if err != nil {
			errs[i] = err
			continue
		}
		results[i] = res[0]
	}
	return results
}

// unindex drops the "items[0]." prefix of a one-item validation error.
func unindex(err error) error {
	var fe *queen.FieldError
	if errors.As(err, &fe) {
		return queen.Invalid(strings.TrimPrefix(fe.Field, "items[0]."), "%s", fe.Message)
	}
	return err
}

// sqsItem turns an SQS record into a push item.
func (h *Handler) sqsItem(rec events.SQSMessage) (queen.PushItem, error) {
	attr := func(name string) string {
		if a, ok := rec.MessageAttributes[name]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	return h.item([]byte(rec.Body), attr("queue"), attr("partition"), rec.MessageId)
}

// snsItem turns an SNS message into a push item. SNS message attributes
// arrive as {"Type": "String", "Value": "…"}.
func (h *Handler) snsItem(msg events.SNSEntity) (queen.PushItem, error) {
	attr := func(name string) string {
		if a, ok := msg.MessageAttributes[name].(map[string]any); ok {
			if v, ok := a["Value"].(string); ok {
				return v
			}
		}
		return ""
	}
	return h.item([]byte(msg.Message), attr("queue"), attr("partition"), msg.MessageID)
}

// item builds a push item from a message body: a push item itself, or a
// raw payload (JSON, or else the text as a JSON string). The body's own
// fields win over the attributes, which win over the defaults; the message
// id is the transactionId unless the body names one.
func (h *Handler) item(body []byte, queue, partition, messageID string) (queen.PushItem, error) {
	it, isItem, err := asItem(body)
	if err != nil {
		return queen.PushItem{}, err
	}
	var out queen.PushItem
	if isItem {
		out = it.Item()
	} else {
		out.Payload = rawPayload(body)
	}
	out.Queue = firstNonEmpty(out.Queue, queue, h.cfg.DefaultQueue)
	out.Partition = firstNonEmpty(out.Partition, partition, h.cfg.DefaultPartition)
	out.TransactionID = firstNonEmpty(out.TransactionID, messageID)
	if out.Queue == "" {
		return out, queen.Invalid("queue", "the message names no queue (body field, message attribute \"queue\") and no default is configured (QUEEN_DEFAULT_QUEUE)")
	}
	return out, nil
}

// itemFields are the members of a push item body.
var itemFields = map[string]bool{"queue": true, "partition": true, "payload": true, "data": true,
	"transactionId": true, "traceId": true}

// asItem reports whether body is a push item: a JSON object with a
// "payload" (or "data") member and no members but those of a push item.
// Anything else is a raw payload.
func asItem(body []byte) (Item, bool, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return Item{}, false, nil
	}
	_, hasPayload := obj["payload"]
	_, hasData := obj["data"]
	if !hasPayload && !hasData {
		return Item{}, false, nil
	}
	for k := range obj {
		if !itemFields[k] {
			return Item{}, false, nil
		}
	}
	var it Item
	if err := json.Unmarshal(body, &it); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return it, true, queen.Invalid(te.Field, "must be a string")
		}
		return it, true, queen.Invalid("body", "malformed push item: %v", err)
	}
	return it, true, nil
}

// rawPayload is body as a JSON payload: itself when it is JSON, else the
// text as a JSON string.
func rawPayload(body []byte) json.RawMessage {
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && json.Valid(trimmed) {
		return json.RawMessage(trimmed)
	}
	b, _ := json.Marshal(string(body)) // invalid UTF-8 becomes U+FFFD
	return b
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func countDuplicates(res []queen.PushResult) int {
	n := 0
	for _, r := range res {
		if r.Status == queen.StatusDuplicate {
			n++
		}
	}
	return n
}

// logOutcome logs one line per event: counts, and each failure with the
// message id (never the payload).
func logOutcome[R any](ctx context.Context, h *Handler, kind Kind, recs []R, res []queen.PushResult, errs []error, id func(R) string) {
	queued, dups, failed := 0, 0, 0
	for i, rec := range recs {
		switch {
		case errs[i] != nil:
			failed++
			h.cfg.Logger.WarnContext(ctx, "message not pushed", "source", kind.String(), "messageId", id(rec), "err", errs[i])
		case res[i].Status == queen.StatusDuplicate:
			dups++
			h.cfg.Logger.InfoContext(ctx, "duplicate message", "source", kind.String(), "messageId", id(rec),
				"queue", res[i].Queue, "partition", res[i].Partition, "offset", res[i].Offset)
		default:
			queued++
		}
	}
	h.cfg.Logger.InfoContext(ctx, "pushed", "source", kind.String(), "records", len(recs),
		"queued", queued, "duplicates", dups, "failed", failed)
}
