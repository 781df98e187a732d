package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/internal/bench"
	"github.com/queen-serverless/queen/internal/pgstoretest"
	"github.com/queen-serverless/queen/internal/pgtest"
)

func TestMain(m *testing.M) { pgstoretest.Main(m) }

// A short run of the harness: every workload runs, reports a number and
// lands in results.json and the chart. Speed is not asserted here.
func TestHarnessSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the benchmark harness runs in the full lane (make test)")
	}
	e := pgstoretest.NewClocked(t)
	dir := t.TempDir()
	var out bytes.Buffer
	rep, err := bench.Run(context.Background(), bench.Config{URL: e.URL, Duration: 300 * time.Millisecond,
		Clients: 2, Partitions: 20, ResultsDir: dir, Out: &out,
		Backlog: 2000, StorageMessages: 2000, ScalePartitions: 100, Waiters: 5, WaitWindow: time.Second, WaitSamples: 3,
		ReapRows: 2000, ReapLeases: 100,
		GrowthMessages: 2000, GrowthPartitions: 200, GrowthSamples: 5, GrowthRounds: 1, GrowthBudget: time.Second,
		Database: func(context.Context, string) (string, func(), error) { return pgtest.NewDatabase(t), func() {}, nil }})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	names := map[string]bool{}
	for _, r := range rep.Results {
		names[r.Name+"/"+r.Via] = true
		measuresCost := r.Name == "S" || r.Name == "D" || r.Name == "G" && r.Unit == "×" || (r.Name == "W" || r.Name == "SUB") && r.Unit == "stmt/s" ||
			r.Name == "W" && r.Unit == "% of a core"
		if !measuresCost && r.Rows == 0 {
			t.Errorf("%s via %s moved no rows: %+v", r.Name, r.Via, r)
		}
	}
	for _, want := range []string{"D/sql", "raw-1/sql", "raw-100/sql", "P1/core", "P1/http", "P10/core", "P100/http",
		"P100-1/core", "C10/core", "C100/http", "F5/core", "S/core", "W/http", "W/sql", "log-1/sql", "log-100/sql", "log-100-1/sql", "R/core", "SUB/core", "G/core", "G/http"} {
		if !names[want] {
			t.Errorf("no result for %s", want)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back bench.Report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Results) != len(rep.Results) {
		t.Fatalf("results.json: %v", err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "results.svg"))
	if err != nil || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "P100") {
		t.Fatalf("chart: %v", err)
	}
	if !strings.Contains(out.String(), "Targets (docs/benchmarks.md)") {
		t.Fatalf("no targets section in the table:\n%s", out.String())
	}
}
