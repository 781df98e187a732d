package soak

import (
	"math"
	"sync"
	"time"
)

// Latency histograms: buckets growing by 2 % from 10 µs, so a percentile is
// exact to within 2 % whatever the number of requests, in constant memory.
const (
	histMin    = 10 * time.Microsecond
	histGrowth = 1.02
	histBins   = 900 // 10 µs · 1.02^900 ≈ 5.5 · 10^8 s: every latency
)

var histLogGrowth = math.Log(histGrowth)

// hist counts durations by bucket.
type hist struct {
	n    int64
	bins [histBins]int64
}

func histBin(d time.Duration) int {
	if d <= histMin {
		return 0
	}
	return min(histBins-1, 1+int(math.Log(float64(d)/float64(histMin))/histLogGrowth))
}

func (h *hist) add(d time.Duration) {
	h.n++
	h.bins[histBin(d)]++
}

// quantile returns the upper bound of the bucket holding the q-quantile
// (0 when empty), in milliseconds.
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen int64
	for i, c := range h.bins {
		seen += c
		if seen >= rank {
			upper := float64(histMin) * math.Pow(histGrowth, float64(i))
			return upper / float64(time.Millisecond)
		}
	}
	return 0
}

// Ops whose latency the run records.
const (
	opPush = iota
	opPop
	opAck
	numOps
)

var opNames = [numOps]string{"push", "pop", "ack"}

// latencies records request latencies per operation: per sample interval
// (swapped out by each sample) and per third of the steady phase.
type latencies struct {
	mu       sync.Mutex
	start    time.Time
	duration time.Duration
	interval [numOps]*hist
	thirds   [3][numOps]hist
}

func newLatencies() *latencies {
	l := &latencies{}
	for i := range l.interval {
		l.interval[i] = &hist{}
	}
	return l
}

// begin starts the steady phase: latencies before it are not recorded.
func (l *latencies) begin(start time.Time, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start, l.duration = start, d
}

// add records one request of op that was sent at sent and took d.
func (l *latencies) add(op int, sent time.Time, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start.IsZero() || sent.Before(l.start) {
		return
	}
	l.interval[op].add(d)
	if el := sent.Sub(l.start); el < l.duration {
		l.thirds[3*el/l.duration][op].add(d)
	}
}

// take returns the interval's histograms and starts new ones.
func (l *latencies) take() [numOps]*hist {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.interval
	for i := range l.interval {
		l.interval[i] = &hist{}
	}
	return out
}

// third returns a copy of one third's histogram of op.
func (l *latencies) third(i, op int) hist {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.thirds[i][op]
}
