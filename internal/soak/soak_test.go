package soak_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queen-serverless/queen/internal/pgstoretest"
	"github.com/queen-serverless/queen/internal/pgtest"
	"github.com/queen-serverless/queen/internal/soak"
)

func TestMain(m *testing.M) { pgstoretest.Main(m) }

// syncBuffer is a bytes.Buffer safe for the run's concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSoakShort is `make soak` in short (about two minutes): steady pushes
// at a modest rate to 1,000 partitions through the HTTP API, three groups
// acking with mixed outcomes, retention of 45 s and a one-minute dedup
// window, the reaper loop, and one 60 s REPEATABLE READ transaction, beside
// a stored backlog of 50,000 messages that is not due. It
// asserts the invariants only — nothing acknowledged lost, no gap, first
// deliveries in order, dedup exact, every ack result the model's, the
// groups drained, the reaper caught up after the long transaction — never
// the sizes or the latencies. SOAK_SEED replays a seed's choices.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the soak's short form is in the full lane (make test)")
	}
	var seed uint64
	if v := os.Getenv("SOAK_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	// The progress shows with -v, the whole report on a failure.
	var out syncBuffer
	rep, err := soak.Run(ctx, soak.Config{URL: pgtest.NewDatabase(t), Short: true, Seed: seed, ResultsDir: dir,
		Out: io.MultiWriter(&out, t.Output())})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d (SOAK_SEED=%d to replay): %s", rep.Seed, rep.Seed, rep.Summary())
	if !rep.OK() {
		t.Fatal("the short soak failed a check (report above)")
	}
	for _, name := range []string{soak.CheckLost, soak.CheckPromises, soak.CheckBacklog} {
		if c, ok := rep.Check(name); !ok || !c.Pass || !c.Enforced {
			t.Errorf("check %q: %+v (found %v), want an enforced pass", name, c, ok)
		}
	}
	for _, name := range []string{soak.CheckSize, soak.CheckP99} {
		if c, ok := rep.Check(name); !ok || c.Enforced {
			t.Errorf("check %q: %+v (found %v), want it reported and not enforced in the short form", name, c, ok)
		}
	}
	// The run did what the checks speak of.
	s := rep.Stats
	for what, n := range map[string]int64{"messages queued": s.Queued, "deliveries": s.Deliveries,
		"redeliveries": s.Redeliveries, "dead letters": s.DeadLettered, "repeats answered duplicate": s.RepeatsDuplicate,
		"reaper passes": int64(s.ReaperPasses)} {
		if n == 0 {
			t.Errorf("no %s", what)
		}
	}
	// The backlog was stored before the traffic, read a little, and is
	// whole at the end (the lost check holds it to what was pushed).
	if b := rep.Backlog; b == nil || b.Messages != soak.ShortBacklog || b.FillRate <= 0 || b.DeadLettered == 0 ||
		b.BaseBytes <= b.Bytes || b.Bytes <= 0 || !strings.HasPrefix(b.Intact, strconv.Itoa(soak.ShortBacklog)+" of ") {
		t.Errorf("backlog %+v, want %d messages stored, read and whole at the end", b, soak.ShortBacklog)
	}
	if len(rep.LongTransactions) != 1 || rep.LongTransactions[0].CaughtUp == nil {
		t.Errorf("long transactions %+v, want one the reaper caught up after", rep.LongTransactions)
	}
	if len(rep.Samples) < 3 || rep.Samples[len(rep.Samples)-1].TotalBytes == 0 {
		t.Errorf("%d samples, the last %+v", len(rep.Samples), rep.Samples[len(rep.Samples)-1])
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back soak.Report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Samples) != len(rep.Samples) || len(back.Checks) != len(rep.Checks) {
		t.Fatalf("results.json: %v", err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "results.svg"))
	if err != nil || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "segments") {
		t.Fatalf("chart: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; last != rep.Summary() {
		t.Errorf("the output ends with %q, want the summary line", last)
	}
}
