package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/storecount"
)

// Defaults of SUB.
const (
	// subscriptionBacklog is the most each throughput run delivers.
	subscriptionBacklog = 20_000
	// idleSubscriptions is how many idle subscriptions are watched.
	idleSubscriptions = 100
)

// subscribe is SUB (docs/subscriptions.md), in process, to a no-op HTTP
// target in this process: push-to-invoke latency for a waiting
// subscription (a push, then the wake queen serve sends after the commit);
// messages/s delivered from a backlog over Config.Partitions partitions at
// batch 10 and 100; and the statements idle subscriptions cost. It takes
// W's sample count and window.
func (r *runner) subscribe(ctx context.Context) error {
	var arrived atomic.Int64 // records the target received
	got := make(chan time.Time, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var ev dispatch.Event
		if err := json.NewDecoder(req.Body).Decode(&ev); err == nil {
			arrived.Add(int64(len(ev.Records)))
		}
		select {
		case got <- time.Now():
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	counted := &storecount.Counting{Store: r.store}
	put := func(queue string, batch, concurrency int) (queen.Subscription, error) {
		return r.store.PutSubscription(ctx, queen.SubscriptionRequest{Queue: queue, ConsumerGroup: "bench-SUB",
			Target: queen.SubscriptionTarget{URL: target.URL}, BatchSize: &batch, MaxConcurrency: &concurrency})
	}

	// Push-to-invoke: one message at a time to a subscription that waits.
	d := dispatch.New(dispatch.Config{Store: r.store})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(runCtx); close(done) }()
	sub, err := put("bench-SUB-latency", 10, 1)
	if err != nil {
		stop()
		return err
	}
	d.Changed(sub) // as queen serve's API does
	lat := make([]time.Duration, 0, r.cfg.WaitSamples)
	for i := range r.cfg.WaitSamples {
		for len(got) > 0 {
			<-got
		}
		start := time.Now()
		if _, err := r.store.Push(ctx, []queen.PushItem{{Queue: "bench-SUB-latency", Payload: []byte(Payload)}}); err != nil {
			stop()
			return err
		}
		d.Wake("bench-SUB-latency")
		select {
		case at := <-got:
			lat = append(lat, at.Sub(start))
		case <-time.After(10 * time.Second):
			stop()
			return fmt.Errorf("push-to-invoke: sample %d not delivered in 10 s", i)
		}
		fmt.Fprintf(r.cfg.Out, "\r  push-to-invoke: %d of %d samples…", i+1, r.cfg.WaitSamples)
	}
	stop()
	<-done
	fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
	res := result("SUB", "core", "push-to-invoke, in process", int64(len(lat)), int64(len(lat)), 0, lat)
	res.Rate, res.Unit = res.P50Ms, "ms p50"
	r.add(res)

	// Throughput from a backlog over the partitions.
	for _, batch := range []int{10, 100} {
		queue := fmt.Sprintf("bench-SUB-%d", batch)
		if err := r.fill(ctx, queue, min(r.cfg.Backlog, subscriptionBacklog), r.cfg.Partitions); err != nil {
			return err
		}
		sub, err := put(queue, batch, r.cfg.Clients)
		if err != nil {
			return err
		}
		arrived.Store(0)
		start := time.Now()
		dr, err := dispatch.New(dispatch.Config{Store: r.store}).Drain(ctx, sub)
		if err != nil {
			return err
		}
		n := dr.Settled
		secs := time.Since(start).Seconds()
		r.add(Result{Name: "SUB", Via: "core", What: fmt.Sprintf("delivered at batch %d, %d partitions", batch, r.cfg.Partitions),
			Ops: arrived.Load(), Rows: int64(n), Seconds: secs, Rate: float64(n) / secs, Unit: "msg/s"})
	}

	// Idle: subscriptions with nothing to deliver, watched as queen serve
	// watches them between reaper passes; every statement is a call of the
	// store. The reaper's pass then looks once for all of them (Due).
	for i := range idleSubscriptions {
		if _, err := put(fmt.Sprintf("bench-SUB-idle-%d", i), 10, 1); err != nil {
			return err
		}
	}
	before := counted.Pops.Load() + counted.Probes.Load() + counted.Listings.Load()
	idle := dispatch.New(dispatch.Config{Store: counted})
	idleCtx, stopIdle := context.WithTimeout(ctx, r.cfg.WaitWindow)
	fmt.Fprintf(r.cfg.Out, "  %d idle subscriptions for %s…", idleSubscriptions+3, r.cfg.WaitWindow)
	start := time.Now()
	idle.Run(idleCtx)
	stopIdle()
	secs := time.Since(start).Seconds()
	fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
	calls := counted.Pops.Load() + counted.Probes.Load() + counted.Listings.Load() - before
	r.add(Result{Name: "SUB", Via: "core", What: fmt.Sprintf("%d idle subscriptions: statements/s", idleSubscriptions+3),
		Ops: calls, Seconds: secs, Rate: float64(calls) / secs, Unit: "stmt/s",
		Target: "0: nothing beyond the reaper's pass"})
	return nil
}
