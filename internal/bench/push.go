package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/queen-serverless/queen/core/queen"
)

// ---- push

// createPartitions creates queue's random-partition workload partitions
// (p-0 … p-N-1) with one message each, so a timed part measures appends.
func (r *runner) createPartitions(ctx context.Context, queue string) error {
	warm := make([]queen.PushItem, r.cfg.Partitions)
	for i := range warm {
		warm[i] = queen.PushItem{Queue: queue, Partition: fmt.Sprintf("p-%d", i), Payload: json.RawMessage(Payload)}
	}
	_, err := r.store.Push(ctx, warm)
	return err
}

func items(queue string, n, partitions int, one bool) []queen.PushItem {
	out := make([]queen.PushItem, n)
	for i := range out {
		p := "p-0"
		if !one {
			p = fmt.Sprintf("p-%d", rand.IntN(partitions))
		}
		out[i] = queen.PushItem{Queue: queue, Partition: p, Payload: json.RawMessage(Payload)}
	}
	return out
}

func (r *runner) push(ctx context.Context, name string, n int, one bool) error {
	what := fmt.Sprintf("push %d per request, random partitions", n)
	if one {
		what = fmt.Sprintf("push %d per request, one partition", n)
	}
	for _, via := range []string{"core", "http"} {
		queue := fmt.Sprintf("bench-%s-%s", name, via)
		// Create the partitions first: the timed part measures appends.
		if !one {
			if err := r.createPartitions(ctx, queue); err != nil {
				return err
			}
		}
		ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
			batch := items(queue, n, r.cfg.Partitions, one)
			var err error
			if via == "core" {
				_, err = r.store.Push(ctx, batch)
			} else {
				err = r.http.push(ctx, batch)
			}
			return n, false, err
		})
		if err != nil {
			return err
		}
		r.add(result(name, via, what, ops, rows, secs, lat))
	}
	return nil
}

// fill pushes n messages into queue over partitions, untimed.
func (r *runner) fill(ctx context.Context, queue string, n, partitions int) error {
	per := n / r.cfg.Clients
	return r.eachClient(func() error {
		for done := 0; done < per; done += 500 {
			if _, err := r.store.Push(ctx, items(queue, min(500, per-done), partitions, false)); err != nil {
				return err
			}
		}
		return nil
	})
}

// eachClient runs fn on Clients goroutines at once (untimed work) and
// returns the first error any of them returned.
func (r *runner) eachClient(fn func() error) error {
	var wg sync.WaitGroup
	errs := make(chan error, r.cfg.Clients)
	for c := 0; c < r.cfg.Clients; c++ {
		wg.Go(func() {
			if err := fn(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
