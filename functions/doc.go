// Package functions holds the Lambda functions of Queen Serverless, one
// main package each, wiring only (see package lambdafn):
//
//	push     POST /api/v1/push, SQS, SNS, EventBridge and direct invocations
//	pop      pop (long-poll) and lease extension
//	ack      ack, ack batch, transaction
//	dlq      dead-letter list, get, delete, retry
//	admin    configure, queues, consumer groups, browse
//	reaper   one maintenance pass per scheduled event, with EMF metrics
//	dispatch one run delivering a subscription, started asynchronously
//	migrate  schema migrations and the application role, at deploy time
//
// Every HTTP function also serves GET /health. `make build` builds each
// into build/lambda/<name>/bootstrap (linux/arm64, provided.al2023). The
// tests in this directory run each bootstrap under the Lambda Runtime
// Interface Emulator.
package functions
