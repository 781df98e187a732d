package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/ingest"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

func TestMain(m *testing.M) { pgstoretest.Main(m) }

// Sample events in the shapes AWS sends.
const (
	sqsEvent = `{"Records":[
	 {"messageId":"m-item","receiptHandle":"r1","body":"{\"queue\":\"orders\",\"partition\":\"eu\",\"payload\":{\"n\":1}}",
	  "attributes":{"ApproximateReceiveCount":"1"},"messageAttributes":{},"md5OfBody":"x",
	  "eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:eu-west-1:123456789012:ingest","awsRegion":"eu-west-1"},
	 {"messageId":"m-attrs","receiptHandle":"r2","body":"{\"n\":2}",
	  "messageAttributes":{"queue":{"stringValue":"orders","dataType":"String"},"partition":{"stringValue":"us","dataType":"String"}},
	  "eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:eu-west-1:123456789012:ingest","awsRegion":"eu-west-1"},
	 {"messageId":"m-text","receiptHandle":"r3","body":"plain text, not JSON",
	  "eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:eu-west-1:123456789012:ingest","awsRegion":"eu-west-1"},
	 {"messageId":"m-bad","receiptHandle":"r4","body":"{\"queue\":\"no spaces allowed\",\"payload\":1}",
	  "eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:eu-west-1:123456789012:ingest","awsRegion":"eu-west-1"}]}`

	snsEvent = `{"Records":[{"EventSource":"aws:sns","EventVersion":"1.0","EventSubscriptionArn":"arn:aws:sns:eu-west-1:123456789012:t:sub",
	 "Sns":{"Type":"Notification","MessageId":"sns-1","TopicArn":"arn:aws:sns:eu-west-1:123456789012:t","Subject":null,
	  "Message":"{\"order\":7}","Timestamp":"2026-01-01T12:00:00.000Z","SignatureVersion":"1","Signature":"x",
	  "MessageAttributes":{"queue":{"Type":"String","Value":"notifications"},"partition":{"Type":"String","Value":"p7"}}}}]}`

	ebEvent = `{"version":"0","id":"eb-1","detail-type":"OrderPlaced","source":"shop","account":"123456789012",
	 "time":"2026-01-01T12:00:00Z","region":"eu-west-1","resources":[],"detail":{"customer":{"id":"c-42"},"total":12.5}}`

	httpEvent = `{"version":"2.0","routeKey":"$default","rawPath":"/health","rawQueryString":"","headers":{},
	 "requestContext":{"http":{"method":"GET","path":"/health"},"requestId":"r","stage":"$default"},"isBase64Encoded":false}`
)

func TestDetect(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]ingest.Kind{
		sqsEvent:                                 ingest.KindSQS,
		snsEvent:                                 ingest.KindSNS,
		ebEvent:                                  ingest.KindEventBridge,
		httpEvent:                                ingest.KindHTTP,
		`{"items":[{"queue":"q","payload":1}]}`:  ingest.KindDirect,
		`{"Records":[{"eventSource":"aws:s3"}]}`: ingest.KindUnknown,
		`{"resource":"/","httpMethod":"GET"}`:    ingest.KindUnknown, // REST API payload 1.0
		`[1,2]`:                                  ingest.KindUnknown,
		`not json`:                               ingest.KindUnknown,
		`{"version":"1.0","routeKey":"GET /","x":1}`: ingest.KindUnknown,
	} {
		if got := ingest.Detect([]byte(in)); got != want {
			t.Errorf("Detect(%.40s…) = %v, want %v", in, got, want)
		}
	}
}

type fixture struct {
	env *pgstoretest.Env
	h   *ingest.Handler
}

func newFixture(t *testing.T, cfg ingest.Config) fixture {
	t.Helper()
	env := pgstoretest.NewClocked(t)
	httpCalls := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 299, Body: req.RawPath}, nil
	}
	return fixture{env: env, h: ingest.New(env.Store, httpCalls, cfg)}
}

// messages returns the queue's log as partition/offset → payload.
func (f fixture) messages(t *testing.T, queue string) map[string]queen.Message {
	t.Helper()
	msgs, err := f.env.Store.Browse(context.Background(), queen.BrowseRequest{Queue: queue, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]queen.Message{}
	for _, m := range msgs {
		out[fmt.Sprintf("%s/%d", m.Partition, m.Offset)] = m.Message
	}
	return out
}

func TestSQS(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ingest.Config{DefaultQueue: "inbox"})
	ctx := context.Background()

	out, err := f.h.Invoke(ctx, json.RawMessage(sqsEvent))
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(events.SQSEventResponse)
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-bad" {
		t.Fatalf("batch item failures %+v, want only m-bad", resp.BatchItemFailures)
	}

	orders := f.messages(t, "orders")
	if len(orders) != 2 {
		t.Fatalf("orders holds %d messages, want 2: %v", len(orders), orders)
	}
	if m := orders["eu/0"]; m.TransactionID != "m-item" || string(m.Data) != `{"n": 1}` && string(m.Data) != `{"n":1}` {
		t.Errorf("push-item record: %+v", m)
	}
	if m := orders["us/0"]; m.TransactionID != "m-attrs" || !strings.Contains(string(m.Data), "2") {
		t.Errorf("attribute record: %+v", m)
	}
	inbox := f.messages(t, "inbox")
	if m := inbox["Default/0"]; m.TransactionID != "m-text" || string(m.Data) != `"plain text, not JSON"` {
		t.Errorf("raw text record to the default queue: %+v (inbox %v)", m, inbox)
	}

	// SQS redelivers the whole batch: nothing is queued twice, and only
	// the bad record fails again.
	out, err = f.h.Invoke(ctx, json.RawMessage(sqsEvent))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.SQSEventResponse); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("redelivery failures %+v", resp.BatchItemFailures)
	}
	if n := len(f.messages(t, "orders")) + len(f.messages(t, "inbox")); n != 3 {
		t.Errorf("after redelivery the log holds %d messages, want 3", n)
	}
}

func TestSQSFIFOFailsTheRest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ingest.Config{DefaultQueue: "inbox"})
	rec := func(id, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:ingest.fifo"}
	}
	resp, err := f.h.SQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		rec("a", `1`), rec("b", `{"queue":"bad queue","payload":2}`), rec("c", `3`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if strings.Join(ids, ",") != "b,c" {
		t.Errorf("FIFO failures %v, want b,c (everything from the first failure on)", ids)
	}
}

func TestSQSQueueFullFailsOnlyItsRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ingest.Config{})
	ctx := context.Background()
	one := int64(1)
	if _, err := f.env.Store.Configure(ctx, queen.ConfigureRequest{Queue: "small", Options: queen.QueueOptions{MaxSize: &one}}); err != nil {
		t.Fatal(err)
	}
	rec := func(id, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:r:1:q"}
	}
	resp, err := f.h.SQS(ctx, events.SQSEvent{Records: []events.SQSMessage{
		rec("s1", `{"queue":"small","payload":1}`), rec("s2", `{"queue":"small","payload":2}`), rec("b1", `{"queue":"big","payload":3}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "s2" {
		t.Errorf("failures %+v, want s2 only", resp.BatchItemFailures)
	}
	if len(f.messages(t, "small")) != 1 || len(f.messages(t, "big")) != 1 {
		t.Errorf("small %v, big %v", f.messages(t, "small"), f.messages(t, "big"))
	}
}

func TestSNS(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ingest.Config{})
	for range 2 { // the second is SNS retrying: a duplicate
		out, err := f.h.Invoke(context.Background(), json.RawMessage(snsEvent))
		if err != nil {
			t.Fatal(err)
		}
		if res := out.([]httpapi.PushResult); len(res) != 1 || res[0].TransactionID != "sns-1" || res[0].Partition != "p7" {
			t.Fatalf("results %+v", res)
		}
	}
	msgs := f.messages(t, "notifications")
	if len(msgs) != 1 || !strings.Contains(string(msgs["p7/0"].Data), "7") {
		t.Errorf("notifications %v", msgs)
	}

	// No queue anywhere: the invocation fails, so SNS retries it.
	_, err := f.h.SNS(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{
		{EventSource: "aws:sns", SNS: events.SNSEntity{MessageID: "x", Message: "hi"}}}})
	if !errors.Is(err, queen.ErrInvalid) || !strings.Contains(err.Error(), "QUEEN_DEFAULT_QUEUE") {
		t.Errorf("err = %v", err)
	}
}

func TestEventBridge(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ingest.Config{DefaultQueue: "events", PartitionField: "customer.id"})
	out, err := f.h.Invoke(context.Background(), json.RawMessage(ebEvent))
	if err != nil {
		t.Fatal(err)
	}
	res := out.([]httpapi.PushResult)
	if len(res) != 1 || res[0].Partition != "c-42" || res[0].TransactionID != "eb-1" || res[0].Status != "queued" {
		t.Fatalf("results %+v", res)
	}
	m := f.messages(t, "events")["c-42/0"]
	var detail map[string]any
	if err := json.Unmarshal(m.Data, &detail); err != nil || detail["total"] != 12.5 {
		t.Errorf("payload %s is not the detail", m.Data)
	}

	for field, want := range map[string]string{"total": "12.5", "missing": "Default", "customer": "Default"} {
		g := ingest.New(f.env.Store, nil, ingest.Config{DefaultQueue: "events", PartitionField: field})
		res, err := g.EventBridge(context.Background(), events.EventBridgeEvent{ID: "eb-" + field, Detail: json.RawMessage(`{"customer":{"id":"c"},"total":12.5}`)})
		if err != nil || res[0].Partition != want {
			t.Errorf("field %s: partition %+v, err %v; want %s", field, res, err, want)
		}
	}

	g := ingest.New(f.env.Store, nil, ingest.Config{})
	if _, err := g.EventBridge(context.Background(), events.EventBridgeEvent{ID: "x"}); err == nil {
		t.Error("EventBridge without a configured queue was accepted")
	}
}

func TestDirect(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ingest.Config{})
	ev := `{"items":[{"queue":"direct","partition":"a","payload":{"x":1},"transactionId":"t1"},{"queue":"direct","data":"y","traceId":"tr"}]}`
	out, err := f.h.Invoke(context.Background(), json.RawMessage(ev))
	if err != nil {
		t.Fatal(err)
	}
	res := out.([]httpapi.PushResult)
	if len(res) != 2 || res[0].Status != "queued" || res[0].TransactionID != "t1" || res[1].Partition != "Default" ||
		res[1].TraceID == nil || *res[1].TraceID != "tr" {
		t.Fatalf("results %+v", res)
	}
	// The wire shape is HTTP push's.
	b, _ := json.Marshal(res[0])
	for _, k := range []string{`"transaction_id"`, `"message_id"`, `"partition_id"`, `"queueName"`, `"offset"`, `"trace_id"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("result %s lacks %s", b, k)
		}
	}
	out, err = f.h.Invoke(context.Background(), json.RawMessage(ev))
	if err != nil {
		t.Fatal(err)
	}
	if res := out.([]httpapi.PushResult); res[0].Status != "duplicate" || res[1].Status != "queued" {
		t.Errorf("again: %+v", res)
	}

	// All or nothing, like HTTP push.
	_, err = f.h.Invoke(context.Background(), json.RawMessage(`{"items":[{"queue":"direct","payload":1},{"queue":"","payload":2}]}`))
	if !errors.Is(err, queen.ErrInvalid) || !strings.Contains(err.Error(), "items[1].queue") {
		t.Errorf("err = %v", err)
	}
	if n := len(f.messages(t, "direct")); n != 3 {
		t.Errorf("direct holds %d messages, want 3", n)
	}

	// An empty batch is an empty result, as HTTP push answers 201 [].
	out, err = f.h.Invoke(context.Background(), json.RawMessage(`{"items":[]}`))
	if err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	if b, _ := json.Marshal(out); string(b) != "[]" {
		t.Errorf("empty batch: %s, want []", b)
	}
}

func TestHTTPAndUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ingest.Config{})
	out, err := f.h.Invoke(context.Background(), json.RawMessage(httpEvent))
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(events.APIGatewayV2HTTPResponse); r.StatusCode != 299 || r.Body != "/health" {
		t.Errorf("HTTP event not routed to the HTTP handler: %+v", r)
	}
	if _, err := f.h.Invoke(context.Background(), json.RawMessage(`{"hello":"world"}`)); !errors.Is(err, ingest.ErrUnknownEvent) {
		t.Errorf("err = %v", err)
	}
}
