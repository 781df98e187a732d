package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/procfs"
	"github.com/queen-serverless/queen/internal/storecount"
)

// Defaults of W.
const (
	// DefaultWaiters is how many consumers long-poll empty queues.
	DefaultWaiters = 200
	// DefaultWaitWindow is how long their cost is measured.
	DefaultWaitWindow = 20 * time.Second
	// DefaultWaitSamples is the number of push-to-delivery samples of each kind.
	DefaultWaitSamples = 40
)

// wait is W: Config.Waiters consumers long-poll empty queues through an
// HTTP server for Config.WaitWindow; reported are the statements they cost
// (pops and probes, counted as the server sends them) and the database
// server's CPU over the window (its processes' CPU time, when it runs on
// this machine). Then, with them still waiting, push-to-delivery latency
// for one more waiting consumer: pushed through the same server
// (in-process wake-up) and through a second server with its own pool and
// wait hub (another process, seen by the probe).
func (r *runner) wait(ctx context.Context) error {
	cs := &storecount.Counting{Store: r.store, Empty: make(chan string, 4096)}
	srv, err := startHTTP(cs, r.cfg.Waiters+8)
	if err != nil {
		return err
	}
	defer srv.close()
	other, err := startHTTP(pgstore.New(r.pool, pgstore.Config{}), 8) // its own hub: "another process"
	if err != nil {
		return err
	}
	defer other.close()

	idleCtx, stopIdle := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopIdle(); wg.Wait() }()
	var failed atomic.Value
	for i := range r.cfg.Waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("/api/v1/pop/queue/bench-W-idle-%d?wait=true&timeout=20000", i)
			for idleCtx.Err() == nil {
				if _, err := srv.do(idleCtx, "GET", path, nil, nil); err != nil && idleCtx.Err() == nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	fmt.Fprintf(r.cfg.Out, "  %d consumers long-polling empty queues for %s…", r.cfg.Waiters, r.cfg.WaitWindow)
	time.Sleep(time.Second) // each has made its first pop and waits
	stmts0, cpu0, t0 := cs.Pops.Load()+cs.Probes.Load(), dbCPU(ctx, r), time.Now()
	time.Sleep(r.cfg.WaitWindow)
	secs := time.Since(t0).Seconds()
	stmts, cpu1 := cs.Pops.Load()+cs.Probes.Load()-stmts0, dbCPU(ctx, r)
	fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	perWaiter := float64(stmts) / secs / float64(r.cfg.Waiters)
	r.add(Result{Name: "W", Via: "http", What: fmt.Sprintf("%d idle long-polls: statements/s", r.cfg.Waiters),
		Ops: stmts, Seconds: secs, Rate: float64(stmts) / secs, Value: perWaiter, Unit: "stmt/s",
		Target: fmt.Sprintf("≤ 1 per waiter per second (%.3f)", perWaiter)})
	cpu := Result{Name: "W", Via: "sql", What: fmt.Sprintf("%d idle long-polls: database CPU", r.cfg.Waiters),
		Seconds: secs, Unit: "% of a core"}
	if cpu0 >= 0 && cpu1 >= cpu0 {
		cpu.Value = 100 * (cpu1 - cpu0) / secs
		cpu.Rate = cpu.Value
	} else {
		cpu.What += " (n/a: the server is not on this machine)"
	}
	r.add(cpu)

	for _, via := range []struct {
		name, what string
		push       *httpTarget
	}{
		{"in-process", "push-to-delivery, push through the same server", srv},
		{"cross-process", "push-to-delivery, push through another server", other},
	} {
		lat := make([]time.Duration, 0, r.cfg.WaitSamples)
		for i := range r.cfg.WaitSamples {
			d, err := r.deliveryLatency(ctx, cs, srv, via.push, fmt.Sprintf("bench-W-%s-%d", via.name, i))
			if err != nil {
				return err
			}
			lat = append(lat, d)
			fmt.Fprintf(r.cfg.Out, "\r  %s: %d of %d samples…", via.name, i+1, r.cfg.WaitSamples)
		}
		fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
		res := result("W", "http", via.what, int64(len(lat)), int64(len(lat)), 0, lat)
		res.Rate, res.Unit = res.P50Ms, "ms p50"
		r.add(res)
	}
	return nil
}

// deliveryLatency times one message from the start of its push (through
// pusher) to its arrival at a consumer already waiting on srv.
func (r *runner) deliveryLatency(ctx context.Context, cs *storecount.Counting, srv, pusher *httpTarget, queue string) (time.Duration, error) {
	for len(cs.Empty) > 0 {
		<-cs.Empty
	}
	type popped struct {
		at  time.Time
		n   int
		err error
	}
	got := make(chan popped, 1)
	go func() {
		var body struct {
			Messages []any `json:"messages"`
		}
		_, err := srv.do(ctx, "GET", "/api/v1/pop/queue/"+queue+"?wait=true&timeout=10000&autoAck=true", nil, &body)
		got <- popped{at: time.Now(), n: len(body.Messages), err: err}
	}()
	for q := range cs.Empty { // the consumer waits: its first pop found nothing
		if q == queue {
			break
		}
	}
	start := time.Now()
	if err := pusher.push(ctx, []queen.PushItem{{Queue: queue, Payload: []byte(Payload)}}); err != nil {
		return 0, err
	}
	p := <-got
	if p.err != nil {
		return 0, p.err
	}
	if p.n != 1 {
		return 0, errors.New("bench W: the waiting consumer did not get the message within 10 s")
	}
	return p.at.Sub(start), nil
}

// dbCPU is the CPU time, in seconds, the database server's processes have
// used (the postmaster and its children: backends, WAL writer,
// checkpointer…), or -1 when they cannot be read (a server on another
// machine).
func dbCPU(ctx context.Context, r *runner) float64 {
	var pid int
	if err := r.pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return -1
	}
	backend, ok := procfs.Read(pid)
	if !ok {
		return -1
	}
	postmaster, ok := procfs.Read(backend.PPID)
	if !ok {
		return -1
	}
	kids, err := procfs.Children(backend.PPID)
	if err != nil {
		return -1
	}
	// The children that exited in between (backends, autovacuum workers)
	// are in the postmaster's ChildTicks, so the sum never goes back.
	ticks := postmaster.Ticks + postmaster.ChildTicks
	for _, k := range kids {
		if st, ok := procfs.Read(k); ok {
			ticks += st.Ticks
		}
	}
	return float64(ticks) / 100 // USER_HZ
}
