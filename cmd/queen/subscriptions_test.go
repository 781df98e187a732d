package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/queen-serverless/queen/internal/pgtest"
)

// subscriptionBody is the JSON of a subscription to target.
func subscriptionBody(queue, group, target string) string {
	return fmt.Sprintf(`{"queue":%q,"consumerGroup":%q,"target":%s}`, queue, group, target)
}

// Creating a subscription refuses, with a 400 that says why, every URL
// the egress fence would refuse and every function the deployment does
// not declare; nothing is stored. queen serve allows loopback and public
// addresses by default, and QUEEN_SUBSCRIPTION_URLS and
// QUEEN_SUBSCRIPTION_FUNCTIONS change what it allows (SPEC §3.8).
func TestServeFencesSubscriptionTargets(t *testing.T) {
	t.Parallel()
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t)})
	for target, why := range map[string]string{
		`{"url":"http://169.254.169.254/latest/meta-data/"}`: "link-local",
		`{"url":"http://[fd00:ec2::254]/"}`:                  "metadata",
		`{"url":"http://10.0.0.1/hook"}`:                     "private",
		`{"url":"http://192.168.1.20/hook"}`:                 "private",
		`{"url":"http://0.0.0.0:22/"}`:                       "unspecified",
		`{"url":"http://:80/"}`:                              "host",
		`{"url":"http://224.0.0.1/"}`:                        "multicast",
		`{"url":"http://user:secret@127.0.0.1:8080/"}`:       "credentials",
		`{"url":"http://127.0.0.1:9001/2018-06-01/runtime"}`: "Lambda runtime",
		`{"function":"orders-handler"}`:                      "declares no function",
	} {
		status, body := s.do("POST", "/api/v1/subscriptions", subscriptionBody("fenced", "g", target))
		if status != 400 || !strings.Contains(body, why) || !strings.Contains(body, "target.") {
			t.Errorf("target %s: %d %s, want a 400 naming the target and saying %q", target, status, body, why)
		}
	}
	if status, body := s.do("GET", "/api/v1/subscriptions", ""); status != 200 || strings.Contains(body, `"fenced"`) {
		t.Errorf("after the refusals: %d %s, want nothing stored", status, body)
	}
	if status, body := s.do("POST", "/api/v1/subscriptions",
		subscriptionBody("fenced", "g", `{"url":"http://localhost:5432/"}`)); status != 201 {
		t.Errorf("a loopback target under queen serve: %d %s, want 201", status, body)
	}

	narrow := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t),
		"QUEEN_SUBSCRIPTION_URLS": "10.1.0.0/16", "QUEEN_SUBSCRIPTION_FUNCTIONS": "orders-handler"})
	for target, want := range map[string]int{
		`{"url":"http://10.1.2.3/hook"}`:                                               201,
		`{"url":"http://10.2.0.1/hook"}`:                                               400,
		`{"url":"http://127.0.0.1:8080/"}`:                                             400,
		`{"function":"orders-handler"}`:                                                201,
		`{"function":"arn:aws:lambda:eu-west-1:123456789012:function:orders-handler"}`: 201,
		`{"function":"orders-handlr"}`:                                                 400,
	} {
		if status, body := narrow.do("POST", "/api/v1/subscriptions", subscriptionBody("narrow", "g", target)); status != want {
			t.Errorf("target %s with QUEEN_SUBSCRIPTION_URLS=10.1.0.0/16: %d %s, want %d", target, status, body, want)
		}
	}
}

// A URL target's query (it may carry a token) and lastError are shown in
// full only to the admin role; a read-only caller sees them redacted.
func TestServeRedactsTargetsForReaders(t *testing.T) {
	t.Parallel()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "QUEEN_JWT_SECRET": testSecret})
	admin, reader := token(t, "ops", "admin"), token(t, "dash", "read-only")
	hook := failing.URL + "/hook?token=s3cr3t-t0ken"
	if status, body := s.doAs(admin, "POST", "/api/v1/subscriptions",
		subscriptionBody("red", "g", fmt.Sprintf(`{"url":%q}`, hook))); status != 201 || !strings.Contains(body, "s3cr3t-t0ken") {
		t.Fatalf("create: %d %s, want 201 echoing the URL to the admin", status, body)
	}
	if status, body := s.doAs(admin, "POST", "/api/v1/push", `{"items":[{"queue":"red","payload":1}]}`); status != 201 {
		t.Fatalf("push: %d %s", status, body)
	}
	waitUntil(t, "the failed delivery recorded", func() bool {
		_, body := s.doAs(admin, "GET", "/api/v1/subscriptions/red/g", "")
		return strings.Contains(body, `"lastErrorAt":"`)
	})
	for _, path := range []string{"/api/v1/subscriptions/red/g", "/api/v1/subscriptions"} {
		status, body := s.doAs(reader, "GET", path, "")
		if status != 200 || strings.Contains(body, "s3cr3t-t0ken") || !strings.Contains(body, "/hook?REDACTED") ||
			!strings.Contains(body, `"lastError":"`) {
			t.Errorf("read-only GET %s: %d %s, want the token redacted (lastError too)", path, status, body)
		}
		status, body = s.doAs(admin, "GET", path, "")
		if status != 200 || !strings.Contains(body, "token=s3cr3t-t0ken") {
			t.Errorf("admin GET %s: %d %s, want the URL in full", path, status, body)
		}
	}
}

// Deleting a subscription, its queue or its group stops delivery before
// the DELETE replies: a message pushed right after is not delivered to
// the old target, and the group's pulling consumers get it (for a new
// queue of the same name, from its offset 0).
func TestServeDeletesStopDelivery(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(target.Close)
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t)})
	for i, del := range []struct{ what, path, next string }{
		{"the subscription", "/api/v1/subscriptions/%s/g", "m1"},
		{"the queue", "/api/v1/resources/queues/%s", "m1"},
		{"the group", "/api/v1/consumer-groups/g", "m0"},
		{"the group on the queue", "/api/v1/consumer-groups/g/queues/%s", "m0"},
	} {
		q := fmt.Sprintf("del%d", i)
		if status, body := s.do("POST", "/api/v1/subscriptions",
			subscriptionBody(q, "g", fmt.Sprintf(`{"url":%q}`, target.URL))); status != 201 {
			t.Fatalf("%s: create: %d %s", del.what, status, body)
		}
		before := calls.Load()
		s.do("POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":%q,"payload":1,"transactionId":"m0"}]}`, q))
		waitUntil(t, del.what+": m0 delivered", func() bool {
			_, body := s.do("GET", "/api/v1/subscriptions/"+q+"/g", "")
			return strings.Contains(body, `"delivered":1`)
		})
		path := del.path
		if strings.Contains(path, "%s") {
			path = fmt.Sprintf(path, q)
		}
		if status, body := s.do("DELETE", path, ""); status != 200 {
			t.Fatalf("%s: DELETE %s: %d %s", del.what, path, status, body)
		}
		delivered := calls.Load()
		if status, body := s.do("POST", "/api/v1/push",
			fmt.Sprintf(`{"items":[{"queue":%q,"payload":2,"transactionId":"m1"}]}`, q)); status != 201 {
			t.Fatalf("%s: push after: %d %s", del.what, status, body)
		}
		status, body := s.do("GET", "/api/v1/pop/queue/"+q+"?consumerGroup=g&batch=1&wait=true&timeout=5000", "")
		var pop struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
			} `json:"messages"`
		}
		_ = json.Unmarshal([]byte(body), &pop)
		if status != 200 || len(pop.Messages) != 1 || pop.Messages[0].TransactionID != del.next {
			t.Errorf("after deleting %s: pulling pop %d %s, want %s", del.what, status, body, del.next)
		}
		if n := calls.Load(); n != delivered || delivered <= before {
			t.Errorf("after deleting %s: %d calls to the old target, want none after the DELETE", del.what, n-delivered)
		}
	}
}
