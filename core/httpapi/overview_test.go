package httpapi_test

import (
	"reflect"
	"testing"

	"github.com/queen-serverless/queen/core/httpapi"
)

// The overview answers, per queue, what the detail routes answer one by
// one: depth, dead letters and each group's exact lag (lastOffset − cursor).
func TestOverview(t *testing.T) {
	t.Parallel()
	s := newServer(t)

	var empty httpapi.Overview
	s.expect("GET", "/api/v1/resources/overview", nil, 200).json(t, &empty)
	if empty.Queues == nil || len(empty.Queues) != 0 || empty.Totals != (httpapi.OverviewTotals{}) {
		t.Fatalf("empty overview %+v", empty)
	}

	s.expect("POST", "/api/v1/push", `{"items":[
		{"queue":"orders","partition":"a","payload":1,"transactionId":"o1"},
		{"queue":"orders","partition":"a","payload":2,"transactionId":"o2"},
		{"queue":"orders","partition":"b","payload":3,"transactionId":"o3"},
		{"queue":"mail","payload":4}]}`, 201)
	// billing dead-letters o1 (its cursor moves past it), reporting reads nothing yet.
	var p popped
	s.expect("GET", "/api/v1/pop/queue/orders/partition/a?batch=1&consumerGroup=billing", nil, 200).json(t, &p)
	s.expect("POST", "/api/v1/ack", map[string]any{"transactionId": "o1", "partitionId": p.PartitionID,
		"status": "dlq", "consumerGroup": "billing", "leaseId": p.LeaseID, "error": "bad"}, 200)
	s.expect("GET", "/api/v1/pop/queue/orders/partition/b?batch=1&consumerGroup=reporting", nil, 200).json(t, &p)

	var got httpapi.Overview
	s.expect("GET", "/api/v1/resources/overview", nil, 200).json(t, &got)
	want := httpapi.Overview{
		Totals: httpapi.OverviewTotals{Queues: 2, Partitions: 3, Depth: 4, DeadLetters: 1},
		Queues: []httpapi.QueueOverview{
			{Name: "mail", Depth: 1, Groups: []httpapi.GroupLag{}},
			{Name: "orders", Depth: 3, DeadLetters: 1, MaxLag: 3, Groups: []httpapi.GroupLag{
				{Group: "billing", Lag: 2}, {Group: "reporting", Lag: 3}}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("overview\n got %+v\nwant %+v", got, want)
	}

	// Dead letters outlive their queue: the overview still counts them.
	s.expect("DELETE", "/api/v1/resources/queues/orders", nil, 200)
	s.expect("GET", "/api/v1/resources/overview", nil, 200).json(t, &got)
	want = httpapi.Overview{
		Totals: httpapi.OverviewTotals{Queues: 1, Partitions: 1, Depth: 1, DeadLetters: 1},
		Queues: []httpapi.QueueOverview{
			{Name: "mail", Depth: 1, Groups: []httpapi.GroupLag{}},
			{Name: "orders", DeadLetters: 1, Groups: []httpapi.GroupLag{}, Deleted: true},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("overview after delete\n got %+v\nwant %+v", got, want)
	}
}
