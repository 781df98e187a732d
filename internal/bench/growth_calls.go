package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// G: the calls, sampled on both databases in turn.

// call is one of G's timed calls: fn makes one sample on a side and
// returns its latency (pop and ack: one each).
type call struct {
	what, via string
	p99       bool // p99 is judged too
	fn        func(ctx context.Context, s *side) ([]time.Duration, error)
}

// softError is a sample that counts, with something to say about it.
type softError struct{ note string }

func (e *softError) Error() string { return e.note }

// measureCalls samples each call on both sides in turn and adds a row per
// ratio. A call that fails on a side is reported as failed, not fatal.
func (g *growthRun) measureCalls(ctx context.Context) {
	timed := func(fn func() error) ([]time.Duration, error) {
		t0 := time.Now()
		err := fn()
		return []time.Duration{time.Since(t0)}, err
	}
	get := func(path string) func(ctx context.Context, s *side) ([]time.Duration, error) {
		return func(ctx context.Context, s *side) ([]time.Duration, error) {
			return timed(func() error { _, err := s.http.do(ctx, "GET", path, nil, nil); return err })
		}
	}
	var pushed atomic.Int64
	calls := []call{
		{what: "stats pass (Store.Stats)", via: "core", fn: func(ctx context.Context, s *side) ([]time.Duration, error) {
			return timed(func() error { _, err := s.store.Stats(ctx); return err })
		}},
		{what: "reaper pass, nothing due", via: "core", fn: func(ctx context.Context, s *side) ([]time.Duration, error) {
			return timed(func() error { _, err := s.store.Reap(ctx, queen.ReapRequest{}); return err })
		}},
		{what: "GET /metrics/prometheus", via: "http", fn: func(ctx context.Context, s *side) ([]time.Duration, error) {
			var body string
			lat, err := timed(func() error { var e error; body, e = s.http.get(ctx, "/metrics/prometheus"); return e })
			if err == nil && !strings.Contains(body, "queen_database_up 1") {
				err = &softError{"the page came without its gauges (queen_database_up 0)"}
			}
			return lat, err
		}},
		{what: "GET /api/v1/resources/overview (console)", via: "http", fn: get("/api/v1/resources/overview")},
		{what: "GET /api/v1/resources/queues", via: "http", fn: get("/api/v1/resources/queues")},
		// a page of 100 partitions: both logs have that many (growthHot)
		{what: "GET /api/v1/resources/queues/{queue}?partitionsLimit=100", via: "http",
			fn: get("/api/v1/resources/queues/" + gLog + "?partitionsLimit=100")},
		{what: "GET /api/v1/consumer-groups", via: "http", fn: get("/api/v1/consumer-groups")},
		{what: "push 1 message", via: "core", p99: true, fn: func(ctx context.Context, s *side) ([]time.Duration, error) {
			part := fmt.Sprintf("hot-%d", pushed.Add(1)%growthHot)
			return timed(func() error {
				_, err := s.store.Push(ctx, []queen.PushItem{{Queue: gLog, Partition: part, Payload: json.RawMessage(Payload)}})
				return err
			})
		}},
		{what: "pop 1 message, queue mode", via: "core", p99: true, fn: g.popAndAck},
		{what: "GET /api/v1/messages (browse a partition, limit 10)", via: "http",
			fn: get("/api/v1/messages?" + url.Values{"queue": {gLog}, "partition": {"browse"}, "limit": {"10"}}.Encode())},
		{what: "GET /api/v1/dlq?limit=10", via: "http", fn: get("/api/v1/dlq?limit=10")},
	}
	for _, c := range calls {
		lat, notes, errs := g.sample(ctx, c)
		if c.what != "pop 1 message, queue mode" {
			g.callRows(c, column(lat, 0), notes, errs)
			continue
		}
		// a sample is a pop and its ack: two measures
		g.callRows(c, column(lat, 0), notes, errs)
		g.callRows(call{what: "ack 1 message", via: "core", p99: true}, column(lat, 1), notes, errs)
	}
}

// column is the j-th latency of every sample, per side.
func column(lat [2][][]time.Duration, j int) [2][]time.Duration {
	var out [2][]time.Duration
	for k := range lat {
		for _, d := range lat[k] {
			out[k] = append(out[k], d[j])
		}
	}
	return out
}

// popAndAck is one sample of pop and ack: a queue-mode pop of one message
// of gLog, then its ack.
func (g *growthRun) popAndAck(ctx context.Context, s *side) ([]time.Duration, error) {
	t0 := time.Now()
	res, err := s.store.Pop(ctx, queen.PopRequest{Queue: gLog, Batch: 1})
	pop := time.Since(t0)
	if err != nil {
		return nil, err
	}
	if len(res.Messages) != 1 {
		return nil, errors.New("the pop found nothing while messages wait")
	}
	m := res.Messages[0]
	t1 := time.Now()
	_, err = s.store.Ack(ctx, []queen.Ack{{PartitionID: m.PartitionID, TransactionID: m.TransactionID,
		Status: queen.AckCompleted, LeaseID: res.LeaseID}})
	return []time.Duration{pop, time.Since(t1)}, err
}

// sample runs c on both sides in turn (which side goes first alternates)
// until each has GrowthSamples samples, or the budget is spent and each
// has growthMinSamples; a side whose own samples alone took the budget
// stops at one (a summary that scans a big log can take half a minute).
// A side whose call fails stops there.
func (g *growthRun) sample(ctx context.Context, c call) (lat [2][][]time.Duration, notes [2]string, errs [2]error) {
	out := g.r.cfg.Out
	var flat [2][]time.Duration
	var spent [2]time.Duration
	start, shown := time.Now(), time.Time{}
	for i := 0; ; i++ {
		more := false
		for j := range 2 {
			k := (i + j) % 2
			n := len(lat[k])
			if errs[k] != nil || n >= g.r.cfg.GrowthSamples || time.Since(start) >= g.r.cfg.GrowthBudget &&
				(n >= growthMinSamples || n > 0 && spent[k] >= g.r.cfg.GrowthBudget) {
				continue
			}
			more = true
			t0 := time.Now()
			d, err := c.fn(ctx, g.sides[k])
			spent[k] += time.Since(t0)
			var soft *softError
			if errors.As(err, &soft) {
				if notes[k] == "" {
					notes[k] = soft.note
				}
				err = nil
			}
			if err != nil {
				errs[k] = err
				continue
			}
			lat[k] = append(lat[k], d)
			flat[k] = append(flat[k], d[0])
		}
		if !more {
			break
		}
		if time.Since(shown) >= time.Second {
			shown = time.Now()
			fmt.Fprintf(out, "\r  G: %s: %d / %d samples, last p50 %.2f / %.2f ms   ", c.what, len(lat[0]), len(lat[1]),
				percentile(flat[0], 0.5), percentile(flat[1], 0.5))
		}
	}
	fmt.Fprintf(out, "\r%110s\r", "")
	return lat, notes, errs
}

// callRows adds c's ratio rows from its samples on both sides: p50, and
// p99 when c.p99.
func (g *growthRun) callRows(c call, lat [2][]time.Duration, notes [2]string, errs [2]error) {
	problem := ""
	for k := range 2 {
		switch {
		case errs[k] != nil:
			problem = fmt.Sprintf("failed on the %s side: %v", growthSideName[k], errs[k])
		case notes[k] != "" && problem == "":
			problem = fmt.Sprintf("%s side: %s", growthSideName[k], notes[k])
		case len(lat[k]) == 0 && problem == "":
			problem = fmt.Sprintf("no samples on the %s side", growthSideName[k])
		}
	}
	stats := []struct {
		name string
		p    float64
	}{{"p50", 0.5}}
	if c.p99 {
		stats = append(stats, struct {
			name string
			p    float64
		}{"p99", 0.99})
	}
	for _, st := range stats {
		e, s := msPercentile(lat[0], st.p), msPercentile(lat[1], st.p)
		res := Result{Name: "G", Via: c.via, What: fmt.Sprintf("%s, ms %s", c.what, st.name), Unit: "×",
			Ops: int64(len(lat[0]) + len(lat[1])), Empty: e, Stored: s, Value: ratio(s, e), Error: problem,
			P50Ms: msPercentile(lat[1], 0.5), P99Ms: msPercentile(lat[1], 0.99)}
		g.r.add(res)
		g.rows = append(g.rows, res)
	}
}

// msPercentile is the p-th percentile of lat in milliseconds, to the
// nanosecond.
func msPercentile(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[int(p*float64(len(s)-1))]) / 1e6
}

// ratio is stored / empty, 0 when there is nothing to divide by (the row
// then carries an error).
func ratio(stored, empty float64) float64 {
	if empty <= 0 {
		return 0
	}
	return stored / empty
}
