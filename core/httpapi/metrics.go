package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// latencyBuckets are the histogram bounds in seconds.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

type opStats struct {
	ok, failed uint64
	buckets    []uint64
	sum        float64
}

// Metrics counts operations and their latencies and renders them, with
// queue depth, group lag and DLQ depth read at scrape time, in the
// Prometheus text format.
type Metrics struct {
	mu  sync.Mutex
	ops map[string]*opStats
}

// NewMetrics returns an empty registry.
func NewMetrics() *Metrics { return &Metrics{ops: map[string]*opStats{}} }

// Observe records one operation.
func (m *Metrics) Observe(op string, err error, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.ops[op]
	if !ok {
		s = &opStats{buckets: make([]uint64, len(latencyBuckets))}
		m.ops[op] = s
	}
	if err != nil {
		s.failed++
	} else {
		s.ok++
	}
	sec := d.Seconds()
	s.sum += sec
	for i, b := range latencyBuckets {
		if sec <= b {
			s.buckets[i]++
		}
	}
}

// Handler serves /metrics/prometheus.
func (m *Metrics) Handler(store queen.Store, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		var b strings.Builder
		m.write(&b)
		st, err := store.Stats(ctx)
		if err != nil {
			log.WarnContext(ctx, "metrics: reading gauges failed", "err", err)
			fmt.Fprintf(&b, "# HELP queen_database_up Whether the database answered the last scrape.\n# TYPE queen_database_up gauge\nqueen_database_up 0\n")
		} else {
			fmt.Fprintf(&b, "# HELP queen_database_up Whether the database answered the last scrape.\n# TYPE queen_database_up gauge\nqueen_database_up 1\n")
			writeGauges(&b, st)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(b.String()))
	})
}

func (m *Metrics) write(b *strings.Builder) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ops := make([]string, 0, len(m.ops))
	for op := range m.ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	b.WriteString("# HELP queen_operations_total Operations served, by outcome.\n# TYPE queen_operations_total counter\n")
	for _, op := range ops {
		s := m.ops[op]
		fmt.Fprintf(b, "queen_operations_total{op=%q,outcome=\"ok\"} %d\n", op, s.ok)
		fmt.Fprintf(b, "queen_operations_total{op=%q,outcome=\"error\"} %d\n", op, s.failed)
	}
	b.WriteString("# HELP queen_operation_seconds Operation latency.\n# TYPE queen_operation_seconds histogram\n")
	for _, op := range ops {
		s := m.ops[op]
		for i, le := range latencyBuckets {
			fmt.Fprintf(b, "queen_operation_seconds_bucket{op=%q,le=\"%g\"} %d\n", op, le, s.buckets[i])
		}
		fmt.Fprintf(b, "queen_operation_seconds_bucket{op=%q,le=\"+Inf\"} %d\n", op, s.ok+s.failed)
		fmt.Fprintf(b, "queen_operation_seconds_sum{op=%q} %g\n", op, s.sum)
		fmt.Fprintf(b, "queen_operation_seconds_count{op=%q} %d\n", op, s.ok+s.failed)
	}
}

func writeGauges(b *strings.Builder, st queen.Stats) {
	fmt.Fprintf(b, "# HELP queen_queues Queues.\n# TYPE queen_queues gauge\nqueen_queues %d\n", st.Queues)
	fmt.Fprintf(b, "# HELP queen_partitions Partitions.\n# TYPE queen_partitions gauge\nqueen_partitions %d\n", st.Partitions)
	writeMap(b, "queen_queue_depth", "Messages after the slowest cursor, by queue.", "queue", st.Depth)
	writeMap(b, "queen_dlq_depth", "Dead letters, by queue.", "queue", st.DLQ)
	b.WriteString("# HELP queen_group_lag Messages a consumer group has not committed, by group and queue.\n# TYPE queen_group_lag gauge\n")
	keys := sortedKeys(st.Lag)
	for _, k := range keys {
		group, queue, _ := strings.Cut(k, queen.LagKeySeparator)
		fmt.Fprintf(b, "queen_group_lag{group=%q,queue=%q} %d\n", group, queue, st.Lag[k])
	}
}

func writeMap(b *strings.Builder, name, help, label string, m map[string]int64) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(b, "%s{%s=%q} %d\n", name, label, k, m[k])
	}
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
