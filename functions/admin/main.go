// Command admin is the Lambda function serving queue and consumer-group administration and browsing
// (docs/api.md) and /health, behind API Gateway (HTTP API, payload 2.0).
package main

import (
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/lambdafn"
)

func main() {
	fn := lambdafn.Init("admin")
	fn.OpenStore()
	fn.Start(fn.HTTP(httpapi.GroupAdmin, httpapi.GroupHealth))
}
