package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/queen-serverless/queen/core/console"
	"github.com/queen-serverless/queen/core/console/consoletest"
)

// Test credentials (AWS's documentation example key).
var testCreds = aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
	SessionToken: "session-token-example"}

// echo answers with what reached the API.
type echoed struct {
	Method, Path, RawQuery, Body string
	Header                       http.Header
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(echoed{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Body: string(b), Header: r.Header})
}

// proxied starts an API behind handler-wrapping upstream and the console's
// proxy in front of it.
func proxied(t *testing.T, upstream http.Handler, auth console.Authorizer) string {
	t.Helper()
	api := httptest.NewServer(upstream)
	t.Cleanup(api.Close)
	u, _ := url.Parse(api.URL + "/stage")
	front := httptest.NewServer(console.NewProxy(u, auth, nil))
	t.Cleanup(front.Close)
	return front.URL
}

func call(t *testing.T, method, u, body string, header map[string]string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var fromConsole = map[string]string{console.RequestHeader: "1", "Cookie": "session=secret", "Content-Type": "application/json"}

// The proxy's SigV4 signatures verify as API Gateway verifies them: the
// same signer, recomputed upstream over method, path, query, the signed
// headers and the body.
func TestSigV4SignaturesVerify(t *testing.T) {
	t.Parallel()
	v := &consoletest.SigV4Verifier{Credentials: testCreds, Region: "eu-west-1", Service: "execute-api", Next: http.HandlerFunc(echo)}
	front := proxied(t, v, console.SigV4{Credentials: credentials.StaticCredentialsProvider{Value: testCreds}, Region: "eu-west-1"})

	st, body := call(t, "GET", front+"/api/v1/resources/queues/a%2Fb?z=1&a=two%20words", "", fromConsole)
	var e echoed
	if err := json.Unmarshal([]byte(body), &e); st != 200 || err != nil {
		t.Fatalf("signed GET: %d %s", st, body)
	}
	if e.Path != "/stage/api/v1/resources/queues/a%2Fb" || !strings.Contains(e.RawQuery, "z=1") {
		t.Errorf("forwarded to %s?%s", e.Path, e.RawQuery)
	}
	if e.Header.Get("Cookie") != "" || e.Header.Get(console.RequestHeader) != "" {
		t.Errorf("browser headers forwarded: %v", e.Header)
	}
	push := `{"items":[{"queue":"orders","payload":{"n":1}}]}`
	if st, body = call(t, "POST", front+"/api/v1/push", push, fromConsole); st != 200 {
		t.Fatalf("signed POST: %d %s", st, body)
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Body != push || e.Header.Get("Content-Type") != "application/json" {
		t.Errorf("POST arrived as %+v", e)
	}
	if st, body = call(t, "DELETE", front+"/api/v1/messages/p/t?consumerGroup=g", "", fromConsole); st != 200 {
		t.Fatalf("signed DELETE: %d %s", st, body)
	}
	if ok, rejected := v.Counts(); ok != 3 || len(rejected) != 0 {
		t.Fatalf("verified %d, rejected %v", ok, rejected)
	}

	// The verifier is not a rubber stamp: another secret, region or no
	// signature at all is refused.
	for name, a := range map[string]console.Authorizer{
		"other secret": console.SigV4{Credentials: credentials.NewStaticCredentialsProvider(testCreds.AccessKeyID, "not-the-secret", testCreds.SessionToken), Region: "eu-west-1"},
		"other region": console.SigV4{Credentials: credentials.StaticCredentialsProvider{Value: testCreds}, Region: "us-east-1"},
		"unsigned":     console.NoAuth{},
	} {
		v := &consoletest.SigV4Verifier{Credentials: testCreds, Region: "eu-west-1", Service: "execute-api", Next: http.HandlerFunc(echo)}
		front := proxied(t, v, a)
		if st, body := call(t, "POST", front+"/api/v1/push", push, fromConsole); st != 403 || !strings.Contains(body, "Forbidden") {
			t.Errorf("%s: %d %s, want 403", name, st, body)
		}
		if ok, rejected := v.Counts(); ok != 0 || len(rejected) != 1 {
			t.Errorf("%s: verified %d, rejected %v", name, ok, rejected)
		}
	}
}

func TestBearerAndRefusals(t *testing.T) {
	t.Parallel()
	front := proxied(t, http.HandlerFunc(echo), console.Bearer("tok-123"))
	st, body := call(t, "GET", front+"/api/v1/dlq", "", fromConsole)
	var e echoed
	if err := json.Unmarshal([]byte(body), &e); st != 200 || err != nil || e.Header.Get("Authorization") != "Bearer tok-123" {
		t.Fatalf("bearer: %d %s", st, body)
	}

	// Only the console's own page gets the proxy to act with the user's
	// credentials.
	for name, h := range map[string]map[string]string{
		"no console header": {},
		"other origin":      {console.RequestHeader: "1", "Origin": "https://evil.example"},
		"rebound host":      {console.RequestHeader: "1", "Host": "evil.example"},
	} {
		req, _ := http.NewRequest("POST", front+"/api/v1/push", strings.NewReader(`{}`))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		if host := h["Host"]; host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), "console proxy") {
			t.Errorf("%s: %d %s, want 403 from the proxy", name, resp.StatusCode, b)
		}
	}

	// An API that cannot be reached is a message, not a blank answer.
	dead, _ := url.Parse("http://127.0.0.1:1")
	front2 := httptest.NewServer(console.NewProxy(dead, console.NoAuth{}, nil))
	defer front2.Close()
	if st, body := call(t, "GET", front2.URL+"/api/v1/resources/queues", "", fromConsole); st != 502 || !strings.Contains(body, `"error"`) {
		t.Errorf("unreachable API: %d %s", st, body)
	}
}

func TestRegionOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://abc123.execute-api.eu-west-1.amazonaws.com/":        "eu-west-1",
		"https://x9y8z7.execute-api.cn-north-1.amazonaws.com.cn/dev": "cn-north-1",
		"https://queue.example.com/":                                 "",
		"http://localhost:6632":                                      "",
	} {
		u, _ := url.Parse(in)
		if got := console.RegionOf(u); got != want {
			t.Errorf("RegionOf(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestHandlerServesTheApp(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(console.Handler(console.Options{API: "https://api.example", Auth: console.AuthSigV4}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `<script src="app.js"`) ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("index: %d %v %.200s", resp.StatusCode, resp.Header, b)
	}
	for path, want := range map[string]string{
		// The app sends the header the proxy requires.
		"/console/app.js":    "'" + console.RequestHeader + "': '1'",
		"/console/style.css": "--accent",
		"/console/meta.json": `{"mode":"proxy","api":"https://api.example","auth":"sigv4"}`,
	} {
		if st, body := call(t, "GET", srv.URL+path, "", nil); st != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %.100s", path, st, body)
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = client.Get(srv.URL + "/console")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/console/" {
		t.Errorf("/console: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}
