// Package bench measures Queen Serverless against the workloads of
// docs/benchmarks.md,
// through the core (the Store) and through the HTTP server, next to the raw
// ceiling of plain INSERTs into a bare table on the same Postgres. It
// prints a table with progress while it runs and writes JSON plus an SVG
// chart to a results folder.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/pgstore"
)

// Defaults of Config.
const (
	DefaultDuration   = 5 * time.Second
	DefaultClients    = 8
	DefaultPartitions = 1000
	DefaultResultsDir = "bench-results"
	// DefaultBacklog is the backlog the consume workloads drain.
	DefaultBacklog = 150000
	// DefaultStorageMessages is how many messages D measures.
	DefaultStorageMessages = 50000
	// DefaultScalePartitions is the wide side of S.
	DefaultScalePartitions = 10000
	// DefaultReapRows is how many messages and dedup keys R clears.
	DefaultReapRows = 200000
	// DefaultReapLeases is how many expired leases R expires.
	DefaultReapLeases = 50000
)

// Payload is the message every workload pushes.
const Payload = `{"hello":"world","n":12345}`

// Config configures a run.
type Config struct {
	// URL is a migrated Postgres database the run may fill and empty.
	URL string
	// Duration of each timed workload. Default DefaultDuration.
	Duration time.Duration
	// Clients per workload. Default DefaultClients.
	Clients int
	// Partitions for random-partition workloads. Default DefaultPartitions.
	Partitions int
	// ResultsDir receives results.json and results.svg. Default DefaultResultsDir.
	ResultsDir string
	// Backlog is the backlog of C10, C100 and F5. Default DefaultBacklog.
	Backlog int
	// StorageMessages is the message count of D. Default DefaultStorageMessages.
	StorageMessages int
	// ScalePartitions is the wide side of S. Default DefaultScalePartitions.
	ScalePartitions int
	// ReapRows is the messages, and the dedup keys, R clears. Default
	// DefaultReapRows.
	ReapRows int
	// ReapLeases is the expired leases R expires. Default DefaultReapLeases.
	ReapLeases int
	// Waiters is how many consumers W keeps long-polling. Default DefaultWaiters.
	Waiters int
	// WaitWindow is how long W measures their cost. Default DefaultWaitWindow.
	WaitWindow time.Duration
	// WaitSamples is W's number of push-to-delivery samples of each kind.
	// Default DefaultWaitSamples.
	WaitSamples int
	// LambdaEmulator adds SUB's push-to-invoke through the dispatch
	// function under the Lambda emulator, both built at run time with the
	// go toolchain (queen bench turns it on).
	LambdaEmulator bool
	// GrowthMessages is the log G stores. Default DefaultGrowthMessages.
	GrowthMessages int
	// GrowthPartitions is the partitions it spreads over. Default
	// DefaultGrowthPartitions.
	GrowthPartitions int
	// GrowthDLQShare is the share of it the groups dead-letter. Default
	// DefaultGrowthDLQShare.
	GrowthDLQShare float64
	// GrowthSamples is the most samples of each of G's calls per database.
	// Default DefaultGrowthSamples.
	GrowthSamples int
	// GrowthRounds is how often G times each reaper kind per database.
	// Default DefaultGrowthRounds.
	GrowthRounds int
	// GrowthBudget is the time the samples of one of G's calls may take.
	// Default DefaultGrowthBudget.
	GrowthBudget time.Duration
	// Database makes a fresh, migrated database for G (what names it) and
	// returns its URL and what drops it. Without it G is skipped.
	Database func(ctx context.Context, what string) (url string, drop func(), err error)
	// Only, when set, runs just the workloads named (e.g. "P1", "raw-1").
	Only []string
	// Out receives the progress table. Default os.Stdout.
	Out io.Writer
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Clients <= 0 {
		c.Clients = DefaultClients
	}
	if c.Partitions <= 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Backlog <= 0 {
		c.Backlog = DefaultBacklog
	}
	if c.StorageMessages <= 0 {
		c.StorageMessages = DefaultStorageMessages
	}
	if c.ScalePartitions <= 0 {
		c.ScalePartitions = DefaultScalePartitions
	}
	if c.ReapRows <= 0 {
		c.ReapRows = DefaultReapRows
	}
	if c.ReapLeases <= 0 {
		c.ReapLeases = DefaultReapLeases
	}
	if c.Waiters <= 0 {
		c.Waiters = DefaultWaiters
	}
	if c.WaitWindow <= 0 {
		c.WaitWindow = DefaultWaitWindow
	}
	if c.WaitSamples <= 0 {
		c.WaitSamples = DefaultWaitSamples
	}
	if c.GrowthMessages <= 0 {
		c.GrowthMessages = DefaultGrowthMessages
	}
	if c.GrowthPartitions <= 0 {
		c.GrowthPartitions = DefaultGrowthPartitions
	}
	if c.GrowthDLQShare <= 0 {
		c.GrowthDLQShare = DefaultGrowthDLQShare
	}
	if c.GrowthSamples <= 0 {
		c.GrowthSamples = DefaultGrowthSamples
	}
	if c.GrowthRounds <= 0 {
		c.GrowthRounds = DefaultGrowthRounds
	}
	if c.GrowthBudget <= 0 {
		c.GrowthBudget = DefaultGrowthBudget
	}
	if c.ResultsDir == "" {
		c.ResultsDir = DefaultResultsDir
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	return c
}

// Result is one measured workload.
type Result struct {
	Name    string  `json:"name"`
	Via     string  `json:"via"` // "core", "http" or "sql"
	What    string  `json:"what"`
	Ops     int64   `json:"ops"`
	Rows    int64   `json:"rows"`
	Seconds float64 `json:"seconds"`
	// Rate is rows (messages) per second.
	Rate  float64 `json:"rate"`
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	Value float64 `json:"value,omitempty"` // D: bytes per message; S, G: ratio
	Unit  string  `json:"unit"`
	// Stored and Empty are G's figure with the log stored and with an
	// empty one (What names the unit); Value is their ratio.
	Stored float64 `json:"stored,omitempty"`
	Empty  float64 `json:"empty,omitempty"`
	// Error says why a figure could not be measured as asked; it is judged
	// a miss.
	Error  string `json:"error,omitempty"`
	Target string `json:"target,omitempty"`
	Pass   *bool  `json:"pass,omitempty"`
}

// Report is a whole run.
type Report struct {
	StartedAt  time.Time `json:"startedAt"`
	Clients    int       `json:"clients"`
	Partitions int       `json:"partitions"`
	DurationS  float64   `json:"durationSeconds"`
	Postgres   string    `json:"postgres"`
	Results    []Result  `json:"results"`
	// Growth describes G's stored log, when G ran.
	Growth *Growth `json:"growth,omitempty"`
}

type runner struct {
	cfg    Config
	pool   *pgxpool.Pool
	store  *pgstore.Store
	http   *httpTarget
	report Report
}

// Run runs the benchmark and writes its results.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.WithDefaults()
	pcfg, err := pgstore.PoolConfig(cfg.URL)
	if err != nil {
		return Report{}, err
	}
	pcfg.MaxConns = int32(cfg.Clients*5 + 4)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return Report{}, err
	}
	defer pool.Close()
	r := &runner{cfg: cfg, pool: pool, store: pgstore.New(pool, config.Config{}.WithDefaults().Store(nil, nil))}
	r.report = Report{StartedAt: time.Now().UTC(), Clients: cfg.Clients, Partitions: cfg.Partitions, DurationS: cfg.Duration.Seconds()}
	_ = pool.QueryRow(ctx, "SHOW server_version").Scan(&r.report.Postgres)
	if r.http, err = startHTTP(r.store, cfg.Clients*5); err != nil {
		return Report{}, err
	}
	defer r.http.close()

	fmt.Fprintf(cfg.Out, "Queen Serverless benchmark: %d clients, %d partitions, %s per workload, PostgreSQL %s\n\n",
		cfg.Clients, cfg.Partitions, cfg.Duration, r.report.Postgres)
	fmt.Fprintf(cfg.Out, "%-10s %-5s %-46s %12s %9s %9s  %s\n", "workload", "via", "what", "rate", "p50 ms", "p99 ms", "target")
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"D", r.storage},
		{"raw-1", r.rawSingle},
		{"raw-100", r.rawMulti},
		{"log-1", func(ctx context.Context) error { return r.logAppend(ctx, "log-1", 1, false) }},
		{"log-100", func(ctx context.Context) error { return r.logAppend(ctx, "log-100", 100, false) }},
		{"log-100-1", func(ctx context.Context) error { return r.logAppend(ctx, "log-100-1", 100, true) }},
		{"P1", func(ctx context.Context) error { return r.push(ctx, "P1", 1, false) }},
		{"P10", func(ctx context.Context) error { return r.push(ctx, "P10", 10, false) }},
		{"P100", func(ctx context.Context) error { return r.push(ctx, "P100", 100, false) }},
		{"P100-1", func(ctx context.Context) error { return r.push(ctx, "P100-1", 100, true) }},
		{"C10", func(ctx context.Context) error { return r.consume(ctx, "C10", 10) }},
		{"C100", func(ctx context.Context) error { return r.consume(ctx, "C100", 100) }},
		{"F5", r.fanout},
		{"S", r.scale},
		{"W", r.wait},
		{"SUB", r.subscribe},
		{"R", r.reap},
		{"G", r.growth},
	}
	for _, s := range steps {
		if !r.selected(s.name) {
			continue
		}
		if err := s.fn(ctx); err != nil {
			return r.report, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	r.judge()
	if err := r.write(); err != nil {
		return r.report, err
	}
	return r.report, nil
}

// selected reports whether Config.Only asks for workload name (all when
// it is empty).
func (r *runner) selected(name string) bool {
	if len(r.cfg.Only) == 0 {
		return true
	}
	for _, o := range r.cfg.Only {
		if o == name {
			return true
		}
	}
	return false
}

// add records a result and prints its row of the table.
func (r *runner) add(res Result) {
	r.report.Results = append(r.report.Results, res)
	rate := fmt.Sprintf("%.0f %s", res.Rate, res.Unit)
	if res.Name == "D" || res.Name == "S" || res.Unit == "×" {
		rate = fmt.Sprintf("%.2f %s", res.Value, res.Unit)
	}
	if res.Name == "W" && res.Unit != "ms p50" || res.Unit == "stmt/s" {
		rate = fmt.Sprintf("%.1f %s", res.Rate, res.Unit)
	}
	if res.Unit == "ms p50" {
		rate = fmt.Sprintf("%.1f %s", res.Rate, res.Unit)
	}
	target := res.Target
	if res.Name == "G" && res.Unit == "×" {
		target = fmt.Sprintf("stored %.3f / empty %.3f", res.Stored, res.Empty)
		if res.Error != "" {
			target += "; " + res.Error
		}
	}
	fmt.Fprintf(r.cfg.Out, "%-10s %-5s %-46s %12s %9.2f %9.2f  %s\n", res.Name, res.Via, res.What, rate, res.P50Ms, res.P99Ms, target)
}

// write writes the report as results.json and its chart as results.svg
// in the results folder.
func (r *runner) write() error {
	if err := os.MkdirAll(r.cfg.ResultsDir, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(r.report, "", "  ")
	if err := os.WriteFile(filepath.Join(r.cfg.ResultsDir, "results.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.cfg.ResultsDir, "results.svg"), []byte(chart(r.report)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(r.cfg.Out, "\nwrote %s and %s\n", filepath.Join(r.cfg.ResultsDir, "results.json"), filepath.Join(r.cfg.ResultsDir, "results.svg"))
	return nil
}
