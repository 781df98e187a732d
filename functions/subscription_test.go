package functions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// deadLetters lists queue's dead letters, and their transactionIds.
func deadLetters(t *testing.T, env *pgstoretest.Env, queue string) (queen.DLQPage, map[string]bool) {
	t.Helper()
	page, err := env.Store.ListDeadLetters(context.Background(), queen.DLQFilter{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	dead := map[string]bool{}
	for _, m := range page.Messages {
		dead[m.TransactionID] = true
	}
	return page, dead
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

	page, dead := deadLetters(t, env, "orders")
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

// testDispatch runs subscriptions on the functions as AWS runs them, each a
// real bootstrap under its own emulator, calling the next through the
// Lambda API (AWS_ENDPOINT_URL_LAMBDA): a push to the push function starts
// a run of the dispatch function, which delivers to the user's function
// (functions/internal/testtarget). The listed failure and the function
// error end in the DLQ after their second attempt (retryLimit 1), the rest
// is completed, and the run gives its wake back. A message pushed with no
// wake-up at all is started by the reaper function's pass.
func testDispatch(t *testing.T, start func(name string, env ...string) *emulator) {
	env := pgstoretest.New(t)
	ctx := context.Background()
	limit, one := 1, 1
	if _, err := env.Store.Configure(ctx, queen.ConfigureRequest{Queue: "orders",
		Options: queen.QueueOptions{RetryLimit: &limit}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.PutSubscription(ctx, queen.SubscriptionRequest{Queue: "orders", ConsumerGroup: "billing",
		Target: queen.SubscriptionTarget{Function: "function"}, MaxConcurrency: &one}); err != nil {
		t.Fatal(err)
	}
	calling := func(next *emulator, more ...string) []string {
		return append([]string{"DATABASE_URL=" + env.URL, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
			"QUEEN_DISPATCH_FUNCTION=function", // the emulator's one function
			"AWS_ENDPOINT_URL_LAMBDA=" + strings.TrimSuffix(next.url, "/2015-03-31/functions/function/invocations")},
			more...)
	}
	target := start("testtarget", "AWS_LAMBDA_FUNCTION_TIMEOUT=5")
	dispatcher := start("dispatch", calling(target)...)
	push := start("push", calling(dispatcher)...)

	items := []queen.PushItem{
		{Partition: "listed", TransactionID: "l0", Payload: json.RawMessage(`{}`)},
		{Partition: "listed", TransactionID: "l1", Payload: json.RawMessage(`{"fail":true}`)},
		{Partition: "listed", TransactionID: "l2", Payload: json.RawMessage(`{}`)},
		{Partition: "errors", TransactionID: "e0", Payload: json.RawMessage(`{"error":true}`)},
		{Partition: "errors", TransactionID: "e1", Payload: json.RawMessage(`{}`)},
	}
	for i := range items {
		items[i].Queue = "orders"
	}
	push.invoke(map[string]any{"items": items})
	settled := func(what string, lag int64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			g, err := env.Store.Group(ctx, "billing")
			if err == nil && len(g.Queues) == 1 && g.Queues[0].Lag == lag {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: group %+v %v, want lag %d within a minute", what, g, err, lag)
			}
			time.Sleep(50 * time.Millisecond) // polls the database: the runs are in other processes
		}
	}
	settled("after the push", 0)
	page, dead := deadLetters(t, env, "orders")
	if len(page.Messages) != 2 || !dead["l1"] || !dead["e0"] {
		t.Fatalf("dead letters %+v, want l1 (listed) and e0 (function error), once each", page.Messages)
	}
	if n := count(t, env, `SELECT count(*) FROM queen.subscription_targets WHERE wake_at IS NOT NULL`); n != 0 {
		t.Errorf("%d wakes still held after the run caught up", n)
	}
	emf, err := dispatcher.emfLine()
	if err != nil || emf[dispatch.MetricSettled] == nil {
		t.Errorf("dispatch EMF line %v (%v), want %s", emf, err, dispatch.MetricSettled)
	}

	// A push that woke nothing (another process's, before any listing):
	// the reaper's pass starts the run.
	if _, err := env.Store.Push(ctx, []queen.PushItem{{Queue: "orders", Partition: "late", TransactionID: "z0",
		Payload: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	reaperFn := start("reaper", calling(dispatcher)...)
	type report struct {
		SubscriptionsStarted int `json:"subscriptionsStarted"`
	}
	scheduled := []byte(`{"version":"0","id":"sched-1","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)
	if rep := invokeAs[report](reaperFn, scheduled); rep.SubscriptionsStarted != 1 {
		t.Errorf("reaper report %+v, want one subscription started", rep)
	}
	settled("after the reaper's pass", 0)
}
