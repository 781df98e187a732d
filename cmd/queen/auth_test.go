package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-serverless/queen/internal/pgtest"
)

const testSecret = "a-test-secret-of-at-least-32-bytes!"

// token signs an HS256 token for sub with roles, valid for an hour.
func token(t *testing.T, sub string, roles ...string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "roles": roles, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *server) doAs(tok, method, path, body string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With QUEEN_JWT_SECRET every route but /health needs a token whose roles
// cover it, and popped messages carry the pusher's verified sub.
func TestServeJWTAuth(t *testing.T) {
	t.Parallel()
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "QUEEN_JWT_SECRET": testSecret})
	var out, errOut strings.Builder
	if err := tokenCmd([]string{"-sub", "svc-orders", "-roles", "produce"}, func(k string) string {
		return map[string]string{"QUEEN_JWT_SECRET": testSecret}[k]
	}, &out, &errOut); err != nil {
		t.Fatalf("queen token: %v %s", err, errOut.String())
	}
	producer, consumer := strings.TrimSpace(out.String()), token(t, "svc-billing", "consume")
	admin, reader := token(t, "ops", "admin"), token(t, "dash", "read-only")
	push := `{"items":[{"queue":"secure","partition":"p","payload":1,"producerSub":"forged"}]}`
	expired, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "x", "roles": []string{"admin"},
		"exp": time.Now().Add(-time.Hour).Unix()}).SignedString([]byte(testSecret))
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "x", "roles": []string{"admin"},
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("another-secret-of-at-least-32-bytes"))

	for _, c := range []struct {
		tok, method, path, body string
		status                  int
	}{
		{"", "GET", "/health", "", 200},
		{"", "POST", "/api/v1/push", push, 401},
		{expired, "POST", "/api/v1/push", push, 401},
		{forged, "POST", "/api/v1/push", push, 401},
		{consumer, "POST", "/api/v1/push", push, 403},
		{reader, "POST", "/api/v1/push", push, 403},
		{producer, "POST", "/api/v1/push", push, 201},
		{producer, "GET", "/api/v1/pop/queue/secure?consumerGroup=g", "", 403},
		{producer, "GET", "/api/v1/resources/queues", "", 403},
		{reader, "GET", "/api/v1/resources/queues", "", 200},
		{reader, "GET", "/api/v1/resources/overview", "", 200},
		{producer, "GET", "/api/v1/resources/overview", "", 403},
		{reader, "POST", "/api/v1/configure", `{"queue":"secure","options":{"leaseTime":60}}`, 403},
		{consumer, "POST", "/api/v1/system/maintenance", `{"enabled":true}`, 403},
		{admin, "POST", "/api/v1/configure", `{"queue":"secure","options":{"leaseTime":60}}`, 200},
	} {
		if st, body := s.doAs(c.tok, c.method, c.path, c.body); st != c.status {
			t.Errorf("%s %s as %.12s…: %d %s, want %d", c.method, c.path, c.tok, st, body, c.status)
		}
	}
	// The scheme's case does not matter (RFC 7235).
	for _, scheme := range []string{"bearer", "BEARER", "bEaReR"} {
		req, _ := http.NewRequest("POST", s.base+"/api/v1/push", strings.NewReader(`{"items":[{"queue":"schemes","payload":1}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", scheme+" "+producer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Errorf("push with Authorization: %s <token>: %d %s, want 201", scheme, resp.StatusCode, b)
		}
	}
	st, body := s.doAs(consumer, "GET", "/api/v1/pop/queue/secure?consumerGroup=g", "")
	if st != 200 {
		t.Fatalf("pop as consumer: %d %s", st, body)
	}
	var p struct {
		Messages []struct {
			ProducerSub *string `json:"producerSub"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || len(p.Messages) != 1 || p.Messages[0].ProducerSub == nil ||
		*p.Messages[0].ProducerSub != "svc-orders" {
		t.Fatalf("pop: %s, want one message with producerSub svc-orders", body)
	}
}

// Listening beyond loopback without authentication is said loudly.
func TestServeWarnsWithoutAuthBeyondLoopback(t *testing.T) {
	t.Parallel()
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t)}, "-host", "0.0.0.0")
	if !strings.Contains(s.stderr.String(), "LISTENING BEYOND LOOPBACK WITHOUT AUTHENTICATION") {
		t.Fatalf("no warning:\n%s", s.stderr.String())
	}
	quiet := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t)})
	if strings.Contains(quiet.stderr.String(), "WITHOUT AUTHENTICATION") {
		t.Fatalf("warned on loopback:\n%s", quiet.stderr.String())
	}
}
