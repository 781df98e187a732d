package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/queen-serverless/queen/core/lambdafn"
)

func TestLoggerCarriesRequestID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := lambdafn.NewLogger(&buf, slog.LevelInfo).With("function", "pop")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-123"})
	log.InfoContext(ctx, "hello", "n", 1)
	log.Info("no context")
	log.DebugContext(ctx, "below the level")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatal(err)
	}
	if first["requestId"] != "req-123" || first["function"] != "pop" || first["msg"] != "hello" {
		t.Errorf("line with a Lambda context: %v", first)
	}
	if _, ok := second["requestId"]; ok {
		t.Errorf("line without a Lambda context has a request id: %v", second)
	}
}

func TestHTTPHandlerAdaptsAPIGatewayV2(t *testing.T) {
	t.Parallel()
	var seen struct {
		method, path, query, body, ctype, requestID string
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen.method, seen.path, seen.query, seen.body = r.Method, r.URL.Path, r.URL.RawQuery, string(b)
		seen.ctype = r.Header.Get("Content-Type")
		if lc, ok := lambdacontext.FromContext(r.Context()); ok {
			seen.requestID = lc.AwsRequestID
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	handle := lambdafn.NewHTTPHandler(h, slog.New(slog.DiscardHandler))
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-9"})
	resp, err := handle(ctx, events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default",
		RawPath: "/api/v1/messages/p%2F1/tx", RawQueryString: "consumerGroup=g%201&x=1",
		Headers:         map[string]string{"content-type": "application/json"},
		Body:            base64.StdEncoding.EncodeToString([]byte(`{"a":1}`)),
		IsBase64Encoded: true,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: "abc.execute-api.eu-west-1.amazonaws.com",
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/api/v1/messages/p/1/tx"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Body != `{"ok":true}` || resp.Headers["Content-Type"] != "application/json" {
		t.Errorf("response %+v", resp)
	}
	if seen.method != "POST" || seen.path != "/api/v1/messages/p/1/tx" || seen.query != "consumerGroup=g%201&x=1" ||
		seen.body != `{"a":1}` || seen.ctype != "application/json" || seen.requestID != "req-9" {
		t.Errorf("request seen by the handler: %+v", seen)
	}
}
