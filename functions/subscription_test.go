package functions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// emulatorClient calls the function an emulator runs through the Lambda
// API, signed as on AWS.
func emulatorClient(e *emulator) *dispatch.LambdaClient {
	return &dispatch.LambdaClient{
		Endpoint: strings.TrimSuffix(e.url, "/2015-03-31/functions/function/invocations"),
		Config: func(context.Context) (aws.Config, error) {
			return aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}, nil
		},
	}
}

// testFunctionTarget delivers a subscription to a function target: a real
// function bootstrap (functions/internal/testtarget) under the Runtime
// Interface Emulator, called through the Lambda API, signed as on AWS. The function lists a record as failed, fails a whole
// invocation, and runs past its timeout; the model's rules decide what
// comes of each (docs/subscriptions.md §3): with retryLimit 1, each of the
// three ends in the DLQ after its second failed attempt, and everything
// else is completed.
func testFunctionTarget(t *testing.T, start func(env ...string) *emulator) {
	env := pgstoretest.New(t)
	e := start("AWS_LAMBDA_FUNCTION_TIMEOUT=2")
	ctx := context.Background()
	client := emulatorClient(e)
	limit, one := 1, 1
	if _, err := env.Store.Configure(ctx, queen.ConfigureRequest{Queue: "orders",
		Options: queen.QueueOptions{RetryLimit: &limit}}); err != nil {
		t.Fatal(err)
	}
	// The emulator takes one invocation at a time.
	sub, err := env.Store.PutSubscription(ctx, queen.SubscriptionRequest{Queue: "orders", ConsumerGroup: "billing",
		Target: queen.SubscriptionTarget{Function: "function"}, MaxConcurrency: &one})
	if err != nil {
		t.Fatal(err)
	}
	items := []queen.PushItem{
		{Partition: "listed", TransactionID: "l0", Payload: json.RawMessage(`{}`)},
		{Partition: "listed", TransactionID: "l1", Payload: json.RawMessage(`{"fail":true}`)},
		{Partition: "listed", TransactionID: "l2", Payload: json.RawMessage(`{}`)},
		{Partition: "errors", TransactionID: "e0", Payload: json.RawMessage(`{"error":true}`)},
		{Partition: "errors", TransactionID: "e1", Payload: json.RawMessage(`{}`)},
		{Partition: "slow", TransactionID: "s0", Payload: json.RawMessage(`{"sleepMs":5000}`)},
		{Partition: "slow", TransactionID: "s1", Payload: json.RawMessage(`{}`)},
	}
	for i := range items {
		items[i].Queue = "orders"
	}
	if _, err := env.Store.Push(ctx, items); err != nil {
		t.Fatal(err)
	}

	d := dispatch.New(dispatch.Config{Store: env.Store, Lambda: client})
	if _, err := d.Drain(ctx, sub); err != nil {
		t.Fatal(err)
	}

	page, err := env.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	dead := map[string]bool{}
	for _, m := range page.Messages {
		dead[m.TransactionID] = true
	}
	if len(page.Messages) != 3 || !dead["l1"] || !dead["e0"] || !dead["s0"] {
		t.Fatalf("dead letters %+v, want l1 (listed), e0 (function error) and s0 (timeout), once each", page.Messages)
	}
	g, err := env.Store.Group(ctx, "billing")
	if err != nil || len(g.Queues) != 1 || g.Queues[0].Lag != 0 {
		t.Fatalf("group %+v %v, want every other message completed", g, err)
	}
	s, err := env.Store.Subscription(ctx, "orders", "billing")
	if err != nil || s.LastError == nil || !strings.Contains(*s.LastError, "function function failed") {
		t.Fatalf("subscription %+v %v, want the function's failure recorded", s, err)
	}
}
