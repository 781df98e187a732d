package pgtest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, host, user, password string }{
		{"postgres://u:p%40ss@db.example:5433/app?sslmode=disable", "db.example", "u", "p@ss"},
		{"postgresql://u@db.example/app?dbname=app&sslmode=disable", "db.example", "u", ""},
		{"postgres://u@/app?host=/var/run/postgresql&sslmode=disable", "/var/run/postgresql", "u", ""},
		{"host=db.example user=u password=secret dbname=app sslmode=disable", "db.example", "u", "secret"},
		{"host=db.example user=u sslmode=disable", "db.example", "u", ""},
	} {
		got := withDatabase(tc.in, "queen_test_x")
		cfg, err := pgconn.ParseConfig(got)
		if err != nil {
			t.Errorf("%s → %s: %v", tc.in, got, err)
			continue
		}
		if cfg.Database != "queen_test_x" || cfg.Host != tc.host || cfg.User != tc.user || cfg.Password != tc.password {
			t.Errorf("%s → %s: database %q host %q user %q password %q", tc.in, got, cfg.Database, cfg.Host, cfg.User, cfg.Password)
		}
	}
}
