package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolerSafe sets a connection up to run unchanged behind a
// transaction-pooling proxy (RDS Proxy, PgBouncer): statements in
// QueryExecModeExec (no named prepared statements, one round trip per
// query) and no statement or description caches. It is the one place these
// settings are made; every pool and connection of the product and its
// tests goes through it.
func PoolerSafe(cc *pgx.ConnConfig) {
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	cc.StatementCacheCapacity = 0
	cc.DescriptionCacheCapacity = 0
}

// PoolConfig parses url into a pool configuration that is safe behind a
// transaction-pooling proxy: QueryExecModeExec (no named prepared
// statements, one round trip per query).
func PoolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	PoolerSafe(cfg.ConnConfig)
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > ConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	}
	// A connection is pinged before use only after it sat idle for
	// IdleCheckAfter: a Lambda container frozen between requests may find
	// that the proxy (idle client timeout 30 min) or the server closed it,
	// and a statement written to a closed socket fails after it was sent,
	// so it cannot be retried. A busy connection is used without a ping (no
	// second round trip).
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration >= IdleCheckAfter
	}
	return cfg, nil
}

// ConnectTimeout bounds a new connection (TCP, TLS, login): a stalled
// proxy answers 503 well before a function's deadline instead of timing it
// out.
const ConnectTimeout = 5 * time.Second

// IdleCheckAfter is how long a pooled connection may sit unused before it
// is pinged before its next use. A variable so tests can shorten it.
var IdleCheckAfter = time.Minute

// ServerSettings are the server parameters the engine is tuned for, as
// postgresql.conf and an RDS parameter group both take them. The local
// cluster starts with them, and the CDK stack's parameter group sets them
// on RDS and Aurora; each is dynamic, so none needs a restart.
//
// autovacuum_naptime: the cursor, lease and ready tables take thousands of
// updates, inserts and deletes a second on a few thousand live rows; what
// VACUUM cannot yet reclaim has to fit in the table, so the table is as
// large as the churn between two vacuums. They are vacuumed after 500 dead
// rows (migrations 0003, 0019), but never more often than the naptime: 10 s
// instead of PostgreSQL's 60 s keeps them six times smaller, and after a
// long transaction ends they are cleaned within seconds.
var ServerSettings = map[string]string{
	"autovacuum_naptime": "10",
}
