// Command ack is the Lambda function serving acks, ack batches and transactions
// (docs/api.md) and /health, behind API Gateway (HTTP API, payload 2.0).
package main

import (
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/lambdafn"
)

func main() {
	fn := lambdafn.Init("ack")
	fn.OpenStore()
	fn.Start(fn.HTTP(httpapi.GroupAck, httpapi.GroupHealth))
}
