package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/internal/chaos"
)

// TestChaosShort is `make chaos` in short: producers and consumers of three
// groups over HTTP through queen serve and PgBouncer in transaction mode,
// while the postmaster is killed with SIGKILL and restarted, then PgBouncer
// is killed and started again. Every push answered 201 must be in the log
// and reach every group or its DLQ, offsets without gaps, first deliveries
// in order, no successful ack undone, no 5xx but 503, and the service must
// recover by itself after each fault. CHAOS_SEED replays a seed's choices.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos run is in the full lane (make test)")
	}
	t.Parallel()
	var seed uint64
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The progress shows with -v, the whole report on a failure.
	var out syncBuffer
	start := time.Now()
	rep, err := chaos.Run(ctx, chaos.Config{Serve: serve, Out: io.MultiWriter(&out, t.Output()), Short: true, Seed: seed})
	if errors.Is(err, chaos.ErrNoPgBouncer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d (CHAOS_SEED=%d to replay), %v: %s", rep.Seed, rep.Seed, time.Since(start).Round(time.Millisecond), rep.Summary())
	if !rep.OK() {
		t.Fatal("the run broke promises (report above)")
	}
	if len(rep.Faults) != 2 || rep.Faults[0].Kind != "kill-postmaster" || rep.Faults[1].Kind != "restart-pgbouncer" {
		t.Errorf("faults %+v, want a postmaster kill and a PgBouncer restart", rep.Faults)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; last != rep.Summary() || !strings.HasSuffix(last, " lost=0 gaps=0 order=0") {
		t.Errorf("the output ends with %q, want the summary line", last)
	}
}
