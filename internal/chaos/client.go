package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// call is one HTTP request the workload made.
type call struct {
	op         string
	start, end time.Time
	status     int // 0: no answer (connection error or client timeout)
}

func (c call) ok() bool { return c.status >= 200 && c.status < 300 }

// recorder keeps every call and tells the fault schedule when the first
// successful request after a fault's end has come back.
type recorder struct {
	mu       sync.Mutex
	calls    []call
	watchers []*recoveryWatch
}

// recoveryWatch waits for the first successful call sent at or after since.
type recoveryWatch struct {
	since time.Time
	at    time.Time // the end of that call
	done  chan struct{}
}

func (r *recorder) add(c call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	if !c.ok() {
		return
	}
	keep := r.watchers[:0]
	for _, w := range r.watchers {
		if !c.start.Before(w.since) {
			w.at = c.end
			close(w.done)
			continue
		}
		keep = append(keep, w)
	}
	r.watchers = keep
}

// watch returns a watch on the first successful call sent at or after since.
func (r *recorder) watch(since time.Time) *recoveryWatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := &recoveryWatch{since: since, done: make(chan struct{})}
	r.watchers = append(r.watchers, w)
	return w
}

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// client talks to `queen serve` and records every call.
type client struct {
	base string
	http *http.Client
	rec  *recorder
}

func newClient(base string, timeout time.Duration) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 200
	tr.MaxIdleConnsPerHost = 200
	return &client{base: base, http: &http.Client{Transport: tr, Timeout: timeout}, rec: &recorder{}}
}

// reply is one answer: status 0 when none came (the error says why).
type reply struct {
	status int
	body   []byte
	err    error
	sent   time.Time
	at     time.Time
}

// do sends one request (body marshalled as JSON unless nil) and records it
// under op. Only a cancelled ctx keeps a call out of the record.
func (c *client) do(ctx context.Context, op, method, path string, body any) reply {
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
	r.at, r.err = time.Now(), err
	if ctx.Err() != nil && r.status == 0 {
		return r // our own shutdown, not the server's doing
	}
	c.rec.add(call{op: op, start: r.sent, end: r.at, status: r.status})
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
