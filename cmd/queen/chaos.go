package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/queen-serverless/queen/internal/chaos"
)

// errChaosFailed is returned when a chaos run broke a promise; the report
// says which.
var errChaosFailed = errors.New("chaos: the run broke a promise (see the report above)")

// chaosCmd runs the chaos harness against this binary's own serve, on a
// throwaway durable cluster behind PgBouncer.
func chaosCmd(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(out)
	d := fs.Duration("duration", chaos.DefaultDuration, "how long to produce and inject faults (then drain and check); also $CHAOS_DURATION")
	seed := fs.Uint64("seed", 0, "seed of every random choice (0: from the clock); also $CHAOS_SEED")
	short := fs.Bool("short", false, "one postmaster kill and one PgBouncer restart instead of random faults for -duration")
	if v := getenv("CHAOS_DURATION"); v != "" {
		if err := fs.Set("duration", v); err != nil {
			return err
		}
	}
	if v := getenv("CHAOS_SEED"); v != "" {
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return errors.New("CHAOS_SEED must be an unsigned integer")
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
	if *d < time.Second {
		return fmt.Errorf("chaos: -duration must be at least 1s, got %v", *d)
	}
	rep, err := chaos.Run(ctx, chaos.Config{Serve: serve, Out: out, Seed: *seed, Short: *short, Duration: *d})
	if err != nil {
		return err
	}
	if !rep.OK() {
		return errChaosFailed
	}
	return nil
}
