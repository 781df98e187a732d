// Command push is the Lambda function that appends messages: POST
// /api/v1/push and /health behind API Gateway (HTTP API, payload 2.0), and
// the event sources of docs/semantics.md §4 — SQS (partial batch failures), SNS,
// EventBridge and direct {"items":[…]} invocations (see package ingest).
package main

import (
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/ingest"
	"github.com/queen-serverless/queen/core/lambdafn"
)

func main() {
	fn := lambdafn.Init("push")
	fn.OpenStore()
	h := ingest.New(fn.Queue, ingest.HTTPHandler(fn.HTTP(httpapi.GroupPush, httpapi.GroupHealth)), ingest.Config{
		DefaultQueue:     fn.Config.DefaultQueue,
		DefaultPartition: fn.Config.DefaultPartition,
		PartitionField:   fn.Config.EventPartitionField,
		Logger:           fn.Logger,
	})
	fn.Start(lambdafn.Bounded(h.Invoke))
}
