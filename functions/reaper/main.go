// Command reaper is the Lambda function an EventBridge schedule invokes
// every minute: one bounded maintenance pass per event (expire leases and
// count the attempt, prune dedup keys, apply retention, start the
// subscriptions with backlog and no live run), logged, with its gauges as
// CloudWatch Embedded Metric Format.
package main

import (
	"os"

	"github.com/queen-serverless/queen/core/lambdafn"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/reaper"
)

func main() {
	fn := lambdafn.Init("reaper")
	// Lease batches run side by side, one connection each.
	fn.OpenStoreConns(pgstore.ReapConns)
	h := &reaper.Handler{Store: fn.Store, Subscriptions: fn.Subscriptions(), Logger: fn.Logger, Metrics: os.Stdout}
	fn.Start(lambdafn.Bounded(h.Invoke))
}
