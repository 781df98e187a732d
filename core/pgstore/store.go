// Package pgstore is the Postgres implementation of queen.Store. It owns the
// SQL (embedded .sql files, one per operation), the migrations and the
// translation of driver errors into domain errors.
//
// Every operation is one statement — a call of a PL/pgSQL routine or one
// query — so each is one round trip and one transaction, and none uses
// session state: no SET, no named prepared statements, no session advisory
// locks, no LISTEN. It runs unchanged behind RDS Proxy or PgBouncer in
// transaction mode (use pgx.QueryExecModeExec, see PoolConfig).
package pgstore

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queen-serverless/queen/core/queen"
)

//go:embed sql/*.sql
var sqlFS embed.FS

func query(name string) string {
	b, err := sqlFS.ReadFile("sql/" + name + ".sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// DB is what the store needs of a connection pool; *pgxpool.Pool has it.
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Config configures a Store.
type Config struct {
	// Clock, when set, supplies "now" to every operation (tests control time
	// with it). When nil the database clock is used, so every function
	// instance shares one clock.
	Clock func() time.Time
	// Logger receives retries of transient errors. Default: slog.Default().
	Logger *slog.Logger
	// DeadlockRetries is how often a statement aborted by a deadlock or
	// serialization failure is retried. Default DefaultDeadlockRetries.
	DeadlockRetries int
	// Keys supplies the key ring that seals and opens the payloads of
	// encrypted queues, loaded the first time one needs it. Nil: this
	// server has no key, and encrypted queues are refused with
	// queen.ErrKeyUnavailable.
	Keys KeyLoader
	// DefaultRetentionSeconds and DefaultCompletedRetentionSeconds are the
	// deployment's retention windows for a queue that sets none of that
	// kind or turned retention off (0: keep for ever).
	DefaultRetentionSeconds          int
	DefaultCompletedRetentionSeconds int
	// DefaultDLQRetentionSeconds is how long dead letters are kept in a
	// queue that sets no dlqRetentionSeconds (0: for ever).
	DefaultDLQRetentionSeconds int
}

// DefaultDeadlockRetries is Config.DeadlockRetries unless set.
const DefaultDeadlockRetries = 3

// Store is queen.Store on Postgres.
type Store struct {
	db     DB
	cfg    Config
	seal   sealing
	tracer pgx.QueryTracer // db's, for the statements row sends
}

var _ queen.Store = (*Store)(nil)

// New returns a Store over db.
func New(db DB, cfg Config) *Store {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DeadlockRetries == 0 {
		cfg.DeadlockRetries = DefaultDeadlockRetries
	}
	return &Store{db: db, cfg: cfg, seal: sealing{load: cfg.Keys}, tracer: tracerOf(db)}
}

// now returns the operation's time argument: nil means the database clock.
func (s *Store) now() *time.Time {
	if s.cfg.Clock == nil {
		return nil
	}
	t := s.cfg.Clock()
	return &t
}

// call runs one statement returning one value and decodes it into out
// (JSON when out is not a scalar). It retries deadlocks.
func (s *Store) call(ctx context.Context, op, sql string, out any, args ...any) error {
	return s.retry(ctx, op, func() error {
		var raw []byte
		switch o := out.(type) {
		case *int64:
			return s.db.QueryRow(ctx, sql, args...).Scan(o)
		default:
			if err := s.db.QueryRow(ctx, sql, args...).Scan(&raw); err != nil || o == nil {
				return err
			}
			if raw == nil {
				return pgx.ErrNoRows
			}
			if jerr := json.Unmarshal(raw, o); jerr != nil {
				return &decodeError{fmt.Errorf("%s: decode result: %w", op, jerr)}
			}
			if contractCheck != nil {
				if cerr := contractCheck(raw, o); cerr != nil {
					return &decodeError{fmt.Errorf("%s: reply does not match its Go type: %w", op, cerr)}
				}
			}
			return nil
		}
	})
}

// decodeError is a reply that came back but does not decode: returned as
// it is, never retried.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// retry runs one statement (do), sending it again after a deadlock, a
// serialization failure or an error that says it was never sent, and
// translates what is left into domain errors.
func (s *Store) retry(ctx context.Context, op string, do func() error) error {
	for attempt := 0; ; attempt++ {
		err := do()
		if err == nil {
			return nil
		}
		var de *decodeError
		if errors.As(err, &de) {
			return de.err
		}
		if attempt < s.cfg.DeadlockRetries && (isRetryable(err) || pgconn.SafeToRetry(err)) && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "retrying after transient error", "op", op, "attempt", attempt+1, "err", err)
			continue
		}
		return interpretError(op, err)
	}
}

// isRetryable reports errors after which the statement had no effect and
// may simply be sent again: deadlock and serialization failures.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

func jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
