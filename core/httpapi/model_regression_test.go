package httpapi_test

// Regression tests for defects of the log model, driven through the HTTP
// API. Every expected value comes from docs/semantics.md §3.5–3.7; none was
// taken from running the engine.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// regAck is the wire form of one ack result, with the fields docs/api.md names.
type regAck struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	Result        string  `json:"result"`
	DLQ           bool    `json:"dlq"`
	Committed     *int64  `json:"committed"`
	LeaseReleased bool    `json:"leaseReleased"`
}

type regDLQ struct {
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

type regBrowse struct {
	Messages []struct {
		TransactionID string `json:"transactionId"`
		Offset        int64  `json:"offset"`
		Partition     string `json:"partition"`
	} `json:"messages"`
}

func (a regAck) String() string {
	e := ""
	if a.Error != nil {
		e = *a.Error
	}
	return fmt.Sprintf("{index %d success %v result %q dlq %v committed %s leaseReleased %v error %q}",
		a.Index, a.Success, a.Result, a.DLQ, i64(a.Committed), a.LeaseReleased, e)
}

func i64(p *int64) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

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

// popGroup pops queue/partition for group; ok is false on 204.
func (s *server) popGroup(queue, partition, group string, batch int, extra string) (popped, bool) {
	s.t.Helper()
	return s.popPath(fmt.Sprintf("/api/v1/pop/queue/%s/partition/%s?batch=%d&consumerGroup=%s%s",
		url.PathEscape(queue), url.PathEscape(partition), batch, url.QueryEscape(group), extra))
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

func offsets(p popped) []int64 {
	out := make([]int64, len(p.Messages))
	for i, m := range p.Messages {
		out[i] = m.Offset
	}
	return out
}

// ackBatch posts one ack/batch call (200 expected).
func (s *server) ackBatch(group, leaseID string, acks ...map[string]any) []regAck {
	s.t.Helper()
	body := map[string]any{"consumerGroup": group, "acknowledgments": acks}
	if leaseID != "" {
		body["leaseId"] = leaseID
	}
	var res []regAck
	s.expect("POST", "/api/v1/ack/batch", body, 200).json(s.t, &res)
	if len(res) != len(acks) {
		s.t.Fatalf("ack/batch of %d: %d results: %+v", len(acks), len(res), res)
	}
	return res
}

// ackOf is one acknowledgement of message i of a pop.
func ackOf(p popped, offset int64, status string) map[string]any {
	for _, m := range p.Messages {
		if m.Offset == offset {
			return map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": status}
		}
	}
	panic(fmt.Sprintf("offset %d not in pop %v", offset, offsets(p)))
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

func (s *server) dlq(query string) regDLQ {
	s.t.Helper()
	var d regDLQ
	s.expect("GET", "/api/v1/dlq?"+query, nil, 200).json(s.t, &d)
	return d
}

func (s *server) browse(query string) regBrowse {
	s.t.Helper()
	var b regBrowse
	s.expect("GET", "/api/v1/messages?"+query, nil, 200).json(s.t, &b)
	return b
}

func (s *server) reap() {
	s.t.Helper()
	if _, err := s.env.Store.Reap(context.Background(), queen.ReapRequest{Batch: 1000}); err != nil {
		s.t.Fatal(err)
	}
}

// §3.5: over span (2,5], [4 failed, 5 completed] gives committed = 3 (offset
// 3 is not mentioned and counts as covered); 4 is redelivered with one more
// attempt, then 5; on its retryLimit+1-th failed attempt 4 is dead-lettered
// and 5 commits.
func TestRegressionClampUnmentionedFailed(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.configure("q", map[string]any{"retryLimit": 3})
	s.pushN("q", "p", 6)

	p, ok := s.popGroup("q", "p", "g", 3, "")
	if !ok || fmt.Sprint(offsets(p)) != "[0 1 2]" {
		t.Fatalf("first pop: %v", offsets(p))
	}
	if r := s.ackBatch("g", p.LeaseID, ackOf(p, 2, "completed")); !r[0].Success || i64(r[0].Committed) != "2" {
		t.Fatalf("ack 2 completed: %+v, want committed 2", r[0])
	}
	p, ok = s.popGroup("q", "p", "g", 10, "")
	if !ok || fmt.Sprint(offsets(p)) != "[3 4 5]" {
		t.Fatalf("second pop: %v, want [3 4 5]", offsets(p))
	}
	// Failed attempt 1 of offset 4.
	r := s.ackBatch("g", p.LeaseID, ackOf(p, 4, "failed"), ackOf(p, 5, "completed"))
	for _, x := range r {
		if !x.Success || i64(x.Committed) != "3" {
			t.Errorf("span (2,5], [4 failed, 5 completed]: item %+v (committed %s), want success with committed = min(5, 4-1) = 3", x, i64(x.Committed))
		}
	}
	if c := s.committed("g", "q", "p"); c != 3 {
		t.Fatalf("span (2,5], [4 failed, 5 completed]: group reports committed %d, want 3", c)
	}

	// Offset 4 comes back with one attempt more each time; its 4th failed
	// attempt (retryLimit 3 + 1) dead-letters it. 5 commits.
	dead := false
	for attempt := 1; attempt <= 3 && !dead; attempt++ {
		p, ok = s.popGroup("q", "p", "g", 10, "")
		if !ok {
			t.Fatalf("after failed attempt %d of offset 4: pop is empty, want offset 4 redelivered", attempt)
		}
		if m := p.Messages[0]; m.Offset != 4 || m.RetryCount != attempt {
			t.Fatalf("after failed attempt %d of offset 4: pop delivers %v, head offset %d retryCount %d; want offset 4 with retryCount %d",
				attempt, offsets(p), m.Offset, m.RetryCount, attempt)
		}
		if len(p.Messages) > 1 && p.Messages[1].Offset != 5 {
			t.Fatalf("redelivery %v: want 4 then 5", offsets(p))
		}
		acks := []map[string]any{ackOf(p, 4, "failed")}
		if len(p.Messages) > 1 {
			acks = append(acks, ackOf(p, 5, "completed"))
		}
		r = s.ackBatch("g", p.LeaseID, acks...)
		want := int64(3)
		if attempt == 3 { // 4th failed attempt: dead-lettered, no stop signal left.
			dead = true
			want = 4
			if len(p.Messages) > 1 {
				want = 5
			}
		}
		for _, x := range r {
			if i64(x.Committed) != fmt.Sprint(want) || (!dead && !x.Success) {
				t.Fatalf("failed attempt %d of offset 4 (pop %v): item %+v committed %s, want %d", attempt+1, offsets(p), x, i64(x.Committed), want)
			}
		}
	}
	if s.committed("g", "q", "p") == 4 { // 5 was not in the last batch: it comes alone now.
		p, ok = s.popGroup("q", "p", "g", 10, "")
		if !ok || fmt.Sprint(offsets(p)) != "[5]" {
			t.Fatalf("after 4 is dead-lettered: pop %v, want [5]", offsets(p))
		}
		s.ackBatch("g", p.LeaseID, ackOf(p, 5, "completed"))
	}
	if c := s.committed("g", "q", "p"); c != 5 {
		t.Fatalf("after 4 is dead-lettered and 5 completed: committed %d, want 5", c)
	}
	d := s.dlq("queue=q")
	if d.Total != 1 || len(d.Messages) != 1 || d.Messages[0].Offset != 4 || d.Messages[0].ConsumerGroup != "g" {
		t.Fatalf("DLQ %+v, want exactly offset 4 of group g", d)
	}
	if _, ok := s.popGroup("q", "p", "g", 10, ""); ok {
		t.Fatal("pop after everything resolved delivered messages")
	}
}

// §3.5: over span (-1,2], [1 retry, 2 completed] gives committed = 0 (0 is
// not mentioned and counts as covered); the next pop starts at 1 with no
// attempt consumed.
func TestRegressionClampUnmentionedRetry(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.pushN("q", "p", 3)
	p, ok := s.popGroup("q", "p", "g", 3, "")
	if !ok || fmt.Sprint(offsets(p)) != "[0 1 2]" {
		t.Fatalf("pop: %v", offsets(p))
	}
	r := s.ackBatch("g", p.LeaseID, ackOf(p, 1, "retry"), ackOf(p, 2, "completed"))
	for _, x := range r {
		if !x.Success || i64(x.Committed) != "0" {
			t.Errorf("span (-1,2], [1 retry, 2 completed]: item %+v committed %s, want success with committed = min(2, 1-1) = 0", x, i64(x.Committed))
		}
	}
	if c := s.committed("g", "q", "p"); c != 0 {
		t.Fatalf("span (-1,2], [1 retry, 2 completed]: group reports committed %d, want 0", c)
	}
	p, ok = s.popGroup("q", "p", "g", 10, "")
	if !ok {
		t.Fatal("pop after retry of 1 is empty, want offset 1 redelivered")
	}
	if m := p.Messages[0]; m.Offset != 1 || m.RetryCount != 0 {
		t.Fatalf("pop after retry of 1: %v, head offset %d retryCount %d; want offset 1 with retryCount 0", offsets(p), m.Offset, m.RetryCount)
	}
}

// §3.5: no call commits past one of its own stop signals, whether or not the
// signal is applied; an acknowledged failed is never turned into a commit.
func TestRegressionStaleFailedNeverCommits(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("q", map[string]any{"leaseTime": 1})
	s.pushN("q", "p", 3)

	a, ok := s.popGroup("q", "p", "g", 3, "")
	if !ok || fmt.Sprint(offsets(a)) != "[0 1 2]" {
		t.Fatalf("consumer A pop: %v", offsets(a))
	}
	s.env.Clock.Advance(2 * time.Second) // A's lease expires
	b, ok := s.popGroup("q", "p", "g", 3, "")
	if !ok || fmt.Sprint(offsets(b)) != "[0]" || b.Messages[0].RetryCount != 1 {
		t.Fatalf("consumer B pop after A's lease expired: %v (%+v), want the head 0 alone with retryCount 1", offsets(b), b.Messages)
	}

	// A, late and without leaseId.
	r := s.ackBatch("g", "", ackOf(a, 0, "completed"), ackOf(a, 1, "failed"), ackOf(a, 2, "completed"))
	for i, x := range r {
		if i64(x.Committed) != "0" {
			t.Errorf("stale [0 completed, 1 failed, 2 completed]: item %d %+v committed %s, want 0 (never past the failed at 1)", i, x, i64(x.Committed))
		}
		if i > 0 && x.Result == queen.ResultCommitted {
			t.Errorf("stale [0 completed, 1 failed, 2 completed]: offset %d reported %q; a failed is never turned into a commit", i, x.Result)
		}
	}
	if c := s.committed("g", "q", "p"); c != 0 {
		t.Fatalf("after stale [0 completed, 1 failed, 2 completed]: committed %d, want 0", c)
	}
	// Offset 1 is not lost: a later pop of g delivers it (once B's lease on
	// (-1,0] is out of the way).
	p, ok := s.popGroup("q", "p", "g", 10, "")
	if !ok {
		s.env.Clock.Advance(2 * time.Second)
		p, ok = s.popGroup("q", "p", "g", 10, "")
	}
	if !ok || p.Messages[0].Offset != 1 {
		t.Fatalf("pop after the stale failed of offset 1: %v (ok %v), want offset 1 delivered again", offsets(p), ok)
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

// §3.6: concurrent retries of one DLQ address re-push one copy; the others
// get 404; the DLQ row is gone.
func TestRegressionDLQRetryExactlyOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const rounds, racers = 10, 8
	for round := 0; round < rounds; round++ {
		part := fmt.Sprintf("r%d", round)
		s.pushN("q", part, 1)
		p, ok := s.popGroup("q", part, "g", 1, "")
		if !ok {
			t.Fatalf("round %d: pop empty", round)
		}
		s.ackBatch("g", p.LeaseID, ackOf(p, 0, "dlq"))
		d := s.dlq("queue=q&partition=" + url.QueryEscape(part))
		if d.Total != 1 {
			t.Fatalf("round %d: DLQ %+v, want the one dead letter", round, d)
		}
		addr := s.URL + "/api/v1/messages/" + d.Messages[0].PartitionID + "/" + url.PathEscape(d.Messages[0].TransactionID) + "/retry"

		start := make(chan struct{})
		statuses := make([]int, racers)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i], errs[i] = postStatus(addr)
			}()
		}
		close(start)
		wg.Wait()
		ok2xx, notFound := 0, 0
		for i := range statuses {
			if errs[i] != nil {
				t.Fatalf("round %d: retry %d: %v", round, i, errs[i])
			}
			switch {
			case statuses[i] >= 200 && statuses[i] < 300:
				ok2xx++
			case statuses[i] == 404:
				notFound++
			}
		}
		if ok2xx != 1 || notFound != racers-1 {
			t.Errorf("round %d: %d concurrent retries of one address answered %v; want exactly one 2xx and %d × 404",
				round, racers, statuses, racers-1)
		}
		b := s.browse("queue=q&partition=" + url.QueryEscape(part))
		if len(b.Messages) != 2 {
			t.Errorf("round %d: partition holds %d messages after the retries, want 2 (the original and exactly one re-pushed copy): %+v",
				round, len(b.Messages), b.Messages)
		}
		if p, ok := s.popGroup("q", part, "g", 100, ""); !ok || len(p.Messages) != 1 {
			t.Errorf("round %d: group pops %v after the retries, want exactly one re-pushed message", round, offsets(p))
		}
		if d := s.dlq("queue=q&partition=" + url.QueryEscape(part)); d.Total != 0 {
			t.Errorf("round %d: DLQ after retry %+v, want empty", round, d)
		}
	}
}

// §3.7: maxSize counts messages that still exist; retention removes them
// from the count.
func TestRegressionMaxSizeAfterRetention(t *testing.T) {
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
func TestRegressionCompletedRetentionLateNewSubscriber(t *testing.T) {
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

// oldAck checks §3.5: an ack of an offset at or below the cursor is a success
// no-op "already committed", however old the message and whatever the dedup
// window — here after more than 1,000 later segments.
func oldAck(t *testing.T, dedupWindow int) {
	s := newClockedServer(t)
	s.configure("q", map[string]any{"dedupWindowSeconds": dedupWindow})
	first := s.pushN("q", "p", 1)[0]
	p, ok := s.popGroup("q", "p", "g", 1, "")
	if !ok {
		t.Fatal("pop empty")
	}
	s.ackBatch("g", p.LeaseID, ackOf(p, 0, "completed"))
	s.env.Clock.Advance(time.Duration(dedupWindow+1) * time.Second)
	s.reap()

	ctx := context.Background()
	const later = 1001
	for i := 0; i < later; i++ { // one segment each
		if _, err := s.env.Store.Push(ctx, []queen.PushItem{{Queue: "q", Partition: "p", Payload: json.RawMessage(fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < later; {
		res, err := s.env.Store.Pop(ctx, queen.PopRequest{Queue: "q", Partition: "p", ConsumerGroup: "g", Batch: 1000})
		if err != nil || len(res.Messages) == 0 {
			t.Fatalf("consuming the later messages: %d so far, %v", got, err)
		}
		got += len(res.Messages)
		last := res.Messages[len(res.Messages)-1]
		if _, err := s.env.Store.Ack(ctx, []queen.Ack{{PartitionID: last.PartitionID, TransactionID: last.TransactionID,
			Status: queen.AckCompleted, ConsumerGroup: "g", LeaseID: res.LeaseID}}); err != nil {
			t.Fatal(err)
		}
	}
	if c := s.committed("g", "q", "p"); c != later {
		t.Fatalf("committed %d after consuming everything, want %d", c, later)
	}

	r := s.do("POST", "/api/v1/ack", map[string]any{"transactionId": first.TransactionID, "partitionId": first.PartitionID,
		"status": "completed", "consumerGroup": "g"})
	if r.status != 200 {
		t.Fatalf("ack of committed offset 0 (dedupWindowSeconds %d, %d later segments): %d %s, want 200 already committed",
			dedupWindow, later, r.status, r.body)
	}
	var res []regAck
	r.json(t, &res)
	if len(res) != 1 || !res[0].Success || res[0].Result != queen.ResultAlreadyCommitted || i64(res[0].Committed) != fmt.Sprint(later) {
		t.Fatalf("ack of committed offset 0: %+v, want success, %q, committed %d", res, queen.ResultAlreadyCommitted, later)
	}
}

func TestRegressionOldAckAfterDedupPrune(t *testing.T) {
	t.Parallel()
	oldAck(t, 5)
}

func TestRegressionOldAckNoDedupWindow(t *testing.T) {
	t.Parallel()
	oldAck(t, 0)
}
