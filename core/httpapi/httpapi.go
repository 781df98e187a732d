// Package httpapi serves Queen's v1 HTTP wire format over a queen.Store, so
// existing Queen clients work unchanged. The same handlers run in each
// Lambda function (a subset of routes each) and in the local server (all).
//
// Handlers translate: decode and validate, call one Store operation,
// encode. Errors map to HTTP status in exactly one function, writeError.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/core/routes"
)

// Defaults of Config.
const (
	// DefaultMaxBodyBytes is the Lambda payload limit.
	DefaultMaxBodyBytes = 6 << 20
	// DefaultMaxWait caps long-polls locally; Lambda sets 20 s (API Gateway
	// cuts requests at 30 s).
	DefaultMaxWait = 30 * time.Second
	// DefaultPollInterval is the longest pause between polls of a long-poll.
	DefaultPollInterval = 250 * time.Millisecond
)

// Group names a set of routes; each Lambda function serves some groups.
type Group string

// Route groups: a function's routes in the route table, and the two that
// are not a function's.
const (
	GroupPush    Group = routes.FnPush
	GroupPop     Group = routes.FnPop
	GroupAck     Group = routes.FnAck
	GroupDLQ     Group = routes.FnDLQ
	GroupAdmin   Group = routes.FnAdmin
	GroupHealth  Group = "health"
	GroupMetrics Group = "metrics"
)

// AllGroups is every route: the local server.
var AllGroups = []Group{GroupPush, GroupPop, GroupAck, GroupDLQ, GroupAdmin, GroupHealth, GroupMetrics}

// Config configures the API.
type Config struct {
	// MaxBodyBytes limits request bodies (413 beyond). Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxWait caps long-poll waits. Default DefaultMaxWait.
	MaxWait time.Duration
	// PollInterval is the pause between polls of a long-poll when the store
	// cannot be probed (see queen.Prober). Default DefaultPollInterval.
	PollInterval time.Duration
	// ProbeInterval is the shortest pause between probes for the long-polls
	// waiting in this API (see wait.go). Default DefaultProbeInterval.
	ProbeInterval time.Duration
	// Logger receives request errors. Default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts operations and serves /metrics/prometheus.
	Metrics Metrics
	// Identity, when set, names the verified caller of a request (JWT sub,
	// or IAM principal ARN); pushed messages carry it as producerSub.
	Identity func(*http.Request) string
	// OnPush, when set, is told after each commit of a push which queues
	// it queued messages in (the local dispatcher's wake-up).
	OnPush func(queue string)
	// OnSubscription, when set, is told of each subscription created or
	// changed through the API.
	OnSubscription func(context.Context, queen.Subscription)
	// OnSubscriptionsGone, when set, is told before a DELETE replies that
	// subscriptions are gone: queue's subscription for group ("" queue:
	// group's on every queue; "" group: every subscription of queue). The
	// local dispatcher stops their deliveries before it returns.
	OnSubscriptionsGone func(ctx context.Context, queue, group string)
	// Targets checks a subscription's target when it is created or
	// changed (config.Config.Fence: the egress fence and the declared
	// functions). nil refuses every target.
	Targets queen.TargetChecker
	// Admin, when set, says whether the caller holds the admin role: only
	// an admin sees a URL target's query and lastError in full. nil:
	// every caller is an admin (no authentication).
	Admin func(*http.Request) bool
}

// Metrics is what the API reports operations to; core/prommetrics
// implements it for the local server.
type Metrics interface {
	// Observe records one operation, its outcome and its latency.
	Observe(op string, err error, d time.Duration)
	// Handler serves /metrics/prometheus.
	Handler(store queen.Store, log *slog.Logger) http.Handler
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// API is the HTTP API over a store.
type API struct {
	store queen.Store
	cfg   Config
	hub   *hub // long-polls

	handlers map[string]func(http.ResponseWriter, *http.Request) error // by route pattern
}

// New returns an API over store.
func New(store queen.Store, cfg Config) *API {
	a := &API{store: store, cfg: cfg.WithDefaults()}
	a.hub = newHub(store, a.cfg.ProbeInterval, a.cfg.Logger)
	a.handlers = a.routeHandlers()
	return a
}

// unserved lists the routes of table without a handler in h and the
// handlers of h without a route in table (the metrics route, served by
// Config.Metrics, excepted).
func unserved(table []routes.Route, h map[string]func(http.ResponseWriter, *http.Request) error) []string {
	var bad []string
	inTable := map[string]bool{}
	for _, rt := range table {
		if rt.Function == "" {
			continue
		}
		inTable[rt.Pattern()] = true
		if h[rt.Pattern()] == nil {
			bad = append(bad, "no handler for "+rt.Pattern())
		}
	}
	for p := range h {
		if !inTable[p] {
			bad = append(bad, "no route for the handler of "+p)
		}
	}
	sort.Strings(bad)
	return bad
}

// routeHandlers maps each route of the route table (core/routes) to its
// handler. A route without a handler, or a handler without a route, is a
// programming error found by every test that builds an API.
func (a *API) routeHandlers() map[string]func(http.ResponseWriter, *http.Request) error {
	h := map[string]func(http.ResponseWriter, *http.Request) error{
		"POST /api/v1/push":                                         a.push,
		"GET /api/v1/pop/queue/{queue}":                             a.pop,
		"GET /api/v1/pop/queue/{queue}/partition/{partition}":       a.pop,
		"POST /api/v1/lease/{leaseId}/extend":                       a.extendLease,
		"POST /api/v1/ack":                                          a.ack,
		"POST /api/v1/ack/batch":                                    a.ackBatch,
		"POST /api/v1/transaction":                                  a.transaction,
		"GET /api/v1/dlq":                                           a.listDLQ,
		"GET /api/v1/messages/{partitionId}/{transactionId}":        a.getDeadLetter,
		"DELETE /api/v1/messages/{partitionId}/{transactionId}":     a.deleteDeadLetter,
		"POST /api/v1/messages/{partitionId}/{transactionId}/retry": a.retryDeadLetter,
		"POST /api/v1/configure":                                    a.configure,
		"GET /api/v1/resources/queues":                              a.listQueues,
		"GET /api/v1/resources/overview":                            a.overview,
		"GET /api/v1/resources/queues/{queue}":                      a.getQueue,
		"DELETE /api/v1/resources/queues/{queue}":                   a.deleteQueue,
		"GET /api/v1/consumer-groups":                               a.listGroups,
		"GET /api/v1/consumer-groups/{group}":                       a.getGroup,
		"DELETE /api/v1/consumer-groups/{group}":                    a.deleteGroup,
		"DELETE /api/v1/consumer-groups/{group}/queues/{queue}":     a.deleteGroup,
		"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek":  a.seek,
		"GET /api/v1/messages":                                      a.browse,
		"POST /api/v1/subscriptions":                                a.putSubscription,
		"GET /api/v1/subscriptions":                                 a.listSubscriptions,
		"GET /api/v1/subscriptions/{queue}/{consumerGroup}":         a.getSubscription,
		"DELETE /api/v1/subscriptions/{queue}/{consumerGroup}":      a.deleteSubscription,
		"GET /api/v1/system/maintenance":                            a.getMaintenance(queen.MaintainPush),
		"POST /api/v1/system/maintenance":                           a.setMaintenance(queen.MaintainPush),
		"GET /api/v1/system/maintenance/pop":                        a.getMaintenance(queen.MaintainPop),
		"POST /api/v1/system/maintenance/pop":                       a.setMaintenance(queen.MaintainPop),
		"GET /health":                                               a.health,
	}
	if bad := unserved(routes.Table, h); len(bad) > 0 {
		panic("httpapi: the route table (core/routes) and the handlers differ: " + strings.Join(bad, "; "))
	}
	return h
}

// Handler returns an http.Handler serving the given route groups.
func (a *API) Handler(groups ...Group) http.Handler {
	mux := http.NewServeMux()
	has := map[Group]bool{}
	for _, g := range groups {
		has[g] = true
	}
	for _, rt := range routes.Table {
		switch {
		case rt.Function == "": // local only: metrics
			if has[GroupMetrics] && a.cfg.Metrics != nil {
				mux.Handle(rt.Pattern(), a.cfg.Metrics.Handler(a.store, a.cfg.Logger))
			}
		case has[Group(rt.Function)], rt.EveryFunction && has[GroupHealth]:
			mux.Handle(rt.Pattern(), a.wrap(rt.Op, a.handlers[rt.Pattern()]))
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// No route: answer the mux's 404 or 405 in the API's error shape.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		if rec.status == http.StatusMethodNotAllowed {
			writeJSON(w, rec.status, errorBody{Error: fmt.Sprintf("method %s not allowed for %s", r.Method, r.URL.Path)})
			return
		}
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	})
}

// statusRecorder captures the status a fallback handler writes.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.status = code }

// wrap applies the body limit, times the operation and maps errors.
func (a *API) wrap(op string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r.Body = http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes)
		err := h(w, r)
		if err != nil {
			a.writeError(w, r, err)
		}
		if a.cfg.Metrics != nil {
			a.cfg.Metrics.Observe(op, err, time.Since(start))
		}
	})
}

// errBodyTooLarge marks a request body beyond the limit.
var errBodyTooLarge = errors.New("request body too large")

// statusOf maps an error to its HTTP status: the one place that does.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, queen.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, queen.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, queen.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, queen.ErrQueueFull):
		return http.StatusTooManyRequests
	case errors.Is(err, queen.ErrMaintenance), errors.Is(err, queen.ErrKeyUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, queen.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errorBody is what a failed request returns. Extra carries per-item
// results for rejected acks.
type errorBody struct {
	Error   string `json:"error"`
	Success *bool  `json:"success,omitempty"`
	Results any    `json:"results,omitempty"`
}

// resultsError carries per-item results along with an error.
type resultsError struct {
	err     error
	results any
	success bool
}

func (e *resultsError) Error() string { return e.err.Error() }
func (e *resultsError) Unwrap() error { return e.err }

// statusClientClosed answers a request whose client went away (nginx's
// 499): nobody reads it, but a Lambda handler must write a status.
const statusClientClosed = 499

func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		// The client cancelled (a long poll given up): whatever the store
		// call then failed with, the database is not at fault.
		a.cfg.Logger.DebugContext(context.WithoutCancel(r.Context()), "client closed the request",
			"method", r.Method, "path", r.URL.Path, "err", err)
		w.WriteHeader(statusClientClosed)
		return
	}
	status := statusOf(err)
	body := errorBody{Error: err.Error()}
	var re *resultsError
	if errors.As(err, &re) {
		body.Results = re.results
		if re.success {
			f := false
			body.Success = &f
		}
	}
	switch {
	case errors.Is(err, queen.ErrMaintenance):
		w.Header().Set("Retry-After", strconv.Itoa(MaintenanceRetryAfter))
		a.cfg.Logger.DebugContext(r.Context(), "request refused: maintenance", "method", r.Method, "path", r.URL.Path)
	case errors.Is(err, queen.ErrKeyUnavailable):
		// An operator must supply the key; the message says which (never
		// key material) and that nothing was written or delivered.
		a.cfg.Logger.ErrorContext(r.Context(), "encryption key unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	case status == http.StatusInternalServerError:
		a.cfg.Logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		body.Error = "internal error"
	case status == http.StatusServiceUnavailable:
		a.cfg.Logger.WarnContext(r.Context(), "database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		body.Error = "database unavailable"
		if errors.Is(err, context.DeadlineExceeded) {
			body.Error = "request timed out"
		}
	default:
		a.cfg.Logger.DebugContext(r.Context(), "request rejected", "status", status, "err", err)
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads a JSON body into v: 413 beyond the limit, 400 for malformed
// JSON, invalid UTF-8 or wrong types (naming the field).
func decode(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeBody(body, v)
}

// readBody reads a request's body: 413 beyond the limit.
func readBody(r *http.Request) (string, error) {
	var buf strings.Builder
	if _, err := ioCopy(&buf, r); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", fmt.Errorf("%w: limit is %d bytes", errBodyTooLarge, mbe.Limit)
		}
		return "", queen.Invalid("body", "could not be read")
	}
	return buf.String(), nil
}

// decodeBody is decode of a body already read.
func decodeBody(body string, v any) error {
	if strings.TrimSpace(body) == "" {
		return queen.Invalid("body", "is empty; a JSON object is required")
	}
	if !utf8.ValidString(body) {
		return queen.Invalid("body", "must be valid UTF-8")
	}
	if err := queen.ValidateSurrogates("body", body); err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "body"
			}
			return queen.Invalid(field, "must be %s, not %s", jsonType(te.Type.Kind().String()), te.Value)
		case errors.As(err, &se):
			return queen.Invalid("body", "malformed JSON at byte %d", se.Offset)
		}
		return queen.Invalid("body", "malformed JSON: %v", err)
	}
	if rest := strings.TrimSpace(body[dec.InputOffset():]); rest != "" {
		return queen.Invalid("body", "must hold one JSON value (found more at byte %d)", dec.InputOffset())
	}
	return nil
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "float64", "uint", "uint64":
		return "a number"
	}
	return kind
}
