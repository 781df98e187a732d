// Package reaper runs the store's maintenance pass (queen.Store.Reap:
// expire leases and count the attempt, prune dedup keys, apply retention) on
// a schedule: once per EventBridge tick in the reaper function (Handler),
// from a ticker in `queen serve` (Loop). A pass works in short
// transactions until it has caught up or its time is up (the function's
// deadline less a margin; the loop's interval), so its rate follows the
// write rate instead of a fixed row count; what it leaves behind is
// reported. Batches are idempotent, so passes may overlap each other and
// traffic.
package reaper

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// Metric names and namespace of the Embedded Metric Format lines; the CDK
// stack's alarms and dashboard read them.
const (
	Namespace         = "QueenServerless"
	MetricDLQDepth    = "DLQDepth"
	MetricMaxGroupLag = "MaxGroupLag"
	// MetricBehind is 1 for a pass that ran out of time with work left,
	// else 0; the stack alarms when it stays 1 for several passes.
	MetricBehind = "ReaperBehind"
	// The rows a pass left due, per kind (0 after a pass that caught up).
	MetricBacklogLeases    = "ReaperBacklogLeases"
	MetricBacklogDedup     = "ReaperBacklogDedup"
	MetricBacklogRetention = "ReaperBacklogRetention"
	// MetricMaxSubscriptionLag is the largest lag of a consumer group that
	// a subscription delivers (docs/subscriptions.md).
	MetricMaxSubscriptionLag = "MaxSubscriptionLag"
	// MetricSubscriptionsStarted counts the subscriptions a pass found with
	// backlog and no live dispatcher, and started.
	MetricSubscriptionsStarted = "SubscriptionsStarted"
)

// DefaultMargin is what Handler leaves of the function's time after a
// pass: for the gauges, the log line and the metrics.
const DefaultMargin = 10 * time.Second

// Report is what one reaper pass did and saw.
type Report struct {
	queen.ReapStats
	// DLQDepth is the number of dead letters, all queues together.
	DLQDepth int64 `json:"dlqDepth"`
	// MaxGroupLag is the largest lag of any consumer group on any queue.
	MaxGroupLag int64 `json:"maxGroupLag"`
	// MaxLagGroup and MaxLagQueue name where MaxGroupLag is.
	MaxLagGroup string `json:"maxLagGroup,omitempty"`
	MaxLagQueue string `json:"maxLagQueue,omitempty"`
	// MaxSubscriptionLag is the largest lag of a group a subscription
	// delivers; SubscriptionsStarted the runs the pass started for
	// subscriptions with backlog and no live run.
	// Both are in the metrics only where subscriptions are delivered
	// (Handler.Subscriptions set): a metric costs money once published.
	MaxSubscriptionLag   int64 `json:"maxSubscriptionLag"`
	SubscriptionsStarted int   `json:"subscriptionsStarted"`
	subscriptions        bool
	Queues               int64 `json:"queues"`
	Partitions           int64 `json:"partitions"`
	DurationMS           int64 `json:"durationMs"`
}

// SubscriptionStarter starts dispatcher runs for the subscriptions with
// backlog and no live run (dispatch.Waker): the safety net of their
// wake-ups (docs/subscriptions.md §8).
type SubscriptionStarter interface {
	StartDue(ctx context.Context) (int, error)
}

// Handler is the reaper function's Lambda handler.
type Handler struct {
	Store queen.Store
	// Subscriptions, when set, starts due subscriptions after each pass.
	Subscriptions SubscriptionStarter
	Logger        *slog.Logger
	// Metrics receives one Embedded Metric Format line per pass (the
	// function's stdout, which CloudWatch Logs reads).
	Metrics io.Writer
	// Batch bounds the rows of one kind one transaction touches (0: the
	// store's default).
	Batch int
	// Margin is left of the invocation's time when the pass stops for its
	// deadline. Default DefaultMargin.
	Margin time.Duration
	// Now is the clock of the metric timestamps. Default time.Now.
	Now func() time.Time
}

// Invoke runs one pass per event (a scheduled event, or any direct
// invocation) until it has caught up or the invocation's deadline less
// Margin, logs it, writes its metrics and returns the report.
func (h *Handler) Invoke(ctx context.Context, _ json.RawMessage) (Report, error) {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	start := time.Now()
	req := queen.ReapRequest{Batch: h.Batch}
	if d, ok := ctx.Deadline(); ok {
		margin := h.Margin
		if margin <= 0 {
			margin = DefaultMargin
		}
		// A short invocation still gets a third of its time for the pass.
		req.Deadline = d.Add(-min(margin, time.Until(d)*2/3))
	}
	stats, err := h.Store.Reap(ctx, req)
	if err != nil {
		h.Logger.ErrorContext(ctx, "reaper pass failed", "err", err)
		return Report{}, err
	}
	rep := Report{ReapStats: stats}
	var subs []queen.Subscription
	if h.Subscriptions != nil {
		rep.subscriptions = true
		if rep.SubscriptionsStarted, err = h.Subscriptions.StartDue(ctx); err != nil {
			h.Logger.ErrorContext(ctx, "start due subscriptions", "err", err)
		}
		if subs, err = h.Store.Subscriptions(ctx); err != nil {
			h.Logger.ErrorContext(ctx, "list subscriptions", "err", err)
		}
	}
	gauges, err := h.Store.Stats(ctx)
	if err != nil {
		// The pass itself succeeded; only the gauges are missing.
		h.Logger.ErrorContext(ctx, "reaper stats failed", "err", err)
		return rep, err
	}
	rep.addGauges(gauges)
	for _, s := range subs {
		if s.Enabled {
			rep.MaxSubscriptionLag = max(rep.MaxSubscriptionLag, gauges.Lag[s.ConsumerGroup+queen.LagKeySeparator+s.Queue])
		}
	}
	rep.DurationMS = time.Since(start).Milliseconds()
	if rep.Behind {
		h.Logger.WarnContext(ctx, "reaper pass ran out of time with work left", "report", rep)
	} else {
		h.Logger.InfoContext(ctx, "reaper pass", "report", rep)
	}
	if h.Metrics != nil {
		if err := WriteEMF(h.Metrics, now(), rep); err != nil {
			h.Logger.ErrorContext(ctx, "write metrics", "err", err)
		}
	}
	return rep, nil
}

func (r *Report) addGauges(st queen.Stats) {
	r.Queues, r.Partitions = st.Queues, st.Partitions
	for _, n := range st.DLQ {
		r.DLQDepth += n
	}
	for key, lag := range st.Lag {
		group, queue, _ := strings.Cut(key, queen.LagKeySeparator)
		if lag > r.MaxGroupLag || r.MaxLagGroup == "" && lag == r.MaxGroupLag {
			r.MaxGroupLag, r.MaxLagGroup, r.MaxLagQueue = lag, group, queue
		}
	}
}

// WriteEMF writes one CloudWatch Embedded Metric Format line: in namespace
// Namespace, without dimensions (the series the alarms use), DLQDepth,
// MaxGroupLag, ReaperBehind and the backlogs, plus what the pass did, and
// the subscriptions' where they are delivered.
func WriteEMF(w io.Writer, now time.Time, r Report) error {
	var behind int64
	if r.Behind {
		behind = 1
	}
	values := []Metric{
		{MetricDLQDepth, "Count", r.DLQDepth},
		{MetricMaxGroupLag, "Count", r.MaxGroupLag},
		{"LeasesExpired", "Count", int64(r.LeasesExpired)},
		{"DeadLettered", "Count", int64(r.DeadLettered)},
		{"DedupPruned", "Count", int64(r.DedupPruned)},
		{"SegmentsRetained", "Count", int64(r.SegmentsRetained + r.SegmentsCompleted)},
		{"DeadLettersExpired", "Count", int64(r.DeadLettersExpired)},
		{"ReaperBatches", "Count", int64(r.Batches)},
		{MetricBehind, "Count", behind},
		{MetricBacklogLeases, "Count", r.Backlog.Leases},
		{MetricBacklogDedup, "Count", r.Backlog.Dedup},
		{MetricBacklogRetention, "Count", r.Backlog.Retention},
	}
	if r.subscriptions {
		values = append(values, Metric{MetricMaxSubscriptionLag, "Count", r.MaxSubscriptionLag},
			Metric{MetricSubscriptionsStarted, "Count", int64(r.SubscriptionsStarted)})
	}
	return EMF(w, now, values)
}

// Metric is one value of an Embedded Metric Format line.
type Metric struct {
	Name, Unit string
	Value      int64
}

// EMF writes one CloudWatch Embedded Metric Format line of values in
// namespace Namespace, without dimensions.
func EMF(w io.Writer, now time.Time, values []Metric) error {
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	line := map[string]any{}
	metrics := make([]metric, 0, len(values))
	for _, v := range values {
		metrics = append(metrics, metric{Name: v.Name, Unit: v.Unit})
		line[v.Name] = v.Value
	}
	line["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  Namespace,
			"Dimensions": [][]string{{}},
			"Metrics":    metrics,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Loop runs a pass every interval until ctx ends: the reaper of `queen
// serve`. A pass may take up to the interval. Passes that did something
// are logged at info, idle ones at debug, failures and passes that ran out
// of time at warn (the next tick goes on). After each pass it calls
// onPass, when set (queen serve's dispatcher looks for due subscriptions).
func Loop(ctx context.Context, store queen.Store, interval time.Duration, log *slog.Logger, onPass func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stats, err := store.Reap(ctx, queen.ReapRequest{Deadline: time.Now().Add(interval)})
		if onPass != nil && ctx.Err() == nil {
			onPass(ctx)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.WarnContext(ctx, "reaper pass failed", "err", err)
		case stats.Behind:
			log.WarnContext(ctx, "reaper pass ran out of time with work left", "stats", stats)
		case stats.Did():
			log.InfoContext(ctx, "reaper pass", "stats", stats)
		default:
			log.DebugContext(ctx, "reaper pass: nothing to do")
		}
	}
}
