// Package storecount counts the statements long-polls and the subscriptions'
// dispatcher send a store.
package storecount

import (
	"context"
	"sync/atomic"

	"github.com/queen-serverless/queen/core/queen"
)

// Counting wraps a Store that is also a queen.Prober and counts what
// long-polls and the dispatcher send it when they wait: pops, probes and
// listings of the subscriptions. Empty, when not nil, receives the queue
// of each empty pop (when it has room).
type Counting struct {
	queen.Store
	Pops, Probes, Listings atomic.Int64
	Empty                  chan string
}

// Subscriptions implements queen.Store.
func (c *Counting) Subscriptions(ctx context.Context) ([]queen.Subscription, error) {
	c.Listings.Add(1)
	return c.Store.Subscriptions(ctx)
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
