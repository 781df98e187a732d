package loadcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Client sends requests of the v1 API to one server. It records nothing:
// each harness wraps Do to keep what it measures.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client of the server at base (scheme, host and
// port) whose requests time out after timeout, keeping up to conns idle
// connections.
func NewClient(base string, timeout time.Duration, conns int) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = conns, conns
	return &Client{base: base, http: &http.Client{Transport: tr, Timeout: timeout}}
}

// Reply is one answer: Status 0 when none came (Err says why).
type Reply struct {
	Status int
	Body   []byte
	Err    error
	// Sent is when the request left, Back when the answer (or the error)
	// came. Sent is zero when the request could not be built, and was
	// never sent.
	Sent, Back time.Time
}

// Do sends one request (body marshalled as JSON unless nil) and reads the
// whole answer.
func (c *Client) Do(ctx context.Context, method, path string, body any) Reply {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return Reply{Err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return Reply{Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	r := Reply{Sent: time.Now()}
	resp, err := c.http.Do(req)
	if err == nil {
		r.Body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			r.Status = resp.StatusCode
		}
	}
	r.Back, r.Err = time.Now(), err
	return r
}

// Decode unmarshals a reply's body.
func (r Reply) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode %d reply %.200q: %w", r.Status, r.Body, err)
	}
	return nil
}

// String describes a reply for a message.
func (r Reply) String() string {
	if r.Status == 0 {
		return fmt.Sprintf("no answer (%v)", r.Err)
	}
	return fmt.Sprintf("%d %.300s", r.Status, bytes.TrimSpace(r.Body))
}
