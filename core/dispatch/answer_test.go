package dispatch_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// rawTarget answers each event with what answer writes, headers and all,
// and records the events.
type rawTarget struct {
	mu     sync.Mutex
	events []dispatch.Event
	srv    *httptest.Server
}

func newRawTarget(t *testing.T, answer func(n int, w http.ResponseWriter, ev dispatch.Event)) *rawTarget {
	tg := &rawTarget{}
	tg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev dispatch.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			t.Errorf("target: %s %s: not an event: %v", r.Method, r.URL, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		tg.mu.Lock()
		tg.events = append(tg.events, ev)
		n := len(tg.events)
		tg.mu.Unlock()
		answer(n, w, ev)
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

// firstThenOK answers the first event as first writes it, and every later
// one with an empty 200 (the batch completed).
func firstThenOK(first func(http.ResponseWriter)) func(int, http.ResponseWriter, dispatch.Event) {
	return func(n int, w http.ResponseWriter, _ dispatch.Event) {
		if n == 1 {
			first(w)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

func (tg *rawTarget) received() []dispatch.Event {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]dispatch.Event(nil), tg.events...)
}

// A redirect is never followed and never an answer: a 3xx fails the batch
// (its head comes back alone with an attempt counted), the address it
// names gets nothing — neither the GET a 302 would make nor the event a
// 307 would re-post — and lastError says why (SPEC §3.8).
func TestRedirectFailsTheBatch(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusOK) // a 200 there would commit the batch
	}))
	t.Cleanup(other.Close)
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			t.Parallel()
			e := pgstoretest.New(t)
			ctx := context.Background()
			tg := newRawTarget(t, firstThenOK(func(w http.ResponseWriter) {
				w.Header().Set("Location", other.URL+"/x")
				w.WriteHeader(code)
			}))
			sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
			push(t, e.Store, "orders", 1, 3)
			if _, err := dispatch.New(local(e.Store, nil)).Drain(ctx, sub); err != nil {
				t.Fatal(err)
			}
			evs := tg.received()
			if len(evs) < 2 || len(evs[1].Records) != 1 || evs[1].Records[0].Offset != 0 || evs[1].Records[0].RetryCount != 1 {
				t.Fatalf("events %+v, want the batch, then its head alone with retryCount 1", evs)
			}
			s, err := e.Store.Subscription(ctx, "orders", "billing")
			if err != nil || s.LastError == nil || !strings.Contains(*s.LastError, "redirects are not followed") {
				t.Fatalf("subscription %+v %v, want lastError to say the redirect was not followed", s, err)
			}
		})
	}
	t.Cleanup(func() {
		if n := elsewhere.Load(); n != 0 {
			t.Errorf("the redirects' Location got %d requests", n)
		}
	})
}

// Only a 2xx whose body is empty or exactly one JSON value that is a
// result is an answer. Content after the first value (a second value, a
// crash report) fails the batch; a 204 without a body and a 202 with a
// result are answers.
func TestAnswerIsOneJSONValue(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		status int
		body   string
		fails  bool
	}{
		"trailing error":      {200, `{"batchItemFailures":[]}` + "\n" + `{"errorMessage":"handler crashed"}`, true},
		"two results":         {200, `{"batchItemFailures":[]}{"batchItemFailures":[]}`, true},
		"trailing text":       {200, `{"batchItemFailures":[]} ok`, true},
		"not an object":       {200, `["done"]`, true},
		"a string":            {200, `"ok"`, true},
		"204 without a body":  {204, ``, false},
		"202 with a result":   {202, `{"batchItemFailures":[]}`, false},
		"whitespace after it": {200, "{\"batchItemFailures\":[]}\n\n", false},
		"null":                {200, `null`, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := pgstoretest.New(t)
			ctx := context.Background()
			tg := newRawTarget(t, firstThenOK(func(w http.ResponseWriter) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
			push(t, e.Store, "orders", 1, 3)
			if _, err := dispatch.New(local(e.Store, nil)).Drain(ctx, sub); err != nil {
				t.Fatal(err)
			}
			evs := tg.received()
			if tc.fails {
				if len(evs) < 2 || len(evs[1].Records) != 1 || evs[1].Records[0].RetryCount != 1 {
					t.Fatalf("events %+v, want the batch failed: its head again, alone, retryCount 1", evs)
				}
				return
			}
			if len(evs) != 1 {
				t.Fatalf("%d events, want the one batch, completed", len(evs))
			}
			if g, err := e.Store.Group(ctx, "billing"); err != nil || g.Queues[0].Lag != 0 {
				t.Fatalf("group %+v %v, want the batch completed", g, err)
			}
		})
	}
}

// An itemIdentifier that is a JSON string names a transactionId, one that
// is a JSON number an offset, never the other way round: with
// transactionIds that look like offsets, each names its own record, and a
// string that is no record's transactionId fails the whole batch even when
// it reads as one's offset.
func TestItemIdentifierKinds(t *testing.T) {
	t.Parallel()
	digits, letters := []string{"2", "0", "1"}, []string{"a", "b", "c"} // the transactionIds at offsets 0, 1, 2
	repeated := []string{"x", "y", "x"}                                 // dedup off: "x" at offsets 0 and 2
	for name, tc := range map[string]struct {
		ids        []string
		identifier any
		next       int64 // the first offset delivered again; -1: the batch failed as a whole
	}{
		`string "1" is the transactionId at offset 2`: {digits, "1", 2},
		`number 1 is offset 1`:                        {digits, 1, 1},
		`number 0 is offset 0`:                        {digits, 0, 0},
		`string "7" names no record`:                  {digits, "7", -1},
		`number 7 names no record`:                    {digits, 7, -1},
		`string "1" is no transactionId`:              {letters, "1", -1},
		`number 1 among lettered records`:             {letters, 1, 1},
		`a repeated transactionId names its first`:    {repeated, "x", 0},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := pgstoretest.New(t)
			ctx := context.Background()
			if _, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: "orders",
				Options: queen.QueueOptions{DedupWindowSeconds: ptr(0)}}); err != nil {
				t.Fatal(err)
			}
			for _, id := range tc.ids { // one push each: a request keeps the first of a repeated id
				if _, err := e.Store.Push(ctx, []queen.PushItem{{Queue: "orders", Partition: "p0", TransactionID: id,
					Payload: json.RawMessage(`{}`)}}); err != nil {
					t.Fatal(err)
				}
			}
			tg := newTarget(t, firstThenComplete(http.StatusOK,
				map[string]any{"batchItemFailures": []map[string]any{{"itemIdentifier": tc.identifier}}}))
			sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
			if _, err := dispatch.New(local(e.Store, nil)).Drain(ctx, sub); err != nil {
				t.Fatal(err)
			}
			evs := tg.received()
			if len(evs) < 2 {
				t.Fatalf("events %+v, want a second delivery", evs)
			}
			again := evs[1].Records[0]
			if tc.next < 0 {
				if again.Offset != 0 || again.RetryCount != 1 || len(evs[1].Records) != 1 {
					t.Fatalf("second event %+v, want the head alone with retryCount 1 (the batch failed)", evs[1])
				}
				return
			}
			if again.Offset != tc.next || again.RetryCount != 1 {
				t.Fatalf("second event starts at %+v, want offset %d with retryCount 1", again, tc.next)
			}
		})
	}
}

// After a failed attempt the partition waits at least a second whoever
// takes it next: with ten workers (the default maxConcurrency) over a
// target that fails everything, as a whole or by listing each record,
// no partition is called again within a second of its previous call, so
// a short outage cannot spend a retryLimit of 1 at once.
func TestFailedAttemptsWaitWhicheverWorker(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]func(dispatch.Event) (int, any){
		"failed as a whole": func(dispatch.Event) (int, any) { return http.StatusServiceUnavailable, nil },
		"records listed": func(ev dispatch.Event) (int, any) {
			var fails []map[string]any
			for _, r := range ev.Records {
				fails = append(fails, map[string]any{"itemIdentifier": r.Offset})
			}
			return http.StatusOK, map[string]any{"batchItemFailures": fails}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := pgstoretest.New(t)
			var mu sync.Mutex
			calls := map[string][]time.Time{}
			tg := newTarget(t, func(ev dispatch.Event) (int, any) {
				mu.Lock()
				calls[ev.Partition] = append(calls[ev.Partition], time.Now())
				mu.Unlock()
				return answer(ev)
			})
			sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil)
			if sub.MaxConcurrency != queen.DefaultSubscriptionConcurrency || sub.MaxConcurrency < 2 {
				t.Fatalf("maxConcurrency %d, want the default of several workers", sub.MaxConcurrency)
			}
			push(t, e.Store, "orders", 4, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
			defer cancel()
			if _, err := dispatch.New(local(e.Store, nil)).Drain(ctx, sub); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for p, at := range calls {
				for i := 1; i < len(at); i++ {
					if gap := at[i].Sub(at[i-1]); gap < time.Second {
						t.Errorf("partition %s called again %v after a failed attempt, want at least 1 s", p, gap)
					}
				}
			}
			if len(calls) != 4 {
				t.Errorf("%d partitions called, want 4", len(calls))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
