package httpapi_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/queen-serverless/queen/core/httpapi"
)

// TestMaintenance switches both maintenance modes over HTTP on the API as
// `queen serve` builds it (docs/semantics.md §3.7.10): push maintenance
// refuses every way in — a push, a transaction's push, a DLQ retry — with
// 503 and Retry-After and writes nothing; pop maintenance makes pops
// empty; both switches live in the database, so another process (a
// restart) sees them.
func TestMaintenance(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var res []pushed
	s.expect("POST", "/api/v1/push", `{"items":[{"queue":"m","payload":1},{"queue":"m","payload":2}]}`, 201).json(t, &res)
	// a dead letter to retry later
	var p popped
	s.expect("GET", "/api/v1/pop/queue/m?batch=1&consumerGroup=g", nil, 200).json(t, &p)
	s.expect("POST", "/api/v1/ack", map[string]any{"transactionId": res[0].TransactionID, "partitionId": res[0].PartitionID,
		"status": "dlq", "consumerGroup": "g", "leaseId": p.LeaseID}, 200)

	var h popped // leased to group h, acked by a refused transaction
	s.expect("GET", "/api/v1/pop/queue/m?batch=1&consumerGroup=h", nil, 200).json(t, &h)

	var on struct {
		MaintenanceMode bool `json:"maintenanceMode"`
	}
	s.expect("POST", "/api/v1/system/maintenance", `{"enabled":true}`, 200).json(t, &on)
	if !on.MaintenanceMode {
		t.Fatalf("maintenanceMode after enabling = false")
	}
	tables := []string{"queues", "partitions", "segments", "dedup", "consumers", "dlq"}
	before := map[string]int64{}
	for _, tb := range tables {
		before[tb] = s.rows(tb)
	}
	refused := func(srv *server, method, path string, body any) {
		t.Helper()
		r := srv.do(method, path, body)
		if r.status != 503 {
			t.Fatalf("%s %s during push maintenance: status %d (%s), want 503", method, path, r.status, r.body)
		}
		if got := r.header.Get("Retry-After"); got != strconv.Itoa(httpapi.MaintenanceRetryAfter) {
			t.Errorf("%s %s: Retry-After %q, want %d", method, path, got, httpapi.MaintenanceRetryAfter)
		}
	}
	refused(s, "POST", "/api/v1/push", `{"items":[{"queue":"m","payload":3},{"queue":"new","payload":4}]}`)
	refused(s, "POST", "/api/v1/transaction", map[string]any{"operations": []map[string]any{
		{"type": "ack", "transactionId": h.Messages[0].TransactionID, "partitionId": h.PartitionID, "status": "completed",
			"consumerGroup": "h", "leaseId": h.LeaseID},
		{"type": "push", "items": []map[string]any{{"queue": "m", "payload": 5}}}}})
	if c := s.committed("h", "m", "Default"); c != -1 {
		t.Fatalf("the refused transaction committed its ack: cursor %d", c)
	}
	refused(s, "POST", "/api/v1/messages/"+res[0].PartitionID+"/"+res[0].TransactionID+"/retry", nil)

	// Another process on the same database — a restart — sees the switch.
	other := s.another(t)
	var st struct {
		MaintenanceMode    bool `json:"maintenanceMode"`
		PopMaintenanceMode bool `json:"popMaintenanceMode"`
	}
	other.expect("GET", "/api/v1/system/maintenance", nil, 200).json(t, &st)
	if !st.MaintenanceMode || st.PopMaintenanceMode {
		t.Fatalf("after a restart: maintenance %+v, want push on, pop off", st)
	}
	refused(other, "POST", "/api/v1/push", `{"items":[{"queue":"m","payload":6}]}`)
	for _, tb := range tables {
		if n := s.rows(tb); n != before[tb] {
			t.Errorf("%s: %d rows after refused requests, %d before: something was written", tb, n, before[tb])
		}
	}
	// pops go on during push maintenance
	s.expect("GET", "/api/v1/pop/queue/m?batch=1", nil, 200)

	s.expect("POST", "/api/v1/system/maintenance", `{"enabled":false}`, 200)
	other.expect("POST", "/api/v1/push", `{"items":[{"queue":"m","payload":7}]}`, 201)

	var pop struct {
		PopMaintenanceMode bool `json:"popMaintenanceMode"`
	}
	s.expect("POST", "/api/v1/system/maintenance/pop", `{"enabled":true}`, 200).json(t, &pop)
	if !pop.PopMaintenanceMode {
		t.Fatalf("popMaintenanceMode after enabling = false")
	}
	other.expect("GET", "/api/v1/pop/queue/m?batch=10&consumerGroup=h2", nil, 204)
	other.expect("GET", "/api/v1/pop/queue/m?batch=10&wait=true&timeout=50", nil, 204)
	s.expect("POST", "/api/v1/push", `{"items":[{"queue":"m","payload":8}]}`, 201) // pushes go on
	other.expect("GET", "/api/v1/system/maintenance", nil, 200).json(t, &st)
	if st.MaintenanceMode || !st.PopMaintenanceMode {
		t.Fatalf("maintenance %+v, want push off, pop on", st)
	}
	s.expect("POST", "/api/v1/system/maintenance/pop", `{"enabled":false}`, 200)
	other.expect("GET", "/api/v1/pop/queue/m?batch=10&consumerGroup=h2", nil, 200)
	if r := s.do("POST", "/api/v1/system/maintenance", `{}`); r.status != 400 || !strings.Contains(r.errorText(t), "enabled") {
		t.Fatalf("no enabled: %d %s, want 400 naming enabled", r.status, r.body)
	}
}
