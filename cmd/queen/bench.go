package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/internal/bench"
	"github.com/queen-serverless/queen/internal/pgcluster"
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
	only := fs.String("only", "", "comma-separated workloads to run (D, raw-1, raw-100, log-1, log-100, log-100-1, P1, P10, P100, P100-1, C10, C100, F5, S, W, R)")
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
	cfg := bench.Config{Duration: *d, Clients: *clients, Partitions: *partitions, ResultsDir: *results, Out: out}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}

	admin := getenv("DATABASE_URL")
	if admin == "" {
		fmt.Fprintln(out, "starting a throwaway PostgreSQL cluster (durable: fsync on) for the benchmark…")
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{Durable: true})
		if err != nil {
			return err
		}
		defer cluster.Stop() //nolint:errcheck // best effort on the way out
		admin = cluster.URL("postgres")
	}
	name := "queen_bench_" + randomHex(6)
	dbURL, err := withDatabase(admin, name)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("bench: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("bench: create database %s (the benchmark needs a database of its own): %w", name, err)
	}
	defer func() {
		dropCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = conn.Exec(dropCtx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}()
	if _, err := pgstore.MigrateURL(ctx, dbURL); err != nil {
		return err
	}
	cfg.URL = dbURL
	_, err = bench.Run(ctx, cfg)
	return err
}

// withDatabase returns the URL of database name on the server of url.
func withDatabase(raw, name string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("bench: DATABASE_URL must be a postgres:// URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
