package ingest_test

// Fuzz targets for the event decoders (SQS, SNS, EventBridge, direct
// invoke), against the real store: no panic, a record that fails writes
// nothing, and one that is accepted is in the log under its transactionId.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/queen-serverless/queen/core/ingest"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

type fuzzIngest struct {
	h   *ingest.Handler
	env *pgstoretest.Env
	n   atomic.Int64
}

func newFuzzIngest(f *testing.F) *fuzzIngest {
	env := pgstoretest.NewClocked(f)
	return &fuzzIngest{env: env, h: ingest.New(env.Store, nil, ingest.Config{DefaultQueue: "inbox", PartitionField: "customer.id"})}
}

func (z *fuzzIngest) segments(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := z.env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM queen.segments`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// logged reports whether a message with transactionId tx is in the log.
func (z *fuzzIngest) logged(t *testing.T, tx string) bool {
	t.Helper()
	var ok bool
	if err := z.env.Pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM queen.segments s WHERE $1 = ANY (`+pgstoretest.SegmentTxIDs+`))`,
		tx).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func FuzzSQSRecord(f *testing.F) {
	for _, s := range [][3]string{
		{`{"queue":"orders","partition":"eu","payload":{"n":1},"transactionId":"t"}`, "", ""},
		{`plain text`, "orders", "us"}, {`{"n":2}`, "", ""}, {`{"queue":"","payload":1}`, "", ""},
		{`{"queue":"orders","payload":"\ud800"}`, "", ""}, {`"\u0000"`, "q", "p"}, {``, "", ""},
		{`{"queue":"bad name!","payload":1}`, "", ""}, {`1`, "orders", "\x00"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	z := newFuzzIngest(f)
	f.Fuzz(func(t *testing.T, body, queue, partition string) {
		id := fmt.Sprintf("sqs-%d", z.n.Add(1))
		attrs := map[string]events.SQSMessageAttribute{}
		if queue != "" {
			attrs["queue"] = events.SQSMessageAttribute{DataType: "String", StringValue: &queue}
		}
		if partition != "" {
			attrs["partition"] = events.SQSMessageAttribute{DataType: "String", StringValue: &partition}
		}
		before := z.segments(t)
		resp, err := z.h.SQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: id, Body: body, MessageAttributes: attrs, EventSource: "aws:sqs"}}})
		if err != nil {
			t.Fatalf("SQS batch error for %q: %v (a bad record must fail alone)", body, err)
		}
		failed := len(resp.BatchItemFailures) == 1
		if failed {
			if z.segments(t) != before {
				t.Fatalf("record %q failed but wrote", body)
			}
			return
		}
		var item struct {
			TransactionID string `json:"transactionId"`
		}
		tx := id
		if json.Unmarshal([]byte(body), &item) == nil && item.TransactionID != "" {
			tx = item.TransactionID
		}
		if !z.logged(t, tx) {
			t.Fatalf("record %q accepted, but no message %s is in the log", body, tx)
		}
	})
}

func FuzzSNSMessage(f *testing.F) {
	for _, s := range []string{`{"queue":"orders","payload":1}`, `plain`, `{"n":1}`, ``, `{"queue":"x y"}`, `"\ud800"`} {
		f.Add(s)
	}
	z := newFuzzIngest(f)
	f.Fuzz(func(t *testing.T, msg string) {
		id := fmt.Sprintf("sns-%d", z.n.Add(1))
		before := z.segments(t)
		_, err := z.h.SNS(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{{
			EventSource: "aws:sns", SNS: events.SNSEntity{MessageID: id, Message: msg}}}})
		if err != nil {
			if z.segments(t) != before {
				t.Fatalf("message %q failed (%v) but wrote", msg, err)
			}
			return
		}
		var item struct {
			TransactionID string `json:"transactionId"`
		}
		tx := id
		if json.Unmarshal([]byte(msg), &item) == nil && item.TransactionID != "" {
			tx = item.TransactionID
		}
		if !z.logged(t, tx) {
			t.Fatalf("message %q accepted, but no message %s is in the log", msg, tx)
		}
	})
}

func FuzzEventBridgeDetail(f *testing.F) {
	for _, s := range []string{`{"customer":{"id":"c-1"},"total":3}`, `{}`, `null`, `[1,2]`, `{"customer":{"id":5}}`,
		`{"customer":{"id":""}}`, `{"customer":{"id":"\u0000"}}`, `"x"`} {
		f.Add([]byte(s))
	}
	z := newFuzzIngest(f)
	f.Fuzz(func(t *testing.T, detail []byte) {
		if !json.Valid(detail) {
			return // EventBridge delivers JSON only
		}
		id := fmt.Sprintf("eb-%d", z.n.Add(1))
		before := z.segments(t)
		_, err := z.h.EventBridge(context.Background(), events.EventBridgeEvent{ID: id, Detail: detail, Source: "s", DetailType: "d"})
		if err != nil {
			if z.segments(t) != before {
				t.Fatalf("detail %s failed (%v) but wrote", detail, err)
			}
			return
		}
		if !z.logged(t, id) {
			t.Fatalf("detail %s accepted, but event %s is not in the log", detail, id)
		}
	})
}

func FuzzDirect(f *testing.F) {
	for _, s := range []string{`{"items":[{"queue":"q","payload":1,"transactionId":"d"}]}`, `{"items":[]}`, `{"items":null}`,
		`{"items":[{"queue":"","payload":1}]}`, `{"items":[{"queue":"q","payload":1,"transactionId":"\ud800"}]}`} {
		f.Add([]byte(s))
	}
	z := newFuzzIngest(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		before := z.segments(t)
		out, err := z.h.Direct(context.Background(), raw)
		if err != nil {
			if z.segments(t) != before {
				t.Fatalf("invoke %q failed (%v) but wrote", raw, err)
			}
			return
		}
		for _, r := range out {
			if !z.logged(t, r.TransactionID) {
				t.Fatalf("invoke %q accepted, but %s is not in the log", raw, r.TransactionID)
			}
		}
	})
}
