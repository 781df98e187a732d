package httpapi_test

// Requests exactly as Queen's shipped clients send them (SPEC §4,
// compatibility paragraph).

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/queen"
)

// Batching loops send {"items":[]} when their count is a multiple of the
// batch size: Queen answers 201 [] and writes nothing.
func TestCompatEmptyPush(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
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
	s := newServer(t, false)
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

// lockedBuffer is a log sink for concurrent handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
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
	logs := &lockedBuffer{}
	entered := make(chan struct{}, 1)
	s := newServer(t, false, func(cfg *httpapi.Config, st *queen.Store) {
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
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "client closed the request") && !strings.Contains(logs.String(), "database unavailable") {
		if time.Now().After(deadline) {
			t.Fatalf("no record of the cancelled request; logs:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if out := logs.String(); strings.Contains(out, "database unavailable") || strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Fatalf("a cancelled long poll was logged as a failure:\n%s", out)
	}
}

// Both SDKs renew a lease with an empty object and the JS client reads
// newExpiresAt: the lease is renewed by the queue's leaseTime.
func TestCompatLeaseRenewWithEmptyBody(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
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
