package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// client talks to the in-process server over loopback HTTP.
type client struct {
	base string
	http *http.Client
	lat  *latencies
}

func newClient(base string, timeout time.Duration, conns int, lat *latencies) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = conns, conns
	return &client{base: base, http: &http.Client{Transport: tr, Timeout: timeout}, lat: lat}
}

// reply is one answer: status 0 when none came (err says why).
type reply struct {
	status     int
	body       []byte
	err        error
	sent, back time.Time
}

// noOp marks a request whose latency is not recorded.
const noOp = -1

// do sends one request (body marshalled as JSON unless nil) and records its
// latency under op unless op is noOp.
func (c *client) do(ctx context.Context, op int, method, path string, body any) reply {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return reply{err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	r := reply{sent: time.Now()}
	resp, err := c.http.Do(req)
	if err == nil {
		r.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			r.status = resp.StatusCode
		}
	}
	r.back, r.err = time.Now(), err
	if op != noOp && r.status != 0 {
		c.lat.add(op, r.sent, r.back.Sub(r.sent))
	}
	return r
}

// decode unmarshals a reply's body.
func (r reply) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("decode %d reply %.200q: %w", r.status, r.body, err)
	}
	return nil
}

// String describes a reply for a message.
func (r reply) String() string {
	if r.status == 0 {
		return fmt.Sprintf("no answer (%v)", r.err)
	}
	return fmt.Sprintf("%d %.300s", r.status, bytes.TrimSpace(r.body))
}

// read fetches one JSON reply of a GET that must answer 200.
func (c *client) read(ctx context.Context, path string, v any) error {
	r := c.do(ctx, noOp, "GET", path, nil)
	if r.status != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, r)
	}
	return r.decode(v)
}
