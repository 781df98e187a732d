package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/queen-serverless/queen/internal/soak"
)

// errSoakFailed is returned when a soak run failed a check; the report
// says which.
var errSoakFailed = errors.New("soak: the run failed a check (see the report above)")

// soakCmd runs the soak in a database of its own, as the benchmark does:
// on $DATABASE_URL's server when set (created and dropped), else on a
// throwaway durable cluster.
func soakCmd(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(out)
	d := fs.Duration("duration", 0, fmt.Sprintf("the steady phase (default %v; the short form: %v); also $SOAK_DURATION", soak.DefaultDuration, soak.ShortDuration))
	seed := fs.Uint64("seed", 0, "seed of every random choice (0: from the clock); also $SOAK_SEED")
	fraction := fs.Float64("fraction", 0, fmt.Sprintf("share of the measured P10 rate pushed steadily (default %v; the short form caps it at %v msg/s)", soak.DefaultFraction, soak.ShortMaxRate))
	rate := fs.Float64("rate", 0, "steady push rate in messages/s instead of a share of the measured P10 rate")
	backlog := fs.Int("backlog", 0, fmt.Sprintf("messages stored before the traffic, not due during the run (0: the default, %d; the short form: %d; -1: none); also $SOAK_BACKLOG",
		soak.DefaultBacklog, soak.ShortBacklog))
	backlogParts := fs.Int("backlog-partitions", 0, fmt.Sprintf("partitions of the backlog (0: the default, %d; the short form: %d)",
		soak.DefaultBacklogPartitions, soak.ShortBacklogPartitions))
	short := fs.Bool("short", false, "the short form make test runs: about two minutes, lower load, one long transaction; sizes and latencies reported, not enforced")
	results := fs.String("out", soak.DefaultResultsDir, "folder for results.json, results.svg and the server's log")
	if v := getenv("SOAK_DURATION"); v != "" {
		if err := fs.Set("duration", v); err != nil {
			return fmt.Errorf("SOAK_DURATION: %w", err)
		}
	}
	if v := getenv("SOAK_BACKLOG"); v != "" {
		if err := fs.Set("backlog", v); err != nil {
			return fmt.Errorf("SOAK_BACKLOG: %w", err)
		}
	}
	if v := getenv("SOAK_SEED"); v != "" {
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return errors.New("SOAK_SEED must be an unsigned integer")
		}
		if err := fs.Set("seed", v); err != nil {
			return err
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	cfg := soak.Config{Out: out, Seed: *seed, Short: *short, Duration: *d, Fraction: *fraction, Rate: *rate, ResultsDir: *results,
		Backlog: *backlog, BacklogPartitions: *backlogParts}
	if err := os.MkdirAll(*results, 0o755); err != nil {
		return err
	}
	serverLog, err := os.Create(filepath.Join(*results, "server.log"))
	if err != nil {
		return err
	}
	defer serverLog.Close()
	cfg.ServerLog = serverLog

	dbURL, cleanup, err := scratchDatabase(ctx, getenv("DATABASE_URL"), "soak", out)
	defer cleanup()
	if err != nil {
		return err
	}
	cfg.URL = dbURL
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if !rep.OK() {
		return errSoakFailed
	}
	return nil
}
