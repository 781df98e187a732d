package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/prommetrics"
	"github.com/queen-serverless/queen/core/queen"
)

// httpTarget is the HTTP server on loopback, built as queen serve builds
// its own (every route, Prometheus metrics), and a client for it.
type httpTarget struct {
	srv    *http.Server
	base   string
	client *http.Client
}

func startHTTP(store queen.Store, conns int) (*httpTarget, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	api := httpapi.New(store, httpapi.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: prommetrics.New()})
	srv := &http.Server{Handler: api.Handler(httpapi.AllGroups...)}
	go func() { _ = srv.Serve(ln) }()
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns}
	return &httpTarget{srv: srv, base: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr}}, nil
}

func (h *httpTarget) close() { _ = h.srv.Close() }

func (h *httpTarget) do(ctx context.Context, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode >= 400 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

// get fetches path and returns the body of its answer.
func (h *httpTarget) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", h.base+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode >= 400 {
		err = fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b), err
}

func (h *httpTarget) push(ctx context.Context, items []queen.PushItem) error {
	_, err := h.do(ctx, "POST", "/api/v1/push", map[string]any{"items": items}, nil)
	return err
}

func (h *httpTarget) popAck(ctx context.Context, req queen.PopRequest) (int, error) {
	q := url.Values{"batch": {strconv.Itoa(req.Batch)}}
	if req.ConsumerGroup != "" {
		q.Set("consumerGroup", req.ConsumerGroup)
	}
	var res struct {
		LeaseID  string `json:"leaseId"`
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
		} `json:"messages"`
	}
	status, err := h.do(ctx, "GET", "/api/v1/pop/queue/"+url.PathEscape(req.Queue)+"?"+q.Encode(), nil, &res)
	if err != nil || status == http.StatusNoContent {
		return 0, err
	}
	acks := make([]map[string]string, len(res.Messages))
	for i, m := range res.Messages {
		acks[i] = map[string]string{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed"}
	}
	_, err = h.do(ctx, "POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": req.ConsumerGroup,
		"leaseId": res.LeaseID, "acknowledgments": acks}, nil)
	return len(res.Messages), err
}
