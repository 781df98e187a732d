package reaper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/core/reaper"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

func TestMain(m *testing.M) { pgstoretest.Main(m) }

func TestHandlerReapsAndReports(t *testing.T) {
	t.Parallel()
	env := pgstoretest.NewClocked(t)
	ctx := context.Background()
	items := []queen.PushItem{
		{Queue: "jobs", Partition: "a", Payload: json.RawMessage(`1`)},
		{Queue: "jobs", Partition: "a", Payload: json.RawMessage(`2`)},
		{Queue: "jobs", Partition: "b", Payload: json.RawMessage(`3`)},
	}
	if _, err := env.Store.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	pop, err := env.Store.Pop(ctx, queen.PopRequest{Queue: "jobs", Partition: "a", Batch: 10})
	if err != nil || len(pop.Messages) != 2 {
		t.Fatalf("pop: %v, %d messages", err, len(pop.Messages))
	}
	// One dead letter, on partition b, for group g.
	popB, err := env.Store.Pop(ctx, queen.PopRequest{Queue: "jobs", Partition: "b", ConsumerGroup: "g", Batch: 10})
	if err != nil || len(popB.Messages) != 1 {
		t.Fatalf("pop b: %v", err)
	}
	m := popB.Messages[0]
	if _, err := env.Store.Ack(ctx, []queen.Ack{{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: queen.AckDLQ, ConsumerGroup: "g"}}); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(time.Duration(queen.DefaultLeaseTime+1) * time.Second)

	var logs, metrics bytes.Buffer
	h := &reaper.Handler{Store: env.Store, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: &metrics,
		Now: func() time.Time { return time.UnixMilli(1767268800000) }}
	rep, err := h.Invoke(ctx, json.RawMessage(`{"source":"aws.events","detail-type":"Scheduled Event","detail":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if rep.LeasesExpired != 1 {
		t.Errorf("leases expired %d, want 1", rep.LeasesExpired)
	}
	if rep.DLQDepth != 1 {
		t.Errorf("DLQ depth %d, want 1", rep.DLQDepth)
	}
	// Queue mode has read nothing of a's 2 messages to completion (lag 2)
	// and b's 1 (lag 1): 3; g is past b and never read a: 2.
	if rep.MaxGroupLag != 3 || rep.MaxLagGroup != queen.QueueModeGroup || rep.MaxLagQueue != "jobs" {
		t.Errorf("max lag %d at %q/%q, want 3 at queue mode/jobs", rep.MaxGroupLag, rep.MaxLagGroup, rep.MaxLagQueue)
	}

	// The EMF line: namespace, no dimensions, the two alarm metrics.
	var line struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		DLQDepth, MaxGroupLag, LeasesExpired, ReaperBehind int64
	}
	if err := json.Unmarshal(metrics.Bytes(), &line); err != nil {
		t.Fatalf("EMF line %q: %v", metrics.String(), err)
	}
	cwm := line.AWS.CloudWatchMetrics
	if line.AWS.Timestamp != 1767268800000 || len(cwm) != 1 || cwm[0].Namespace != "QueenServerless" ||
		len(cwm[0].Dimensions) != 1 || len(cwm[0].Dimensions[0]) != 0 {
		t.Errorf("EMF metadata %+v", line.AWS)
	}
	names := map[string]bool{}
	for _, m := range cwm[0].Metrics {
		names[m.Name] = m.Unit == "Count"
	}
	if !names["DLQDepth"] || !names["MaxGroupLag"] || !names["ReaperBehind"] || !names["ReaperBacklogLeases"] ||
		!names["ReaperBacklogDedup"] || !names["ReaperBacklogRetention"] {
		t.Errorf("EMF metrics %+v", cwm[0].Metrics)
	}
	if line.DLQDepth != 1 || line.MaxGroupLag != 3 || line.LeasesExpired != 1 || line.ReaperBehind != 0 {
		t.Errorf("EMF values %+v", line)
	}
	if !bytes.Contains(logs.Bytes(), []byte(`"leasesExpired":1`)) {
		t.Errorf("log does not say what the pass did: %s", logs.String())
	}

	// The next pass finds nothing more to expire.
	rep, err = h.Invoke(ctx, nil)
	if err != nil || rep.LeasesExpired != 0 {
		t.Errorf("second pass: %+v, %v", rep, err)
	}
}

// A pass that ran out of time says so in its metrics, with what it left:
// the series the stack's "reaper not catching up" alarm and dashboard read.
func TestEMFReportsBacklog(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	rep := reaper.Report{ReapStats: queen.ReapStats{Behind: true, Batches: 40,
		Backlog: queen.ReapBacklog{Leases: 7, Dedup: 12000, Retention: 3}}}
	if err := reaper.WriteEMF(&b, time.UnixMilli(0), rep); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(b.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{reaper.MetricBehind: 1, reaper.MetricBacklogLeases: 7,
		reaper.MetricBacklogDedup: 12000, reaper.MetricBacklogRetention: 3, "ReaperBatches": 40} {
		if line[name] != want {
			t.Errorf("%s = %v, want %v", name, line[name], want)
		}
	}
}

// A pass goes on, batch after batch, until it has caught up.
func TestHandlerCatchesUpInBatches(t *testing.T) {
	t.Parallel()
	env := pgstoretest.NewClocked(t)
	ctx := context.Background()
	for i := range 7 {
		part := string(rune('a' + i))
		if _, err := env.Store.Push(ctx, []queen.PushItem{{Queue: "many", Partition: part, Payload: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
		if r, err := env.Store.Pop(ctx, queen.PopRequest{Queue: "many", Partition: part, Batch: 1}); err != nil || len(r.Messages) != 1 {
			t.Fatalf("pop %s: %v", part, err)
		}
	}
	env.Clock.Advance(time.Duration(queen.DefaultLeaseTime+1) * time.Second)
	h := &reaper.Handler{Store: env.Store, Logger: slog.New(slog.DiscardHandler), Batch: 2}
	lambdaCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := h.Invoke(lambdaCtx, nil)
	if err != nil || rep.LeasesExpired != 7 || rep.Behind || rep.Batches < 4 {
		t.Fatalf("pass: %+v %v, want 7 leases expired in at least 4 batches, nothing left", rep, err)
	}
}

// reapWatch reports the start of every reaper pass on started.
type reapWatch struct {
	queen.Store
	started chan struct{}
}

func (w reapWatch) Reap(ctx context.Context, req queen.ReapRequest) (queen.ReapStats, error) {
	select {
	case w.started <- struct{}{}:
	default:
	}
	return w.Store.Reap(ctx, req)
}

// Loop runs a pass every interval and logs each; it returns when its
// context is cancelled.
func TestLoopStopsWithContext(t *testing.T) {
	t.Parallel()
	env := pgstoretest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var logs lockedBuffer
	store := reapWatch{Store: env.Store, started: make(chan struct{}, 1)}
	go func() {
		reaper.Loop(ctx, store, 10*time.Millisecond, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
		close(done)
	}()
	// The second pass starts once the first has been logged.
	for i := range 2 {
		select {
		case <-store.started:
		case <-time.After(time.Minute):
			t.Fatalf("%d reaper passes within a minute", i)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Loop did not return after cancel")
	}
	if !logs.contains("reaper pass") {
		t.Errorf("no pass logged:\n%s", logs.String())
	}
}

// lockedBuffer is a log sink safe for a writer and a reader at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Contains(b.buf.String(), s)
}
