package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/internal/pgstoretest"
	"github.com/queen-serverless/queen/internal/pgtest"
)

func TestMain(m *testing.M) { pgstoretest.Main(m) }

// server is one `queen serve` running in this process.
type server struct {
	t      *testing.T
	base   string
	cancel context.CancelFunc
	done   chan error
	stdout *syncBuffer
	stderr *syncBuffer
}

func startServe(t *testing.T, env map[string]string, args ...string) *server {
	t.Helper()
	port := freePort(t)
	env["QUEEN_PORT"] = strconv.Itoa(port)
	if !slices.Contains(args, "-key-file") {
		args = append(args, "-key-file", filepath.Join(t.TempDir(), "encryption.key"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{t: t, base: "http://127.0.0.1:" + strconv.Itoa(port), cancel: cancel, done: make(chan error, 1),
		stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	go func() { s.done <- serve(ctx, args, func(k string) string { return env[k] }, s.stdout, s.stderr) }()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("serve output:\n%s\n%s", s.stdout.String(), s.stderr.String())
		}
	})
	waitUntil(t, "serve healthy", func() bool {
		select {
		case err := <-s.done:
			t.Fatalf("serve ended: %v\n%s", err, s.stderr.String())
		default:
		}
		resp, err := http.Get(s.base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return s
}

// waitUntil polls cond until it holds, failing the test after a minute.
// The states waited for (a server answering, a row the reaper writes, a
// line printed) come with no event to wait on, so they are polled; the
// limit only turns a hang into a failure.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond) // the poll's interval
	}
}

// stop cancels the server (as SIGINT does) and waits for it.
func (s *server) stop() error {
	s.t.Helper()
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		s.t.Fatal("serve did not stop within 30 s")
		return nil
	}
}

func (s *server) do(method, path, body string) (int, string) {
	s.t.Helper()
	return s.doAs("", method, path, body)
}

func TestServe(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	// Long-polls may wait 15 minutes, far longer than the test waits for
	// serve to stop: only the shutdown can end the one below in time.
	s := startServe(t, map[string]string{"DATABASE_URL": dbURL, "QUEEN_REAPER_INTERVAL": "100ms", "QUEEN_MAX_WAIT_MS": "900000"})

	out := s.stdout.String()
	for _, want := range []string{"Queen is serving on http://localhost:", "curl -s -X POST http://localhost:", "/api/v1/push", "Ctrl-C"} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q:\n%s", want, out)
		}
	}

	// Every route group is mounted: push, pop, ack, dlq, admin, metrics.
	if st, body := s.do("POST", "/api/v1/push", `{"items":[{"queue":"jobs","payload":{"n":1}}]}`); st != 201 {
		t.Fatalf("push: %d %s", st, body)
	}
	st, body := s.do("GET", "/api/v1/pop/queue/jobs?batch=1", "")
	if st != 200 {
		t.Fatalf("pop: %d %s", st, body)
	}
	var pop struct{ LeaseID string }
	_ = json.Unmarshal([]byte(body), &pop)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/v1/ack", `{}`}, {"GET", "/api/v1/dlq", ""}, {"GET", "/api/v1/resources/queues", ""},
	} {
		if st, body := s.do(r.method, r.path, r.body); st == 404 && strings.Contains(body, "no route") {
			t.Errorf("%s %s is not mounted", r.method, r.path)
		}
	}
	if st, body := s.do("GET", "/metrics/prometheus", ""); st != 200 || !strings.Contains(body, `queen_operations_total{op="push"`) {
		t.Errorf("metrics: %d %.200s", st, body)
	}

	// The reaper loop expires a lease that ran out.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := pgstoretest.ExpireLeases(ctx, conn, pop.LeaseID); err != nil {
		t.Fatal(err)
	}
	count := func(sql string) int {
		var n int
		if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitUntil(t, "the reaper loop expiring the lease", func() bool {
		return count(`SELECT count(*) FROM queen.consumers WHERE lease_id IS NULL AND attempts = 1`) == 1
	})

	// Shutdown: a long-poll in flight answers 204, and serve returns
	// cleanly — no request holds the shutdown up to its limit.
	lp := make(chan int, 1)
	go func() {
		resp, err := http.Get(s.base + "/api/v1/pop/queue/idle?wait=true&timeout=900000&consumerGroup=waiter")
		if err != nil {
			lp <- -1
			return
		}
		resp.Body.Close()
		lp <- resp.StatusCode
	}()
	// The long-poll's first pop subscribes its group; then it waits.
	waitUntil(t, "the long-poll's first pop", func() bool {
		return count(`SELECT count(*) FROM queen.subscriptions WHERE queue_name = 'idle' AND group_name = 'waiter'`) == 1
	})
	if err := s.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	select {
	case st := <-lp:
		if st != 204 {
			t.Errorf("long-poll during shutdown: status %d, want 204", st)
		}
	case <-time.After(time.Minute):
		t.Error("the long-poll in flight got no answer though serve stopped")
	}
	if strings.Contains(s.stderr.String(), "msg=shutdown") {
		t.Errorf("serve's shutdown waited for a request to its limit:\n%s", s.stderr.String())
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(s.base, "http://"), time.Second); err == nil {
		t.Error("still listening after shutdown")
	}
}

// TestServeEmbedded runs `queen serve` without DATABASE_URL: it starts its
// own persistent PostgreSQL in the data directory, keeps the data across
// runs and stops the server when it stops.
func TestServeEmbedded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The server may run as another user (when this runs as root): let it
	// reach the directory.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dataDir := filepath.Join(dir, "pgdata")
	keyFile := filepath.Join(dir, "encryption.key")

	s := startServe(t, map[string]string{}, "-data-dir", dataDir, "-key-file", keyFile)
	if !strings.Contains(s.stdout.String(), "embedded PostgreSQL") {
		t.Errorf("banner does not name the embedded database:\n%s", s.stdout.String())
	}
	// Without QUEEN_ENCRYPTION_KEY the first start creates a local key and
	// says so; encrypted queues work out of the box.
	if !strings.Contains(s.stderr.String(), "created a local encryption key") {
		t.Errorf("first start does not say it created a key:\n%s", s.stderr.String())
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v", err)
	}
	if st, body := s.do("POST", "/api/v1/configure", `{"queue":"sealed","options":{"encryptionEnabled":true}}`); st != 200 {
		t.Fatalf("configure: %d %s", st, body)
	}
	if st, body := s.do("POST", "/api/v1/push", `{"items":[{"queue":"kept","payload":"across runs","transactionId":"t-1"},`+
		`{"queue":"sealed","payload":{"secret":"kept sealed"},"transactionId":"t-2"}]}`); st != 201 {
		t.Fatalf("push: %d %s", st, body)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); err == nil {
		t.Fatal("PostgreSQL still running after serve stopped")
	}

	s = startServe(t, map[string]string{}, "-data-dir", dataDir, "-key-file", keyFile)
	st, body := s.do("GET", "/api/v1/messages?queue=kept", "")
	if st != 200 || !strings.Contains(body, `"t-1"`) || !strings.Contains(body, "across runs") {
		t.Errorf("after a restart: %d %s", st, body)
	}
	if strings.Contains(s.stderr.String(), "created a local encryption key") {
		t.Error("the restart created another key")
	}
	if st, body := s.do("GET", "/api/v1/pop/queue/sealed?autoAck=true", ""); st != 200 || !strings.Contains(body, `"kept sealed"`) {
		t.Errorf("encrypted queue after a restart: %d %s", st, body)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestUsageNamesEveryCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "migrate", "bench", "console", "chaos", "token", "help"} {
		if !strings.Contains(usage, "queen "+cmd) {
			t.Errorf("usage lacks %s", cmd)
		}
	}
	if err := run(context.Background(), []string{"nope"}); err == nil {
		t.Error("unknown command accepted")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
