package dbconn_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/dbconn"
	"github.com/queen-serverless/queen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fakeAWS returns static fake credentials: BuildAuthToken signs locally, so
// nothing reaches AWS.
func fakeAWS(calls *atomic.Int32) dbconn.AWSConfigLoader {
	return func(context.Context) (aws.Config, error) {
		calls.Add(1)
		return aws.Config{
			Region:      "eu-west-1",
			Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "fake-secret-key", ""),
		}, nil
	}
}

func iamConfig() config.Config {
	return config.Config{
		DBHost: "queen-proxy.proxy-abc.eu-west-1.rds.amazonaws.com", DBName: "queen", DBUser: "queen_app",
		DBIAMAuth: true, DBSSLMode: "require", Lambda: true,
	}.WithDefaults()
}

func TestIAMBeforeConnectSetsTokenPassword(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	pc, err := dbconn.PoolConfig(iamConfig(), dbconn.Options{AWSConfig: fakeAWS(&calls)})
	if err != nil {
		t.Fatal(err)
	}
	if pc.BeforeConnect == nil {
		t.Fatal("IAM auth on, but no BeforeConnect")
	}
	if calls.Load() != 0 {
		t.Fatal("the AWS config was loaded before the first connection")
	}
	cc := pc.ConnConfig.Copy()
	if cc.Password != "" {
		t.Fatalf("password before BeforeConnect: %q", cc.Password)
	}
	if err := pc.BeforeConnect(context.Background(), cc); err != nil {
		t.Fatal(err)
	}
	// An RDS IAM token is a presigned URL without scheme:
	// host:port?Action=connect&DBUser=...&X-Amz-...&X-Amz-Signature=...
	prefix := "queen-proxy.proxy-abc.eu-west-1.rds.amazonaws.com:5432?"
	if !strings.HasPrefix(cc.Password, prefix) {
		t.Fatalf("token %q does not start with %q", cc.Password, prefix)
	}
	q, err := url.ParseQuery(strings.TrimPrefix(cc.Password, prefix))
	if err != nil {
		t.Fatalf("token query: %v", err)
	}
	for k, want := range map[string]string{
		"Action": "connect", "DBUser": "queen_app", "X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-Expires": "900",
	} {
		if got := q.Get(k); got != want {
			t.Errorf("token %s = %q, want %q", k, got, want)
		}
	}
	if cred := q.Get("X-Amz-Credential"); !strings.HasPrefix(cred, "AKIDEXAMPLE/") || !strings.Contains(cred, "/eu-west-1/rds-db/aws4_request") {
		t.Errorf("token credential scope %q", cred)
	}
	if sig := q.Get("X-Amz-Signature"); len(sig) != 64 {
		t.Errorf("token signature %q is not a hex SHA-256", sig)
	}

	// The AWS config is loaded once, at the first connection.
	cc2 := pc.ConnConfig.Copy()
	if err := pc.BeforeConnect(context.Background(), cc2); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 {
		t.Errorf("AWS config loaded %d times, want 1", calls.Load())
	}
}

func TestIAMBeforeConnectFailsClearly(t *testing.T) {
	t.Parallel()
	noRegion := func(context.Context) (aws.Config, error) {
		return aws.Config{Credentials: credentials.NewStaticCredentialsProvider("AKID", "x", "")}, nil
	}
	pc, err := dbconn.PoolConfig(iamConfig(), dbconn.Options{AWSConfig: noRegion})
	if err != nil {
		t.Fatal(err)
	}
	err = pc.BeforeConnect(context.Background(), pc.ConnConfig.Copy())
	if err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Fatalf("err = %v, want one naming AWS_REGION", err)
	}
}

func TestPoolConfigIsProxySafe(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, pc *pgxpool.Config) {
		t.Helper()
		if pc.ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeExec {
			t.Errorf("exec mode %v, want QueryExecModeExec", pc.ConnConfig.DefaultQueryExecMode)
		}
		if pc.ConnConfig.StatementCacheCapacity != 0 || pc.ConnConfig.DescriptionCacheCapacity != 0 {
			t.Errorf("caches %d/%d, want 0/0", pc.ConnConfig.StatementCacheCapacity, pc.ConnConfig.DescriptionCacheCapacity)
		}
	}

	t.Run("host on Lambda: TLS, one connection", func(t *testing.T) {
		pc, err := dbconn.PoolConfig(iamConfig(), dbconn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, pc)
		if pc.MaxConns != 1 {
			t.Errorf("MaxConns %d on Lambda, want 1", pc.MaxConns)
		}
		if pc.ConnConfig.TLSConfig == nil {
			t.Error("sslmode=require without TLS")
		}
		if len(pc.ConnConfig.Fallbacks) != 0 {
			t.Errorf("sslmode=require has %d fallbacks: a plaintext fallback would defeat it", len(pc.ConnConfig.Fallbacks))
		}
		if pc.ConnConfig.Host != "queen-proxy.proxy-abc.eu-west-1.rds.amazonaws.com" || pc.ConnConfig.Port != 5432 ||
			pc.ConnConfig.Database != "queen" || pc.ConnConfig.User != "queen_app" {
			t.Errorf("connects to %s@%s:%d/%s", pc.ConnConfig.User, pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database)
		}
	})
	t.Run("verify-full checks the server name", func(t *testing.T) {
		c := iamConfig()
		c.DBSSLMode = "verify-full"
		pc, err := dbconn.PoolConfig(c, dbconn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if tc := pc.ConnConfig.TLSConfig; tc == nil || tc.InsecureSkipVerify || tc.ServerName != c.DBHost {
			t.Errorf("verify-full TLS config %+v", tc)
		}
	})
	t.Run("url locally", func(t *testing.T) {
		c := config.Config{DatabaseURL: "postgres://u@localhost:5433/db?sslmode=disable"}.WithDefaults()
		pc, err := dbconn.PoolConfig(c, dbconn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, pc)
		if pc.MaxConns != dbconn.LocalMaxConns || pc.BeforeConnect != nil {
			t.Errorf("MaxConns %d (want %d), BeforeConnect set: %v", pc.MaxConns, dbconn.LocalMaxConns, pc.BeforeConnect != nil)
		}
	})
	t.Run("url pool size kept", func(t *testing.T) {
		c := config.Config{DatabaseURL: "postgres://u@localhost/db?pool_max_conns=3"}.WithDefaults()
		pc, err := dbconn.PoolConfig(c, dbconn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if pc.MaxConns != 3 {
			t.Errorf("MaxConns %d, want the URL's 3", pc.MaxConns)
		}
	})
	t.Run("url on Lambda: one connection", func(t *testing.T) {
		c := config.Config{DatabaseURL: "postgres://u@localhost/db", Lambda: true}.WithDefaults()
		pc, err := dbconn.PoolConfig(c, dbconn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if pc.MaxConns != 1 {
			t.Errorf("MaxConns %d on Lambda, want 1", pc.MaxConns)
		}
	})
	t.Run("a function that asks for more connections gets them", func(t *testing.T) {
		pc, err := dbconn.PoolConfig(iamConfig(), dbconn.Options{MaxConns: 3})
		if err != nil {
			t.Fatal(err)
		}
		if pc.MaxConns != 3 {
			t.Errorf("MaxConns %d on Lambda with Options.MaxConns 3, want 3", pc.MaxConns)
		}
	})
	t.Run("no database", func(t *testing.T) {
		_, err := dbconn.PoolConfig(config.Config{}.WithDefaults(), dbconn.Options{})
		if !errors.Is(err, dbconn.ErrNoDatabase) {
			t.Errorf("err = %v, want ErrNoDatabase", err)
		}
	})
	t.Run("bad url never echoes its password", func(t *testing.T) {
		c := config.Config{DatabaseURL: "postgres://u:s3cret@localhost:notaport/db"}.WithDefaults()
		_, err := dbconn.PoolConfig(c, dbconn.Options{})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestIAMPoolConnects drives a pool built from host fields with IAM auth
// against the test server, which trusts local TCP logins and so accepts the
// token as it would any password: the wiring from config to a working
// connection holds end to end (sslmode prefer: the test server has no TLS).
func TestIAMPoolConnects(t *testing.T) {
	t.Parallel()
	cc, err := pgx.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{
		DBHost: "127.0.0.1", DBPort: int(cc.Port), DBName: cc.Database, DBUser: cc.User,
		DBIAMAuth: true, DBSSLMode: "prefer", Lambda: true,
	}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	pool, err := dbconn.NewPool(context.Background(), cfg, dbconn.Options{AWSConfig: fakeAWS(&calls)})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var db string
	if err := pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if db != cc.Database || calls.Load() != 1 {
		t.Errorf("database %q (want %q), AWS config loads %d (want 1)", db, cc.Database, calls.Load())
	}
}

func TestConnConfigPassword(t *testing.T) {
	t.Parallel()
	c := config.Config{DBHost: "db.internal", DBPort: 6543, DBName: "queen", DBUser: "master", DBSecretARN: "arn:x"}.WithDefaults()
	u, err := dbconn.URL(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := "postgres://master@db.internal:" + strconv.Itoa(6543) + "/queen?sslmode=require"; u != want {
		t.Errorf("URL %q, want %q", u, want)
	}
	cc, err := dbconn.ConnConfig(c, "pw-from-secret")
	if err != nil {
		t.Fatal(err)
	}
	if cc.Password != "pw-from-secret" || cc.DefaultQueryExecMode != pgx.QueryExecModeExec || cc.TLSConfig == nil {
		t.Errorf("conn config: password set %v, exec mode %v, TLS %v", cc.Password != "", cc.DefaultQueryExecMode, cc.TLSConfig != nil)
	}
}
