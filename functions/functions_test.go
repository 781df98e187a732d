package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/queen-serverless/queen/core/crypt"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
	"github.com/queen-serverless/queen/internal/pgtest"
)

func TestMain(m *testing.M) { pgstoretest.Main(m) }

// TestFunctions builds every function's bootstrap once and runs each under
// the Lambda Runtime Interface Emulator against its own migrated database,
// with the events AWS would send, and checks the results in the database.
// It reports each function's cold init as the emulator measures it.
func TestFunctions(t *testing.T) {
	dir := t.TempDir()
	buildAll(t, dir)
	rie := filepath.Join(dir, "aws-lambda-rie")

	t.Run("size", func(t *testing.T) { checkSizes(t, dir) })
	if !testing.Short() { // measurements, not behaviour: the full lane
		t.Run("coldinit", func(t *testing.T) { measureColdInit(t, dir, rie) })
		t.Run("durations", func(t *testing.T) { measureDurations(t, dir, rie) })
	}

	run := func(name string, test func(t *testing.T, start func(env ...string) *emulator)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, func(env ...string) *emulator { return startEmulator(t, rie, filepath.Join(dir, name), env...) })
		})
	}
	run("push", testPush)
	run("pop", testPop)
	run("ack", testAck)
	run("dlq", testDLQ)
	run("admin", testAdmin)
	run("reaper", testReaper)
	run("migrate", testMigrate)
	run("testtarget", testFunctionTarget)
	t.Run("dispatch", func(t *testing.T) {
		t.Parallel()
		testDispatch(t, func(name string, env ...string) *emulator {
			return startEmulator(t, rie, filepath.Join(dir, name), env...)
		})
	})
}

// functionNames are the directories of functions/, one bootstrap each.
var functionNames = []string{"push", "pop", "ack", "dlq", "admin", "reaper", "dispatch", "migrate"}

// maxBootstrapBytes is the limit on each bootstrap (docs/benchmarks.md,
// Lambda limits).
const maxBootstrapBytes = 15_000_000

// checkSizes holds every bootstrap to its 15 MB limit (built as make
// build-lambda builds them, for this machine's architecture).
func checkSizes(t *testing.T, dir string) {
	for _, fn := range functionNames {
		st, err := os.Stat(filepath.Join(dir, fn))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-8s %6.2f MB", fn, float64(st.Size())/1e6)
		if st.Size() > maxBootstrapBytes {
			t.Errorf("%s bootstrap is %.2f MB, over the 15 MB limit (docs/benchmarks.md)", fn, float64(st.Size())/1e6)
		}
	}
}

// coldInitRuns is how many fresh processes per function measureColdInit
// starts for each measure; it reports the median.
const coldInitRuns = 5

// measureColdInit reports each function's cold init, one process at a time
// so they do not compete for the CPU, without any database work (the limit
// is ≤ 50 ms excluding the first database connection, docs/benchmarks.md
// Lambda limits; this test
// reports, it does not time-assert):
//
//   - init: from starting the process to its first request for an event
//     (see initToNext);
//   - emulator: under the Runtime Interface Emulator, the first invocation's
//     latency less a warm one's, which adds the emulator's own sandbox
//     start-up (a hello-world Go function shows about as much).
func measureColdInit(t *testing.T, dir, rie string) {
	// A database URL is needed to build the pool; nothing here uses it.
	env := []string{"DATABASE_URL=postgres://queen@127.0.0.1:1/never?sslmode=disable"}
	median := func(runs []time.Duration) time.Duration {
		sort.Slice(runs, func(i, j int) bool { return runs[i] < runs[j] })
		return runs[len(runs)/2]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n  %-8s %10s %10s", "function", "init", "emulator")
	for _, name := range functionNames {
		bootstrap := filepath.Join(dir, name)
		var direct, emulated []time.Duration
		for range coldInitRuns {
			direct = append(direct, initToNext(t, bootstrap, env...))
			e := startEmulator(t, rie, bootstrap, env...)
			emulated = append(emulated, e.coldInit())
			e.stop()
		}
		fmt.Fprintf(&b, "\n  %-8s %7.1f ms %7.1f ms", name, ms(median(direct)), ms(median(emulated)))
	}
	t.Logf("cold init, median of %d fresh processes each, no database connection:%s", coldInitRuns, b.String())
}

// measureDurations times warm invocations of push, pop and ack through the
// emulator on the test database (median of 200 each, one message per call,
// wall time seen by the caller, which includes the emulator's hop): the
// inputs of the README's cost model. Logged, never asserted.
func measureDurations(t *testing.T, dir, rie string) {
	env := pgstoretest.New(t)
	seed(t, env, "cost", 400)
	start := func(name string) *emulator {
		return startEmulator(t, rie, filepath.Join(dir, name), "DATABASE_URL="+env.URL)
	}
	push, pop, ack := start("push"), start("pop"), start("ack")
	const runs = 200
	var tp, to, ta []time.Duration
	for i := range runs {
		t0 := time.Now()
		expect(t, "push", push.http("POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"cost-in","payload":{"hello":"world","n":%d}}]}`, i)), 201)
		t1 := time.Now()
		r := pop.http("GET", "/api/v1/pop/queue/cost?batch=1", "")
		expect(t, "pop", r, 200)
		t2 := time.Now()
		var p popResponse
		r.json(t, &p)
		m := p.Messages[0]
		expect(t, "ack", ack.http("POST", "/api/v1/ack", fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"status":"completed","leaseId":%q}`,
			m.TransactionID, m.PartitionID, p.LeaseID)), 200)
		t3 := time.Now()
		if i >= 10 { // warm
			tp, to, ta = append(tp, t1.Sub(t0)), append(to, t2.Sub(t1)), append(ta, t3.Sub(t2))
		}
	}
	median := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return ms(d[len(d)/2])
	}
	t.Logf("warm invocation, median of %d each (1 message; emulator on this machine):\n  push %.2f ms\n  pop  %.2f ms\n  ack  %.2f ms",
		runs-10, median(tp), median(to), median(ta))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// count runs a counting query.
func count(t *testing.T, env *pgstoretest.Env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// messages counts the messages of a queue in the log.
func messages(t *testing.T, env *pgstoretest.Env, queue string) int {
	t.Helper()
	msgs, err := env.Store.Browse(context.Background(), queen.BrowseRequest{Queue: queue, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(msgs)
}

type pushResult struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transaction_id"`
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	PartitionID   string `json:"partition_id"`
	Offset        int64  `json:"offset"`
	QueueName     string `json:"queueName"`
	Partition     string `json:"partition"`
}

func testPush(t *testing.T, start func(env ...string) *emulator) {
	env := pgstoretest.New(t)
	fn := start("DATABASE_URL="+env.URL, "QUEEN_DEFAULT_QUEUE=events", "QUEEN_EVENT_PARTITION_FIELD=customer.id")

	// API Gateway: push, a rejected push, health, a route of another function.
	r := fn.http("POST", "/api/v1/push", `{"items":[{"queue":"orders","partition":"eu","payload":{"n":1},"transactionId":"tx-1"},{"queue":"orders","payload":"two"}]}`)
	expect(t, "push", r, 201)
	var res []pushResult
	r.json(t, &res)
	if len(res) != 2 || res[0].Status != "queued" || res[0].TransactionID != "tx-1" || res[0].Partition != "eu" ||
		res[1].Partition != "Default" || res[1].QueueName != "orders" {
		t.Fatalf("push results %+v", res)
	}
	expect(t, "push with a bad queue name", fn.http("POST", "/api/v1/push", `{"items":[{"queue":"orders","payload":1},{"queue":"bad name!","payload":2}]}`), 400)
	expect(t, "push malformed", fn.http("POST", "/api/v1/push", `{"items":[`), 400)
	if n := messages(t, env, "orders"); n != 2 {
		t.Fatalf("orders holds %d messages after one good and two rejected pushes, want 2", n)
	}
	expect(t, "health", fn.http("GET", "/health", ""), 200)
	expect(t, "a dlq route on the push function", fn.http("GET", "/api/v1/dlq", ""), 404)

	// producerSub: the caller API Gateway verified (JWT sub, or IAM
	// principal), never the body's claim.
	jwt := &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "alice", "scope": "queen/produce"}}}
	iam := &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:role/producer"}}
	expect(t, "push as alice", fn.httpAs(jwt, "POST", "/api/v1/push", `{"items":[{"queue":"subs","partition":"p","payload":1,"producerSub":"mallory"}]}`), 201)
	expect(t, "push as an IAM role", fn.httpAs(iam, "POST", "/api/v1/push", `{"items":[{"queue":"subs","partition":"p","payload":2}]}`), 201)
	expect(t, "push without an authorizer", fn.http("POST", "/api/v1/push", `{"items":[{"queue":"subs","partition":"p","payload":3,"producerSub":"mallory"}]}`), 201)
	popped, err := env.Store.Pop(context.Background(), queen.PopRequest{Queue: "subs", Partition: "p", Batch: 10, Partitions: 1, ConsumerGroup: "g"})
	if err != nil || len(popped.Messages) != 3 {
		t.Fatalf("pop subs: %d messages, %v", len(popped.Messages), err)
	}
	for i, want := range []string{"alice", "arn:aws:iam::123456789012:role/producer", ""} {
		got := ""
		if s := popped.Messages[i].ProducerSub; s != nil {
			got = *s
		}
		if got != want {
			t.Errorf("message %d: producerSub %q, want %q", i, got, want)
		}
	}

	// SQS: a push-item body, a raw body with attributes, a record with a bad
	// queue name; then SQS redelivers the same batch.
	sqs := events.SQSEvent{Records: []events.SQSMessage{
		sqsRecord("sqs-1", `{"queue":"ingest","partition":"a","payload":{"k":1}}`, nil),
		sqsRecord("sqs-2", `{"k":2}`, map[string]string{"queue": "ingest", "partition": "b"}),
		sqsRecord("sqs-bad", `{"k":3}`, map[string]string{"queue": "no spaces allowed"}),
	}}
	for delivery := 1; delivery <= 2; delivery++ {
		resp := invokeAs[events.SQSEventResponse](fn, sqs)
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "sqs-bad" {
			t.Fatalf("SQS delivery %d: batch item failures %+v, want sqs-bad only", delivery, resp.BatchItemFailures)
		}
		if n := messages(t, env, "ingest"); n != 2 {
			t.Fatalf("SQS delivery %d: ingest holds %d messages, want 2", delivery, n)
		}
	}
	// Each is the first message of its segment, whose key is the segment's.
	if n := count(t, env, `SELECT count(*) FROM queen.segments s JOIN queen.partitions p ON p.num = s.partition_num
		JOIN queen.queues x ON x.id = p.queue_id AND x.name = 'ingest'
		WHERE coalesce(s.txid, s.txids[1]) IN ('sqs-1', 'sqs-2')`); n != 2 {
		t.Errorf("dedup keys for the SQS message ids: %d, want 2", n)
	}
	dups := fn.logLines("duplicate message")
	if len(dups) != 2 || dups[0]["messageId"] != "sqs-1" || dups[1]["messageId"] != "sqs-2" || dups[0]["requestId"] == nil {
		t.Errorf("the redelivery was not reported as duplicates (with the request id): %v", dups)
	}

	// SNS.
	sns := events.SNSEvent{Records: []events.SNSEventRecord{{EventSource: "aws:sns", EventVersion: "1.0",
		SNS: events.SNSEntity{MessageID: "sns-1", Type: "Notification", TopicArn: "arn:aws:sns:eu-west-1:123456789012:t",
			Message: `{"order":7}`, Timestamp: time.Now().UTC(),
			MessageAttributes: map[string]any{"queue": map[string]any{"Type": "String", "Value": "notifications"}}}}}}
	snsRes := invokeAs[[]pushResult](fn, sns)
	if len(snsRes) != 1 || snsRes[0].TransactionID != "sns-1" || snsRes[0].Status != "queued" || messages(t, env, "notifications") != 1 {
		t.Errorf("SNS: %+v", snsRes)
	}

	// EventBridge: the configured queue, the partition from detail.customer.id.
	eb := []byte(`{"version":"0","id":"eb-1","detail-type":"OrderPlaced","source":"shop","account":"123456789012",
		"time":"2026-01-01T12:00:00Z","region":"eu-west-1","resources":[],"detail":{"customer":{"id":"c-42"},"total":12.5}}`)
	ebRes := invokeAs[[]pushResult](fn, eb)
	if len(ebRes) != 1 || ebRes[0].QueueName != "events" || ebRes[0].Partition != "c-42" || ebRes[0].TransactionID != "eb-1" {
		t.Errorf("EventBridge: %+v", ebRes)
	}
	var detail string
	if err := env.Pool.QueryRow(context.Background(),
		`SELECT (queen.seg_all(s.payload, s.payloads))[1] FROM queen.segments s JOIN queen.partitions p ON p.num = s.partition_num
		WHERE p.name = 'c-42'`).Scan(&detail); err != nil ||
		!strings.Contains(detail, "12.5") {
		t.Errorf("EventBridge payload %q, %v: want the detail", detail, err)
	}

	// Direct invocation: HTTP push's result array; a repeat is a duplicate;
	// a bad item fails the invocation and writes nothing.
	direct := []byte(`{"items":[{"queue":"direct","payload":{"x":1},"transactionId":"d-1"}]}`)
	if res := invokeAs[[]pushResult](fn, direct); len(res) != 1 || res[0].Status != "queued" || res[0].MessageID == "" {
		t.Errorf("direct: %+v", res)
	}
	if res := invokeAs[[]pushResult](fn, direct); len(res) != 1 || res[0].Status != "duplicate" {
		t.Errorf("direct again: %+v", res)
	}
	if e := invokeAs[lambdaError](fn, []byte(`{"items":[{"queue":"direct","payload":2},{"payload":3}]}`)); !strings.Contains(e.ErrorMessage, "items[1].queue") {
		t.Errorf("direct with a bad item: %+v", e)
	}
	if n := messages(t, env, "direct"); n != 1 {
		t.Errorf("direct holds %d messages, want 1", n)
	}
	if e := invokeAs[lambdaError](fn, []byte(`{"hello":"world"}`)); !strings.Contains(e.ErrorMessage, "unrecognised event") {
		t.Errorf("unknown event: %+v", e)
	}
}

func sqsRecord(id, body string, attrs map[string]string) events.SQSMessage {
	ma := map[string]events.SQSMessageAttribute{}
	for k, v := range attrs {
		ma[k] = events.SQSMessageAttribute{StringValue: &v, DataType: "String"}
	}
	return events.SQSMessage{MessageId: id, ReceiptHandle: "rh-" + id, Body: body, MessageAttributes: ma,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:queen-ingest", AWSRegion: "eu-west-1"}
}

// seed pushes n messages to queue through the store.
func seed(t *testing.T, env *pgstoretest.Env, queue string, n int) {
	t.Helper()
	items := make([]queen.PushItem, n)
	for i := range items {
		items[i] = queen.PushItem{Queue: queue, Payload: json.RawMessage(fmt.Sprint(i))}
	}
	if _, err := env.Store.Push(context.Background(), items); err != nil {
		t.Fatal(err)
	}
}

type popResponse struct {
	Success  bool   `json:"success"`
	LeaseID  string `json:"leaseId"`
	Messages []struct {
		TransactionID string          `json:"transactionId"`
		PartitionID   string          `json:"partitionId"`
		Offset        int64           `json:"offset"`
		Data          json.RawMessage `json:"data"`
	} `json:"messages"`
}

func testPop(t *testing.T, start func(env ...string) *emulator) {
	env := pgstoretest.New(t)
	seed(t, env, "work", 3)
	fn := start("DATABASE_URL=" + env.URL)

	r := fn.http("GET", "/api/v1/pop/queue/work?batch=2", "")
	expect(t, "pop", r, 200)
	var pop popResponse
	r.json(t, &pop)
	if !pop.Success || pop.LeaseID == "" || len(pop.Messages) != 2 || pop.Messages[0].Offset != 0 || pop.Messages[1].Offset != 1 {
		t.Fatalf("pop %+v", pop)
	}
	if n := count(t, env, `SELECT count(*) FROM queen.consumers WHERE lease_id = $1 AND batch_end = 1`, pop.LeaseID); n != 1 {
		t.Errorf("the lease is not in the database")
	}
	expect(t, "extend", fn.http("POST", "/api/v1/lease/"+pop.LeaseID+"/extend", `{"seconds":120}`), 200)
	if n := count(t, env, `SELECT count(*) FROM queen.consumers WHERE lease_id = $1 AND lease_expires_at > now() + interval '100 seconds'`, pop.LeaseID); n != 1 {
		t.Errorf("the lease was not extended in the database")
	}
	expect(t, "pop while leased (same group)", fn.http("GET", "/api/v1/pop/queue/work?batch=2", ""), 204)
	expect(t, "long-poll pop of an empty queue", fn.http("GET", "/api/v1/pop/queue/nothing/partition/Default?wait=true&timeout=200", ""), 204)
	expect(t, "pop with a bad batch", fn.http("GET", "/api/v1/pop/queue/work?batch=-1", ""), 400)
	r = fn.http("POST", "/api/v1/lease/00000000-0000-7000-8000-000000000000/extend", `{"seconds":10}`)
	if r.Status != 404 && r.Status != 409 {
		t.Errorf("extend of an unknown lease: %d %s", r.Status, r.Body)
	}
	expect(t, "an ack route on the pop function", fn.http("POST", "/api/v1/ack", `{}`), 404)

	// An encrypted queue: the function opens what another process sealed
	// with the key ring of QUEEN_ENCRYPTION_KEY; without it, a clear 503.
	const key = "k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	ring, err := crypt.Parse(key)
	if err != nil {
		t.Fatal(err)
	}
	sealer := pgstore.New(env.Pool, pgstore.Config{Keys: func(context.Context) (*crypt.Ring, error) { return ring, nil }})
	if _, err := sealer.Configure(context.Background(), queen.ConfigureRequest{Queue: "vault",
		Options: queen.QueueOptions{EncryptionEnabled: new(true)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sealer.Push(context.Background(), []queen.PushItem{{Queue: "vault", Payload: json.RawMessage(`{"pin":"2468"}`)}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, env, `SELECT count(*) FROM queen.segments WHERE key_id LIKE 'k1.%' AND (queen.seg_all(payload, payloads))[1] NOT LIKE '%2468%'`); n != 1 {
		t.Fatalf("the encrypted queue's payload is not stored sealed")
	}
	r = fn.http("GET", "/api/v1/pop/queue/vault", "")
	if r.Status != 503 || !strings.Contains(string(r.Body), "does not hold") {
		t.Fatalf("pop of an encrypted queue without a key: %d %s, want 503", r.Status, r.Body)
	}
	keyed := start("DATABASE_URL="+env.URL, "QUEEN_ENCRYPTION_KEY="+key)
	r = keyed.http("GET", "/api/v1/pop/queue/vault", "")
	expect(t, "pop of an encrypted queue with its key", r, 200)
	r.json(t, &pop)
	if len(pop.Messages) != 1 || string(pop.Messages[0].Data) != `{"pin":"2468"}` {
		t.Fatalf("encrypted pop: %+v", pop)
	}
}

func testAck(t *testing.T, start func(env ...string) *emulator) {
	env := pgstoretest.New(t)
	seed(t, env, "tasks", 2)
	pop, err := env.Store.Pop(context.Background(), queen.PopRequest{Queue: "tasks", Batch: 2})
	if err != nil || len(pop.Messages) != 2 {
		t.Fatalf("pop: %v", err)
	}
	fn := start("DATABASE_URL=" + env.URL)
	committed := func() int {
		return count(t, env, `SELECT committed FROM queen.consumers WHERE group_name = $1`, queen.QueueModeGroup)
	}

	m0, m1 := pop.Messages[0], pop.Messages[1]
	r := fn.http("POST", "/api/v1/ack", fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"status":"completed","leaseId":%q}`,
		m0.TransactionID, m0.PartitionID, pop.LeaseID))
	expect(t, "ack", r, 200)
	if c := committed(); c != 0 {
		t.Errorf("committed %d after acking offset 0", c)
	}
	r = fn.http("POST", "/api/v1/ack/batch", fmt.Sprintf(`{"acknowledgments":[{"transactionId":%q,"partitionId":%q,"status":"completed"}]}`,
		m1.TransactionID, m1.PartitionID))
	expect(t, "ack batch", r, 200)
	if c := committed(); c != 1 {
		t.Errorf("committed %d after acking offset 1", c)
	}
	expect(t, "ack malformed", fn.http("POST", "/api/v1/ack", `{"transactionId":`), 400)
	r = fn.http("POST", "/api/v1/ack", `{"transactionId":"nope","partitionId":"00000000-0000-0000-0000-0000000000aa","status":"completed"}`)
	if r.Status < 400 || r.Status >= 500 {
		t.Errorf("ack of an unknown partition: %d %s", r.Status, r.Body)
	}
	r = fn.http("POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"next","payload":{"step":2}}]}]}`)
	expect(t, "transaction", r, 200)
	if n := messages(t, env, "next"); n != 1 {
		t.Errorf("the transaction's push is not in the log (%d)", n)
	}
	if c := committed(); c != 1 {
		t.Errorf("committed moved to %d", c)
	}
}

func testDLQ(t *testing.T, start func(env ...string) *emulator) {
	env := pgstoretest.New(t)
	ctx := context.Background()
	seed(t, env, "mail", 1)
	pop, err := env.Store.Pop(ctx, queen.PopRequest{Queue: "mail", Batch: 1})
	if err != nil || len(pop.Messages) != 1 {
		t.Fatalf("pop: %v", err)
	}
	m := pop.Messages[0]
	if _, err := env.Store.Ack(ctx, []queen.Ack{{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: queen.AckDLQ, Error: "bounced"}}); err != nil {
		t.Fatal(err)
	}
	fn := start("DATABASE_URL=" + env.URL)

	r := fn.http("GET", "/api/v1/dlq?queue=mail", "")
	expect(t, "dlq list", r, 200)
	var page struct {
		Total    int64 `json:"total"`
		Messages []struct {
			TransactionID string `json:"transactionId"`
			Error         string `json:"errorMessage"`
		} `json:"messages"`
	}
	r.json(t, &page)
	if page.Total != 1 || len(page.Messages) != 1 || page.Messages[0].TransactionID != m.TransactionID || page.Messages[0].Error != "bounced" {
		t.Fatalf("dlq page %+v", page)
	}
	expect(t, "dlq get", fn.http("GET", "/api/v1/messages/"+m.PartitionID+"/"+m.TransactionID, ""), 200)
	expect(t, "dlq get unknown", fn.http("GET", "/api/v1/messages/"+m.PartitionID+"/no-such-tx", ""), 404)
	expect(t, "dlq list with a bad limit", fn.http("GET", "/api/v1/dlq?limit=abc", ""), 400)
	r = fn.http("POST", "/api/v1/messages/"+m.PartitionID+"/"+m.TransactionID+"/retry", "")
	if r.Status != 200 && r.Status != 201 {
		t.Fatalf("retry: %d %s", r.Status, r.Body)
	}
	if n := count(t, env, `SELECT count(*) FROM queen.dlq`); n != 0 {
		t.Errorf("%d dead letters left after the retry", n)
	}
	if n := messages(t, env, "mail"); n != 2 {
		t.Errorf("mail holds %d messages after the retry, want 2 (the original and the re-push)", n)
	}
}

func testAdmin(t *testing.T, start func(env ...string) *emulator) {
	env := pgstoretest.New(t)
	fn := start("DATABASE_URL=" + env.URL)

	r := fn.http("POST", "/api/v1/configure", `{"queue":"billing","options":{"leaseTime":60,"retryLimit":5}}`)
	expect(t, "configure", r, 200)
	if n := count(t, env, `SELECT count(*) FROM queen.queues WHERE name = 'billing' AND lease_time = 60 AND retry_limit = 5`); n != 1 {
		t.Errorf("the configuration is not in the database")
	}
	r = fn.http("GET", "/api/v1/resources/queues", "")
	expect(t, "queues", r, 200)
	if !strings.Contains(r.Body, `"billing"`) {
		t.Errorf("queue list %s", r.Body)
	}
	expect(t, "unknown queue", fn.http("GET", "/api/v1/resources/queues/nope", ""), 404)
	expect(t, "configure a bad name", fn.http("POST", "/api/v1/configure", `{"queue":"bad name","options":{}}`), 400)
	if n := count(t, env, `SELECT count(*) FROM queen.queues`); n != 1 {
		t.Errorf("%d queues, want 1", n)
	}
	expect(t, "groups", fn.http("GET", "/api/v1/consumer-groups", ""), 200)
	r = fn.http("GET", "/api/v1/resources/overview", "")
	expect(t, "overview", r, 200)
	if !strings.Contains(r.Body, `"name":"billing"`) {
		t.Errorf("overview %s", r.Body)
	}
	expect(t, "health", fn.http("GET", "/health", ""), 200)

	testAdminSubscriptions(t, start)
}

// testAdminSubscriptions: the admin function as the stack configures it
// refuses URL targets until QUEEN_SUBSCRIPTION_URLS lists what they may
// reach and function targets not in QUEEN_SUBSCRIPTION_FUNCTIONS (400,
// nothing stored), and shows a URL's query only to a JWT caller with the
// admin scope: read-only and IAM callers see it redacted.
func testAdminSubscriptions(t *testing.T, start func(env ...string) *emulator) {
	env := pgstoretest.New(t)
	sub := func(target string) string {
		return `{"queue":"hooks","consumerGroup":"g","target":` + target + `}`
	}
	closed := start("DATABASE_URL="+env.URL, "QUEEN_SUBSCRIPTION_FUNCTIONS=orders-handler")
	expect(t, "a URL target by default", closed.http("POST", "/api/v1/subscriptions", sub(`{"url":"https://hooks.example.com/"}`)), 400)
	expect(t, "an undeclared function", closed.http("POST", "/api/v1/subscriptions", sub(`{"function":"other"}`)), 400)
	expect(t, "a declared function", closed.http("POST", "/api/v1/subscriptions", sub(`{"function":"orders-handler"}`)), 201)

	open := start("DATABASE_URL="+env.URL, "QUEEN_SUBSCRIPTION_URLS=203.0.113.0/24")
	expect(t, "the metadata address", open.http("POST", "/api/v1/subscriptions", sub(`{"url":"http://169.254.169.254/"}`)), 400)
	expect(t, "loopback on Lambda", open.http("POST", "/api/v1/subscriptions", sub(`{"url":"http://127.0.0.1:9000/"}`)), 400)
	expect(t, "an unlisted address", open.http("POST", "/api/v1/subscriptions", sub(`{"url":"http://198.51.100.7/"}`)), 400)
	expect(t, "a listed address", open.http("POST", "/api/v1/subscriptions", sub(`{"url":"http://203.0.113.7/hook?token=s3cr3t"}`)), 201)
	admin := &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "ops", "scope": "queen/admin"}}}
	reader := &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "dash", "scope": "queen/read-only"}}}
	iam := &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:role/dash"}}
	for name, caller := range map[string]*events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		"admin": admin, "read-only": reader, "IAM": iam} {
		r := open.httpAs(caller, "GET", "/api/v1/subscriptions/hooks/g", "")
		expect(t, "GET as "+name, r, 200)
		if full := strings.Contains(r.Body, "token=s3cr3t"); full != (caller == admin) || !full && !strings.Contains(r.Body, "/hook?REDACTED") {
			t.Errorf("GET as %s: %s, want the token shown only to the admin", name, r.Body)
		}
	}
}

func testReaper(t *testing.T, start func(env ...string) *emulator) {
	env := pgstoretest.New(t)
	ctx := context.Background()
	seed(t, env, "jobs", 2)
	pop, err := env.Store.Pop(ctx, queen.PopRequest{Queue: "jobs", Batch: 2})
	if err != nil || pop.LeaseID == "" {
		t.Fatalf("pop: %v", err)
	}
	// The consumer died: its lease ran out a minute ago.
	if err := pgstoretest.ExpireLeases(ctx, env.Pool, ""); err != nil {
		t.Fatal(err)
	}
	fn := start("DATABASE_URL=" + env.URL)

	scheduled := []byte(`{"version":"0","id":"sched-1","detail-type":"Scheduled Event","source":"aws.events",
		"account":"123456789012","time":"2026-01-01T12:00:00Z","region":"eu-west-1",
		"resources":["arn:aws:events:eu-west-1:123456789012:rule/queen-reaper"],"detail":{}}`)
	type report struct {
		LeasesExpired int   `json:"leasesExpired"`
		MaxGroupLag   int64 `json:"maxGroupLag"`
	}
	rep := invokeAs[report](fn, scheduled)
	if rep.LeasesExpired != 1 || rep.MaxGroupLag != 2 {
		t.Errorf("report %+v, want 1 lease expired, lag 2", rep)
	}
	if n := count(t, env, `SELECT count(*) FROM queen.consumers WHERE lease_id IS NULL AND attempts = 1 AND head_only`); n != 1 {
		t.Errorf("the expiry is not in the database (lease cleared, one attempt counted)")
	}
	emf, err := fn.emfLine()
	if err != nil {
		t.Fatalf("no EMF line in the output:\n%s", fn.emu.Output())
	}
	if !strings.Contains(fmt.Sprint(emf["_aws"]), "QueenServerless") || emf["DLQDepth"] != 0.0 || emf["MaxGroupLag"] != 2.0 {
		t.Errorf("EMF line %v", emf)
	}
	if lines := fn.logLines("reaper pass"); len(lines) != 1 || lines[0]["requestId"] == nil {
		t.Errorf("reaper log lines %v", lines)
	}

	// A second tick finds nothing to do.
	rep = invokeAs[report](fn, scheduled)
	if rep.LeasesExpired != 0 {
		t.Errorf("second pass expired %d leases", rep.LeasesExpired)
	}

	// Without its database the pass fails, and so does the invocation
	// (the function-errors alarm sees it).
	down := start("DATABASE_URL=" + strings.Replace(env.URL, "/"+pgtest.DatabasePrefix, "/"+pgtest.DatabasePrefix+"missing_", 1))
	if e := invokeAs[lambdaError](down, scheduled); !strings.Contains(e.ErrorMessage, "database unavailable") {
		t.Errorf("reaper without a database: %+v", e)
	}
}

func testMigrate(t *testing.T, start func(env ...string) *emulator) {
	env := pgstoretest.New(t)
	ctx := context.Background()
	// An empty database: what the stack's database holds at first deploy.
	if _, err := env.Pool.Exec(ctx, `DROP SCHEMA queen CASCADE`); err != nil {
		t.Fatal(err)
	}
	role := pgtest.NewRole(t, env.URL)
	fn := start("DATABASE_URL="+env.URL, "QUEEN_DB_USER="+role)

	create := []byte(`{"RequestType":"Create","ServiceToken":"arn:aws:lambda:eu-west-1:123456789012:function:provider",
		"ResponseURL":"https://cloudformation-custom-resource-response-euwest1.s3.amazonaws.com/x",
		"StackId":"arn:aws:cloudformation:eu-west-1:123456789012:stack/queen/1","RequestId":"req-1",
		"LogicalResourceId":"Schema","ResourceType":"Custom::QueenSchema",
		"ResourceProperties":{"ServiceToken":"arn:x","MigrateCodeSha256":"abc"}}`)
	type response struct {
		PhysicalResourceID string            `json:"PhysicalResourceId"`
		Data               map[string]string `json:"Data"`
	}
	resp := invokeAs[response](fn, create)
	if resp.PhysicalResourceID != "queen-schema" || resp.Data["Applied"] == "" {
		t.Fatalf("create: %+v", resp)
	}
	if n := count(t, env, `SELECT count(*) FROM queen.schema_migrations`); n < 2 {
		t.Errorf("%d migrations recorded", n)
	}
	var canWrite, canCall bool
	if err := env.Pool.QueryRow(ctx, `SELECT has_table_privilege($1, 'queen.segments', 'INSERT'),
		has_function_privilege($1, 'queen.push(json, timestamptz)', 'EXECUTE')`, role).Scan(&canWrite, &canCall); err != nil || !canWrite || !canCall {
		t.Errorf("app role %s: insert %v, execute %v, %v", role, canWrite, canCall, err)
	}

	del := invokeAs[response](fn, []byte(`{"RequestType":"Delete","PhysicalResourceId":"queen-schema","LogicalResourceId":"Schema"}`))
	if del.PhysicalResourceID != "queen-schema" || count(t, env, `SELECT count(*) FROM queen.schema_migrations`) < 2 {
		t.Errorf("delete: %+v; the schema must stay", del)
	}
	if e := invokeAs[lambdaError](fn, []byte(`{"RequestType":"Replace"}`)); !strings.Contains(e.ErrorMessage, "RequestType") {
		t.Errorf("unknown request type: %+v", e)
	}
	// A direct invocation is a Create: nothing left to apply.
	if resp := invokeAs[response](fn, []byte(`{}`)); resp.PhysicalResourceID != "queen-schema" || resp.Data["Applied"] != "" {
		t.Errorf("direct invoke: %+v", resp)
	}
}
