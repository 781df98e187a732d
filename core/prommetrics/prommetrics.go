// Package prommetrics serves the local server's /metrics/prometheus page
// through prometheus/client_golang: operation counters and latencies kept
// in process, queue depth, group lag and DLQ depth read from the store at
// scrape time. It lives apart from httpapi so that the Lambda bootstraps,
// which do not serve the page, do not link the client library.
package prommetrics

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/queen-serverless/queen/core/queen"
)

// latencyBuckets are the histogram bounds in seconds.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// scrapeTimeout bounds the store read behind one scrape.
const scrapeTimeout = 10 * time.Second

// Metrics counts operations and their latencies; it satisfies
// httpapi.Metrics.
type Metrics struct {
	reg     *prometheus.Registry
	ops     *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// New returns a registry with no operations observed yet.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queen_operations_total", Help: "Operations served, by outcome.",
		}, []string{"op", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "queen_operation_seconds", Help: "Operation latency.", Buckets: latencyBuckets,
		}, []string{"op"}),
	}
	m.reg.MustRegister(m.ops, m.latency)
	return m
}

// Observe records one operation.
func (m *Metrics) Observe(op string, err error, d time.Duration) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.ops.WithLabelValues(op, outcome).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}

// Handler serves /metrics/prometheus: the operation metrics and the
// store's gauges as of this scrape. When the store does not answer, the
// page still renders, with queen_database_up 0 and no gauges.
func (m *Metrics) Handler(store queen.Store, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), scrapeTimeout)
		defer cancel()
		gauges := prometheus.NewRegistry()
		st, err := store.Stats(ctx)
		if err != nil {
			log.WarnContext(ctx, "metrics: reading gauges failed", "err", err)
		}
		gauges.MustRegister(stats{st: st, up: err == nil})
		promhttp.HandlerFor(prometheus.Gatherers{m.reg, gauges}, promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}).ServeHTTP(w, r)
	})
}

var (
	upDesc         = prometheus.NewDesc("queen_database_up", "Whether the database answered the last scrape.", nil, nil)
	queuesDesc     = prometheus.NewDesc("queen_queues", "Queues.", nil, nil)
	partitionsDesc = prometheus.NewDesc("queen_partitions", "Partitions.", nil, nil)
	depthDesc      = prometheus.NewDesc("queen_queue_depth", "Messages after the slowest cursor, by queue.", []string{"queue"}, nil)
	dlqDesc        = prometheus.NewDesc("queen_dlq_depth", "Dead letters, by queue.", []string{"queue"}, nil)
	lagDesc        = prometheus.NewDesc("queen_group_lag", "Messages a consumer group has not committed, by group and queue.", []string{"group", "queue"}, nil)
)

// stats exposes one scrape's store reading as gauges.
type stats struct {
	st queen.Stats
	up bool
}

func (s stats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{upDesc, queuesDesc, partitionsDesc, depthDesc, dlqDesc, lagDesc} {
		ch <- d
	}
}

func (s stats) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	if !s.up {
		gauge(upDesc, 0)
		return
	}
	gauge(upDesc, 1)
	gauge(queuesDesc, s.st.Queues)
	gauge(partitionsDesc, s.st.Partitions)
	for q, v := range s.st.Depth {
		gauge(depthDesc, v, q)
	}
	for q, v := range s.st.DLQ {
		gauge(dlqDesc, v, q)
	}
	for k, v := range s.st.Lag {
		group, q, _ := strings.Cut(k, queen.LagKeySeparator)
		gauge(lagDesc, v, group, q)
	}
}
