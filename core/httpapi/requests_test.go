package httpapi_test

// Requests as a client makes them through the API, and the wire forms of
// their replies, shared by the tests of every operation.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/queen-serverless/queen/core/queen"
)

// dlqPage is the wire form of a DLQ listing.
type dlqPage struct {
	Messages []struct {
		Queue         string `json:"queue"`
		Partition     string `json:"partition"`
		PartitionID   string `json:"partitionId"`
		Offset        int64  `json:"offset"`
		TransactionID string `json:"transactionId"`
		ConsumerGroup string `json:"consumerGroup"`
	} `json:"messages"`
	Total int64 `json:"total"`
}

// browsePage is the wire form of a message listing.
type browsePage struct {
	Messages []struct {
		TransactionID string `json:"transactionId"`
		Offset        int64  `json:"offset"`
		Partition     string `json:"partition"`
	} `json:"messages"`
}

// i64 prints an optional offset.
func i64(p *int64) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

// configure sets a queue's options (200 expected).
func (s *server) configure(queue string, opts map[string]any) {
	s.t.Helper()
	s.expect("POST", "/api/v1/configure", map[string]any{"queue": queue, "options": opts}, 200)
}

// pushN pushes n messages to queue/partition in one request.
func (s *server) pushN(queue, partition string, n int) []pushed {
	s.t.Helper()
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": queue, "partition": partition, "payload": map[string]any{"n": i}}
	}
	var res []pushed
	s.expect("POST", "/api/v1/push", map[string]any{"items": items}, 201).json(s.t, &res)
	if len(res) != n {
		s.t.Fatalf("push of %d: %d results", n, len(res))
	}
	return res
}

// pushOnePerPartition pushes one message to each of partitions
// name(0)…name(n-1) of queue, in requests small enough for the test body
// limit.
func (s *server) pushOnePerPartition(queue string, n int, name func(int) string) {
	s.t.Helper()
	for lo := 0; lo < n; lo += 400 {
		var items []map[string]any
		for i := lo; i < min(n, lo+400); i++ {
			items = append(items, map[string]any{"queue": queue, "partition": name(i), "payload": i})
		}
		s.expect("POST", "/api/v1/push", map[string]any{"items": items}, 201)
	}
}

// popGroup pops queue/partition for group; ok is false on 204.
func (s *server) popGroup(queue, partition, group string, batch int, extra string) (popped, bool) {
	s.t.Helper()
	return s.popPath(fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?batch=%d&consumerGroup=%s%s",
		url.PathEscape(queue), url.PathEscape(partition), batch, url.QueryEscape(group), extra))
}

// popWildcard pops queue for group; ok is false on 204.
func (s *server) popWildcard(queue, group, query string) (popped, bool) {
	s.t.Helper()
	return s.popPath("/api/v1/pop/queue/" + queue + "?consumerGroup=" + group + query)
}

// popPath pops with GET path; ok is false on 204.
func (s *server) popPath(path string) (popped, bool) {
	s.t.Helper()
	r := s.do("GET", path, nil)
	switch r.status {
	case 204:
		return popped{}, false
	case 200:
		var p popped
		r.json(s.t, &p)
		return p, true
	}
	s.t.Fatalf("GET %s: status %d (%s)", path, r.status, r.body)
	return popped{}, false
}

// offsets are the offsets a pop delivered, in order.
func offsets(p popped) []int64 {
	out := make([]int64, len(p.Messages))
	for i, m := range p.Messages {
		out[i] = m.Offset
	}
	return out
}

// ackBatch posts one ack/batch call (200 expected).
func (s *server) ackBatch(group, leaseID string, acks ...map[string]any) []acked {
	s.t.Helper()
	body := map[string]any{"consumerGroup": group, "acknowledgments": acks}
	if leaseID != "" {
		body["leaseId"] = leaseID
	}
	var res []acked
	s.expect("POST", "/api/v1/ack/batch", body, 200).json(s.t, &res)
	if len(res) != len(acks) {
		s.t.Fatalf("ack/batch of %d: %d results: %+v", len(acks), len(res), res)
	}
	return res
}

// ackOf is one acknowledgement of the message at offset of a pop.
func ackOf(p popped, offset int64, status string) map[string]any {
	for _, m := range p.Messages {
		if m.Offset == offset {
			return map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": status}
		}
	}
	panic(fmt.Sprintf("offset %d not in pop %v", offset, offsets(p)))
}

// ackAll acks every message of a pop as completed, under its lease.
func (s *server) ackAll(group string, p popped) {
	s.t.Helper()
	acks := make([]map[string]any, len(p.Messages))
	for i, m := range p.Messages {
		acks[i] = map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed"}
	}
	for _, a := range s.ackBatch(group, p.LeaseID, acks...) {
		if !a.Success {
			s.t.Fatalf("ack failed: %v", a)
		}
	}
}

// committed reads group's committed offset on queue/partition through
// GET /api/v1/consumer-groups/:group.
func (s *server) committed(group, queue, partition string) int64 {
	s.t.Helper()
	var g struct {
		Queues []struct {
			Queue   string `json:"queue"`
			Cursors []struct {
				Partition string `json:"partition"`
				Committed int64  `json:"committed"`
			} `json:"cursors"`
		} `json:"queues"`
	}
	s.expect("GET", "/api/v1/consumer-groups/"+url.PathEscape(group), nil, 200).json(s.t, &g)
	for _, q := range g.Queues {
		if q.Queue != queue {
			continue
		}
		for _, c := range q.Cursors {
			if c.Partition == partition {
				return c.Committed
			}
		}
	}
	s.t.Fatalf("group %s has no cursor on %s/%s: %+v", group, queue, partition, g)
	return 0
}

// dlq lists dead letters with GET /api/v1/dlq?query.
func (s *server) dlq(query string) dlqPage {
	s.t.Helper()
	var d dlqPage
	s.expect("GET", "/api/v1/dlq?"+query, nil, 200).json(s.t, &d)
	return d
}

// browse lists messages with GET /api/v1/messages?query.
func (s *server) browse(query string) browsePage {
	s.t.Helper()
	var b browsePage
	s.expect("GET", "/api/v1/messages?"+query, nil, 200).json(s.t, &b)
	return b
}

// queueDetail reads GET /api/v1/resources/queues/:queue.
type queueDetail struct {
	Depth  int64 `json:"depth"`
	Groups []struct {
		Group        string `json:"group"`
		Lag          int64  `json:"lag"`
		ActiveLeases int    `json:"activeLeases"`
	} `json:"groups"`
}

// queue reads one queue's detail.
func (s *server) queue(name string) queueDetail {
	s.t.Helper()
	var q queueDetail
	s.expect("GET", "/api/v1/resources/queues/"+name, nil, 200).json(s.t, &q)
	return q
}

// reap runs one reaper pass on the server's store.
func (s *server) reap() {
	s.t.Helper()
	if _, err := s.env.Store.Reap(context.Background(), queen.ReapRequest{Batch: 1000}); err != nil {
		s.t.Fatal(err)
	}
}

// postStatus is a request from a goroutine other than the test's.
func postStatus(u string) (int, error) {
	resp, err := http.Post(u, "application/json", nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
