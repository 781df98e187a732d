package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/egress"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/lambdaemu"
	"github.com/queen-serverless/queen/internal/storecount"
)

// localFence is the egress fence `queen serve` has by default: the
// bench's target listens on loopback.
func localFence() *egress.Fence {
	p, err := egress.ParsePolicy(egress.DefaultLocal)
	if err != nil {
		panic(err)
	}
	return &egress.Fence{URLs: p}
}

// Defaults of SUB.
const (
	// subscriptionBacklog is the most each throughput run delivers.
	subscriptionBacklog = 20_000
	// idleSubscriptions is how many idle subscriptions are watched.
	idleSubscriptions = 100
)

// subscribe is SUB (docs/subscriptions.md), in process, to a no-op HTTP
// target in this process: push-to-invoke latency for a waiting
// subscription (a push, then the wake queen serve sends after the commit),
// and with Config.LambdaEmulator through the dispatch function too;
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
	d := dispatch.New(dispatch.Config{Store: r.store, Fence: localFence()})
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
	if r.cfg.LambdaEmulator {
		if err := r.pushToInvokeLambda(ctx, put, got); err != nil {
			return err
		}
	}

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
		dr, err := dispatch.New(dispatch.Config{Store: r.store, Fence: localFence()}).Drain(ctx, sub)
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
	idle := dispatch.New(dispatch.Config{Store: counted, Fence: localFence()})
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

// dispatchFunction is the dispatch function's main package.
const dispatchFunction = "github.com/queen-serverless/queen/functions/dispatch"

// pushToInvokeLambda is SUB's push-to-invoke as on AWS, through the Lambda
// emulator: each push goes through a dispatch.WakingStore, whose Waker
// starts a run with an asynchronous invoke of the dispatch function's real
// bootstrap under the emulator (built here with the go toolchain), whose
// run delivers to target, the URL target in this process (got). The
// emulator runs the invoke to its end before it answers, so each push
// returns after its run. The first push's cold start (the function's
// process, its first database connection) is not a sample. Without the go
// toolchain or the modules it needs, it prints why and adds no row.
func (r *runner) pushToInvokeLambda(ctx context.Context, put func(queue string, batch, concurrency int) (queen.Subscription, error), got chan time.Time) error {
	const queue = "bench-SUB-lambda"
	dir, err := os.MkdirTemp("", "queen-bench-lambda-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := r.buildLambda(ctx, dir); err != nil {
		fmt.Fprintf(r.cfg.Out, "  SUB through the Lambda emulator skipped: it builds offline with the go toolchain, "+
			"inside this module, from the module cache (go mod download): %v\n", err)
		return nil
	}
	emu, err := lambdaemu.Start(ctx, filepath.Join(dir, "aws-lambda-rie"), filepath.Join(dir, "dispatch"),
		"DATABASE_URL="+r.cfg.URL, "AWS_REGION="+lambdaRegion,
		"AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench", // the emulator checks no signature
		"QUEEN_DISPATCH_FUNCTION="+lambdaemu.Function,
		config.EnvSubscriptionURLs+"="+egress.Loopback) // the target listens here
	if err != nil {
		return fmt.Errorf("the Lambda emulator: %w", err)
	}
	defer emu.Stop()
	var warnings bytes.Buffer // the Waker's, from this goroutine only
	store := dispatch.WakingStore{Store: r.store, Waker: &dispatch.Waker{
		Store:  r.store,
		Logger: slog.New(slog.NewTextHandler(&warnings, nil)),
		Starter: dispatch.FunctionStarter{Function: lambdaemu.Function, Client: &dispatch.LambdaClient{
			Endpoint: emu.Endpoint,
			Config: func(context.Context) (aws.Config, error) {
				return aws.Config{Region: lambdaRegion, Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")}, nil
			},
		}},
	}}
	if _, err := put(queue, 10, 1); err != nil {
		return err
	}
	// Deleted after, so that the idle subscriptions are the ones counted.
	defer func() { _ = r.store.DeleteSubscription(context.WithoutCancel(ctx), queue, "bench-SUB") }()

	lat := make([]time.Duration, 0, r.cfg.WaitSamples)
	for i := -1; i < r.cfg.WaitSamples; i++ { // -1: the cold start
		for len(got) > 0 {
			<-got
		}
		pushCtx, cancel := context.WithTimeout(ctx, lambdaemu.DefaultTimeout+5*time.Second)
		start := time.Now()
		_, err := store.Push(pushCtx, []queen.PushItem{{Queue: queue, Payload: []byte(Payload)}})
		cancel()
		if err != nil {
			return err
		}
		select {
		case at := <-got:
			if i >= 0 {
				lat = append(lat, at.Sub(start))
			}
		case <-time.After(10 * time.Second):
			return fmt.Errorf("push-to-invoke through the Lambda emulator: sample %d not delivered in 10 s\n%s%s",
				i+1, warnings.String(), emu.Output())
		}
		fmt.Fprintf(r.cfg.Out, "\r  push-to-invoke through the Lambda emulator: %d of %d samples…", i+1, r.cfg.WaitSamples)
	}
	emu.Stop()
	fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
	res := result("SUB", "core", "push-to-invoke, dispatch function under the Lambda emulator", int64(len(lat)), int64(len(lat)), 0, lat)
	res.Rate, res.Unit, res.Target = res.P50Ms, "ms p50", "report"
	r.add(res)
	return nil
}

// lambdaRegion is the region the emulated function and its caller name.
const lambdaRegion = "eu-west-1"

// buildLambda builds the dispatch bootstrap and the emulator into dir,
// printing the time it takes as it goes (the first build compiles every
// package; later ones come from the build cache).
func (r *runner) buildLambda(ctx context.Context, dir string) error {
	done := make(chan error, 1)
	go func() { done <- lambdaemu.Build(ctx, dir, dispatchFunction, lambdaemu.RIE) }()
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		fmt.Fprintf(r.cfg.Out, "\r  building the dispatch function and the Lambda emulator… %ds", int(time.Since(start).Seconds()))
		select {
		case err := <-done:
			fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
			return err
		case <-tick.C:
		}
	}
}
