package httpapi_test

// Retention through the API (docs/semantics.md §3.7): what it deletes, and
// that maxSize counts only what is left.

import (
	"testing"
	"time"
)

// §3.7: maxSize counts messages that still exist; retention removes them
// from the count.
func TestMaxSizeFreedByRetention(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("q", map[string]any{"maxSize": 5, "retentionSeconds": 10})
	for i := 0; i < 5; i++ {
		s.pushN("q", "p", 1)
	}
	one := map[string]any{"items": []map[string]any{{"queue": "q", "partition": "p", "payload": "sixth"}}}
	s.expect("POST", "/api/v1/push", one, 429)

	s.env.Clock.Advance(11 * time.Second)
	s.reap()
	if b := s.browse("queue=q"); len(b.Messages) != 0 {
		t.Fatalf("retention of 10 s left %d messages after 11 s and a reap", len(b.Messages))
	}
	var q struct {
		Depth int64 `json:"depth"`
	}
	s.expect("GET", "/api/v1/resources/queues/q", nil, 200).json(t, &q)
	if q.Depth != 0 {
		t.Errorf("queue detail depth %d after retention removed every message, want 0", q.Depth)
	}
	var qs struct {
		Queues []struct {
			Name  string `json:"name"`
			Depth int64  `json:"depth"`
		} `json:"queues"`
	}
	s.expect("GET", "/api/v1/resources/queues", nil, 200).json(t, &qs)
	for _, x := range qs.Queues {
		if x.Name == "q" && x.Depth != 0 {
			t.Errorf("queue listing depth %d after retention removed every message, want 0", x.Depth)
		}
	}
	if r := s.do("POST", "/api/v1/push", one); r.status != 201 {
		t.Fatalf("push after retention emptied the queue (maxSize 5): %d %s, want 201", r.status, r.body)
	}
}

// §3.7: completedRetentionSeconds deletes segments every group has committed
// past; a group whose subscription starts after a segment never holds it back.
func TestCompletedRetentionIgnoresLaterSubscriber(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("q", map[string]any{"completedRetentionSeconds": 10})
	s.pushN("q", "p", 5)
	a, ok := s.popGroup("q", "p", "A", 10, "&subscriptionMode=all")
	if !ok || len(a.Messages) != 5 {
		t.Fatalf("group A pop: %v", offsets(a))
	}
	s.ackBatch("A", a.LeaseID, ackOf(a, 4, "completed"))
	if c := s.committed("A", "q", "p"); c != 4 {
		t.Fatalf("group A committed %d, want 4", c)
	}
	s.env.Clock.Advance(time.Second) // B subscribes after the messages were written
	s.expect("GET", "/api/v1/pop/queue/q?batch=10&consumerGroup=B&subscriptionMode=new", nil, 204)
	s.env.Clock.Advance(11 * time.Second)
	s.reap()
	if b := s.browse("queue=q"); len(b.Messages) != 0 {
		t.Fatalf("completedRetentionSeconds 10: %d consumed messages still there 12 s later, after a reap (group B subscribed after them): %+v",
			len(b.Messages), b.Messages)
	}
}
