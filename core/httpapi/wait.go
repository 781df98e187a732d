package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// Long-polls wait in a hub, one per API (per process, or per Lambda
// container). A push through this API wakes its waiters at once. For
// pushes elsewhere, one goroutine asks the store which of the waited-for
// (queue, group) pairs have something deliverable — one statement for all
// the waiters of the process — and wakes one waiter of each such pair; a
// waiter that got messages wakes the next, so a burst is shared without a
// herd of empty pops. The probe runs every ProbeInterval, or less often
// when few wait: at most about one probe per waiter per second (a lone
// waiter probes every MaxProbeInterval, so a pushed message reaches a
// waiter within the second docs/semantics.md §3.4.6 allows).
const (
	// DefaultProbeInterval is the shortest pause between probes.
	DefaultProbeInterval = 250 * time.Millisecond
	// MaxProbeInterval is the longest.
	MaxProbeInterval = 800 * time.Millisecond
)

type hub struct {
	probe    func(context.Context, []queen.WaitKey) ([]bool, error) // nil: waiters poll
	interval time.Duration                                          // shortest pause between probes
	log      *slog.Logger

	mu      sync.Mutex
	waiting map[queen.WaitKey][]*waiter // in arrival order
	n       int
	probing bool
}

type waiter struct {
	key  queen.WaitKey
	wake chan struct{} // holds one pending wake-up
}

func newHub(store queen.Store, interval time.Duration, log *slog.Logger) *hub {
	h := &hub{interval: interval, log: log, waiting: map[queen.WaitKey][]*waiter{}}
	if p, ok := store.(queen.Prober); ok {
		h.probe = p.Deliverable
	}
	return h
}

// add registers a waiter for key; it is woken by signals sent from now on.
func (h *hub) add(key queen.WaitKey) *waiter {
	w := &waiter{key: key, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting[key] = append(h.waiting[key], w)
	h.n++
	if h.probe != nil && !h.probing {
		h.probing = true
		go h.run()
	}
	return w
}

// remove unregisters w.
func (h *hub) remove(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.waiting[w.key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			h.n--
			break
		}
	}
	if len(ws) == 0 {
		delete(h.waiting, w.key)
	} else {
		h.waiting[w.key] = ws
	}
}

// wake signals up to n waiters of key that have no signal pending, oldest
// first.
func (h *hub) wake(key queen.WaitKey, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakeLocked(key, n)
}

func (h *hub) wakeLocked(key queen.WaitKey, n int) {
	for _, w := range h.waiting[key] {
		if n <= 0 {
			return
		}
		select {
		case w.wake <- struct{}{}:
			n--
		default: // already signalled
		}
	}
}

// pushed wakes, for every group waiting on queue, up to n waiters: each
// group reads every message.
func (h *hub) pushed(queue string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key := range h.waiting {
		if key.Queue == queue {
			h.wakeLocked(key, n)
		}
	}
}

// run probes while anyone waits.
func (h *hub) run() {
	for {
		h.mu.Lock()
		if h.n == 0 {
			h.probing = false
			h.mu.Unlock()
			return
		}
		pause := min(max(h.interval, time.Second/time.Duration(h.n)), max(h.interval, MaxProbeInterval))
		h.mu.Unlock()
		time.Sleep(pause)

		h.mu.Lock()
		keys := make([]queen.WaitKey, 0, len(h.waiting))
		for k := range h.waiting {
			keys = append(keys, k)
		}
		h.mu.Unlock()
		if len(keys) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ready, err := h.probe(ctx, keys)
		cancel()
		if err != nil {
			// The waiters still pop once more at their deadline.
			h.log.Debug("long-poll probe failed", "err", err)
			continue
		}
		for i, ok := range ready {
			if ok {
				h.wake(keys[i], 1)
			}
		}
	}
}
