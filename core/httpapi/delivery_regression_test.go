package httpapi_test

// Delivery tests driven through the HTTP API: the scheduler's liveness
// (docs/semantics.md §3.4.3), exactly-once transactions (§3.7.1),
// depth/maxSize/activeLeases (§3.7.5) and the Prometheus page. Every
// expected value comes from docs/semantics.md; none was taken from running
// the engine.

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/queen"
)

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

// popWildcard pops queue for group; ok is false on 204.
func (s *server) popWildcard(queue, group, query string) (popped, bool) {
	s.t.Helper()
	return s.popPath("/api/v1/pop/queue/" + queue + "?consumerGroup=" + group + query)
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

// Defect 1: consumed partitions must not hide a deliverable one. 150
// partitions are consumed one by one; a message then pushed to the last one
// served is deliverable, so the very next wildcard pop returns it.
func TestRegressionWildcardAfterManyConsumed(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.pushOnePerPartition("wide", 150, func(i int) string { return fmt.Sprintf("p%03d", i) })
	seen := map[string]bool{}
	var last string
	for range 150 {
		p, ok := s.popWildcard("wide", "g", "&batch=1")
		if !ok {
			t.Fatalf("204 after %d of 150 partitions, with messages waiting", len(seen))
		}
		last = p.Partition
		seen[last] = true
		s.ackAll("g", p)
	}
	if len(seen) != 150 {
		t.Fatalf("served %d distinct partitions, want 150", len(seen))
	}
	if _, ok := s.popWildcard("wide", "g", "&batch=1"); ok {
		t.Fatal("a pop after the drain found a message; none was pushed")
	}
	s.pushN("wide", last, 1)
	p, ok := s.popWildcard("wide", "g", "&batch=1")
	if !ok || p.Partition != last || len(p.Messages) != 1 || p.Messages[0].Offset != 1 {
		t.Fatalf("after pushing to %s: ok=%v %+v, want its offset 1", last, ok, p)
	}
}

// Waiting partitions must not hide a deliverable one either: with
// windowBuffer 10 s, 100 partitions pushed to a moment ago are not
// deliverable, and the quiet partition scheduled after them is.
func TestRegressionWindowBufferedAheadOfDeliverable(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("windowed", map[string]any{"windowBuffer": 10})
	busy := func(i int) string { return fmt.Sprintf("busy%03d", i) }
	s.pushOnePerPartition("windowed", 100, busy)
	s.pushN("windowed", "quiet", 1)
	s.env.Clock.Advance(11 * time.Second)
	s.pushOnePerPartition("windowed", 100, busy) // their windows start again
	for range 2 {
		p, ok := s.popWildcard("windowed", "g", "&batch=1")
		if !ok || p.Partition != "quiet" {
			t.Fatalf("wildcard pop: ok=%v partition %q, want the quiet partition, the only deliverable one", ok, p.Partition)
		}
		s.ackAll("g", p)
		if _, ok := s.popWildcard("windowed", "g", "&batch=1"); ok {
			t.Fatal("a pop found a message while every other partition is inside its window")
		}
		s.pushN("windowed", "quiet", 1)
		s.env.Clock.Advance(10 * time.Second)
		s.pushOnePerPartition("windowed", 100, busy)
	}
	// Once the busy partitions are quiet for 10 s they are served again.
	s.env.Clock.Advance(10 * time.Second)
	got := 0
	for {
		p, ok := s.popWildcard("windowed", "g", "&batch=1000&partitions=100")
		if !ok {
			break
		}
		got += len(p.Messages)
		s.ackAll("g", p)
	}
	if want := 100*4 + 1; got != want { // four pushes to each busy partition, the quiet one's last
		t.Fatalf("after the windows passed got %d messages, want %d", got, want)
	}
}

// Defect 1, partitions=N: one pop leases up to N partitions (§3.4.1),
// here 100 of 120 each holding one message, under one lease id.
func TestRegressionPopHundredPartitions(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.pushOnePerPartition("many", 120, func(i int) string { return fmt.Sprintf("m%03d", i) })
	p, ok := s.popWildcard("many", "g", "&batch=500&partitions=100")
	if !ok {
		t.Fatal("204 with 120 partitions waiting")
	}
	parts := map[string]bool{}
	for _, m := range p.Messages {
		parts[m.Partition] = true
		if m.LeaseID != p.LeaseID {
			t.Fatalf("message under lease %s, pop lease %s", m.LeaseID, p.LeaseID)
		}
	}
	if len(p.Messages) != 100 || len(parts) != 100 {
		t.Fatalf("partitions=100 leased %d messages from %d partitions, want 100 from 100", len(p.Messages), len(parts))
	}
}

// Defect 1, waiting consumer: after 3,000 partitions were drained, a message
// pushed during a long-poll reaches it within §3.4.6's second.
func TestRegressionLongPollAfterDrain(t *testing.T) {
	t.Parallel()
	watch := &popWatch{queue: "drained", empty: make(chan time.Time, 1000)}
	s := newServer(t, func(cfg *httpapi.Config, st *queen.Store) {
		cfg.MaxWait = 10 * time.Second
		watch.Store = *st
		*st = watch
	})
	n := 3000 // the figure; any count well past the 64-row scan budget shows the defect
	if testing.Short() {
		n = 400
	}
	s.pushOnePerPartition("drained", n, func(i int) string { return fmt.Sprintf("d%04d", i) })
	var last string
	for got := 0; got < n; {
		p, ok := s.popWildcard("drained", "g", "&batch=100&partitions=100")
		if !ok {
			t.Fatalf("204 after %d of %d messages", got, n)
		}
		got += len(p.Messages)
		last = p.Messages[len(p.Messages)-1].Partition
		s.ackAll("g", p)
	}
	for len(watch.empty) > 0 {
		<-watch.empty
	}
	done := make(chan reply, 1)
	go func() { done <- s.do("GET", "/api/v1/pop/queue/drained?consumerGroup=g&wait=true&timeout=5000", nil) }()
	select { // the consumer is waiting: its first poll found nothing
	case <-watch.empty:
	case r := <-done:
		t.Fatalf("long-poll ended (%d %s) before any message was pushed", r.status, r.body)
	}
	pushedAt := time.Now()
	s.pushN("drained", last, 1)
	r := <-done
	if r.status != 200 {
		t.Fatalf("long-poll after a drain of %d partitions: %d %s, want the message pushed to %s", n, r.status, r.body, last)
	}
	if d := time.Since(pushedAt); d > time.Second {
		t.Fatalf("message reached the waiting consumer %v after the push, want < 1 s", d)
	}
}

// Defect 2: pushes in flight to a partition with a backlog must not hide it
// from wildcard pops. Four producers push one message at a time while one
// consumer pops and acks; every pop finds the backlog.
func TestRegressionPushInFlightKeepsPartitionVisible(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for range 4 {
		s.pushN("hot", "only", 500)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"items":[{"queue":"hot","partition":"only","payload":%d}]}`, w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Post(s.URL+"/api/v1/push", "application/json", strings.NewReader(body))
				if err != nil {
					return
				}
				resp.Body.Close()
			}
		}()
	}
	const pops = 200
	empty := 0
	for range pops {
		p, ok := s.popWildcard("hot", "g", "&batch=1")
		if !ok {
			empty++
			continue
		}
		s.ackAll("g", p)
	}
	close(stop)
	wg.Wait()
	if empty > 0 {
		t.Fatalf("%d of %d wildcard pops answered 204 while at least 1,800 messages waited", empty, pops)
	}
}

// Defect 3: of six identical concurrent transactions (ack under lease L +
// push, requiredLeases [L]) exactly one applies; the others get 409 and push
// nothing. A replay afterwards is refused too. Five rounds, each with its own
// message, so a race that is only usually lost still shows.
func TestRegressionTransactionExactlyOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const rounds, copies = 5, 6
	for round := range rounds {
		s.pushN("jobs", "a", 1)
		p, ok := s.popWildcard("jobs", "w", "&batch=1")
		if !ok {
			t.Fatalf("round %d: no job", round)
		}
		m := p.Messages[0]
		body := map[string]any{
			"operations": []map[string]any{
				{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed", "consumerGroup": "w"},
				{"type": "push", "items": []map[string]any{{"queue": "results", "partition": "r", "payload": map[string]any{"round": round}}}},
			},
			"requiredLeases": []string{p.LeaseID},
		}
		statuses := make([]int, copies)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i] = s.do("POST", "/api/v1/transaction", body).status
			}()
		}
		close(start)
		wg.Wait()
		applied := 0
		for _, st := range statuses {
			switch st {
			case 200:
				applied++
			case 409:
			default:
				t.Fatalf("round %d: statuses %v, want one 200 and 409s", round, statuses)
			}
		}
		if applied != 1 {
			t.Fatalf("round %d: %d of %d identical transactions applied (statuses %v), want exactly 1", round, applied, copies, statuses)
		}
		if r := s.do("POST", "/api/v1/transaction", body); r.status != 409 {
			t.Fatalf("round %d: replay answered %d %s, want 409", round, r.status, r.body)
		}
	}
	if b := s.browse("queue=results&partition=r&limit=100"); len(b.Messages) != rounds {
		t.Fatalf("results holds %d messages after %d rounds, want %d", len(b.Messages), rounds, rounds)
	}
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

func (s *server) queue(name string) queueDetail {
	s.t.Helper()
	var q queueDetail
	s.expect("GET", "/api/v1/resources/queues/"+name, nil, 200).json(s.t, &q)
	return q
}

// Defect 4: groups A and B subscribe (their first pop); five messages are
// pushed and A consumes them. B still has all five to read, so depth is 5
// (§3.7.5: a subscribed group with no cursor counts from its start) and
// a queue with maxSize 5 refuses a sixth message, writing nothing.
func TestRegressionDepthCountsLateSubscriber(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.configure("capped", map[string]any{"maxSize": 5})
	for _, g := range []string{"A", "B"} {
		if _, ok := s.popWildcard("capped", g, "&batch=10"); ok {
			t.Fatalf("group %s found a message in an empty queue", g)
		}
	}
	s.pushN("capped", "p", 5)
	p, ok := s.popWildcard("capped", "A", "&batch=10")
	if !ok || len(p.Messages) != 5 {
		t.Fatalf("A popped %d messages, want 5", len(p.Messages))
	}
	s.ackAll("A", p)
	q := s.queue("capped")
	lag := map[string]int64{}
	for _, g := range q.Groups {
		lag[g.Group] = g.Lag
	}
	if q.Depth != 5 || lag["A"] != 0 || lag["B"] != 5 {
		t.Fatalf("depth %d, lag A %d, lag B %d; want 5, 0, 5", q.Depth, lag["A"], lag["B"])
	}
	r := s.do("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "capped", "partition": "p", "payload": 6}}})
	if r.status != 429 {
		t.Fatalf("sixth push into maxSize 5 with B 5 behind: %d %s, want 429", r.status, r.body)
	}
	if b := s.browse("queue=capped&partition=p&limit=100"); len(b.Messages) != 5 {
		t.Fatalf("the refused push wrote: %d messages, want 5", len(b.Messages))
	}
}

// Defect 6: activeLeases counts live leases only; an expired lease stops
// counting when it expires, not when the reaper runs.
func TestRegressionActiveLeasesLiveOnly(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("leased", map[string]any{"leaseTime": 30})
	s.pushN("leased", "p", 1)
	if _, ok := s.popWildcard("leased", "g", "&batch=1"); !ok {
		t.Fatal("no message")
	}
	active := func() (onQueue, onGroups int) {
		for _, g := range s.queue("leased").Groups {
			if g.Group == "g" {
				onQueue = g.ActiveLeases
			}
		}
		var gs struct {
			ConsumerGroups []struct {
				Group  string `json:"group"`
				Queues []struct {
					Queue        string `json:"queue"`
					ActiveLeases int    `json:"activeLeases"`
				} `json:"queues"`
			} `json:"consumerGroups"`
		}
		s.expect("GET", "/api/v1/consumer-groups", nil, 200).json(s.t, &gs)
		for _, g := range gs.ConsumerGroups {
			for _, q := range g.Queues {
				if g.Group == "g" && q.Queue == "leased" {
					onGroups = q.ActiveLeases
				}
			}
		}
		return onQueue, onGroups
	}
	if q, g := active(); q != 1 || g != 1 {
		t.Fatalf("while leased: activeLeases %d (queue) %d (groups), want 1", q, g)
	}
	s.env.Clock.Advance(31 * time.Second)
	if q, g := active(); q != 0 || g != 0 {
		t.Fatalf("after the lease expired, before any reap: activeLeases %d (queue) %d (groups), want 0", q, g)
	}
}

// Defect 7: label values are escaped as the Prometheus text format
// requires, so a scraper parses the page whatever the group and queue are
// called, and reads the names back unchanged.
func TestRegressionMetricsLabelEscaping(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const group, queueName = "zero\u200bwidth \"quoted\" back\\slash", "q.metrics"
	s.pushN(queueName, "p", 3)
	if _, ok := s.popGroup(queueName, "p", group, 1, ""); !ok {
		t.Fatal("no message")
	}
	page := s.expect("GET", "/metrics/prometheus", nil, 200)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(page.body)))
	if err != nil {
		t.Fatalf("a scraper rejects the page: %v\n%s", err, page.body)
	}
	lag := families["queen_group_lag"]
	if lag == nil {
		t.Fatalf("no queen_group_lag:\n%s", page.body)
	}
	found := false
	for _, m := range lag.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["group"] == group && labels["queue"] == queueName {
			found = true
			if v := m.GetGauge().GetValue(); v != 3 {
				t.Errorf("lag of %q on %q is %v, want 3 (one leased, none committed)", group, queueName, v)
			}
		}
	}
	if !found {
		t.Fatalf("no lag series for group %q on %q:\n%s", group, queueName, page.body)
	}
	if d := families["queen_queue_depth"]; d == nil || len(d.Metric) != 1 || d.Metric[0].Label[0].GetValue() != queueName {
		t.Fatalf("queue depth series: %v", d)
	}
}

// A seek is a group's first use of the queue when it comes before any pop:
// it subscribes the group from the seek on (README "Seek"). After a seek to
// the end, the group reads exactly what was pushed after the seek — on the
// partitions it positioned and on partitions created later — and a later
// pop's subscriptionMode does not change that (§3.3.3: later modes do not
// change a subscription).
func TestSeekBeforeFirstPopSubscribes(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.pushN("sq", "a", 3)
	s.expect("POST", "/api/v1/consumer-groups/G/queues/sq/seek", map[string]any{"toEnd": true}, 200)
	s.env.Clock.Advance(time.Second)
	s.pushN("sq", "a", 2)
	s.pushN("sq", "b", 2)
	s.env.Clock.Advance(time.Second)
	p, ok := s.popWildcard("sq", "G", "&batch=10&partitions=10&subscriptionMode=new")
	if !ok {
		t.Fatal("204: the four messages pushed after the seek were not delivered")
	}
	got := map[string][]int64{}
	for _, m := range p.Messages {
		got[m.Partition] = append(got[m.Partition], m.Offset)
	}
	if fmt.Sprint(got["a"]) != "[3 4]" || fmt.Sprint(got["b"]) != "[0 1]" || len(p.Messages) != 4 {
		t.Fatalf("after the seek got %v, want a:[3 4] b:[0 1]", got)
	}
	var g struct {
		Queues []struct {
			Queue string `json:"queue"`
			Mode  string `json:"subscriptionMode"`
		} `json:"queues"`
	}
	s.expect("GET", "/api/v1/consumer-groups/G", nil, 200).json(t, &g)
	if len(g.Queues) != 1 || g.Queues[0].Mode != "all" {
		t.Fatalf("group after seek and pop: %+v, want subscribed all", g)
	}
}
