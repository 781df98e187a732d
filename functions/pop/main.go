// Command pop is the Lambda function serving pops (long-poll) and lease extension
// (docs/api.md) and /health, behind API Gateway (HTTP API, payload 2.0).
package main

import (
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/lambdafn"
)

func main() {
	fn := lambdafn.Init("pop")
	fn.OpenStore()
	fn.Start(fn.HTTP(httpapi.GroupPop, httpapi.GroupHealth))
}
