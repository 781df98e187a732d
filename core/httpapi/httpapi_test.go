package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/prommetrics"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

type server struct {
	*httptest.Server
	env *pgstoretest.Env
	t   *testing.T
}

// serverOption changes the API's config or wraps the store it serves (the
// env keeps the unwrapped store). Only tests of the long-poll's own timing
// change the config.
type serverOption func(cfg *httpapi.Config, store *queen.Store)

// newServer serves the API as `queen serve` and the Lambda functions build
// it: a store on the database's clock (pgstoretest.New), the API's config
// from config.FromEnv (defaults: the environment names only the database).
func newServer(t *testing.T, opts ...serverOption) *server {
	t.Helper()
	return serve(t, pgstoretest.New(t), opts)
}

// newClockedServer is newServer on a test clock (s.env.Clock), for tests of
// leases, delays, retention and dedup windows.
func newClockedServer(t *testing.T, opts ...serverOption) *server {
	t.Helper()
	return serve(t, pgstoretest.NewClocked(t), opts)
}

func serve(t *testing.T, e *pgstoretest.Env, opts []serverOption) *server {
	t.Helper()
	cfg := apiConfig(t, e)
	var store queen.Store = e.Store
	for _, o := range opts {
		o(&cfg, &store)
	}
	api := httpapi.New(store, cfg)
	s := httptest.NewServer(api.Handler(httpapi.AllGroups...))
	t.Cleanup(s.Close)
	return &server{Server: s, env: e, t: t}
}

// another is a second server process on s's database, with its own pool
// and store, built as s was: what a restart, or another Lambda container,
// sees.
func (s *server) another(t *testing.T) *server {
	t.Helper()
	cfg, err := pgstore.PoolConfig(s.env.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return s.serving(t, pgstore.New(pool, s.storeConfig()))
}

// storeConfig is the store configuration s was built with: its clock, if any.
func (s *server) storeConfig() pgstore.Config {
	var cfg pgstore.Config
	if s.env.Clock != nil {
		cfg.Clock = s.env.Clock.Now
	}
	return cfg
}

// serving is another API process over store on s's database, configured
// as s is.
func (s *server) serving(t *testing.T, store queen.Store) *server {
	t.Helper()
	hs := httptest.NewServer(httpapi.New(store, apiConfig(t, s.env)).Handler(httpapi.AllGroups...))
	t.Cleanup(hs.Close)
	return &server{Server: hs, env: s.env, t: t}
}

// apiConfig is the API's config as `queen serve` builds it on e's database.
func apiConfig(t testing.TB, e *pgstoretest.Env) httpapi.Config {
	t.Helper()
	conf, err := config.FromEnv(func(name string) string {
		if name == config.EnvDatabaseURL {
			return e.URL
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := conf.API(slog.New(slog.NewTextHandler(io.Discard, nil)))
	cfg.Metrics = prommetrics.New()
	return cfg
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

func (r reply) errorText(t *testing.T) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	r.json(t, &e)
	return e.Error
}

func (s *server) do(method, path string, body any) reply {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (s *server) expect(method, path string, body any, status int) reply {
	s.t.Helper()
	r := s.do(method, path, body)
	if r.status != status {
		s.t.Fatalf("%s %s: status %d (%s), want %d", method, path, r.status, r.body, status)
	}
	return r
}

func (s *server) rows(table string) int64 {
	s.t.Helper()
	var n int64
	if err := s.env.Pool.QueryRow(context.Background(), "SELECT count(*) FROM queen."+table).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

type pushed struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transaction_id"`
	Status        string  `json:"status"`
	MessageID     string  `json:"message_id"`
	PartitionID   string  `json:"partition_id"`
	Offset        int64   `json:"offset"`
	QueueName     string  `json:"queueName"`
	TraceID       *string `json:"trace_id"`
}

type popped struct {
	Success       bool    `json:"success"`
	Queue         string  `json:"queue"`
	Partition     string  `json:"partition"`
	PartitionID   string  `json:"partitionId"`
	LeaseID       string  `json:"leaseId"`
	ConsumerGroup *string `json:"consumerGroup"`
	Messages      []struct {
		ID            string          `json:"id"`
		TransactionID string          `json:"transactionId"`
		PartitionID   string          `json:"partitionId"`
		Partition     string          `json:"partition"`
		Queue         string          `json:"queue"`
		Offset        int64           `json:"offset"`
		Data          json.RawMessage `json:"data"`
		TraceID       *string         `json:"traceId"`
		CreatedAt     time.Time       `json:"createdAt"`
		LeaseID       string          `json:"leaseId"`
		ConsumerGroup *string         `json:"consumerGroup"`
		RetryCount    int             `json:"retryCount"`
	} `json:"messages"`
}

// acked is the wire form of one ack result, with the fields docs/api.md
// names.
type acked struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	Result        string  `json:"result"`
	QueueName     string  `json:"queueName"`
	PartitionName string  `json:"partitionName"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Committed     *int64  `json:"committed"`
}

func (a acked) String() string {
	e := ""
	if a.Error != nil {
		e = *a.Error
	}
	return fmt.Sprintf("{index %d success %v result %q dlq %v committed %s leaseReleased %v error %q}",
		a.Index, a.Success, a.Result, a.DLQ, i64(a.Committed), a.LeaseReleased, e)
}

func TestPushPopAckShapes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var res []pushed
	s.expect("POST", "/api/v1/push", `{"items": [
		{"queue": "orders", "partition": "cust-1", "payload": {"z": 1, "a": 2}, "transactionId": "t1", "traceId": "tr"},
		{"queue": "orders", "partition": "cust-1", "payload": "two"},
		{"queue": "orders", "partition": "cust-1", "payload": 3, "transactionId": "t1"}]}`, 201).json(t, &res)
	if len(res) != 3 || res[0].Status != "queued" || res[0].Offset != 0 || res[0].QueueName != "orders" ||
		res[0].MessageID == "" || res[0].PartitionID == "" || *res[0].TraceID != "tr" || res[1].TransactionID == "" ||
		res[2].Status != "duplicate" || res[2].Offset != 0 || res[2].Index != 2 {
		t.Fatalf("push results %+v", res)
	}

	var p popped
	s.expect("GET", "/api/v1/pop/queue/orders?batch=10&consumerGroup=billing", nil, 200).json(t, &p)
	if !p.Success || p.Queue != "orders" || p.Partition != "cust-1" || p.PartitionID != res[0].PartitionID ||
		p.LeaseID == "" || *p.ConsumerGroup != "billing" || len(p.Messages) != 2 {
		t.Fatalf("pop %+v", p)
	}
	m := p.Messages[0]
	if m.ID != res[0].MessageID || m.TransactionID != "t1" || string(m.Data) != `{"z":1,"a":2}` || *m.TraceID != "tr" ||
		m.LeaseID != p.LeaseID || *m.ConsumerGroup != "billing" || m.Offset != 0 || m.CreatedAt.IsZero() {
		t.Fatalf("message %+v", m)
	}
	// Nothing left: 204 with no body.
	if r := s.expect("GET", "/api/v1/pop/queue/orders/partition/cust-1?consumerGroup=billing", nil, 204); len(r.body) != 0 {
		t.Fatalf("204 with body %q", r.body)
	}

	var ex map[string]any
	s.expect("POST", "/api/v1/lease/"+p.LeaseID+"/extend", map[string]any{"seconds": 60}, 200).json(t, &ex)
	if ex["leaseId"] != p.LeaseID || ex["expiresAt"] == nil {
		t.Fatalf("extend %+v", ex)
	}

	var a []acked
	s.expect("POST", "/api/v1/ack", map[string]any{"transactionId": "t1", "partitionId": m.PartitionID, "status": "completed",
		"consumerGroup": "billing", "leaseId": p.LeaseID}, 200).json(t, &a)
	if len(a) != 1 || !a[0].Success || a[0].Error != nil || *a[0].Committed != 0 || a[0].LeaseReleased || a[0].QueueName != "orders" || a[0].PartitionName != "cust-1" {
		t.Fatalf("ack %+v", a)
	}
	s.expect("POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": "billing", "acknowledgments": []map[string]any{
		{"transactionId": p.Messages[1].TransactionID, "partitionId": m.PartitionID, "status": "success", "leaseId": p.LeaseID},
	}}, 200).json(t, &a)
	if !a[0].Success || *a[0].Committed != 1 || !a[0].LeaseReleased {
		t.Fatalf("ack batch %+v", a)
	}
	// Queue mode: the group is __QUEUE_MODE__ on the wire, as Queen names
	// it (docs/semantics.md §3.3.2), at the top and on each message.
	for _, query := range []string{"autoAck=true", "batch=1"} {
		var qm popped
		s.expect("GET", "/api/v1/pop/queue/orders?"+query, nil, 200).json(t, &qm)
		if qm.ConsumerGroup == nil || *qm.ConsumerGroup != queen.QueueModeGroup ||
			qm.Messages[0].ConsumerGroup == nil || *qm.Messages[0].ConsumerGroup != queen.QueueModeGroup {
			t.Fatalf("queue-mode pop (%s): consumerGroup %v, message's %v, want %q", query, qm.ConsumerGroup,
				qm.Messages[0].ConsumerGroup, queen.QueueModeGroup)
		}
		if (qm.LeaseID == "") != (query == "autoAck=true") {
			t.Fatalf("queue-mode pop (%s): leaseId %q", query, qm.LeaseID)
		}
	}
}

func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.expect("POST", "/api/v1/configure", map[string]any{"queue": "small", "options": map[string]any{"maxSize": 1}}, 200)
	var res []pushed
	s.expect("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "q", "payload": 1}}}, 201).json(t, &res)
	var p popped
	s.expect("GET", "/api/v1/pop/queue/q", nil, 200).json(t, &p)
	before := map[string]int64{}
	for _, tb := range []string{"queues", "partitions", "segments", "dedup", "consumers", "dlq"} {
		before[tb] = s.rows(tb)
	}

	big := fmt.Sprintf(`{"items":[{"queue":"q","payload":"%s"}]}`, strings.Repeat("x", config.DefaultMaxBodyBytes))
	cases := []struct {
		method, path string
		body         any
		status       int
		mention      string
	}{
		{"POST", "/api/v1/push", `{"items": [`, 400, "malformed"},
		{"POST", "/api/v1/push", ``, 400, "body"},
		{"POST", "/api/v1/push", `{"items": "nope"}`, 400, "items"},
		{"POST", "/api/v1/push", `{"items": [{"queue": 5}]}`, 400, "queue"},
		{"POST", "/api/v1/push", `{"items": [{"queue": "bad name"}]}`, 400, "items[0].queue"},
		{"POST", "/api/v1/push", `{"items": null}`, 400, "items"},
		{"POST", "/api/v1/push", "{\"items\": [{\"queue\": \"q\", \"payload\": \"\xff\"}]}", 400, "UTF-8"},
		{"POST", "/api/v1/push", `{"items": [{"queue": "q", "partition": "a\u0000b"}]}`, 400, "partition"},
		{"POST", "/api/v1/push", big, 413, "too large"},
		{"POST", "/api/v1/push", `{"items": [{"queue": "small", "payload": 1}, {"queue": "small", "payload": 2}]}`, 429, "full"},
		{"GET", "/api/v1/pop/queue/q?batch=-1", nil, 400, "batch"},
		{"GET", "/api/v1/pop/queue/q?batch=abc", nil, 400, "batch"},
		{"GET", "/api/v1/pop/queue/q?batch=99999999", nil, 400, "batch"},
		{"GET", "/api/v1/pop/queue/q?wait=maybe", nil, 400, "wait"},
		{"GET", "/api/v1/pop/queue/q?subscriptionFrom=yesterday", nil, 400, "subscriptionFrom"},
		{"POST", "/api/v1/ack", map[string]any{"transactionId": "nope", "partitionId": "00000000-0000-0000-0000-0000000000aa", "status": "completed"}, 404, "partition not found"},
		{"POST", "/api/v1/ack", map[string]any{"transactionId": res[0].TransactionID, "partitionId": res[0].PartitionID, "status": "completed", "leaseId": "00000000-0000-0000-0000-000000000000"}, 409, "lease"},
		{"POST", "/api/v1/ack", map[string]any{"transactionId": res[0].TransactionID, "partitionId": "zzz", "status": "completed"}, 400, "partitionId"},
		{"POST", "/api/v1/ack", map[string]any{"transactionId": res[0].TransactionID, "partitionId": res[0].PartitionID, "status": "meh"}, 400, "status"},
		{"POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{}}, 400, "acknowledgments"},
		{"POST", "/api/v1/lease/not-a-lease/extend", map[string]any{"seconds": 10}, 404, "lease"},
		{"POST", "/api/v1/lease/" + p.LeaseID + "/extend", map[string]any{"seconds": -5}, 400, "seconds"},
		{"POST", "/api/v1/transaction", map[string]any{"operations": []map[string]any{{"type": "frobnicate"}}}, 400, "type"},
		{"POST", "/api/v1/transaction", map[string]any{"operations": []map[string]any{{"type": "push", "items": []map[string]any{{"queue": "x", "payload": 1}}}}, "requiredLeases": []string{"00000000-0000-0000-0000-000000000000"}}, 409, "lease"},
		{"GET", "/api/v1/dlq?limit=-3", nil, 400, "limit"},
		{"GET", "/api/v1/dlq?from=noon", nil, 400, "from"},
		{"GET", "/api/v1/messages/" + res[0].PartitionID + "/nope", nil, 404, "dead letter"},
		{"POST", "/api/v1/messages/" + res[0].PartitionID + "/nope/retry", nil, 404, "dead letter"},
		{"DELETE", "/api/v1/messages/" + res[0].PartitionID + "/nope", nil, 404, "dead letter"},
		{"POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"leaseTime": "long"}}, 400, "leaseTime"},
		{"POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"retryLimit": -1}}, 400, "retryLimit"},
		{"GET", "/api/v1/resources/queues/missing", nil, 404, "missing"},
		{"DELETE", "/api/v1/resources/queues/missing", nil, 404, "missing"},
		{"GET", "/api/v1/consumer-groups/nobody", nil, 404, "nobody"},
		{"POST", "/api/v1/consumer-groups/g/queues/missing/seek", map[string]any{"toEnd": true}, 404, "missing"},
		{"POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"timestamp": "soon"}, 400, "timestamp"},
		{"GET", "/api/v1/messages?queue=q&limit=many", nil, 400, "limit"},
		{"GET", "/api/v1/nowhere", nil, 404, "no route"},
		{"PUT", "/api/v1/push", nil, 405, ""},
	}
	for _, c := range cases {
		r := s.do(c.method, c.path, c.body)
		if r.status != c.status {
			t.Errorf("%s %s: status %d (%s), want %d", c.method, c.path, r.status, r.body, c.status)
			continue
		}
		if c.mention != "" && !strings.Contains(strings.ToLower(r.errorText(t)), strings.ToLower(c.mention)) {
			t.Errorf("%s %s: error %q does not mention %q", c.method, c.path, r.errorText(t), c.mention)
		}
	}
	for tb, n := range before {
		if got := s.rows(tb); got != n {
			t.Errorf("rejected requests changed %s: %d rows, was %d", tb, got, n)
		}
	}
}

func TestDatabaseDownIs503(t *testing.T) {
	t.Parallel()
	cfg, _ := pgstore.PoolConfig("postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	api := httpapi.New(pgstore.New(pool, pgstore.Config{}), httpapi.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(api.Handler(httpapi.AllGroups...))
	defer srv.Close()
	s := &server{Server: srv, t: t}
	r := s.expect("GET", "/health", nil, 503)
	var h map[string]string
	r.json(t, &h)
	if h["status"] != "unhealthy" || h["database"] != "disconnected" {
		t.Fatalf("health %v", h)
	}
	r = s.expect("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "q", "payload": 1}}}, 503)
	if strings.Contains(r.errorText(t), "127.0.0.1") {
		t.Fatalf("503 leaks internals: %s", r.body)
	}
}
