package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/queen-serverless/queen/core/console"
	"github.com/queen-serverless/queen/core/console/consoletest"
	"github.com/queen-serverless/queen/internal/pgtest"
)

// consoleProc is one `queen console` running in this process.
type consoleProc struct {
	base   string
	stdout *syncBuffer
}

func startConsole(t *testing.T, env map[string]string, loadAWS awsConfigLoader, args ...string) *consoleProc {
	t.Helper()
	port := freePort(t)
	args = append(args, "-port", strconv.Itoa(port))
	ctx, cancel := context.WithCancel(context.Background())
	c := &consoleProc{base: "http://127.0.0.1:" + strconv.Itoa(port), stdout: &syncBuffer{}}
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- consoleCmd(ctx, args, func(k string) string { return env[k] }, loadAWS, c.stdout, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("queen console: %v", err)
		}
		if t.Failed() {
			t.Logf("console output:\n%s\n%s", c.stdout.String(), stderr.String())
		}
	})
	waitUntil(t, "queen console starting", func() bool {
		select {
		case err := <-done:
			t.Fatalf("queen console ended: %v\n%s", err, stderr.String())
		default:
		}
		return strings.Contains(c.stdout.String(), "Queen console on")
	})
	return c
}

// call is what the console's page does: a request with the console header.
func (c *consoleProc) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set(console.RequestHeader, "1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `queen console -api` against a local `queen serve` standing in for the
// deployed API behind API Gateway's IAM authorizer (consoletest's verifier,
// which recomputes every signature): credentials come from the default AWS
// config chain (here the environment), every forwarded call verifies, and
// the console's reads and actions work end to end.
func TestConsoleSigV4(t *testing.T) {
	// Not parallel: it sets the AWS environment the default chain reads.
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "example-session"}
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY": creds.SecretAccessKey, "AWS_SESSION_TOKEN": creds.SessionToken,
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": t.TempDir() + "/none", "AWS_SHARED_CREDENTIALS_FILE": t.TempDir() + "/none",
	} {
		t.Setenv(k, v)
	}
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t)})
	target, _ := url.Parse(s.base)
	verifier := &consoletest.SigV4Verifier{Credentials: creds, Region: "eu-west-1", Service: "execute-api",
		Next: httputil.NewSingleHostReverseProxy(target)}
	gateway := httptest.NewServer(verifier)
	defer gateway.Close()

	// Without a region (a custom domain, no AWS_REGION) it says what to do.
	var out, errOut syncBuffer
	err := consoleCmd(context.Background(), []string{"-api", gateway.URL, "-port", "0"}, func(string) string { return "" }, loadAWSConfig, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "-region") {
		t.Fatalf("no region: %v", err)
	}

	c := startConsole(t, map[string]string{}, loadAWSConfig, "-api", gateway.URL+"/", "-region", "eu-west-1")
	if out := c.stdout.String(); !strings.Contains(out, "SigV4 (execute-api, region eu-west-1, credentials from EnvConfigCredentials)") {
		t.Errorf("banner:\n%s", out)
	}
	if st, body := c.call(t, "GET", "/console/", ""); st != 200 || !strings.Contains(body, "Queen console") {
		t.Fatalf("console page: %d %.200s", st, body)
	}
	if st, body := c.call(t, "GET", "/console/meta.json", ""); st != 200 || !strings.Contains(body, `"auth":"sigv4"`) {
		t.Errorf("meta: %d %s", st, body)
	}
	if st, body := c.call(t, "POST", "/api/v1/push", `{"items":[{"queue":"remote","partition":"p/1","payload":{"n":1}}]}`); st != 201 {
		t.Fatalf("push through the console: %d %s", st, body)
	}
	if st, body := c.call(t, "POST", "/api/v1/configure", `{"queue":"remote","options":{"retryLimit":7}}`); st != 200 || !strings.Contains(body, `"retryLimit":7`) {
		t.Fatalf("configure through the console: %d %s", st, body)
	}
	if st, body := c.call(t, "GET", "/api/v1/resources/overview", ""); st != 200 || !strings.Contains(body, `"name":"remote"`) {
		t.Fatalf("overview through the console: %d %s", st, body)
	}
	if st, body := c.call(t, "GET", "/api/v1/messages?queue=remote&partition=p%2F1", ""); st != 200 || !strings.Contains(body, `"n":1`) {
		t.Fatalf("browse through the console: %d %s", st, body)
	}
	// API errors come back as they are, for the console to show.
	if st, body := c.call(t, "GET", "/api/v1/resources/queues/missing", ""); st != 404 || !strings.Contains(body, "missing") {
		t.Errorf("404 through the console: %d %s", st, body)
	}
	verified, rejected := verifier.Counts()
	if verified != 5 || len(rejected) != 0 {
		t.Fatalf("verified %d signatures, rejected %v", verified, rejected)
	}
	// A request without the console's header is refused before it is signed.
	req, _ := http.NewRequest("POST", c.base+"/api/v1/push", strings.NewReader(`{"items":[{"queue":"remote","payload":2}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n, _ := verifier.Counts(); resp.StatusCode != 403 || n != verified {
		t.Errorf("request without the console header: %d, forwarded: %v", resp.StatusCode, n != verified)
	}
}

// With a JWT authorizer (here `queen serve` with JWT authentication) the
// console forwards a bearer token from -token or $QUEEN_TOKEN.
func TestConsoleBearer(t *testing.T) {
	t.Parallel()
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "QUEEN_JWT_SECRET": testSecret})
	noAWS := func(context.Context, string) (aws.Config, error) {
		t.Error("bearer mode loaded the AWS configuration")
		return aws.Config{}, nil
	}
	c := startConsole(t, map[string]string{"QUEEN_TOKEN": token(t, "ops", "admin")}, noAWS, "-api", s.base)
	if st, body := c.call(t, "POST", "/api/v1/push", `{"items":[{"queue":"jwt","payload":1}]}`); st != 201 {
		t.Fatalf("push with the token: %d %s", st, body)
	}
	st, body := c.call(t, "GET", "/api/v1/pop/queue/jwt", "")
	var pop struct {
		Messages []struct {
			ProducerSub string `json:"producerSub"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &pop); st != 200 || err != nil || len(pop.Messages) != 1 || pop.Messages[0].ProducerSub != "ops" {
		t.Fatalf("pop with the token: %d %s", st, body)
	}

	// A token without the role is the API's 403, passed on with its message.
	reader := startConsole(t, map[string]string{}, noAWS, "-api", s.base, "-token", token(t, "dash", "read-only"))
	if st, body := reader.call(t, "GET", "/api/v1/resources/queues", ""); st != 200 {
		t.Errorf("read with a read-only token: %d %s", st, body)
	}
	if st, body := reader.call(t, "DELETE", "/api/v1/resources/queues/jwt", ""); st != 403 || !strings.Contains(body, "insufficient role") {
		t.Errorf("delete with a read-only token: %d %s", st, body)
	}
}

// `queen serve` serves the console at /console/ (and / leads there); its
// files are public, its API calls are not when JWT authentication is on.
func TestServeMountsTheConsole(t *testing.T) {
	t.Parallel()
	s := startServe(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "QUEEN_JWT_SECRET": testSecret})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for path, want := range map[string]string{"/": "/console/", "/console": "/console/"} {
		resp, err := client.Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
			t.Errorf("GET %s: %d to %q, want a redirect to %s", path, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	if st, body := s.do("GET", "/console/", ""); st != 200 || !strings.Contains(body, "<title>Queen console</title>") {
		t.Errorf("GET /console/: %d %.100s", st, body)
	}
	if st, body := s.do("GET", "/console/meta.json", ""); st != 200 || body != `{"mode":"local"}` {
		t.Errorf("GET /console/meta.json: %d %s", st, body)
	}
	if st, _ := s.do("GET", "/api/v1/resources/overview", ""); st != 401 {
		t.Errorf("the API without a token: %d, want 401", st)
	}
	if st, body := s.do("POST", "/console/", "{}"); st != 401 && st != 404 && st != 405 {
		t.Errorf("POST /console/: %d %s", st, body)
	}
}
