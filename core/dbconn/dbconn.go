// Package dbconn builds the pgx connection pool of a Queen process from its
// config.Config: from DATABASE_URL, or from host, port, database and user
// with TLS per sslmode and, on AWS, an RDS IAM auth token as the password of
// every new connection (the functions log in to RDS Proxy this way; no
// password exists anywhere).
//
// Every pool is safe behind a transaction-pooling proxy (RDS Proxy,
// PgBouncer): statements run in pgx.QueryExecModeExec with the statement and
// description caches off, so nothing pins a proxy session. On Lambda the pool
// holds one connection: a container serves one request at a time.
package dbconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/pgstore"
)

// Pool sizes.
const (
	// LambdaMaxConns is the pool size on Lambda: one request at a time per
	// container, one connection.
	LambdaMaxConns = 1
	// LocalMaxConns is the pool size of `queen serve` unless the URL sets
	// pool_max_conns.
	LocalMaxConns = 16
)

// ErrNoDatabase means the configuration names no database.
var ErrNoDatabase = fmt.Errorf("no database configured: set %s, or %s with %s and %s",
	config.EnvDatabaseURL, config.EnvDBHost, config.EnvDBName, config.EnvDBUser)

// AWSConfigLoader loads the AWS region and credentials that sign IAM auth
// tokens.
type AWSConfigLoader func(ctx context.Context) (aws.Config, error)

// LoadDefaultAWSConfig is the production AWSConfigLoader: the SDK's default
// chain (on Lambda, the function role's credentials and AWS_REGION from the
// environment).
func LoadDefaultAWSConfig(ctx context.Context) (aws.Config, error) {
	return awsconfig.LoadDefaultConfig(ctx)
}

// Options adjusts PoolConfig.
type Options struct {
	// AWSConfig loads what IAM auth needs. Default LoadDefaultAWSConfig. It
	// is called at the first connection, not when the pool is built, so a
	// cold start does not pay for it before it needs the database, and a
	// failure is retried at the next connection.
	AWSConfig AWSConfigLoader
	// MaxConns, when positive, is the pool's size in place of the
	// environment's default (LambdaMaxConns, LocalMaxConns): the reaper
	// function runs its lease batches side by side.
	MaxConns int32
}

// URL returns the connection URL the configuration names, without any
// password: DatabaseURL as is, or one built from the DB* fields.
func URL(cfg config.Config) (string, error) {
	if cfg.DatabaseURL != "" {
		return cfg.DatabaseURL, nil
	}
	if cfg.DBHost == "" {
		return "", ErrNoDatabase
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(cfg.DBUser),
		Host:     net.JoinHostPort(cfg.DBHost, strconv.Itoa(cfg.DBPort)),
		Path:     "/" + cfg.DBName,
		RawQuery: url.Values{"sslmode": {cfg.DBSSLMode}}.Encode(),
	}
	return u.String(), nil
}

// PoolConfig returns the pool configuration for cfg (see the package doc).
func PoolConfig(cfg config.Config, opt Options) (*pgxpool.Config, error) {
	connURL, err := URL(cfg)
	if err != nil {
		return nil, err
	}
	pc, err := pgstore.PoolConfig(connURL)
	if err != nil {
		// The parse error may quote the URL, and with it a password.
		return nil, fmt.Errorf("database url %s: invalid", config.RedactURL(connURL))
	}
	switch {
	case cfg.Lambda:
		pc.MaxConns = LambdaMaxConns
		pc.MinConns = 0
	case !strings.Contains(connURL, "pool_max_conns"):
		pc.MaxConns = LocalMaxConns
	}
	if opt.MaxConns > 0 {
		pc.MaxConns = opt.MaxConns
	}
	if cfg.DatabaseURL == "" && cfg.DBIAMAuth {
		iam := &iamAuth{load: opt.AWSConfig}
		if iam.load == nil {
			iam.load = LoadDefaultAWSConfig
		}
		pc.BeforeConnect = iam.beforeConnect
	}
	return pc, nil
}

// NewPool builds the pool for cfg. It does not connect: the first query
// does.
func NewPool(ctx context.Context, cfg config.Config, opt Options) (*pgxpool.Pool, error) {
	pc, err := PoolConfig(cfg, opt)
	if err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, pc)
}

// ConnConfig returns the configuration of one connection for cfg, logging
// in with password when it is not empty (the migrate function's master
// password, read from Secrets Manager; it is never part of a URL or a log).
// Like the pool it uses QueryExecModeExec.
func ConnConfig(cfg config.Config, password string) (*pgx.ConnConfig, error) {
	connURL, err := URL(cfg)
	if err != nil {
		return nil, err
	}
	cc, err := pgx.ParseConfig(connURL)
	if err != nil {
		return nil, fmt.Errorf("database url %s: invalid", config.RedactURL(connURL))
	}
	pgstore.PoolerSafe(cc)
	if password != "" {
		cc.Password = password
	}
	return cc, nil
}

// iamAuth sets an RDS IAM auth token as the password of each new
// connection. Tokens are signed locally (no network call) and valid for 15
// minutes, which only bounds the login: the connection lives on.
type iamAuth struct {
	load AWSConfigLoader

	mu  sync.Mutex
	cfg *aws.Config
}

func (a *iamAuth) awsConfig(ctx context.Context) (aws.Config, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg != nil {
		return *a.cfg, nil
	}
	c, err := a.load(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("iam auth: load AWS config: %w", err)
	}
	if c.Region == "" {
		return aws.Config{}, errors.New("iam auth: no AWS region (set AWS_REGION)")
	}
	if c.Credentials == nil {
		return aws.Config{}, errors.New("iam auth: no AWS credentials")
	}
	a.cfg = &c
	return c, nil
}

func (a *iamAuth) beforeConnect(ctx context.Context, cc *pgx.ConnConfig) error {
	c, err := a.awsConfig(ctx)
	if err != nil {
		return err
	}
	endpoint := net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	token, err := auth.BuildAuthToken(ctx, endpoint, c.Region, cc.User, c.Credentials)
	if err != nil {
		return fmt.Errorf("iam auth: build token for %s@%s: %w", cc.User, endpoint, err)
	}
	cc.Password = token
	return nil
}
