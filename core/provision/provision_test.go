package provision_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/provision"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgtest"
)

// Databases start empty: provisioning creates the schema.
func TestMain(m *testing.M) { pgtest.Main(m) }

// asRole returns dbURL logging in as role (the test server trusts local
// logins).
func asRole(t *testing.T, dbURL, role string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

func TestCreateProvisionsSchemaAndRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	role := pgtest.NewRole(t, dbURL)
	cfg := config.Config{DatabaseURL: dbURL}.WithDefaults()
	h := &provision.Handler{Connect: provision.MasterConnector(cfg, nil), AppRole: role, Logger: slog.New(slog.DiscardHandler)}

	resp, err := h.Invoke(ctx, json.RawMessage(`{"RequestType":"Create","RequestId":"r1","LogicalResourceId":"Schema",
		"StackId":"arn:aws:cloudformation:eu-west-1:123456789012:stack/queen/x","ResourceType":"Custom::QueenSchema",
		"ResourceProperties":{"ServiceToken":"arn:x","MigrateCodeSha256":"abc"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.PhysicalResourceID != "queen-schema" || resp.Data["Applied"] == "" || resp.Data["Role"] != role {
		t.Errorf("response %+v", resp)
	}

	// The application role can do everything the functions do, and
	// nothing to the migration bookkeeping.
	appCfg, err := pgstore.PoolConfig(asRole(t, dbURL, role))
	if err != nil {
		t.Fatal(err)
	}
	appConn, err := pgx.ConnectConfig(ctx, appCfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer appConn.Close(ctx)
	store := pgstore.New(appConn, pgstore.Config{})
	exercise(t, store)
	if _, err := appConn.Exec(ctx, "DELETE FROM queen.schema_migrations"); err == nil {
		t.Error("the app role may write the migration bookkeeping")
	}
	if _, err := appConn.Exec(ctx, "CREATE TABLE queen.intruder (x int)"); err == nil {
		t.Error("the app role may create tables in schema queen")
	}

	// Update: nothing left to apply; the role is kept.
	resp, err = h.Invoke(ctx, json.RawMessage(`{"RequestType":"Update","PhysicalResourceId":"queen-schema","LogicalResourceId":"Schema"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.PhysicalResourceID != "queen-schema" || resp.Data["Applied"] != "" || resp.Data["RoutinesReplaced"] != "false" {
		t.Errorf("update response %+v", resp)
	}
}

// exercise runs each kind of store operation.
func exercise(t *testing.T, store *pgstore.Store) {
	t.Helper()
	ctx := context.Background()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("as the app role, %s: %v", what, err)
		}
	}
	lease := 30
	_, err := store.Configure(ctx, queen.ConfigureRequest{Queue: "q", Options: queen.QueueOptions{LeaseTime: &lease}})
	step("configure", err)
	_, err = store.Push(ctx, []queen.PushItem{{Queue: "q", Payload: json.RawMessage(`1`)}, {Queue: "q", Payload: json.RawMessage(`2`)}})
	step("push", err)
	pop, err := store.Pop(ctx, queen.PopRequest{Queue: "q", Batch: 2})
	step("pop", err)
	if len(pop.Messages) != 2 {
		t.Fatalf("popped %d", len(pop.Messages))
	}
	_, err = store.ExtendLease(ctx, pop.LeaseID, 60)
	step("extend", err)
	m0, m1 := pop.Messages[0], pop.Messages[1]
	_, err = store.Ack(ctx, []queen.Ack{{PartitionID: m0.PartitionID, TransactionID: m0.TransactionID, Status: queen.AckCompleted},
		{PartitionID: m1.PartitionID, TransactionID: m1.TransactionID, Status: queen.AckDLQ, Error: "x"}})
	step("ack", err)
	_, err = store.RetryDeadLetter(ctx, m1.PartitionID, m1.TransactionID, "")
	step("dlq retry", err)
	_, err = store.Reap(ctx, queen.ReapRequest{})
	step("reap", err)
	_, err = store.Stats(ctx)
	step("stats", err)
	_, err = store.ListGroups(ctx)
	step("groups", err)
	step("delete queue", store.DeleteQueue(ctx, "q"))
}

func TestDeleteAndDirectInvoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	connected := 0
	h := &provision.Handler{
		Connect: func(ctx context.Context) (*pgx.Conn, error) { connected++; return pgx.Connect(ctx, dbURL) },
		Logger:  slog.New(slog.DiscardHandler),
	}
	resp, err := h.Invoke(ctx, json.RawMessage(`{"RequestType":"Delete","PhysicalResourceId":"queen-schema"}`))
	if err != nil || resp.PhysicalResourceID != "queen-schema" || connected != 0 {
		t.Fatalf("delete: %+v, %v, connected %d times", resp, err, connected)
	}
	resp, err = h.Invoke(ctx, json.RawMessage(`{}`))
	if err != nil || resp.Data["Applied"] == "" {
		t.Fatalf("direct invoke: %+v, %v", resp, err)
	}
	if _, err := h.Invoke(ctx, json.RawMessage(`{"RequestType":"Explode"}`)); err == nil {
		t.Error("unknown request type accepted")
	}
}

func TestMasterConnectorReadsTheSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cc, err := pgx.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{
		DBHost: cc.Host, DBPort: int(cc.Port), DBName: cc.Database, DBUser: "queen_app",
		DBSSLMode: "prefer", DBSecretARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:master",
	}.WithDefaults()
	read := func(_ context.Context, arn string) (string, error) {
		if arn != cfg.DBSecretARN {
			return "", fmt.Errorf("wrong secret %s", arn)
		}
		return fmt.Sprintf(`{"username":%q,"password":"s3cret-pw","engine":"postgres","host":"elsewhere","port":5432}`, cc.User), nil
	}
	conn, err := provision.MasterConnector(cfg, read)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var user, db string
	if err := conn.QueryRow(ctx, "SELECT current_user, current_database()").Scan(&user, &db); err != nil {
		t.Fatal(err)
	}
	if user != cc.User || db != cc.Database {
		t.Errorf("connected as %s to %s, want the secret's user %s to %s", user, db, cc.User, cc.Database)
	}

	bad := func(context.Context, string) (string, error) { return `{"user":"x","pw":"s3cret-pw"}`, nil }
	_, err = provision.MasterConnector(cfg, bad)(ctx)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("bad secret: %v", err)
	}
	failing := func(context.Context, string) (string, error) { return "", errors.New("AccessDenied") }
	if _, err := provision.MasterConnector(cfg, failing)(ctx); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("unreadable secret: %v", err)
	}
}

// TestRDSIAMGrant plays RDS: where the rds_iam role exists, the application
// role is granted it. It creates rds_iam, a cluster-wide role, so it runs
// only on the throwaway test cluster, and not in parallel with the tests
// that would see it.
func TestRDSIAMGrant(t *testing.T) {
	if os.Getenv(pgtest.EnvDatabaseURL) != "" {
		t.Skip("creates the cluster-wide role rds_iam: only on the throwaway test cluster")
	}
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE ROLE rds_iam NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, dbURL)
		if err == nil {
			defer c.Close(ctx)
			_, err = c.Exec(ctx, "DROP ROLE rds_iam")
		}
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	role := pgtest.NewRole(t, dbURL) // dropped first (LIFO), so rds_iam has no members left

	res, err := provision.Run(ctx, conn, role, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.RoleCreated || !res.RDSIAM {
		t.Errorf("result %+v, want the role created and granted rds_iam", res)
	}
	var member bool
	if err := conn.QueryRow(ctx, "SELECT pg_has_role($1, 'rds_iam', 'MEMBER')", role).Scan(&member); err != nil || !member {
		t.Errorf("%s is not a member of rds_iam (%v)", role, err)
	}
	// Again: nothing new.
	res, err = provision.Run(ctx, conn, role, pgstore.MigrateOptions{})
	if err != nil || res.RoleCreated || len(res.Applied) != 0 {
		t.Errorf("second run %+v, %v", res, err)
	}
}
