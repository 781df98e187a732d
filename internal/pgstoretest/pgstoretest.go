// Package pgstoretest gives tests a migrated, isolated Postgres database
// and a Store over it: on the database's clock, as production runs
// (New), or on a clock the test controls (NewClocked).
//
// Use it from a TestMain:
//
//	func TestMain(m *testing.M) { pgstoretest.Main(m) }
//
// then call New in each test.
package pgstoretest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/internal/pgtest"
)

// Main runs the package's tests with a template database holding the
// current schema, so each test's database starts migrated.
func Main(m *testing.M) {
	pgtest.Main(m, pgtest.WithTemplate(func(ctx context.Context, url string) error {
		_, err := pgstore.MigrateURL(ctx, url)
		return err
	}))
}

// Clock is a test clock: it stands still until the test moves it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock set to start.
func NewClock(start time.Time) *Clock { return &Clock{t: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Env is one test's database, pool, store and clock (nil: the database's).
type Env struct {
	Pool  *pgxpool.Pool
	Store *pgstore.Store
	Clock *Clock
	URL   string
}

// Epoch is where test clocks start.
var Epoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// New returns a fresh migrated database with a Store built as every entry
// point builds it (config.Config.Store with the defaults): on the
// database's clock, without keys (tests that need keys build theirs from
// StoreConfig). Use it unless the test must move time.
func New(t testing.TB) *Env {
	t.Helper()
	e := newEnv(t)
	e.Store = pgstore.New(e.Pool, StoreConfig())
	return e
}

// StoreConfig is the store configuration of a process with the default
// configuration, as the mains build it.
func StoreConfig() pgstore.Config {
	return config.Config{}.WithDefaults().Store(nil, nil)
}

// NewClocked is New with a test clock (pgstore.Config.Clock) that stands
// still until the test moves it: for tests of leases, delays, retention
// and dedup windows, which would otherwise wait for real time to pass.
func NewClocked(t testing.TB) *Env {
	t.Helper()
	e := newEnv(t)
	e.Clock = NewClock(Epoch)
	cfg := StoreConfig()
	cfg.Clock = e.Clock.Now
	e.Store = pgstore.New(e.Pool, cfg)
	return e
}

func newEnv(t testing.TB) *Env {
	url := pgtest.NewDatabase(t)
	cfg, err := pgstore.PoolConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &Env{Pool: pool, URL: url}
}

// Execer is what ExpireLeases needs of a connection or pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ExpireLeases makes the lease leaseID ("": every lease) run out a minute
// ago, as if its consumer had died: in its cursors, and in queen.leases,
// where the reaper looks for expired leases.
func ExpireLeases(ctx context.Context, db Execer, leaseID string) error {
	_, err := db.Exec(ctx, `
		WITH c AS (
			UPDATE queen.consumers SET lease_expires_at = now() - interval '1 minute'
			WHERE lease_id IS NOT NULL AND ($1 = '' OR lease_id::text = $1)
		)
		UPDATE queen.leases SET expires_at = now() - interval '1 minute'
		WHERE $1 = '' OR lease_id::text = $1`, leaseID)
	return err
}

// SegmentTxIDs is an SQL expression of the transactionIds of segment row
// s (queen.segments s), in offset order, whether stored or derived.
const SegmentTxIDs = `ARRAY(SELECT queen.seg_txid((queen.seg_all(s.txid, s.txids))[g], s.created_at, s.partition_num,
                                              s.base_offset + g - 1, s.id_seed)
      FROM generate_series(1, queen.seg_count(s.txids, s.id_count)) g ORDER BY g)`
