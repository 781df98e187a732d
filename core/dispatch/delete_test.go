package dispatch_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// runDispatcher runs d until the test ends.
func runDispatcher(t *testing.T, d *dispatch.Dispatcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// pullOne pops the group's next message as a pulling consumer would, and
// fails the test unless it is the one with transactionId id.
func pullOne(t *testing.T, st queen.Store, queue, group, id string) queen.Message {
	t.Helper()
	res, err := st.Pop(context.Background(), queen.PopRequest{Queue: queue, ConsumerGroup: group, Batch: 1, Partitions: 1})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].TransactionID != id {
		t.Fatalf("pulling pop of %s/%s: %+v %v, want %s: the subscription must not have taken it", queue, group, res, err, id)
	}
	return res.Messages[0]
}

// A dispatcher in another process keeps its listing for a while. Its
// deliveries check the subscription in the transaction that takes the
// lease, so a subscription deleted, paused or retargeted elsewhere is
// not delivered to its old target: the group's pulling consumers get the
// message instead (SPEC §3.8).
func TestStaleListingsDeliverNothing(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(ctx context.Context, st queen.Store, newURL string) error{
		"deleted": func(ctx context.Context, st queen.Store, _ string) error {
			return st.DeleteSubscription(ctx, "orders", "billing")
		},
		"queue deleted and made again": func(ctx context.Context, st queen.Store, _ string) error {
			return st.DeleteQueue(ctx, "orders")
		},
		"group deleted": func(ctx context.Context, st queen.Store, _ string) error {
			return st.DeleteGroup(ctx, "billing", "")
		},
		"paused": func(ctx context.Context, st queen.Store, url string) error {
			off := false
			_, err := st.PutSubscription(ctx, queen.SubscriptionRequest{Queue: "orders", ConsumerGroup: "billing",
				Target: queen.SubscriptionTarget{URL: url}, Enabled: &off})
			return err
		},
		"retargeted": func(ctx context.Context, st queen.Store, url string) error {
			_, err := st.PutSubscription(ctx, queen.SubscriptionRequest{Queue: "orders", ConsumerGroup: "billing",
				Target: queen.SubscriptionTarget{URL: url + "/elsewhere"}})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := pgstoretest.New(t)
			ctx := context.Background()
			tg := newTarget(t, completeAll)
			sub := subscribe(t, e.Store, "orders", "billing", tg.srv.URL, nil) // as the other process listed it
			d := dispatch.New(local(e.Store, nil))
			pushOne(t, e.Store, "orders", "p0", "before")
			if _, err := d.Drain(ctx, sub); err != nil || len(tg.received()) != 1 {
				t.Fatalf("drain: %v, %d events, want the first message delivered", err, len(tg.received()))
			}

			if err := change(ctx, e.Store, tg.srv.URL); err != nil {
				t.Fatal(err)
			}
			pushOne(t, e.Store, "orders", "p0", "after")
			if _, err := d.Drain(ctx, sub); err != nil {
				t.Fatal(err)
			}
			want := "after"
			if name == "group deleted" {
				want = "before" // the group starts again from the beginning
			}
			m := pullOne(t, e.Store, "orders", "billing", want)
			if name == "queue deleted and made again" && m.Offset != 0 {
				t.Fatalf("the new queue's first message at offset %d", m.Offset)
			}
			for _, ev := range tg.received()[1:] {
				t.Errorf("delivered to the old target after the change: %+v", ev)
			}
		})
	}
}

// Deleting a subscription stops the deliveries in flight in this process
// before Gone returns (queen serve calls it before the DELETE replies): a
// call the target has not answered is cut off, its batch goes back without
// an attempt counted, and nothing is sent after.
func TestGoneStopsDeliveriesInFlight(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	ctx := context.Background()
	called := make(chan struct{}, 10)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the connection close
		calls.Add(1)
		called <- struct{}{}
		select { // a slow target: only the cut-off ends the call
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	sub := subscribe(t, e.Store, "orders", "billing", srv.URL, nil)
	d := dispatch.New(local(e.Store, nil))
	d.Changed(sub)
	runDispatcher(t, d)
	pushOne(t, e.Store, "orders", "p0", "m0")
	d.Wake("orders")
	<-called

	if err := e.Store.DeleteSubscription(ctx, "orders", "billing"); err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d.Gone(gone, "orders", "billing")
	if gone.Err() != nil {
		t.Fatal("Gone did not return once the delivery in flight stopped")
	}
	m := pullOne(t, e.Store, "orders", "billing", "m0")
	if m.RetryCount != 0 {
		t.Errorf("the cut-off batch counted %d attempts, want none", m.RetryCount)
	}
	pushOne(t, e.Store, "orders", "p0", "m1")
	d.Wake("orders")
	d.Due(ctx)
	if n := calls.Load(); n != 1 {
		t.Errorf("%d events sent, want only the one cut off", n)
	}
}
