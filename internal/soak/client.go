package soak

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/queen-serverless/queen/internal/loadcheck"
)

// client talks to the in-process server over loopback HTTP.
type client struct {
	http *loadcheck.Client
	lat  *latencies
}

func newClient(base string, timeout time.Duration, conns int, lat *latencies) *client {
	return &client{http: loadcheck.NewClient(base, timeout, conns), lat: lat}
}

// noOp marks a request whose latency is not recorded.
const noOp = -1

// do sends one request (body marshalled as JSON unless nil) and records its
// latency under op unless op is noOp.
func (c *client) do(ctx context.Context, op int, method, path string, body any) loadcheck.Reply {
	r := c.http.Do(ctx, method, path, body)
	if op != noOp && r.Status != 0 {
		c.lat.add(op, r.Sent, r.Back.Sub(r.Sent))
	}
	return r
}

// read fetches one JSON reply of a GET that must answer 200.
func (c *client) read(ctx context.Context, path string, v any) error {
	r := c.do(ctx, noOp, "GET", path, nil)
	if r.Status != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, r)
	}
	return r.Decode(v)
}
