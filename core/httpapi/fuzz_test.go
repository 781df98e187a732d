package httpapi_test

// Fuzz targets for every request decoder of the HTTP API, against the real
// store on the test database. Each asserts what docs/api.md and
// docs/semantics.md §5 promise a
// client whatever it sends: no panic, no 5xx (the database is up), a
// rejected request writes nothing, and an accepted push round-trips (the
// names and transactionId exactly, the payload as the same JSON value).
// `make test` runs the seed corpus (and testdata/fuzz); `make fuzz` runs
// each target for a while.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/crypt"
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// fuzzAPI is one API on one database for all of a target's inputs.
type fuzzAPI struct {
	h   http.Handler
	env *pgstoretest.Env
}

func newFuzzAPI(f *testing.F) *fuzzAPI {
	e := pgstoretest.NewClocked(f)
	ring, err := crypt.Parse("k1:" + encKey1) // encrypted queues work too
	if err != nil {
		f.Fatal(err)
	}
	e.Store = pgstore.New(e.Pool, pgstore.Config{Clock: e.Clock.Now,
		Keys: func(context.Context) (*crypt.Ring, error) { return ring, nil }})
	api := httpapi.New(e.Store, httpapi.Config{MaxBodyBytes: 64 << 10, MaxWait: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return &fuzzAPI{h: api.Handler(httpapi.AllGroups...), env: e}
}

func (a *fuzzAPI) do(method, target string, body []byte) (int, []byte) {
	req, err := http.NewRequest(method, "http://queen"+target, bytes.NewReader(body))
	if err != nil {
		return 0, nil // not a request a client can send
	}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// footprint counts every table a request may write.
func (a *fuzzAPI) footprint(t *testing.T) string {
	t.Helper()
	var s string
	err := a.env.Pool.QueryRow(context.Background(), `SELECT concat_ws(',',
		(SELECT count(*) FROM queen.queues), (SELECT count(*) FROM queen.partitions),
		(SELECT count(*) FROM queen.segments), (SELECT count(*) FROM queen.dedup),
		(SELECT count(*) FROM queen.consumers), (SELECT count(*) FROM queen.subscriptions),
		(SELECT count(*) FROM queen.dlq), (SELECT count(*) FROM queen.maintenance),
		(SELECT coalesce(sum(committed), 0) FROM queen.consumers),
		(SELECT count(*) FROM queen.consumers WHERE lease_id IS NOT NULL),
		(SELECT coalesce(max(updated_at)::text, '') FROM queen.queues))`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// check sends the request and holds the reply to the promises every
// route makes; it returns the status and body.
func (a *fuzzAPI) check(t *testing.T, method, target string, body []byte) (int, []byte) {
	t.Helper()
	before := a.footprint(t)
	status, reply := a.do(method, target, body)
	if status >= 500 {
		t.Fatalf("%s %s %q: %d %s", method, target, body, status, reply)
	}
	if status >= 400 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(reply, &e) != nil || e.Error == "" {
			t.Fatalf("%s %s %q: %d without an error message: %s", method, target, body, status, reply)
		}
		if after := a.footprint(t); after != before {
			t.Fatalf("%s %s %q: rejected (%d %s) but wrote: %s -> %s", method, target, body, status, reply, before, after)
		}
	}
	return status, reply
}

func sameJSON(a, b []byte) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func FuzzPush(f *testing.F) {
	for _, s := range []string{
		`{"items":[{"queue":"q","payload":{"a":1}}]}`,
		`{"items":[{"queue":"q","partition":"p","payload":"x","transactionId":"t1"},{"queue":"q","partition":"p","payload":2,"transactionId":"t1"}]}`,
		`{"items":[{"queue":"q/with:odd.chars@1-2","partition":"名前 with spaces","payload":[1,2.5e3,null,true],"traceId":"tr"}]}`,
		`{"items":[{"queue":"q","partition":"'; DROP TABLE queen.segments; --","payload":{"$":"\"quoted\""}}]}`,
		`{"items":[{"queue":"q","payload":"\u0000"}]}`,
		`{"items":[{"queue":"q","partition":"\ud800","payload":1}]}`,
		`{"items":[{"queue":"q","partition":"\ud83d\ude00","payload":"<b>&amp;</b>"}]}`,
		`{"items":[{"queue":"","payload":1}]}`,
		`{"items":[{"queue":"q","payload":1e999}]}`,
		`{"items":[{"queue":"q","payload":{"n":123456789012345678901234567890}}]}`,
		`{"items":[{"queue":"q","payload":1,"transactionId":123}]}`,
		`{"items":[{"queue":"q"}]}`,
		`{"items":[]}`, `{"items":null}`, `{}`, `[]`, `null`, ``, `{"items":[{"queue":"q","payload":1}]} trailing`,
		`{"items":[{"queue":"q","payload":1,"unknown":true}]}`,
		"{\"items\":[{\"queue\":\"q\",\"payload\":\"\xff\"}]}",
	} {
		f.Add([]byte(s))
	}
	a := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		status, reply := a.check(t, "POST", "/api/v1/push", body)
		if status != http.StatusCreated {
			return
		}
		var req struct {
			Items []struct {
				Queue         string          `json:"queue"`
				Partition     *string         `json:"partition"`
				Payload       json.RawMessage `json:"payload"`
				TransactionID *string         `json:"transactionId"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("accepted %q, which does not decode: %v", body, err)
		}
		var res []struct {
			Index         int    `json:"index"`
			TransactionID string `json:"transaction_id"`
			Status        string `json:"status"`
			Offset        int64  `json:"offset"`
			Queue         string `json:"queueName"`
			Partition     string `json:"partition"`
		}
		if err := json.Unmarshal(reply, &res); err != nil || len(res) != len(req.Items) {
			t.Fatalf("push reply %s for %d items (%v)", reply, len(req.Items), err)
		}
		for i, r := range res {
			it := req.Items[i]
			part := "Default" // absent or empty
			if it.Partition != nil && *it.Partition != "" {
				part = *it.Partition
			}
			if r.Queue != it.Queue || r.Partition != part || it.TransactionID != nil && r.TransactionID != *it.TransactionID {
				t.Fatalf("item %d: pushed %s/%s %v, the reply says %s/%s %s", i, it.Queue, part, it.TransactionID, r.Queue, r.Partition, r.TransactionID)
			}
			if r.Status != "queued" {
				continue
			}
			q := url.Values{"queue": {it.Queue}, "partition": {part}, "fromOffset": {fmt.Sprint(r.Offset)}, "limit": {"1"}}
			st, got := a.do("GET", "/api/v1/messages?"+q.Encode(), nil)
			var page struct {
				Messages []struct {
					TransactionID string          `json:"transactionId"`
					Queue         string          `json:"queue"`
					Partition     string          `json:"partition"`
					Offset        int64           `json:"offset"`
					Data          json.RawMessage `json:"data"`
				} `json:"messages"`
			}
			if st != 200 || json.Unmarshal(got, &page) != nil || len(page.Messages) != 1 {
				t.Fatalf("item %d: browse %s: %d %s", i, q.Encode(), st, got)
			}
			m := page.Messages[0]
			if m.TransactionID != r.TransactionID || m.Queue != it.Queue || m.Partition != part || m.Offset != r.Offset {
				t.Fatalf("item %d: stored %+v, pushed %s/%s %s at %d", i, m, it.Queue, part, r.TransactionID, r.Offset)
			}
			want := it.Payload
			if want == nil {
				want = json.RawMessage("null")
			}
			if !sameJSON(m.Data, want) {
				t.Fatalf("item %d: payload %s came back as %s", i, want, m.Data)
			}
		}
	})
}

func FuzzPopQuery(f *testing.F) {
	for _, s := range []string{"", "batch=10", "batch=0", "batch=-1", "batch=99999999999999999999", "batch=1.5",
		"partitions=100&batch=5", "wait=true&timeout=5", "wait=maybe", "timeout=-1&wait=true",
		"timeout=10000000000000&wait=true", "consumerGroup=g&subscriptionMode=new", "subscriptionMode=from_beginning",
		"subscriptionFrom=2020-01-01T00:00:00Z", "subscriptionFrom=not-a-time", "subscriptionFrom=9999-01-01T00:00:00Z",
		"autoAck=true", "autoAck=yes", "consumerGroup=%00", "consumerGroup=%ED%A0%80", "consumerGroup=" + strings.Repeat("g", 300)} {
		f.Add("q", s)
	}
	f.Add("", "")
	f.Add("%2F..%2F", "batch=2")
	a := newFuzzAPI(f)
	a.do("POST", "/api/v1/push", []byte(`{"items":[{"queue":"q","payload":1},{"queue":"q","partition":"p","payload":2}]}`))
	f.Fuzz(func(t *testing.T, queue, query string) {
		target := "/api/v1/pop/queue/" + url.PathEscape(queue) + "?" + query
		if _, err := url.ParseRequestURI(target); err != nil {
			return // not a request a client can send
		}
		status, _ := a.check(t, "GET", target, nil)
		switch status {
		case 0, 200, 204, 400, 404: // 0: not a request a client can send
		default:
			t.Fatalf("pop %s: %d", target, status)
		}
	})
}

// fuzzBodies runs a decoder's target with its seeds on a database that
// holds a queue with delivered messages, so acks and seeks can succeed.
func fuzzBodies(f *testing.F, method, path string, seeds []string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	a := newFuzzAPI(f)
	a.do("POST", "/api/v1/push", []byte(`{"items":[{"queue":"q","partition":"p","payload":1,"transactionId":"t1"},`+
		`{"queue":"q","partition":"p","payload":2,"transactionId":"t2"}]}`))
	a.do("GET", "/api/v1/pop/queue/q?batch=1", nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		a.check(t, method, path, body)
	})
}

func FuzzAck(f *testing.F) {
	fuzzBodies(f, "POST", "/api/v1/ack", []string{
		`{"transactionId":"t1","partitionId":"00000000-0000-0000-0000-000000000000","status":"completed"}`,
		`{"transactionId":"t1","partitionId":"not-a-uuid","status":"completed"}`,
		`{"transactionId":"t1","partitionId":"00000000-0000-0000-0000-000000000000","status":"exploded"}`,
		`{"transactionId":"","partitionId":"","status":""}`, `{"transactionId":1}`, `[]`, `{}`, `null`,
		`{"transactionId":"t1","partitionId":"00000000-0000-0000-0000-000000000000","status":"failed","leaseId":"x","error":"\u0000"}`,
	})
}

func FuzzAckBatch(f *testing.F) {
	fuzzBodies(f, "POST", "/api/v1/ack/batch", []string{
		`{"acknowledgments":[{"transactionId":"t1","partitionId":"00000000-0000-0000-0000-000000000000","status":"completed"}]}`,
		`{"consumerGroup":"g","acknowledgments":[]}`, `{"acknowledgments":null}`, `{"acknowledgments":[{}]}`,
		`{"acknowledgments":[{"transactionId":"t1","status":"retry"},{"transactionId":"t1","status":"dlq"}]}`,
	})
}

func FuzzTransaction(f *testing.F) {
	fuzzBodies(f, "POST", "/api/v1/transaction", []string{
		`{"operations":[{"type":"push","items":[{"queue":"r","payload":{"x":1}}]}]}`,
		`{"operations":[{"type":"ack","transactionId":"t1","partitionId":"00000000-0000-0000-0000-000000000000","status":"completed"}],"requiredLeases":["nope"]}`,
		`{"operations":[{"type":"explode"}]}`, `{"operations":[]}`, `{"operations":null}`, `{}`,
		`{"operations":[{"type":"push","items":[{"queue":"","payload":1}]}]}`,
	})
}

func FuzzConfigure(f *testing.F) {
	fuzzBodies(f, "POST", "/api/v1/configure", []string{
		`{"queue":"c","options":{"leaseTime":60,"retryLimit":5}}`,
		`{"queue":"c","options":{"leaseTime":-1}}`, `{"queue":"c","options":{"leaseTime":1e20}}`,
		`{"queue":"c","options":{"ttl":5,"retentionSeconds":6}}`, `{"queue":"c","options":{"nope":1}}`,
		`{"queue":"c","options":{"encryptionEnabled":true}}`, `{"queue":"c","options":{"deadLetterQueue":false}}`,
		`{"queue":"c","mode":"replace","options":{}}`, `{"queue":"c"}`, `{"options":{}}`, `{"queue":"c","options":[]}`,
	})
}

func FuzzSeek(f *testing.F) {
	fuzzBodies(f, "POST", "/api/v1/consumer-groups/g/queues/q/seek", []string{
		`{"toEnd":true}`, `{"toBeginning":true}`, `{"timestamp":"2020-01-01T00:00:00Z"}`, `{"timestamp":"yesterday"}`,
		`{"offsets":{"p":0}}`, `{"offsets":{"p":-1}}`, `{"offsets":{"nope":1}}`, `{"offsets":{}}`,
		`{"toEnd":true,"toBeginning":true}`, `{}`, `{"offsets":{"p":1e30}}`,
	})
}
