package pgtest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/internal/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, pgtest.WithTemplate(func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		_, err = conn.Exec(ctx, `
			CREATE TABLE notes (id int PRIMARY KEY, owner text NOT NULL);
			INSERT INTO notes VALUES (0, 'template');`)
		return errors.Join(err, conn.Close(ctx))
	}))
}

func TestEachTestHasItsOwnDatabase(t *testing.T) {
	var (
		mu  sync.Mutex
		dbs = map[string]string{}
	)
	t.Run("group", func(t *testing.T) {
		for _, owner := range []string{"alice", "bob"} {
			t.Run(owner, func(t *testing.T) {
				t.Parallel()
				pool := pgtest.NewPool(t)
				ctx := t.Context()

				var db string
				if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(db, pgtest.DatabasePrefix) || strings.HasPrefix(db, pgtest.TemplatePrefix) {
					t.Errorf("database %q is not a test database", db)
				}
				mu.Lock()
				dbs[owner] = db
				mu.Unlock()

				if _, err := pool.Exec(ctx, "INSERT INTO notes VALUES (1, $1)", owner); err != nil {
					t.Fatal(err)
				}
				// The template's row and ours, nothing of the other test's,
				// whichever ran first.
				var owners []string
				if err := pool.QueryRow(ctx, "SELECT array_agg(owner ORDER BY id) FROM notes").Scan(&owners); err != nil {
					t.Fatal(err)
				}
				if len(owners) != 2 || owners[0] != "template" || owners[1] != owner {
					t.Errorf("rows = %q, want [template %s]", owners, owner)
				}
			})
		}
	})
	if dbs["alice"] == "" || dbs["alice"] == dbs["bob"] {
		t.Errorf("databases %v: want two distinct ones", dbs)
	}
}

func TestNewPoolRunsWithoutPreparedStatements(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	if mode := pool.Config().ConnConfig.DefaultQueryExecMode; mode != pgx.QueryExecModeExec {
		t.Fatalf("DefaultQueryExecMode = %v", mode)
	}
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM notes WHERE owner = $1", "template").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v", n, err)
	}
}

func TestNewDatabaseIsDroppedAfterTheTest(t *testing.T) {
	t.Parallel()
	admin, err := pgx.Connect(t.Context(), pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	exists := func(t *testing.T, db string) bool {
		t.Helper()
		var ok bool
		if err := admin.QueryRow(t.Context(), "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", db).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}

	var (
		db   string
		left *pgx.Conn
	)
	t.Run("sub", func(t *testing.T) {
		// A session left open must not keep the database alive.
		var err error
		left, err = pgx.Connect(t.Context(), pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := left.QueryRow(t.Context(), "SELECT current_database()").Scan(&db); err != nil {
			t.Fatal(err)
		}
		if !exists(t, db) {
			t.Fatalf("%s not in pg_database during the test", db)
		}
	})
	if db == "" {
		t.FailNow()
	}
	defer left.Close(context.Background())
	if exists(t, db) {
		t.Errorf("%s still exists after its test ended", db)
	}
	if err := left.Ping(t.Context()); err == nil {
		t.Error("session in the dropped database still alive")
	}
}
