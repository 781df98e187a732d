// Package storecount counts the statements long-polls send a store.
package storecount

import (
	"context"
	"sync/atomic"

	"github.com/queen-serverless/queen/core/queen"
)

// Counting wraps a Store that is also a queen.Prober and counts what
// long-polls send it: pops and probes. Empty, when not nil, receives the
// queue of each empty pop (when it has room).
type Counting struct {
	queen.Store
	Pops, Probes atomic.Int64
	Empty        chan string
}

// Pop implements queen.Store.
func (c *Counting) Pop(ctx context.Context, req queen.PopRequest) (queen.PopResult, error) {
	c.Pops.Add(1)
	res, err := c.Store.Pop(ctx, req)
	if err == nil && len(res.Messages) == 0 && c.Empty != nil {
		select {
		case c.Empty <- req.Queue:
		default:
		}
	}
	return res, err
}

// Deliverable implements queen.Prober.
func (c *Counting) Deliverable(ctx context.Context, keys []queen.WaitKey) ([]bool, error) {
	c.Probes.Add(1)
	return c.Store.(queen.Prober).Deliverable(ctx, keys)
}
