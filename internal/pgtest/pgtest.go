// Package pgtest is the test harness for packages that need PostgreSQL. It
// isolates tests by giving each one its own freshly created database, so
// tests run in parallel, open as many connections as they like, commit, and
// never see each other's rows.
//
// A package opts in from its TestMain, naming the setup every database
// starts from (typically: apply the migrations):
//
//	func TestMain(m *testing.M) {
//		pgtest.Main(m, pgtest.WithTemplate(func(ctx context.Context, url string) error {
//			return migrate.Up(ctx, url)
//		}))
//	}
//
// and each test asks for a database of its own:
//
//	func TestPush(t *testing.T) {
//		t.Parallel()
//		pool := pgtest.NewPool(t)
//		...
//	}
//
// The server: when the environment variable DATABASE_URL is set, Main uses
// the server it names. Otherwise Main starts a throwaway PostgreSQL cluster
// (package pgcluster) for the test process, on its own port and unix socket,
// removed when the tests end, or within seconds if the process crashes.
//
// The databases: Main creates one template database per process,
// queen_test_tmpl_<random>, and runs the template setup in it once. Each
// NewDatabase is then a copy of it (CREATE DATABASE ... TEMPLATE), much
// cheaper than running the migrations per test, named queen_test_<random>
// and dropped when its test ends. After the tests Main drops whatever is left
// and the template. On a server named by DATABASE_URL the harness creates and
// drops only its own queen_test_ databases and never writes to the database
// the URL names; only databases of a test process that crashed are left
// behind there.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/internal/pgcluster"
)

const (
	// DatabasePrefix starts the name of every database the harness creates.
	DatabasePrefix = "queen_test_"

	// TemplatePrefix starts the name of the per-process template database.
	TemplatePrefix = DatabasePrefix + "tmpl_"

	// EnvDatabaseURL names the environment variable pointing the harness at
	// an existing server instead of starting one.
	EnvDatabaseURL = "DATABASE_URL"

	// opTimeout bounds one CREATE or DROP DATABASE.
	opTimeout = 2 * time.Minute
)

// Option configures Main.
type Option func(*config)

type config struct {
	setup func(ctx context.Context, url string) error
}

// WithTemplate makes setup prepare the template every test database is copied
// from. Main calls it once, with the URL of the template database; setup must
// close its connections before returning (leftover sessions are terminated).
func WithTemplate(setup func(ctx context.Context, url string) error) Option {
	return func(c *config) { c.setup = setup }
}

// current is the harness of this test process, set by Main.
var current atomic.Pointer[harness]

// Main resolves the server (DATABASE_URL, else a throwaway cluster), prepares
// the template, runs the tests, drops the databases it created, stops the
// cluster and exits with the tests' exit code. When no server can be had it
// prints why and exits with code 1: tests that need a database are never
// skipped.
func Main(m *testing.M, opts ...Option) {
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts []Option) int {
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	h, err := open(context.Background(), cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	current.Store(h)
	defer func() {
		current.Store(nil)
		if err := h.close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: cleanup: %v\n", err)
		}
	}()
	return m.Run()
}

// NewDatabase creates a database for t, a copy of the template, drops it when
// t ends (disconnecting any sessions left), and returns its URL. It is safe
// for parallel tests.
func NewDatabase(t testing.TB) string {
	t.Helper()
	h := current.Load()
	if h == nil {
		t.Fatal("pgtest: no server: call pgtest.Main(m) from TestMain")
	}
	name := DatabasePrefix + randomSuffix()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := h.create(ctx, name, h.template); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := h.drop(ctx, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return h.url(name)
}

// NewPool creates a database for t (see NewDatabase) and returns a pool
// connected to it, closed when t ends. The pool runs statements in
// pgx.QueryExecModeExec, as the product does behind a transaction-pooling
// proxy: no named prepared statements.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDatabase(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	pgstore.PoolerSafe(cfg.ConnConfig)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// AdminURL returns the URL of the server's maintenance database: DATABASE_URL
// itself, or the postgres database of the throwaway cluster. It is for tests
// of the server as a whole (listing databases, roles); tests must not write
// to it. It panics when called outside Main.
func AdminURL() string {
	h := current.Load()
	if h == nil {
		panic("pgtest: AdminURL called without pgtest.Main")
	}
	return h.adminURL
}

// harness is one process's server, template and created databases.
type harness struct {
	adminURL string
	url      func(dbname string) string
	admin    *pgxpool.Pool
	cluster  *pgcluster.Cluster // nil with DATABASE_URL
	template string
	strategy string // CREATE DATABASE strategy, empty for the default

	// createMu serializes CREATE DATABASE: two copies of the template at
	// once can fail with "source database is being accessed by other users".
	createMu sync.Mutex

	mu      sync.Mutex
	created map[string]bool // databases to drop at the end
}

func open(ctx context.Context, cfg config) (h *harness, err error) {
	h = &harness{created: map[string]bool{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, h.close())
		}
	}()
	if dsn := os.Getenv(EnvDatabaseURL); dsn != "" {
		h.adminURL = dsn
		h.url = func(name string) string { return withDatabase(dsn, name) }
	} else {
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return h, fmt.Errorf("no %s and no embedded PostgreSQL: %w", EnvDatabaseURL, err)
		}
		h.cluster, h.adminURL, h.url = c, c.URL("postgres"), c.URL
	}

	poolCfg, err := pgxpool.ParseConfig(h.adminURL)
	if err != nil {
		return h, fmt.Errorf("%s: %w", EnvDatabaseURL, err)
	}
	pgstore.PoolerSafe(poolCfg.ConnConfig)
	poolCfg.MaxConns = 4
	if h.admin, err = pgxpool.NewWithConfig(ctx, poolCfg); err != nil {
		return h, err
	}
	if err := h.admin.Ping(ctx); err != nil {
		return h, fmt.Errorf("connect to the server: %w", err)
	}

	if h.cluster != nil {
		// Without fsync, a file copy is about three times faster than the
		// default WAL_LOG strategy of PostgreSQL 15 and later. Servers we do
		// not own keep their default: a file copy checkpoints twice.
		var version int
		if err := h.admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
			return h, err
		}
		if version >= 150000 {
			h.strategy = "FILE_COPY"
		}
	}

	tmpl := TemplatePrefix + randomSuffix()
	if err := h.create(ctx, tmpl, ""); err != nil {
		return h, err
	}
	h.template = tmpl
	if cfg.setup != nil {
		if err := cfg.setup(ctx, h.url(tmpl)); err != nil {
			return h, fmt.Errorf("template setup: %w", err)
		}
	}
	// Copying a database needs it free of sessions: end any the setup left.
	_, err = h.admin.Exec(ctx,
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", tmpl)
	if err != nil {
		return h, fmt.Errorf("disconnect from the template: %w", err)
	}
	return h, nil
}

// create creates database name, from template if not empty.
func (h *harness) create(ctx context.Context, name, template string) error {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
		if h.strategy != "" {
			sql += " STRATEGY " + h.strategy
		}
	}
	h.mu.Lock()
	h.created[name] = true
	h.mu.Unlock()

	h.createMu.Lock()
	defer h.createMu.Unlock()
	if _, err := h.admin.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// drop drops database name, disconnecting its sessions.
func (h *harness) drop(ctx context.Context, name string) error {
	if !strings.HasPrefix(name, DatabasePrefix) {
		return fmt.Errorf("refusing to drop %s: not a test database", name)
	}
	if _, err := h.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	h.mu.Lock()
	delete(h.created, name)
	h.mu.Unlock()
	return nil
}

// close drops the databases still there (the template last) and stops the
// cluster.
func (h *harness) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var errs []error
	if h.admin != nil {
		h.mu.Lock()
		names := make([]string, 0, len(h.created))
		for name := range h.created {
			names = append(names, name)
		}
		h.mu.Unlock()
		// The template last.
		slices.SortFunc(names, func(a, b string) int {
			return boolCmp(a == h.template, b == h.template)
		})
		for _, name := range names {
			if err := h.drop(ctx, name); err != nil {
				errs = append(errs, err)
			}
		}
		h.admin.Close()
	}
	if h.cluster != nil {
		if err := h.cluster.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// withDatabase returns connString (a URL or keyword/value string) naming
// database dbname instead.
func withDatabase(connString, dbname string) string {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err == nil {
			u.Path, u.RawPath = "/"+dbname, ""
			if q := u.Query(); q.Has("dbname") || q.Has("database") {
				q.Del("dbname")
				q.Del("database")
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
	}
	// Keyword/value: the last setting of a keyword wins.
	return connString + " dbname=" + dbname
}

// randomSuffix returns 16 random hex digits, a valid identifier part.
func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewRole returns a fresh role name (queen_app_<random>) for a test that
// creates it, and drops the role and what it owns in dbURL's database when
// t ends. Roles are cluster-wide; the cleanup runs before the database of
// a NewDatabase made earlier in the test is dropped (cleanups are LIFO).
func NewRole(t testing.TB, dbURL string) string {
	t.Helper()
	role := "queen_app_" + randomSuffix()
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
			return
		}
		defer conn.Close(ctx)
		var exists bool
		_ = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists)
		if !exists {
			return
		}
		r := pgx.Identifier{role}.Sanitize()
		for _, s := range []string{"DROP OWNED BY " + r, "DROP ROLE " + r} {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Errorf("drop role %s: %s: %v", role, s, err)
			}
		}
	})
	return role
}
