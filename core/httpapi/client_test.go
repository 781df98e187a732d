package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/queen-serverless/queen/core/queen"
)

func pushItems(queue string, n int) []queen.PushItem {
	out := make([]queen.PushItem, n)
	for i := range out {
		out[i] = queen.PushItem{Queue: queue, Payload: json.RawMessage(fmt.Sprint(i))}
	}
	return out
}

// The flow Queen's own clients drive: push → pop with long-poll →
// ack / ack batch → transaction → DLQ list → retry, with their shapes.
func TestClientFlow(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.expect("POST", "/api/v1/configure", map[string]any{"queue": "jobs", "options": map[string]any{"retryLimit": 0, "leaseTime": 30, "priority": 5}}, 200)

	items := []map[string]any{}
	for i := 0; i < 4; i++ {
		items = append(items, map[string]any{"queue": "jobs", "partition": "tenant-a", "payload": map[string]any{"job": i}})
	}
	s.expect("POST", "/api/v1/push", map[string]any{"items": items}, 201)

	var p popped
	s.expect("GET", "/api/v1/pop/queue/jobs?batch=2&wait=true&timeout=2000", nil, 200).json(t, &p)
	if len(p.Messages) != 2 {
		t.Fatalf("pop %+v", p)
	}
	// Ack one by one.
	for _, m := range p.Messages {
		var a []acked
		s.expect("POST", "/api/v1/ack", map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"status": "completed", "leaseId": p.LeaseID}, 200).json(t, &a)
		if !a[0].Success {
			t.Fatalf("ack %+v", a)
		}
	}
	// Next batch: the first fails (retryLimit 0 → dead-lettered), the second completes.
	s.expect("GET", "/api/v1/pop/queue/jobs?batch=2&wait=true&timeout=2000", nil, 200).json(t, &p)
	var a []acked
	s.expect("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []map[string]any{
		{"transactionId": p.Messages[0].TransactionID, "partitionId": p.Messages[0].PartitionID, "status": "failed", "leaseId": p.LeaseID, "error": "boom"},
		{"transactionId": p.Messages[1].TransactionID, "partitionId": p.Messages[1].PartitionID, "status": "completed", "leaseId": p.LeaseID},
	}}, 200).json(t, &a)
	if !a[0].DLQ || *a[1].Committed != 3 || !a[1].LeaseReleased {
		t.Fatalf("batch ack %+v", a)
	}

	// Transaction: consume from jobs and hand off to results exactly once.
	s.expect("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "jobs", "partition": "tenant-a", "payload": "last"}}}, 201)
	s.expect("GET", "/api/v1/pop/queue/jobs?batch=1&wait=true&timeout=2000", nil, 200).json(t, &p)
	var tx struct {
		TransactionID string            `json:"transactionId"`
		Success       bool              `json:"success"`
		Results       []json.RawMessage `json:"results"`
	}
	s.expect("POST", "/api/v1/transaction", map[string]any{
		"operations": []map[string]any{
			{"type": "ack", "transactionId": p.Messages[0].TransactionID, "partitionId": p.Messages[0].PartitionID, "status": "completed"},
			{"type": "push", "items": []map[string]any{{"queue": "results", "payload": map[string]any{"done": true}}}},
		},
		"requiredLeases": []string{p.LeaseID},
	}, 200).json(t, &tx)
	if !tx.Success || tx.TransactionID == "" || len(tx.Results) != 2 || !strings.Contains(string(tx.Results[1]), `"queued"`) {
		t.Fatalf("transaction %+v", tx)
	}
	s.expect("GET", "/api/v1/pop/queue/results", nil, 200)

	// DLQ list, then retry the dead letter.
	var dlq struct {
		Messages []struct {
			PartitionID   string          `json:"partitionId"`
			TransactionID string          `json:"transactionId"`
			Data          json.RawMessage `json:"data"`
			ErrorMessage  string          `json:"errorMessage"`
			ConsumerGroup string          `json:"consumerGroup"`
		} `json:"messages"`
		Total int `json:"total"`
	}
	s.expect("GET", "/api/v1/dlq?queue=jobs", nil, 200).json(t, &dlq)
	if dlq.Total != 1 || dlq.Messages[0].ErrorMessage != "boom" || string(dlq.Messages[0].Data) != `{"job":2}` {
		t.Fatalf("dlq %+v", dlq)
	}
	d := dlq.Messages[0]
	s.expect("GET", "/api/v1/messages/"+d.PartitionID+"/"+d.TransactionID, nil, 200)
	var retried struct {
		Retried bool   `json:"retried"`
		Message pushed `json:"message"`
	}
	s.expect("POST", "/api/v1/messages/"+d.PartitionID+"/"+d.TransactionID+"/retry", nil, 200).json(t, &retried)
	if !retried.Retried || retried.Message.Status != "queued" || retried.Message.TransactionID == d.TransactionID {
		t.Fatalf("retry %+v", retried)
	}
	s.expect("GET", "/api/v1/pop/queue/jobs?wait=true&timeout=2000", nil, 200).json(t, &p)
	if string(p.Messages[0].Data) != `{"job":2}` {
		t.Fatalf("retried message %s", p.Messages[0].Data)
	}
	s.expect("GET", "/api/v1/dlq?queue=jobs", nil, 200).json(t, &dlq)
	if dlq.Total != 0 {
		t.Fatalf("DLQ after retry: %+v", dlq)
	}
}

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var cfg map[string]any
	s.expect("POST", "/api/v1/configure", map[string]any{"queue": "q", "namespace": "ns", "options": map[string]any{"leaseTime": 60, "priority": 9}}, 200).json(t, &cfg)
	opts := cfg["options"].(map[string]any)
	if cfg["configured"] != true || opts["leaseTime"] != 60.0 || opts["retryLimit"] != 3.0 || cfg["notes"] == nil {
		t.Fatalf("configure %+v", cfg)
	}
	s.expect("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "q", "partition": "a", "payload": 1}, {"queue": "q", "partition": "a", "payload": 2}}}, 201)
	var p popped
	s.expect("GET", "/api/v1/pop/queue/q?consumerGroup=g", nil, 200).json(t, &p)
	s.expect("POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "status": "completed", "consumerGroup": "g"}, 200)

	var qs struct {
		Queues []map[string]any `json:"queues"`
	}
	s.expect("GET", "/api/v1/resources/queues", nil, 200).json(t, &qs)
	if len(qs.Queues) != 1 || qs.Queues[0]["partitions"] != 1.0 || qs.Queues[0]["depth"] != 1.0 {
		t.Fatalf("queues %+v", qs)
	}
	var q struct {
		Partitions []map[string]any `json:"partitions"`
		Groups     []map[string]any `json:"groups"`
		Options    map[string]any   `json:"options"`
	}
	s.expect("GET", "/api/v1/resources/queues/q", nil, 200).json(t, &q)
	if q.Partitions[0]["lastOffset"] != 1.0 || q.Groups[0]["lag"] != 1.0 || q.Options["leaseTime"] != 60.0 {
		t.Fatalf("queue detail %+v", q)
	}
	var gs struct {
		ConsumerGroups []map[string]any `json:"consumerGroups"`
	}
	s.expect("GET", "/api/v1/consumer-groups", nil, 200).json(t, &gs)
	if len(gs.ConsumerGroups) != 1 || gs.ConsumerGroups[0]["lag"] != 1.0 {
		t.Fatalf("groups %+v", gs)
	}
	s.expect("GET", "/api/v1/consumer-groups/g", nil, 200)
	var browse struct {
		Messages []map[string]any `json:"messages"`
	}
	s.expect("GET", "/api/v1/messages?queue=q&partition=a&fromOffset=1", nil, 200).json(t, &browse)
	if len(browse.Messages) != 1 || browse.Messages[0]["offset"] != 1.0 {
		t.Fatalf("browse %+v", browse)
	}
	var seek map[string]any
	s.expect("POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"toBeginning": true}, 200).json(t, &seek)
	s.expect("GET", "/api/v1/pop/queue/q?consumerGroup=g&batch=5", nil, 200).json(t, &p)
	if len(p.Messages) != 2 {
		t.Fatalf("after seek to beginning got %d messages", len(p.Messages))
	}
	metrics := s.expect("GET", "/metrics/prometheus", nil, 200)
	for _, want := range []string{`queen_operations_total{op="push",outcome="ok"}`, `queen_queue_depth{queue="q"}`, `queen_group_lag{group="g",queue="q"}`, "queen_operation_seconds_bucket"} {
		if !strings.Contains(string(metrics.body), want) {
			t.Fatalf("metrics lack %s:\n%s", want, metrics.body)
		}
	}
	s.expect("DELETE", "/api/v1/consumer-groups/g/queues/q", nil, 200)
	s.expect("DELETE", "/api/v1/consumer-groups/g", nil, 404)
	s.expect("DELETE", "/api/v1/resources/queues/q", nil, 200)
	s.expect("GET", "/api/v1/resources/queues/q", nil, 404)
	var h map[string]string
	s.expect("GET", "/health", nil, 200).json(t, &h)
	if h["status"] != "healthy" || h["database"] != "connected" {
		t.Fatalf("health %v", h)
	}
}

// Queue names may hold '/': clients escape it as %2F inside a path segment.
func TestSlashInQueueName(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.expect("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "team/orders", "partition": "a/b", "payload": 1}}}, 201)
	var p popped
	s.expect("GET", "/api/v1/pop/queue/team%2Forders/partition/a%2Fb", nil, 200).json(t, &p)
	if p.Queue != "team/orders" || p.Partition != "a/b" {
		t.Fatalf("pop %+v", p)
	}
	s.expect("GET", "/api/v1/resources/queues/team%2Forders", nil, 200)
}
