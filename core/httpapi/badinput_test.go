package httpapi_test

// Bad input over every route of the route table (docs/semantics.md §5.5): a 4xx whose
// message names what is wrong (a field, the body, or the missing thing),
// and the database byte for byte as it was.

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/queen-serverless/queen/core/routes"
)

// snapshot is every table of the schema, rendered row by row and hashed.
func (s *server) snapshot() string {
	s.t.Helper()
	// One query built from the catalog, so a table added later is covered.
	var q string
	err := s.env.Pool.QueryRow(context.Background(), `
		SELECT string_agg(format('SELECT %L AS tbl, md5(coalesce(string_agg(x::text, %L ORDER BY x::text), %L)) AS h FROM queen.%I x',
		                         tablename, '|', '', tablename), ' UNION ALL ' ORDER BY tablename)
		FROM pg_tables WHERE schemaname = 'queen'`).Scan(&q)
	if err != nil {
		s.t.Fatal(err)
	}
	var out string
	err = s.env.Pool.QueryRow(context.Background(),
		`SELECT string_agg(t.tbl || '=' || t.h, ' ' ORDER BY t.tbl) FROM (`+q+`) t`).Scan(&out)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// badInputs are, per route pattern, requests that must be refused: the
// path (with its parameters) and the body. Generic body faults are added
// to every route that reads a body.
var badInputs = map[string][][2]string{
	"POST /api/v1/push": {
		{"", `{"items":[{"payload":1}]}`}, {"", `{"items":[{"queue":"","payload":1}]}`},
		{"", `{"items":[{"queue":"bad name!","payload":1}]}`}, {"", `{"items":[{"queue":"q","partition":"a\u0001b","payload":1}]}`},
		{"", `{"items":[{"queue":"q","partition":"` + strings.Repeat("p", 256) + `","payload":1}]}`},
		{"", `{"items":[{"queue":"q","payload":1,"transactionId":` + strings.Repeat("9", 40) + `}]}`},
		{"", `{"items":"many"}`}, {"", `{"items":[1]}`},
		// Unknown fields in a push are not refused: Queen's clients may send
		// keys Queen reads and this server does not (docs/api.md, compatibility).
	},
	"GET /api/v1/pop/queue/{queue}": {
		{"/api/v1/pop/queue/q?batch=-1", ""}, {"/api/v1/pop/queue/q?batch=0", ""}, {"/api/v1/pop/queue/q?batch=1e3", ""},
		{"/api/v1/pop/queue/q?batch=99999999999999999999999", ""}, {"/api/v1/pop/queue/q?partitions=0", ""},
		{"/api/v1/pop/queue/q?wait=maybe", ""}, {"/api/v1/pop/queue/q?timeout=-5&wait=true", ""},
		{"/api/v1/pop/queue/q?autoAck=2", ""}, {"/api/v1/pop/queue/q?subscriptionFrom=yesterday", ""},
		{"/api/v1/pop/queue/q?consumerGroup=g2&subscriptionFrom=2999-01-01T00:00:00Z", ""}, {"/api/v1/pop/queue/bad%20name", ""},
		{"/api/v1/pop/queue/q?consumerGroup=%ED%A0%80", ""},
	},
	"GET /api/v1/pop/queue/{queue}/partition/{partition}": {
		{"/api/v1/pop/queue/q/partition/p?batch=-3", ""}, {"/api/v1/pop/queue/q/partition/a%01b", ""},
	},
	"POST /api/v1/lease/{leaseId}/extend": {
		{"/api/v1/lease/not-a-uuid/extend", `{"seconds":10}`}, {"/api/v1/lease/00000000-0000-7000-8000-000000000000/extend", `{"seconds":10}`},
		{"/api/v1/lease/{lease}/extend", `{"seconds":-1}`}, {"/api/v1/lease/{lease}/extend", `{"seconds":"ten"}`},
		{"/api/v1/lease/{lease}/extend", `{"seconds":99999999999}`},
	},
	"POST /api/v1/ack": {
		{"", `{"transactionId":"t1","partitionId":"not-a-uuid","status":"completed"}`},
		{"", `{"transactionId":"nope","partitionId":"{pid}","status":"completed"}`},
		{"", `{"transactionId":"t1","partitionId":"{pid}","status":"exploded"}`},
		{"", `{"transactionId":"t1","partitionId":"{pid}","status":"completed","leaseId":"not-a-lease"}`},
		{"", `{"partitionId":"{pid}","status":"completed"}`}, {"", `{"transactionId":"t1","status":"completed"}`},
		{"", `{"transactionId":"t1","partitionId":"{pid}","status":"failed","error":"stack\u0000trace"}`},
	},
	"POST /api/v1/ack/batch": {
		{"", `{"acknowledgments":[]}`}, {"", `{"acknowledgments":[{"transactionId":"t1","partitionId":"{pid}","status":"completed"},{"transactionId":"nope","partitionId":"{pid}","status":"completed"}]}`},
		{"", `{"acknowledgments":{}}`},
	},
	"POST /api/v1/transaction": {
		{"", `{"operations":[]}`}, {"", `{"operations":[{"type":"explode"}]}`},
		{"", `{"operations":[{"type":"push","items":[{"queue":"r","payload":1}]}],"requiredLeases":["00000000-0000-7000-8000-000000000000"]}`},
		{"", `{"operations":[{"type":"push","items":[{"queue":"","payload":1}]}]}`},
		{"", `{"operations":[{"type":"ack","transactionId":"nope","partitionId":"{pid}","status":"completed"},{"type":"push","items":[{"queue":"r","payload":1}]}]}`},
	},
	"GET /api/v1/dlq": {
		{"/api/v1/dlq?limit=0", ""}, {"/api/v1/dlq?limit=-1", ""}, {"/api/v1/dlq?offset=-1", ""}, {"/api/v1/dlq?from=never", ""},
	},
	"GET /api/v1/messages/{partitionId}/{transactionId}": {
		{"/api/v1/messages/not-a-uuid/t1", ""}, {"/api/v1/messages/{pid}/nope", ""},
	},
	"DELETE /api/v1/messages/{partitionId}/{transactionId}": {
		{"/api/v1/messages/not-a-uuid/t1", ""}, {"/api/v1/messages/{pid}/nope", ""},
	},
	"POST /api/v1/messages/{partitionId}/{transactionId}/retry": {
		{"/api/v1/messages/not-a-uuid/t1/retry", ""}, {"/api/v1/messages/{pid}/nope/retry", ""},
	},
	"POST /api/v1/configure": {
		{"", `{"options":{}}`}, {"", `{"queue":"bad name!","options":{}}`}, {"", `{"queue":"q","options":{"leaseTime":0}}`},
		{"", `{"queue":"q","options":{"leaseTime":1e12}}`}, {"", `{"queue":"q","options":{"retryLimit":-1}}`},
		{"", `{"queue":"q","options":{"maxSize":-5}}`}, {"", `{"queue":"q","options":{"nope":1}}`},
		{"", `{"queue":"q","options":{"deadLetterQueue":false}}`}, {"", `{"queue":"q","mode":"replace","options":{}}`},
		{"", `{"queue":"q","options":{"leaseTime":"60"}}`},
	},
	"GET /api/v1/resources/queues/{queue}":    {{"/api/v1/resources/queues/nope", ""}, {"/api/v1/resources/queues/bad%20name", ""}},
	"DELETE /api/v1/resources/queues/{queue}": {{"/api/v1/resources/queues/nope", ""}, {"/api/v1/resources/queues/bad%20name", ""}},
	"GET /api/v1/consumer-groups/{group}":     {{"/api/v1/consumer-groups/nope", ""}, {"/api/v1/consumer-groups/a%01b", ""}},
	"DELETE /api/v1/consumer-groups/{group}":  {{"/api/v1/consumer-groups/nope", ""}},
	"DELETE /api/v1/consumer-groups/{group}/queues/{queue}": {
		{"/api/v1/consumer-groups/g/queues/nope", ""}, {"/api/v1/consumer-groups/g/queues/bad%20name", ""},
	},
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek": {
		{"/api/v1/consumer-groups/g/queues/q/seek", `{}`}, {"/api/v1/consumer-groups/g/queues/q/seek", `{"toEnd":true,"toBeginning":true}`},
		{"/api/v1/consumer-groups/g/queues/q/seek", `{"timestamp":"yesterday"}`},
		{"/api/v1/consumer-groups/g/queues/q/seek", `{"offsets":{"p":-1}}`},
		{"/api/v1/consumer-groups/g/queues/q/seek", `{"offsets":{"p":null}}`}, // not 0: a rewind to the start
		{"/api/v1/consumer-groups/g/queues/q/seek", `{"offsets":{"nope":1}}`},
		{"/api/v1/consumer-groups/g/queues/nope/seek", `{"toEnd":true}`},
	},
	"GET /api/v1/messages": {
		{"/api/v1/messages", ""}, {"/api/v1/messages?queue=q&fromOffset=-1", ""}, {"/api/v1/messages?queue=bad%20name", ""},
		{"/api/v1/messages?queue=q&limit=many", ""},
	},
	"POST /api/v1/subscriptions": {
		{"", `{"consumerGroup":"g","target":{"url":"http://127.0.0.1:1/"}}`},
		{"", `{"queue":"q","target":{"url":"http://127.0.0.1:1/"}}`}, {"", `{"queue":"q","consumerGroup":"g"}`},
		{"", `{"queue":"q","consumerGroup":"g","target":{"url":"http://127.0.0.1:1/","function":"f"}}`},
		{"", `{"queue":"q","consumerGroup":"g","target":{"url":"ftp://127.0.0.1/"}}`},
		{"", `{"queue":"q","consumerGroup":"g","target":{"url":"http://127.0.0.1:1/"},"batchSize":0}`},
		{"", `{"queue":"q","consumerGroup":"g","target":{"url":"http://127.0.0.1:1/"},"maxConcurrency":"ten"}`},
		{"", `{"queue":"q","consumerGroup":"g","target":{"url":"http://127.0.0.1:1/"},"batchsize":5}`},
		{"", `{"queue":"q","consumerGroup":"g","target":{"uri":"http://127.0.0.1:1/"}}`},
		{"", `{"queue":"bad name!","consumerGroup":"g","target":{"url":"http://127.0.0.1:1/"}}`},
	},
	"GET /api/v1/subscriptions/{queue}/{consumerGroup}": {
		{"/api/v1/subscriptions/q/nope", ""}, {"/api/v1/subscriptions/bad%20name/g", ""},
	},
	"DELETE /api/v1/subscriptions/{queue}/{consumerGroup}": {
		{"/api/v1/subscriptions/q/nope", ""}, {"/api/v1/subscriptions/q/a%01b", ""},
	},
	"POST /api/v1/system/maintenance":     {{"", `{}`}, {"", `{"enabled":"yes"}`}},
	"POST /api/v1/system/maintenance/pop": {{"", `{}`}, {"", `{"enabled":1}`}},
}

// genericBodies are body faults any route that reads a body must refuse.
var genericBodies = []string{
	`{`, `not json`, `[1,2]`, `"a string"`, `{"a":1} {"b":2}`, "{\"x\":\"\xff\xfe\"}", `{"x":"\ud800"}`, `{"x":"\u0000"}`,
	strings.Repeat(" ", 10) + `{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
}

// fieldMessage is an error message that says what is wrong: "<field>: …",
// or a not-found/conflict sentence naming the thing.
var fieldMessage = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_.\[\]]*: |.*(not found|no dead letter|expired|invalid or expired lease|not delivered|does not read|full|required|must ))`)

func TestBadInputEveryRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	// A queue with a delivered message, a lease and a dead letter, so the
	// refusals are refusals of real targets too.
	s.expect("POST", "/api/v1/push", `{"items":[{"queue":"q","partition":"p","payload":1,"transactionId":"t1"},`+
		`{"queue":"q","partition":"p","payload":2,"transactionId":"t2"},{"queue":"q","partition":"d","payload":3,"transactionId":"t3"}]}`, 201)
	var p popped
	s.expect("GET", "/api/v1/pop/queue/q/partition/d?consumerGroup=g", nil, 200).json(t, &p)
	s.expect("POST", "/api/v1/ack", map[string]any{"transactionId": "t3", "partitionId": p.Messages[0].PartitionID,
		"status": "dlq", "consumerGroup": "g", "leaseId": p.LeaseID}, 200)
	s.expect("GET", "/api/v1/pop/queue/q/partition/p?consumerGroup=g", nil, 200).json(t, &p)
	subst := strings.NewReplacer("{pid}", p.Messages[0].PartitionID, "{lease}", p.LeaseID)

	covered := map[string]bool{}
	before := s.snapshot()
	for _, rt := range routes.Table {
		cases := badInputs[rt.Pattern()]
		readsBody := rt.Method == "POST" && !strings.HasSuffix(rt.Path, "/retry")
		if readsBody {
			path := rt.Path
			if len(cases) > 0 && cases[0][0] != "" {
				path = cases[0][0]
			}
			for _, b := range genericBodies {
				cases = append(cases, [2]string{path, b})
			}
		}
		for _, c := range cases {
			path := c[0]
			if path == "" {
				path = rt.Path
			}
			path, body := subst.Replace(path), subst.Replace(c[1])
			var r reply
			if body == "" {
				r = s.do(rt.Method, path, nil)
			} else {
				r = s.do(rt.Method, path, body)
			}
			covered[rt.Pattern()] = true
			if r.status < 400 || r.status >= 500 {
				t.Errorf("%s %s %.80q: %d %s, want a 4xx", rt.Method, path, body, r.status, r.body)
				continue
			}
			// "invalid input: …" is PostgreSQL's own text passed on: it names no field.
			if msg := r.errorText(t); !fieldMessage.MatchString(msg) || strings.HasPrefix(msg, "invalid input:") {
				t.Errorf("%s %s %.80q: %d %q does not say what is wrong", rt.Method, path, body, r.status, msg)
			}
			if after := s.snapshot(); after != before {
				t.Fatalf("%s %s %.80q: refused (%d %s) but the database changed", rt.Method, path, body, r.status, r.body)
			}
		}
	}
	// The snapshot sees every table, and sees a write.
	if !strings.Contains(before, "ready_cursor=") || !strings.Contains(before, "segments=") {
		t.Fatalf("snapshot misses tables: %s", before)
	}
	s.expect("POST", "/api/v1/push", `{"items":[{"queue":"q","partition":"p","payload":4}]}`, 201)
	if s.snapshot() == before {
		t.Fatal("the snapshot does not change with a push")
	}
	// Every route that takes input is covered (listings and health take none).
	for _, rt := range routes.Table {
		takesInput := rt.Method != "GET" || strings.Contains(rt.Path, "{") || rt.Path == "/api/v1/messages" || rt.Path == "/api/v1/dlq"
		if takesInput && !covered[rt.Pattern()] {
			t.Errorf("no bad input for %s", rt.Pattern())
		}
	}
}

// A push whose body holds a NUL in a string, a lone surrogate escape, or
// text after its one JSON value is refused with a 400 that says which,
// and writes nothing.
func TestPushRefusesBadEscapesAndTrailingText(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for body, says := range map[string]string{
		`{"items":[{"queue":"q","payload":"a\u0000b"}]}`:             "NUL",
		`{"items":[{"queue":"q","partition":"\ud800","payload":1}]}`: "surrogate",
		`{"items":[{"queue":"q","payload":1}]} }`:                    "one JSON value",
	} {
		r := s.do("POST", "/api/v1/push", body)
		if r.status != 400 || !strings.Contains(r.errorText(t), says) {
			t.Errorf("%s: %d %s, want 400 saying %q", body, r.status, r.body, says)
		}
	}
	if n := s.rows("segments") + s.rows("queues"); n != 0 {
		t.Fatalf("refused pushes wrote %d rows", n)
	}
}
