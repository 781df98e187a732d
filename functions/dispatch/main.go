// Command dispatch is the Lambda function that delivers subscriptions
// (docs/subscriptions.md): each invocation is one run for the subscription
// its event names ({"queue", "consumerGroup"}), started asynchronously by
// a push, the admin API, the reaper's safety net or the run before it. A
// run delivers ordered batches to the subscription's target until it has
// caught up or its time is up, then hands back its wake or starts the
// next run, and writes its metrics as CloudWatch Embedded Metric Format.
package main

import (
	"github.com/queen-serverless/queen/core/lambdafn"
)

func main() {
	fn := lambdafn.Init("dispatch")
	fn.OpenStore()
	fn.Start(lambdafn.Bounded(fn.Dispatch().Invoke))
}
