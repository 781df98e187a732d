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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// the steps of migrators started at the same time.
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
	// Retries counts the steps tried again after a lock wait timed out.
	Retries int
	// Chunks counts the transactions of batched data migrations.
	Chunks int
}

// ErrMigrationChanged: a migration already applied to the database differs
// from the one this release carries. Applied migrations never change; a
// change is a new numbered migration.
var ErrMigrationChanged = errors.New("an applied migration was changed")

// MigrateOptions bound how Migrate waits for the locks its statements
// take. The zero value is the defaults.
type MigrateOptions struct {
	// LockTimeout is the longest a schema change waits for a lock (SET
	// LOCAL lock_timeout). While it waits, the statements that need the same
	// table queue behind it; past it, the step rolls back, lets them through
	// and tries again. Default DefaultMigrateLockTimeout.
	LockTimeout time.Duration
	// Attempts is how often a step is tried before Migrate gives up.
	// Default DefaultMigrateAttempts.
	Attempts int
	// Backoff is the wait before the second attempt; it doubles after each
	// one, up to 10 s. Default DefaultMigrateBackoff.
	Backoff time.Duration
	// OnRetry, when set, hears of each step that timed out waiting for a
	// lock, before the wait (the mains log it).
	OnRetry func(step string, attempt int, err error)
}

// Defaults of MigrateOptions: with them a step waits at most about five
// minutes in all, inside the migrate function's fifteen.
const (
	DefaultMigrateLockTimeout = 3 * time.Second
	DefaultMigrateAttempts    = 30
	DefaultMigrateBackoff     = 500 * time.Millisecond
)

func (o MigrateOptions) withDefaults() MigrateOptions {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultMigrateLockTimeout
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultMigrateAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultMigrateBackoff
	}
	return o
}

// batchedMarker, the first line of a migration, makes it a batched data
// migration: its text does a bounded chunk of the work and is run again,
// each run a transaction of its own, until a run's last statement affects
// no row; only then is the migration recorded. Its text must therefore be
// safe to run again (it selects what is left to do), which also makes it
// resumable: a migrate cut off half-way goes on where it stopped.
const batchedMarker = "-- queen:batched"

// lockNotAvailable is the SQLSTATE of a lock wait past lock_timeout.
const lockNotAvailable = "55P03"

// Migrate brings the schema up to date: it applies the numbered
// migrations not yet recorded, each in a short transaction of its own
// (batched data migrations in many), then re-creates the routines, in a
// transaction of their own, when their checksum changed. Every step sets
// lock_timeout and, when it times out waiting for a lock (a long
// transaction holds the table), rolls back, waits and tries again, so that
// a schema change never holds the queue's traffic behind it for longer than
// the timeout. It is idempotent and safe when several processes start at
// once (each step takes a transaction-level advisory lock and reads what is
// applied under it), and uses no session state, so it works behind a
// transaction-pooling proxy.
//
// It first checks the migrations already applied against this release's:
// one whose text changed fails the whole run with ErrMigrationChanged,
// before anything is applied. When the database has migrations this
// release lacks (a rollback to an older release), nothing is applied and
// the routines are not replaced: the newer routines keep serving the older
// release's calls, which they accept by the compatibility rule of
// sql/routines/, while older routines might not match the newer schema.
func Migrate(ctx context.Context, conn *pgx.Conn) (MigrateResult, error) {
	return MigrateWith(ctx, conn, MigrateOptions{})
}

// MigrateWith is Migrate with options.
func MigrateWith(ctx context.Context, conn *pgx.Conn, opt MigrateOptions) (MigrateResult, error) {
	return migrate(ctx, conn, Migrations(), routinesSQL, opt.withDefaults())
}

func migrate(ctx context.Context, conn *pgx.Conn, migrations []Migration, routines string, opt MigrateOptions) (MigrateResult, error) {
	var res MigrateResult
	m := &migrator{conn: conn, opt: opt, res: &res}
	var applied map[string]string
	err := m.step(ctx, "bookkeeping", func(tx pgx.Tx) error {
		if err := execScript(ctx, tx, `
			CREATE SCHEMA IF NOT EXISTS queen;
			CREATE TABLE IF NOT EXISTS queen.schema_migrations (
				version    text PRIMARY KEY,
				checksum   text NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now()
			);`); err != nil {
			return fmt.Errorf("bookkeeping table: %w", err)
		}
		var err error
		applied, err = readApplied(ctx, tx)
		return err
	})
	if err != nil {
		return res, err
	}

	known := map[string]bool{"routines": true}
	var changed []string
	for _, mg := range migrations {
		known[mg.Version] = true
		if sum, ok := applied[mg.Version]; ok && sum != checksum(mg.SQL) {
			changed = append(changed, mg.Version)
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
	if len(res.Ahead) > 0 {
		return res, nil
	}

	for _, mg := range migrations {
		if _, ok := applied[mg.Version]; ok {
			continue
		}
		if err := m.apply(ctx, mg); err != nil {
			return res, err
		}
	}

	sum := checksum(routines)
	if applied["routines"] != sum {
		err := m.step(ctx, "routines", func(tx pgx.Tx) error {
			now, err := readApplied(ctx, tx)
			if err != nil || now["routines"] == sum {
				return err // another migrator replaced them meanwhile
			}
			if err := execScript(ctx, tx, routines); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO queen.schema_migrations (version, checksum) VALUES ('routines', $1)
				ON CONFLICT (version) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()`, sum)
			res.RoutinesReplaced = err == nil
			return err
		})
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// migrator runs the steps of one Migrate.
type migrator struct {
	conn *pgx.Conn
	opt  MigrateOptions
	res  *MigrateResult
}

// apply applies one migration and records it: in one transaction, or a
// batched one chunk by chunk and then recorded.
func (m *migrator) apply(ctx context.Context, mg Migration) error {
	record := func(tx pgx.Tx) (bool, error) {
		now, err := readApplied(ctx, tx)
		if _, ok := now[mg.Version]; ok || err != nil {
			return false, err // another migrator applied it meanwhile
		}
		_, err = tx.Exec(ctx, "INSERT INTO queen.schema_migrations (version, checksum) VALUES ($1, $2)",
			mg.Version, checksum(mg.SQL))
		return err == nil, err
	}
	if strings.HasPrefix(mg.SQL, batchedMarker) {
		for chunk := 1; ; chunk++ {
			var rows int64
			err := m.step(ctx, fmt.Sprintf("%s (chunk %d)", mg.Version, chunk), func(tx pgx.Tx) error {
				results, err := tx.Conn().PgConn().Exec(ctx, mg.SQL).ReadAll()
				if err == nil && len(results) > 0 {
					rows = results[len(results)-1].CommandTag.RowsAffected()
				}
				return err
			})
			if err != nil {
				return err
			}
			if rows == 0 {
				break
			}
			m.res.Chunks++
		}
		return m.step(ctx, mg.Version, func(tx pgx.Tx) error {
			done, err := record(tx)
			if done {
				m.res.Applied = append(m.res.Applied, mg.Version)
			}
			return err
		})
	}
	return m.step(ctx, mg.Version, func(tx pgx.Tx) error {
		now, err := readApplied(ctx, tx)
		if _, ok := now[mg.Version]; ok || err != nil {
			return err
		}
		if err := execScript(ctx, tx, mg.SQL); err != nil {
			return err
		}
		done, err := record(tx)
		if done {
			m.res.Applied = append(m.res.Applied, mg.Version)
		}
		return err
	})
}

// step runs fn in a transaction of its own, under the migrators' advisory
// lock and with lock_timeout, and tries again after a growing wait when a
// lock wait timed out. Other errors end the run.
func (m *migrator) step(ctx context.Context, name string, fn func(pgx.Tx) error) error {
	wait := m.opt.Backoff
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, m.conn, func(tx pgx.Tx) error {
			// SET LOCAL ends with the transaction: no session state.
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", m.opt.LockTimeout.Milliseconds())); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::bigint)", int64(migrateLockKey)); err != nil {
				return err
			}
			return fn(tx)
		})
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != lockNotAvailable {
			if err != nil {
				return fmt.Errorf("migrate: %s: %w", name, err)
			}
			return nil
		}
		if attempt >= m.opt.Attempts {
			return fmt.Errorf("migrate: %s: still waiting for a lock after %d attempts: %w", name, attempt, err)
		}
		m.res.Retries++
		if m.opt.OnRetry != nil {
			m.opt.OnRetry(name, attempt, err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("migrate: %s: %w", name, ctx.Err())
		}
		wait = min(2*wait, 10*time.Second)
	}
}

func readApplied(ctx context.Context, tx pgx.Tx) (map[string]string, error) {
	rows, err := tx.Query(ctx, "SELECT version, checksum FROM queen.schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read applied: %w", err)
	}
	applied := map[string]string{}
	for rows.Next() {
		var v, c string
		if err := rows.Scan(&v, &c); err != nil {
			return nil, err
		}
		applied[v] = c
	}
	return applied, rows.Err()
}

// MigrateURL connects to url and runs Migrate.
func MigrateURL(ctx context.Context, url string) (MigrateResult, error) {
	return MigrateURLWith(ctx, url, MigrateOptions{})
}

// MigrateURLWith connects to url and runs MigrateWith.
func MigrateURLWith(ctx context.Context, url string, opt MigrateOptions) (MigrateResult, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(ctx)
	return MigrateWith(ctx, conn, opt)
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
