package pgstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// The routines, one file per operation (sql/routines/NN_name.sql),
// applied as one script in file-name order (a later file may call what an
// earlier one defines).
//
//go:embed sql/routines/*.sql
var routinesFS embed.FS

var routinesSQL = func() string {
	entries, err := fs.ReadDir(routinesFS, "sql/routines")
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	for _, e := range entries { // ReadDir sorts by name
		text, err := routinesFS.ReadFile("sql/routines/" + e.Name())
		if err != nil {
			panic(err)
		}
		b.Write(text)
	}
	return b.String()
}()

// migrateLockKey is the transaction-level advisory lock that serializes
// migrators started at the same time.
const migrateLockKey = 0x5155454e // "QUEN"

// Migration is one numbered schema change.
type Migration struct {
	Version string
	SQL     string
}

// Migrations returns the embedded migrations in order.
func Migrations() []Migration {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		panic(err)
	}
	var out []Migration
	for _, e := range entries {
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			panic(err)
		}
		out = append(out, Migration{Version: strings.TrimSuffix(e.Name(), ".sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// MigrateResult says what Migrate did.
type MigrateResult struct {
	Applied          []string
	RoutinesReplaced bool
	// Ahead lists migrations the database has and this release does not:
	// a newer release migrated it (this is a rollback). The routines were
	// left as they are (see Migrate).
	Ahead []string
}

// ErrMigrationChanged: a migration already applied to the database differs
// from the one this release carries. Applied migrations never change; a
// change is a new numbered migration.
var ErrMigrationChanged = errors.New("an applied migration was changed")

// Migrate brings the schema up to date in one transaction: it applies the
// numbered migrations not yet recorded, then re-creates the routines when
// their checksum changed. It is idempotent and safe when several processes
// start at once (a transaction-level advisory lock serializes them), and it
// uses no session state, so it works behind a transaction-pooling proxy.
//
// It first checks the migrations already applied against this release's:
// one whose text changed fails the whole run with ErrMigrationChanged,
// before anything is applied. When the database has migrations this
// release lacks (a rollback to an older release), nothing is applied and
// the routines are not replaced: the newer routines keep serving the older
// release's calls, which they accept by the compatibility rule of
// sql/routines/, while older routines might not match the newer schema.
func Migrate(ctx context.Context, conn *pgx.Conn) (MigrateResult, error) {
	var res MigrateResult
	tx, err := conn.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit

	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::bigint)", int64(migrateLockKey)); err != nil {
		return res, fmt.Errorf("migrate: lock: %w", err)
	}
	if err := execScript(ctx, tx, `
		CREATE SCHEMA IF NOT EXISTS queen;
		CREATE TABLE IF NOT EXISTS queen.schema_migrations (
			version    text PRIMARY KEY,
			checksum   text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		);`); err != nil {
		return res, fmt.Errorf("migrate: bookkeeping table: %w", err)
	}
	applied := map[string]string{}
	rows, err := tx.Query(ctx, "SELECT version, checksum FROM queen.schema_migrations")
	if err != nil {
		return res, fmt.Errorf("migrate: read applied: %w", err)
	}
	for rows.Next() {
		var v, c string
		if err := rows.Scan(&v, &c); err != nil {
			return res, err
		}
		applied[v] = c
	}
	if err := rows.Err(); err != nil {
		return res, err
	}

	known := map[string]bool{"routines": true}
	var changed []string
	for _, m := range Migrations() {
		known[m.Version] = true
		if sum, ok := applied[m.Version]; ok && sum != checksum(m.SQL) {
			changed = append(changed, m.Version)
		}
	}
	if len(changed) > 0 {
		return res, fmt.Errorf("migrate: %w: %s applied with other text than this release carries; "+
			"applied migrations never change (add a new one); a local development database can be "+
			"dropped and made anew", ErrMigrationChanged, strings.Join(changed, ", "))
	}
	for v := range applied {
		if !known[v] {
			res.Ahead = append(res.Ahead, v)
		}
	}
	sort.Strings(res.Ahead)

	for _, m := range Migrations() {
		if _, ok := applied[m.Version]; ok || len(res.Ahead) > 0 {
			continue
		}
		if err := execScript(ctx, tx, m.SQL); err != nil {
			return res, fmt.Errorf("migrate: %s: %w", m.Version, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO queen.schema_migrations (version, checksum) VALUES ($1, $2)",
			m.Version, checksum(m.SQL)); err != nil {
			return res, fmt.Errorf("migrate: record %s: %w", m.Version, err)
		}
		res.Applied = append(res.Applied, m.Version)
	}

	sum := checksum(routinesSQL)
	if applied["routines"] != sum && len(res.Ahead) == 0 {
		if err := execScript(ctx, tx, routinesSQL); err != nil {
			return res, fmt.Errorf("migrate: routines: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO queen.schema_migrations (version, checksum) VALUES ('routines', $1)
			ON CONFLICT (version) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()`, sum); err != nil {
			return res, fmt.Errorf("migrate: record routines: %w", err)
		}
		res.RoutinesReplaced = true
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("migrate: commit: %w", err)
	}
	return res, nil
}

// MigrateURL connects to url and runs Migrate.
func MigrateURL(ctx context.Context, url string) (MigrateResult, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(ctx)
	return Migrate(ctx, conn)
}

// execScript runs a multi-statement script with the simple protocol.
func execScript(ctx context.Context, tx pgx.Tx, script string) error {
	_, err := tx.Conn().PgConn().Exec(ctx, script).ReadAll()
	return err
}

func checksum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
