package dispatch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// LambdaClient calls Lambda's Invoke API over HTTPS, each request signed
// with SigV4 by aws-sdk-go-v2's signer. It is the one Lambda call the
// functions make, so they carry this instead of the SDK's Lambda client
// (which adds about 0.7 MB to every bootstrap). The Runtime Interface
// Emulator serves the same API, so a client whose endpoint is an
// emulator's invokes the function it runs.
type LambdaClient struct {
	// HTTP sends the requests. Default: a client without an overall
	// timeout (a synchronous call is bounded by its context).
	HTTP *http.Client
	// Endpoint is the API's base URL. Default: AWS_ENDPOINT_URL_LAMBDA or
	// AWS_ENDPOINT_URL when set (as the SDK reads them), else
	// https://lambda.<region>.amazonaws.com.
	Endpoint string
	// Config loads the region and credentials, once, at the first call
	// (not at cold start). Default: the SDK's default chain.
	Config func(context.Context) (aws.Config, error)

	mu  sync.Mutex
	aws *aws.Config // loaded
}

// Invocation types of the Invoke API.
const (
	invokeSync  = "RequestResponse"
	invokeAsync = "Event"
)

// Invoke implements Invoker: it calls function synchronously and returns
// its result. A function error (an error the function returned, a crash,
// a timeout) and a failed call (a throttle, a missing function, no
// permission) are errors.
func (c *LambdaClient) Invoke(ctx context.Context, function string, payload []byte) ([]byte, error) {
	resp, body, err := c.call(ctx, function, invokeSync, payload)
	if err != nil {
		return nil, err
	}
	if fe := resp.Header.Get("X-Amz-Function-Error"); fe != "" {
		return nil, fmt.Errorf("function %s failed (%s): %s", function, fe, errorText(body))
	}
	// The emulator answers a function error without the header, and a
	// timeout with a line of text.
	if msg, ok := errorPayload(body); ok {
		return nil, fmt.Errorf("function %s failed: %s", function, msg)
	}
	if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
		return nil, fmt.Errorf("function %s failed: %s", function, errorText(body))
	}
	return body, nil
}

// InvokeAsync queues an asynchronous invocation of function (invocation
// type Event): Lambda answers once the event is queued, not run.
func (c *LambdaClient) InvokeAsync(ctx context.Context, function string, payload []byte) error {
	_, _, err := c.call(ctx, function, invokeAsync, payload)
	return err
}

// maxAnswerBytes bounds what is read of an answer (Lambda's synchronous
// response limit).
const maxAnswerBytes = 6 << 20

// call sends one signed Invoke request and returns the answer of a
// successful call (2xx); any other status is an error with the API's
// message.
func (c *LambdaClient) call(ctx context.Context, function, kind string, payload []byte) (*http.Response, []byte, error) {
	cfg, err := c.config(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("invoke %s: AWS configuration: %w", function, err)
	}
	base := c.Endpoint
	if base == "" {
		base = endpointFromEnv(cfg.Region)
	}
	// The function's name, ARN or alias ARN is one path segment, its
	// colons escaped as the SDK escapes them.
	name := strings.ReplaceAll(url.PathEscape(function), ":", "%3A")
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/2015-03-31/functions/" + name + "/invocations")
	if err != nil {
		return nil, nil, fmt.Errorf("invoke %s: %w", function, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(payload))
	if err != nil {
		return nil, nil, fmt.Errorf("invoke %s: %w", function, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amz-Invocation-Type", kind)
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("invoke %s: credentials: %w", function, err)
	}
	sum := sha256.Sum256(payload)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "lambda", cfg.Region, time.Now()); err != nil {
		return nil, nil, fmt.Errorf("invoke %s: sign: %w", function, err)
	}
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("invoke %s: %w", function, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("invoke %s: read the answer: %w", function, err)
	}
	if len(body) > maxAnswerBytes {
		return nil, nil, fmt.Errorf("invoke %s: the answer is over %d bytes", function, maxAnswerBytes)
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, fmt.Errorf("invoke %s: %s: %s", function, resp.Status, apiError(resp, body))
	}
	return resp, body, nil
}

// config loads the AWS configuration at the first call; a failure is
// tried again at the next.
func (c *LambdaClient) config(ctx context.Context) (aws.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aws != nil {
		return *c.aws, nil
	}
	load := c.Config
	if load == nil {
		load = func(ctx context.Context) (aws.Config, error) { return awsconfig.LoadDefaultConfig(ctx) }
	}
	cfg, err := load(ctx)
	if err != nil {
		return aws.Config{}, err
	}
	if cfg.Credentials == nil {
		cfg.Credentials = aws.AnonymousCredentials{}
	}
	c.aws = &cfg
	return cfg, nil
}

// endpointFromEnv is the Lambda endpoint the SDK would use: the
// service's endpoint variable, the general one, or the region's.
func endpointFromEnv(region string) string {
	for _, name := range []string{"AWS_ENDPOINT_URL_LAMBDA", "AWS_ENDPOINT_URL"} {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return v
		}
	}
	return "https://lambda." + region + ".amazonaws.com"
}

// apiError is the message of a failed Invoke call: the API's
// {"message"} (or {"Message"}) with its error type, else the body.
func apiError(resp *http.Response, body []byte) string {
	var e struct {
		Message  string `json:"message"`
		Message2 string `json:"Message"`
		Type     string `json:"Type"`
	}
	kind := resp.Header.Get("X-Amzn-Errortype")
	if json.Unmarshal(body, &e) == nil && (e.Message != "" || e.Message2 != "") {
		return strings.TrimSpace(kind + " " + e.Message + e.Message2)
	}
	return strings.TrimSpace(kind + " " + errorText(body))
}

// errorPayload recognises Lambda's error payload, {"errorMessage",
// "errorType"} without "batchItemFailures".
func errorPayload(p []byte) (string, bool) {
	if !bytes.HasPrefix(bytes.TrimSpace(p), []byte("{")) {
		return "", false
	}
	var e struct {
		Message  *string          `json:"errorMessage"`
		Type     *string          `json:"errorType"`
		Failures *json.RawMessage `json:"batchItemFailures"`
	}
	if json.Unmarshal(p, &e) != nil || e.Message == nil || e.Failures != nil {
		return "", false
	}
	if e.Type != nil {
		return *e.Type + ": " + *e.Message, true
	}
	return *e.Message, true
}

// errorText is a function error's payload for a log line, shortened.
func errorText(p []byte) string {
	if msg, ok := errorPayload(p); ok {
		return msg
	}
	if len(p) > 200 {
		return string(p[:200]) + "…"
	}
	return string(p)
}
