package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/internal/pgcluster"
)

// scratchDatabase gives a workload (bench, soak) a migrated database of its
// own: on admin's server when admin (DATABASE_URL) is set, else on a
// throwaway durable cluster (fsync on) started for it. It returns the
// database's URL and a cleanup that drops the database and stops the
// cluster; what names the workload in messages and in the database's name.
func scratchDatabase(ctx context.Context, admin, what string, out io.Writer) (string, func(), error) {
	var stops []func()
	cleanup := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if admin == "" {
		fmt.Fprintf(out, "starting a throwaway PostgreSQL cluster (durable: fsync on) for the %s…\n", what)
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{Durable: true})
		if err != nil {
			return "", cleanup, err
		}
		stops = append(stops, func() { _ = cluster.Stop() }) // best effort on the way out
		admin = cluster.URL("postgres")
	}
	name := "queen_" + what + "_" + randomHex(6)
	dbURL, err := withDatabase(admin, name)
	if err != nil {
		return "", cleanup, fmt.Errorf("%s: %w", what, err)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", cleanup, fmt.Errorf("%s: connect: %w", what, err)
	}
	stops = append(stops, func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", cleanup, fmt.Errorf("%s: create database %s (the %s needs a database of its own): %w", what, name, what, err)
	}
	stops = append(stops, func() {
		dropCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = conn.Exec(dropCtx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	if _, err := pgstore.MigrateURL(ctx, dbURL); err != nil {
		return "", cleanup, err
	}
	return dbURL, cleanup, nil
}

// withDatabase returns the URL of database name on the server of url.
func withDatabase(raw, name string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("DATABASE_URL must be a postgres:// URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
