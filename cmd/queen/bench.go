package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/queen-serverless/queen/internal/bench"
)

// benchCmd runs the benchmark in a database of its own: on $DATABASE_URL's
// server when set (created and dropped), else on a throwaway durable
// cluster, so it never writes to a database the user named.
func benchCmd(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	d := fs.Duration("duration", bench.DefaultDuration, "duration of each timed workload")
	clients := fs.Int("clients", bench.DefaultClients, "concurrent clients per workload")
	partitions := fs.Int("partitions", bench.DefaultPartitions, "partitions of random-partition workloads")
	results := fs.String("out", bench.DefaultResultsDir, "folder for results.json and results.svg")
	only := fs.String("only", "", "comma-separated workloads to run (D, raw-1, raw-100, log-1, log-100, log-100-1, P1, P10, P100, P100-1, C10, C100, F5, S, W, SUB, R, G)")
	gMessages := fs.Int("g-messages", bench.DefaultGrowthMessages, "G: messages of the stored log (SPEC's size: 10000000 or more)")
	gPartitions := fs.Int("g-partitions", bench.DefaultGrowthPartitions, "G: partitions the stored log spreads over")
	gDLQ := fs.Float64("g-dlq", bench.DefaultGrowthDLQShare, "G: share of the stored log the groups dead-letter")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (the clients and the in-process HTTP server) to this file; read it with go tool pprof")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: -cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: -cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	cfg := bench.Config{Duration: *d, Clients: *clients, Partitions: *partitions, ResultsDir: *results, Out: out,
		LambdaEmulator: true, GrowthMessages: *gMessages, GrowthPartitions: *gPartitions, GrowthDLQShare: *gDLQ}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}

	dbURL, cleanup, err := scratchDatabase(ctx, getenv("DATABASE_URL"), "bench", out)
	defer cleanup()
	if err != nil {
		return err
	}
	cfg.URL = dbURL
	// G's databases: more of the same, on the same server.
	cfg.Database = func(ctx context.Context, what string) (string, func(), error) {
		return scratchDatabase(ctx, dbURL, what, out)
	}
	_, err = bench.Run(ctx, cfg)
	return err
}
