// Command queen is the operator's binary: the local server (every route of
// the HTTP API and the reaper, on DATABASE_URL or an embedded PostgreSQL)
// and schema migrations.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `queen — Queen Serverless, a partitioned message queue on PostgreSQL

Usage:
  queen serve       run the HTTP API (every route, the web console at
                    /console/) and the reaper on
                    $QUEEN_PORT (default 6632); without $DATABASE_URL on an
                    embedded PostgreSQL with its data in .queen/pgdata (run
                    as root where user postgres cannot reach it, a link to
                    /var/lib/queen-serverless/pgdata-<hash>)
                    (flags: -host, -data-dir, -key-file, -no-migrate)
  queen migrate     apply the schema migrations to $DATABASE_URL
  queen bench       run the benchmark (docs/benchmarks.md) in a database of its own (on
                    $DATABASE_URL's server, else a throwaway cluster) and write
                    bench-results/results.json and results.svg
                    (flags: -duration, -clients, -partitions, -only, -out)
  queen console     the web console for a deployed API: serves it on
                    localhost:6633 and forwards its calls to -api, signed with
                    SigV4 (AWS config chain) or with a bearer token (-token,
                    $QUEEN_TOKEN); queen serve has it at /console/
  queen chaos       run producers and consumers through queen serve and PgBouncer
                    (transaction mode) on a throwaway durable PostgreSQL while
                    killing the postmaster, restarting PgBouncer and stalling
                    the database, then check that nothing acknowledged was lost
                    (flags: -duration, -seed, -short; make chaos)
  queen soak        run steady mixed traffic through the HTTP API (a share of the
                    measured P10 push rate, three consumer groups, short
                    retention, a long read transaction now and then) on a
                    throwaway durable PostgreSQL, record sizes, dead tuples, the
                    reaper's backlog and latencies, and check that sizes
                    plateau, late p99 stays near early p99, the reaper catches
                    up and nothing acknowledged is lost; writes
                    soak-results/results.json and results.svg
                    (flags: -duration, -seed, -fraction, -rate, -short, -out;
                    make soak)
  queen target      an example subscription target (docs/subscriptions.md) on
                    -listen (default 127.0.0.1:8080): prints each event and
                    fails the records whose payload has "fail": true
  queen token       print an HS256 token signed with $QUEEN_JWT_SECRET, to try
                    the server's authentication (flags: -sub, -roles, -ttl)
  queen help        show this help
  queen <command> -h
                    the command's flags

Configuration (environment): DATABASE_URL, QUEEN_PORT, QUEEN_MAX_WAIT_MS,
QUEEN_MAX_BODY_BYTES, QUEEN_LOG_LEVEL, QUEEN_REAPER_INTERVAL, QUEEN_JWT_SECRET,
QUEEN_JWT_JWKS_URL, QUEEN_JWT_ISSUER, QUEEN_JWT_AUDIENCE.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "queen:", err)
		os.Exit(1)
	}
}

// run runs the command args name. A command's -h prints its usage and is
// not an error.
func run(ctx context.Context, args []string) error {
	if err := command(ctx, args); err != nil && !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil
}

func command(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Print(usage)
		return nil
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], os.Getenv, os.Stdout, os.Stderr)
	case "migrate":
		return migrate(ctx, args[1:])
	case "bench":
		return benchCmd(ctx, args[1:], os.Getenv, os.Stdout)
	case "console":
		return consoleCmd(ctx, args[1:], os.Getenv, loadAWSConfig, os.Stdout, os.Stderr)
	case "chaos":
		return chaosCmd(ctx, args[1:], os.Getenv, os.Stdout)
	case "soak":
		return soakCmd(ctx, args[1:], os.Getenv, os.Stdout)
	case "target":
		return targetCmd(ctx, args[1:], os.Stdout)
	case "token":
		return tokenCmd(args[1:], os.Getenv, os.Stdout, os.Stderr)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q (see queen help)", args[0])
}
