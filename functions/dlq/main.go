// Command dlq is the Lambda function serving the dead-letter queue: list, get, delete, retry
// (docs/api.md) and /health, behind API Gateway (HTTP API, payload 2.0).
package main

import (
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/lambdafn"
)

func main() {
	fn := lambdafn.Init("dlq")
	fn.OpenStore()
	fn.Start(fn.HTTP(httpapi.GroupDLQ, httpapi.GroupHealth))
}
