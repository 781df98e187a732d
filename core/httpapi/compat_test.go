package httpapi_test

// Requests exactly as Queen's shipped clients send them (docs/api.md,
// compatibility with Queen's clients).

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/queen"
)

// Batching loops send {"items":[]} when their count is a multiple of the
// batch size: Queen answers 201 [] and writes nothing.
func TestCompatEmptyPush(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.expect("POST", "/api/v1/push", `{"items":[]}`, 201)
	if strings.TrimSpace(string(r.body)) != "[]" {
		t.Fatalf("empty push answered %s, want []", r.body)
	}
	if n := s.rows("queues"); n != 0 {
		t.Fatalf("empty push created %d queues", n)
	}
	if r := s.do("POST", "/api/v1/push", `{}`); r.status != 400 || !strings.Contains(r.errorText(t), "items") {
		t.Fatalf("push without items: %d %s, want 400 naming items", r.status, r.body)
	}
}

// The JS client subscribes with subscriptionMode=from_beginning; Queen reads
// every mode but new/new-only from the beginning.
func TestCompatSubscriptionModes(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.pushN("modes", "p", 2)
	for _, mode := range []string{"from_beginning", "all", "ALL", "earliest"} {
		p, ok := s.popGroup("modes", "p", "g-"+mode, 10, "&subscriptionMode="+mode)
		if !ok || len(p.Messages) != 2 || p.Messages[0].Offset != 0 {
			t.Fatalf("subscriptionMode=%s: got %v, want offsets [0 1]", mode, offsets(p))
		}
	}
	s.env.Clock.Advance(time.Second)
	for _, mode := range []string{"new", "new-only"} {
		if _, ok := s.popGroup("modes", "p", "g-"+mode, 10, "&subscriptionMode="+mode); ok {
			t.Fatalf("subscriptionMode=%s delivered messages pushed before the subscription", mode)
		}
	}
}

// lockedBuffer is a log sink for concurrent handlers. wrote, when not nil,
// is signalled after each write.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cancelInPop holds each pop until its request is cancelled, then runs it
// against the real store with the cancelled context.
type cancelInPop struct {
	queen.Store
	entered chan struct{}
}

func (c cancelInPop) Pop(ctx context.Context, req queen.PopRequest) (queen.PopResult, error) {
	c.entered <- struct{}{}
	<-ctx.Done()
	return c.Store.Pop(ctx, req)
}

// A consumer giving up its long poll is not a database outage: no warning
// that says so.
func TestCompatCancelledLongPollIsNotAnOutage(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{wrote: make(chan struct{}, 1)}
	entered := make(chan struct{}, 1)
	s := newServer(t, func(cfg *httpapi.Config, st *queen.Store) {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		*st = cancelInPop{Store: *st, entered: entered}
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/api/v1/pop/queue/q?wait=true&timeout=5000", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-entered
	cancel()
	<-done
	timeout := time.After(replyLimit)
	for !strings.Contains(logs.String(), "client closed the request") && !strings.Contains(logs.String(), "database unavailable") {
		select {
		case <-logs.wrote:
		case <-timeout:
			t.Fatalf("no record of the cancelled request; logs:\n%s", logs.String())
		}
	}
	if out := logs.String(); strings.Contains(out, "database unavailable") || strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Fatalf("a cancelled long poll was logged as a failure:\n%s", out)
	}
}

// Both SDKs renew a lease with an empty object and the JS client reads
// newExpiresAt: the lease is renewed by the queue's leaseTime.
func TestCompatLeaseRenewWithEmptyBody(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("renew", map[string]any{"leaseTime": 120})
	s.pushN("renew", "p", 1)
	p, ok := s.popGroup("renew", "p", "g", 1, "")
	if !ok {
		t.Fatal("no message")
	}
	s.env.Clock.Advance(100 * time.Second) // 20 s of the lease left
	var ex struct {
		LeaseID      string    `json:"leaseId"`
		NewExpiresAt time.Time `json:"newExpiresAt"`
		ExpiresAt    time.Time `json:"expiresAt"`
	}
	s.expect("POST", "/api/v1/lease/"+p.LeaseID+"/extend", `{}`, 200).json(t, &ex)
	want := s.env.Clock.Now().Add(120 * time.Second)
	if !ex.NewExpiresAt.Equal(want) || !ex.ExpiresAt.Equal(want) || ex.LeaseID != p.LeaseID {
		t.Fatalf("renewal %+v, want lease %s to expire at %v (leaseTime from now)", ex, p.LeaseID, want)
	}
	s.env.Clock.Advance(110 * time.Second) // past the old expiry, inside the renewed one
	if r := s.do("POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[0].TransactionID,
		"partitionId": p.PartitionID, "status": "completed", "consumerGroup": "g", "leaseId": p.LeaseID}); r.status != 200 {
		t.Fatalf("ack under the renewed lease: %d %s", r.status, r.body)
	}
	if r := s.do("POST", "/api/v1/lease/"+p.LeaseID+"/extend", `{"seconds":0}`); r.status != 400 {
		t.Fatalf("seconds 0: %d %s, want 400", r.status, r.body)
	}
}

// Configure echoes every option as it was sent, as Queen's clients check
// it; Queen's retention names act on the log with their mapped meaning,
// reported as the effective windows.
func TestCompatConfigureEcho(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	type echo struct {
		Configured bool           `json:"configured"`
		Options    map[string]any `json:"options"`
		Notes      []string       `json:"notes"`
	}
	configure := func(queue string, opts map[string]any) echo {
		t.Helper()
		var res echo
		s.expect("POST", "/api/v1/configure", map[string]any{"queue": queue, "options": opts}, 200).json(t, &res)
		return res
	}
	sameAsSent := func(what string, res echo, sent map[string]any) {
		t.Helper()
		for k, v := range sent {
			b, _ := json.Marshal(v)
			var want any
			_ = json.Unmarshal(b, &want)
			if got, ok := res.Options[k]; !ok || got != want {
				t.Errorf("%s: options.%s = %v, sent %v", what, k, got, want)
			}
		}
	}
	// What Queen's JS client sends with every create: its defaults, with
	// 0 for every option left alone, under the caller's options.
	jsDefaults := map[string]any{"leaseTime": 300, "retryLimit": 3, "priority": 0, "delayedProcessing": 0,
		"windowBuffer": 0, "maxSize": 10000, "retentionSeconds": 0, "completedRetentionSeconds": 0, "encryptionEnabled": false}
	withDefaults := func(opts map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range jsDefaults {
			out[k] = v
		}
		for k, v := range opts {
			out[k] = v
		}
		return out
	}
	for _, c := range []struct {
		name           string
		opts           map[string]any
		keep, keepDone float64
		enabled        bool
	}{
		{"ttl", withDefaults(map[string]any{"ttl": 2}), 2, 0, true},
		{"maxWait", withDefaults(map[string]any{"maxWaitTimeSeconds": 2, "dlqAfterMaxRetries": true, "deadLetterQueue": true}), 2, 0, true},
		{"retention", withDefaults(map[string]any{"retentionEnabled": true, "retentionSeconds": 3600}), 3600, 0, true},
		{"completed", withDefaults(map[string]any{"completedRetentionSeconds": 60}), 0, 60, true},
		{"none", withDefaults(map[string]any{"retentionEnabled": false, "retentionSeconds": 0, "completedRetentionSeconds": 0}), 0, 0, false},
		// Queen's configureQueue test (its encryptionEnabled true needs a
		// key, which this server does not hold).
		{"configureQueue", map[string]any{"completedRetentionSeconds": 1, "deadLetterQueue": true, "delayedProcessing": 1,
			"dlqAfterMaxRetries": true, "encryptionEnabled": false, "leaseTime": 30, "maxSize": 1000, "maxWaitTimeSeconds": 10,
			"priority": 5, "retentionEnabled": false, "retentionSeconds": 0, "retryDelay": 1000, "retryLimit": 3, "ttl": 36,
			"windowBuffer": 100}, 0, 0, false},
		{"smallest", map[string]any{"ttl": 60, "retentionSeconds": 120, "maxWaitTimeSeconds": 0}, 60, 0, true},
	} {
		res := configure("echo-"+c.name, c.opts)
		sameAsSent(c.name, res, c.opts)
		// A queue that sets no window of a kind, or turned retention
		// off, keeps for the deployment's default.
		if c.keep == 0 {
			c.keep = config.DefaultRetentionSeconds
		}
		if c.keepDone == 0 {
			c.keepDone = config.DefaultCompletedRetentionSeconds
		}
		if res.Options["effectiveRetentionSeconds"] != c.keep || res.Options["effectiveCompletedRetentionSeconds"] != c.keepDone ||
			res.Options["retentionEnabled"] != c.enabled {
			t.Errorf("%s: effective %v / %v, enabled %v; want %v / %v, %v", c.name, res.Options["effectiveRetentionSeconds"],
				res.Options["effectiveCompletedRetentionSeconds"], res.Options["retentionEnabled"], c.keep, c.keepDone, c.enabled)
		}
		if off := c.name == "configureQueue"; off != slices.Contains(res.Notes, httpapi.RetentionOffNote) {
			t.Errorf("%s: notes %v", c.name, res.Notes)
		}
	}
	// A partial update keeps what it does not name; retentionEnabled false
	// keeps the windows and applies the deployment's default instead, true
	// applies them again.
	res := configure("echo-smallest", map[string]any{"retentionEnabled": false})
	if res.Options["ttl"] != 60.0 || res.Options["retentionSeconds"] != 120.0 ||
		res.Options["effectiveRetentionSeconds"] != float64(config.DefaultRetentionSeconds) {
		t.Errorf("after retentionEnabled false: %v", res.Options)
	}
	res = configure("echo-smallest", map[string]any{"retentionEnabled": true, "ttl": 0})
	if res.Options["effectiveRetentionSeconds"] != 120.0 {
		t.Errorf("after ttl 0 and retentionEnabled true: %v", res.Options)
	}
	for _, bad := range []struct {
		opts map[string]any
		says string
	}{
		{map[string]any{"deadLetterQueue": false}, "dead-letter"},
		{map[string]any{"dlqAfterMaxRetries": false}, "dead-letter"},
		{map[string]any{"ttl": -1}, "ttl"},
		{map[string]any{"retryDelay": -1}, "retryDelay"},
	} {
		r := s.do("POST", "/api/v1/configure", map[string]any{"queue": "echo-smallest", "options": bad.opts})
		if r.status != 400 || !strings.Contains(r.errorText(t), bad.says) {
			t.Errorf("configure %v: %d %s, want 400 saying %q", bad.opts, r.status, r.body, bad.says)
		}
	}
	// Nothing of the refused requests was written.
	if res := configure("echo-smallest", map[string]any{}); res.Options["ttl"] != 0.0 || res.Options["retentionSeconds"] != 120.0 {
		t.Errorf("a refused configure changed the queue: %v", res.Options)
	}
}

// retryDelay (ms): a failed message is redelivered no sooner than that.
func TestCompatRetryDelay(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("slow", map[string]any{"retryDelay": 5000, "retryLimit": 3})
	s.pushN("slow", "p", 2)
	p, ok := s.popGroup("slow", "p", "g", 1, "")
	if !ok {
		t.Fatal("no message")
	}
	s.ackBatch("g", p.LeaseID, ackOf(p, 0, "failed"))
	for _, step := range []time.Duration{0, 4900 * time.Millisecond} {
		s.env.Clock.Advance(step)
		if _, ok := s.popGroup("slow", "p", "g", 1, ""); ok {
			t.Fatalf("redelivered %v after the failure, retryDelay is 5 s", step)
		}
		if _, ok := s.popWildcard("slow", "g", "&batch=1"); ok {
			t.Fatalf("wildcard pop redelivered before retryDelay passed")
		}
	}
	s.env.Clock.Advance(100 * time.Millisecond)
	p, ok = s.popWildcard("slow", "g", "&batch=1")
	if !ok || p.Messages[0].Offset != 0 || p.Messages[0].RetryCount != 1 {
		t.Fatalf("after 5 s: ok=%v %+v, want offset 0 with retryCount 1", ok, p.Messages)
	}
	// A completed ack releases the hold at once for the next message.
	s.ackBatch("g", p.LeaseID, ackOf(p, 0, "completed"))
	if p, ok := s.popGroup("slow", "p", "g", 1, ""); !ok || p.Messages[0].Offset != 1 {
		t.Fatalf("after the redelivery was completed the next message waits: ok=%v", ok)
	}
}

// queenctl browses with limit=10000 and tells consumed from pending by each
// message's status (Queen's status/busStatus), derived here from the cursors.
func TestCompatBrowseStatusAndLimit(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("seen", map[string]any{"leaseTime": 30})
	for _, g := range []string{"A", "B"} {
		s.popWildcard("seen", g, "&batch=1") // subscribe
	}
	s.pushN("seen", "p", 4)
	a, _ := s.popGroup("seen", "p", "A", 3, "")
	s.ackBatch("A", a.LeaseID, ackOf(a, 0, "completed"), ackOf(a, 1, "completed")) // lease kept over 2
	b, _ := s.popGroup("seen", "p", "B", 1, "")
	s.ackBatch("B", b.LeaseID, ackOf(b, 0, "completed"))
	b, _ = s.popGroup("seen", "p", "B", 1, "")
	s.ackBatch("B", b.LeaseID, ackOf(b, 1, "dlq"))

	type row struct {
		Offset    int64  `json:"offset"`
		Status    string `json:"status"`
		BusStatus struct {
			ConsumedBy  int `json:"consumedBy"`
			TotalGroups int `json:"totalGroups"`
		} `json:"busStatus"`
	}
	read := func() []row {
		var page struct {
			Messages []row `json:"messages"`
		}
		s.expect("GET", "/api/v1/messages?queue=seen&limit=10000", nil, 200).json(t, &page)
		return page.Messages
	}
	check := func(when string, want []string, consumed []int) {
		t.Helper()
		got := read()
		if len(got) != len(want) {
			t.Fatalf("%s: %d messages, want %d", when, len(got), len(want))
		}
		for i, r := range got {
			if r.Offset != int64(i) || r.Status != want[i] || r.BusStatus.ConsumedBy != consumed[i] || r.BusStatus.TotalGroups != 2 {
				t.Errorf("%s: offset %d: %+v, want status %s consumed by %d of 2", when, i, r, want[i], consumed[i])
			}
		}
	}
	check("A leased 2", []string{"completed", "dead_letter", "processing", "pending"}, []int{2, 2, 0, 0})
	s.env.Clock.Advance(31 * time.Second)
	check("A's lease expired", []string{"completed", "dead_letter", "pending", "pending"}, []int{2, 2, 0, 0})
	for _, limit := range []string{"0", "-5"} {
		s.expect("GET", "/api/v1/messages?queue=seen&limit="+limit, nil, 200)
	}
}

// Pop messages carry producerSub: the verified caller that pushed them
// (Config.Identity), never a value from the push body; null when unknown.
func TestCompatProducerSub(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(cfg *httpapi.Config, _ *queen.Store) {
		cfg.Identity = func(r *http.Request) string { return r.Header.Get("X-Test-Verified-Sub") }
	})
	push := func(sub, body string) {
		req, _ := http.NewRequest("POST", s.URL+"/api/v1/push", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if sub != "" {
			req.Header.Set("X-Test-Verified-Sub", sub)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("push: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	push("svc-billing", `{"items":[{"queue":"ps","partition":"p","payload":1,"producerSub":"forged"}]}`)
	push("", `{"items":[{"queue":"ps","partition":"p","payload":2,"producerSub":"forged"}]}`)
	var raw struct {
		Messages []map[string]any `json:"messages"`
	}
	s.expect("GET", "/api/v1/pop/queue/ps/partition/p?batch=10&consumerGroup=g", nil, 200).json(t, &raw)
	if len(raw.Messages) != 2 {
		t.Fatalf("popped %d messages", len(raw.Messages))
	}
	if raw.Messages[0]["producerSub"] != "svc-billing" {
		t.Errorf("first message producerSub %v, want svc-billing", raw.Messages[0]["producerSub"])
	}
	if v, ok := raw.Messages[1]["producerSub"]; !ok || v != nil {
		t.Errorf("second message producerSub %v (present %v), want null", v, ok)
	}
}

// Options configure does not know are refused, never ignored.
func TestCompatConfigureRefusesUnknownOptions(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, c := range []struct {
		body any
		says string
	}{
		{map[string]any{"queue": "u", "options": map[string]any{"leaseTme": 30}}, "options.leaseTme: unknown option"},
		{map[string]any{"queue": "u", "options": map[string]any{"minPopWaitTime": 100}}, "options.minPopWaitTime: is not supported"},
		{map[string]any{"queue": "u", "options": map[string]any{"leaseTime": "long"}}, "options.leaseTime"},
		{map[string]any{"queue": "u", "mode": "replace", "options": map[string]any{}}, "mode: only merge"},
	} {
		r := s.do("POST", "/api/v1/configure", c.body)
		if r.status != 400 || !strings.Contains(r.errorText(t), c.says) {
			t.Errorf("configure %v: %d %s, want 400 with %q", c.body, r.status, r.body, c.says)
		}
	}
	if n := s.rows("queues"); n != 0 {
		t.Fatalf("refused configures created %d queues", n)
	}
	s.expect("POST", "/api/v1/configure", map[string]any{"queue": "u", "mode": "merge", "options": map[string]any{"leaseTime": 30}}, 200)
}

// A retryDelay hold ends early when the cursor moves on: a seek, or a
// completed ack of the held message, makes the partition deliverable at
// once to wildcard pops too (which had seen it waiting).
func TestCompatRetryDelayEndsWithTheCursor(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.configure("hold", map[string]any{"retryDelay": 60000, "retryLimit": 5})
	s.pushN("hold", "p", 3)
	p, _ := s.popGroup("hold", "p", "g", 1, "")
	s.ackBatch("g", p.LeaseID, ackOf(p, 0, "failed"))
	if _, ok := s.popWildcard("hold", "g", "&batch=1"); ok {
		t.Fatal("delivered during the hold")
	}
	// A completed ack without a lease (from the consumer that failed it,
	// which did the work after all) commits offset 0.
	s.ackBatch("g", "", ackOf(p, 0, "completed"))
	if p, ok := s.popWildcard("hold", "g", "&batch=1"); !ok || p.Messages[0].Offset != 1 {
		t.Fatalf("after the held message was completed: ok=%v, want offset 1 at once", ok)
	} else {
		s.ackBatch("g", p.LeaseID, ackOf(p, 1, "failed"))
	}
	if _, ok := s.popWildcard("hold", "g", "&batch=1"); ok {
		t.Fatal("delivered during the second hold")
	}
	s.expect("POST", "/api/v1/consumer-groups/g/queues/hold/seek", map[string]any{"toBeginning": true}, 200)
	if p, ok := s.popWildcard("hold", "g", "&batch=10"); !ok || len(p.Messages) != 3 {
		t.Fatalf("after a seek to the beginning: ok=%v, want all 3 at once", ok)
	}
}

// A shorter hold replaces a longer one: after retryDelay was lowered, a
// retry ack holds the partition back for the new delay only.
func TestCompatRetryDelayShortenedHold(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("short", map[string]any{"retryDelay": 60000, "leaseTime": 10, "retryLimit": 5})
	s.pushN("short", "p", 1)
	p, _ := s.popGroup("short", "p", "g", 1, "")
	s.env.Clock.Advance(11 * time.Second) // the lease expired: a failed attempt, held 60 s
	if _, ok := s.popWildcard("short", "g", "&batch=1"); ok {
		t.Fatal("delivered during the 60 s hold")
	}
	s.configure("short", map[string]any{"retryDelay": 1000})
	if _, ok := s.popWildcard("short", "g", "&batch=1"); ok {
		t.Fatal("delivered during the 60 s hold after retryDelay was lowered")
	}
	s.ackBatch("g", "", ackOf(p, 0, "retry")) // a new hold of 1 s replaces it
	s.env.Clock.Advance(time.Second)
	if p, ok := s.popWildcard("short", "g", "&batch=1"); !ok || p.Messages[0].Offset != 0 {
		t.Fatalf("1 s after the retry ack: ok=%v, want offset 0 redelivered", ok)
	}
}

// Queen's ttl deletes messages older than it, as retentionSeconds does,
// even when the client also sends retentionSeconds 0 (not set); with
// retentionEnabled false the window is kept but not applied.
func TestCompatTTLApplies(t *testing.T) {
	t.Parallel()
	s := newClockedServer(t)
	s.configure("ttl-on", map[string]any{"ttl": 10, "retentionSeconds": 0})
	s.configure("ttl-off", map[string]any{"ttl": 10, "retentionSeconds": 0, "retentionEnabled": false})
	s.pushN("ttl-on", "p", 2)
	s.pushN("ttl-off", "p", 2)
	s.env.Clock.Advance(11 * time.Second)
	s.reap()
	if b := s.browse("queue=ttl-on"); len(b.Messages) != 0 {
		t.Errorf("ttl 10 s: %d messages left after 11 s, want 0", len(b.Messages))
	}
	if b := s.browse("queue=ttl-off"); len(b.Messages) != 2 {
		t.Errorf("ttl with retentionEnabled false: %d messages left, want 2", len(b.Messages))
	}
}
