package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/queen-serverless/queen/internal/lambdaemu"
)

// rieModule is the Lambda Runtime Interface Emulator, a tool of this module
// (go.mod), so its version is pinned and it builds offline from the module
// cache.
const rieModule = lambdaemu.RIE

// buildAll builds every function's bootstrap for this machine, the way
// `make build` does for Lambda (static, stripped, -tags lambda.norpc), and
// the emulator, into dir with one go build.
func buildAll(t *testing.T, dir string) {
	t.Helper()
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags", "-s -w", "-tags", "lambda.norpc",
		"-o", dir+string(filepath.Separator), "./...", rieModule)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built the bootstraps and the emulator in %v", time.Since(start).Round(time.Millisecond))
}

// emulator is one aws-lambda-rie process running one function. It takes
// one invocation at a time.
type emulator struct {
	t    *testing.T
	name string
	url  string
	emu  *lambdaemu.Emulator
	// stop ends the emulator and the function (also at the test's end).
	stop func()
}

// startEmulator runs bootstrap under the emulator with env (and nothing of
// this process's environment but PATH), until t ends.
func startEmulator(t *testing.T, rie, bootstrap string, env ...string) *emulator {
	t.Helper()
	emu, err := lambdaemu.Start(context.Background(), rie, bootstrap, append([]string{
		"AWS_LAMBDA_FUNCTION_NAME=queen-" + filepath.Base(bootstrap),
		"AWS_REGION=eu-west-1",
	}, env...)...)
	if err != nil {
		t.Fatal(err)
	}
	e := &emulator{t: t, name: filepath.Base(bootstrap), emu: emu, stop: emu.Stop,
		url: emu.Endpoint + "/2015-03-31/functions/" + lambdaemu.Function + "/invocations"}
	t.Cleanup(func() {
		e.stop()
		if t.Failed() {
			t.Logf("%s emulator output:\n%s", e.name, emu.Output())
		}
	})
	return e
}

// invoke sends one event and returns the function's response payload. A
// function error comes back as {"errorMessage", "errorType"}.
func (e *emulator) invoke(event any) []byte {
	e.t.Helper()
	body, ok := event.([]byte)
	if !ok {
		var err error
		if body, err = json.Marshal(event); err != nil {
			e.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("invoke %s: %v", e.name, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("invoke %s: emulator status %d: %s", e.name, resp.StatusCode, out)
	}
	return out
}

// invokeAs invokes and decodes the response into a T.
func invokeAs[T any](e *emulator, event any) T {
	e.t.Helper()
	raw := e.invoke(event)
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		e.t.Fatalf("decode %s response %s: %v", e.name, raw, err)
	}
	return v
}

// lambdaError is the payload of a failed invocation.
type lambdaError struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

// httpResponse is an API Gateway response with its JSON body decoded.
type httpResponse struct {
	Status int
	Body   string
}

func (r httpResponse) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.Body), v); err != nil {
		t.Fatalf("response body %q: %v", r.Body, err)
	}
}

// http sends an API Gateway HTTP API (payload 2.0) request event.
func (e *emulator) http(method, target, body string) httpResponse {
	e.t.Helper()
	return e.httpAs(nil, method, target, body)
}

// httpAs is http with the authorizer API Gateway puts in the request
// context after verifying the caller (nil: a route without one).
func (e *emulator) httpAs(auth *events.APIGatewayV2HTTPRequestContextAuthorizerDescription, method, target, body string) httpResponse {
	e.t.Helper()
	path, query, _ := strings.Cut(target, "?")
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "$default",
		RawPath:        path,
		RawQueryString: query,
		Headers:        map[string]string{"content-type": "application/json", "user-agent": "queen-test"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID: "123456789012", APIID: "abc123", DomainName: "abc123.execute-api.eu-west-1.amazonaws.com",
			Stage: "$default", RequestID: fmt.Sprintf("req-%d", time.Now().UnixNano()),
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.7"},
			Authorizer: auth,
		},
		Body: body,
	}
	resp := invokeAs[events.APIGatewayV2HTTPResponse](e, ev)
	if resp.StatusCode == 0 {
		e.t.Fatalf("%s %s: not an API Gateway response", method, target)
	}
	return httpResponse{Status: resp.StatusCode, Body: resp.Body}
}

// expect checks a response's status.
func expect(t *testing.T, what string, r httpResponse, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.Status, status, r.Body)
	}
}

// coldInit measures the function's cold start without any database work:
// the emulator starts the function process at the first invocation, so the
// first invocation's latency less a warm one's is the init (process start,
// Go runtime, main's wiring, the runtime API handshake). The probe is not
// JSON, so the runtime rejects it before any handler code runs. It must be
// the emulator's first invocation.
func (e *emulator) coldInit() time.Duration {
	e.t.Helper()
	probe := []byte("cold-start probe")
	timed := func() time.Duration {
		start := time.Now()
		if out := e.invoke(probe); !bytes.Contains(out, []byte("errorMessage")) {
			e.t.Fatalf("probe answered %s", out)
		}
		return time.Since(start)
	}
	cold := timed()
	warm := timed()
	for range 4 {
		warm = min(warm, timed())
	}
	return cold - warm
}

// initToNext measures a function's init exactly: the time from starting
// its process until it asks the Runtime API for its first event, served by
// a stand-in Runtime API (and Extensions API, for the SIGTERM
// registration) so nothing else runs meanwhile. main's wiring makes no
// database connection, so none is counted.
func initToNext(t *testing.T, bootstrap string, env ...string) time.Duration {
	t.Helper()
	asked := make(chan time.Time, 1)
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2020-01-01/extension/register", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Lambda-Extension-Identifier", "ext-1")
		_, _ = w.Write([]byte(`{}`))
	})
	block := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}
	mux.HandleFunc("GET /2020-01-01/extension/event/next", block)
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- time.Now():
		default:
		}
		block(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(done)

	cmd := exec.Command(bootstrap)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(srv.URL, "http://"),
		"AWS_LAMBDA_FUNCTION_NAME=queen-" + filepath.Base(bootstrap),
		"AWS_REGION=eu-west-1",
	}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // the output is complete, and read only after this
	}
	select {
	case at := <-asked:
		stop()
		return at.Sub(start)
	case <-time.After(10 * time.Second):
		stop()
		t.Fatalf("%s never asked for an event:\n%s", bootstrap, out.String())
		return 0
	}
}

// logLines returns the function's JSON log lines whose msg is msg.
func (e *emulator) logLines(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(e.emu.Output(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

var errNoLine = errors.New("no such line")

// emfLine returns the first Embedded Metric Format line of the output.
func (e *emulator) emfLine() (map[string]any, error) {
	for _, line := range strings.Split(e.emu.Output(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["_aws"] != nil {
			return m, nil
		}
	}
	return nil, errNoLine
}
