package chaos

import (
	"context"
	"sync"
	"time"

	"github.com/queen-serverless/queen/internal/loadcheck"
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
	http *loadcheck.Client
	rec  *recorder
}

func newClient(base string, timeout time.Duration) *client {
	return &client{http: loadcheck.NewClient(base, timeout, 200), rec: &recorder{}}
}

// do sends one request (body marshalled as JSON unless nil) and records it
// under op. Only a cancelled ctx, or a request that could not be built,
// keeps a call out of the record.
func (c *client) do(ctx context.Context, op, method, path string, body any) loadcheck.Reply {
	r := c.http.Do(ctx, method, path, body)
	if r.Sent.IsZero() || ctx.Err() != nil && r.Status == 0 {
		return r // never sent, or our own shutdown: not the server's doing
	}
	c.rec.add(call{op: op, start: r.Sent, end: r.Back, status: r.Status})
	return r
}
