package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// measure runs fn from clients goroutines for the configured duration (or
// until fn says it is done) and times each call. fn returns the rows it
// handled; 0 rows and done=true ends that client.
func (r *runner) measure(ctx context.Context, clients int, fn func(ctx context.Context, client int) (rows int, done bool, err error)) (ops, rows int64, secs float64, lat []time.Duration, err error) {
	// Operations run on ctx; the clock only stops new ones from starting, so
	// every client completes at least one operation even on a busy machine.
	deadline := time.Now().Add(r.cfg.Duration)
	var mu sync.Mutex
	var firstErr error
	var nOps, nRows atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := progress(r.cfg.Out, start, r.cfg.Duration, &nRows)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for first := true; first || time.Now().Before(deadline); first = false {
				t0 := time.Now()
				n, done, err := fn(ctx, c)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					break
				}
				if done {
					break
				}
				mine = append(mine, time.Since(t0))
				nOps.Add(1)
				nRows.Add(int64(n))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	stop()
	return nOps.Load(), nRows.Load(), time.Since(start).Seconds(), lat, firstErr
}

// progress prints a live counter on one line until stopped.
func progress(out io.Writer, start time.Time, d time.Duration, rows *atomic.Int64) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprintf(out, "\r%60s\r", "")
				return
			case <-t.C:
				el := time.Since(start)
				fmt.Fprintf(out, "\r  … %4.0f%%  %d rows, %.0f/s", 100*el.Seconds()/d.Seconds(), rows.Load(), float64(rows.Load())/el.Seconds())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func percentile(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return float64(s[i].Microseconds()) / 1000
}

func result(name, via, what string, ops, rows int64, secs float64, lat []time.Duration) Result {
	return Result{Name: name, Via: via, What: what, Ops: ops, Rows: rows, Seconds: secs,
		Rate: float64(rows) / secs, P50Ms: percentile(lat, 0.5), P99Ms: percentile(lat, 0.99), Unit: "msg/s"}
}
