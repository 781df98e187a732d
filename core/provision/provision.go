// Package provision prepares the database at deploy time: it applies the
// schema migrations and ensures the application role the functions log in
// as. The migrate function runs it from a CloudFormation custom resource
// (through the CDK provider framework) on every create and update, before
// anything serves traffic, so migrations are never raced by cold starts.
//
// It connects as the master user, whose credentials it reads at run time
// from Secrets Manager (QUEEN_DB_SECRET_ARN): they are never in an
// environment variable or a log. DATABASE_URL, when set, is used instead
// (tests, local runs).
package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/dbconn"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/core/secrets"
)

// PhysicalResourceID identifies the schema as a CloudFormation resource. It
// never changes, so an update never asks CloudFormation to delete the
// "old" schema.
const PhysicalResourceID = "queen-schema"

// rdsIAMRole is the RDS role that lets a role log in with IAM auth tokens.
const rdsIAMRole = "rds_iam"

// provisionLockKey serializes concurrent provisioning (transaction-level
// advisory lock; no session state).
const provisionLockKey = 0x51524f4c // "QROL"

// Result says what Run did.
type Result struct {
	pgstore.MigrateResult
	// Role is the application role ensured ("" when none was asked for).
	Role string `json:"role,omitempty"`
	// RoleCreated is true when Role did not exist before.
	RoleCreated bool `json:"roleCreated,omitempty"`
	// RDSIAM is true when Role was granted rds_iam (the database is RDS).
	RDSIAM bool `json:"rdsIam,omitempty"`
}

// Run applies the migrations and, when role is not empty, ensures the
// application role. It is idempotent.
func Run(ctx context.Context, conn *pgx.Conn, role string, opt pgstore.MigrateOptions) (Result, error) {
	mr, err := pgstore.MigrateWith(ctx, conn, opt)
	res := Result{MigrateResult: mr}
	if err != nil {
		return res, err
	}
	if role == "" {
		return res, nil
	}
	res.Role = role
	res.RoleCreated, res.RDSIAM, err = EnsureAppRole(ctx, conn, role)
	return res, err
}

// EnsureAppRole makes role a login role with the privileges the functions
// need on schema queen — reading and writing its tables, using its
// sequences, calling its routines, also for objects later migrations create
// — and nothing else: no DDL, no writes to the migration bookkeeping. Where
// the database has the rds_iam role (RDS), role is granted it, which makes
// it log in with IAM auth tokens only. It reports whether the role was
// created and whether rds_iam was granted. It does nothing for the role
// connected.
func EnsureAppRole(ctx context.Context, conn *pgx.Conn, role string) (created, rdsIAM bool, err error) {
	if err := queen.ValidateText("role", role); err != nil {
		return false, false, err
	}
	var self bool
	if err := conn.QueryRow(ctx, "SELECT current_user = $1", role).Scan(&self); err != nil {
		return false, false, fmt.Errorf("app role: %w", err)
	}
	if self {
		return false, false, nil
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, false, fmt.Errorf("app role: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit

	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::bigint)", int64(provisionLockKey)); err != nil {
		return false, false, fmt.Errorf("app role: lock: %w", err)
	}
	var exists bool
	var db string
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1),
	                               EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $2),
	                               current_database()`, role, rdsIAMRole).Scan(&exists, &rdsIAM, &db)
	if err != nil {
		return false, false, fmt.Errorf("app role: %w", err)
	}
	// Identifiers cannot be parameters; these are quoted by pgx.
	r := pgx.Identifier{role}.Sanitize()
	var stmts []string
	if exists {
		stmts = append(stmts, "ALTER ROLE "+r+" LOGIN")
	} else {
		stmts = append(stmts, "CREATE ROLE "+r+" LOGIN")
	}
	if rdsIAM {
		stmts = append(stmts, "GRANT "+rdsIAMRole+" TO "+r)
	}
	stmts = append(stmts,
		"GRANT CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" TO "+r,
		"GRANT USAGE ON SCHEMA queen TO "+r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA queen TO "+r,
		"REVOKE INSERT, UPDATE, DELETE ON queen.schema_migrations FROM "+r,
		"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA queen TO "+r,
		"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA queen TO "+r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA queen GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "+r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA queen GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO "+r,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA queen GRANT EXECUTE ON FUNCTIONS TO "+r,
	)
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return false, false, fmt.Errorf("app role: %s: %w", strings.SplitN(s, " TO ", 2)[0], err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, false, fmt.Errorf("app role: commit: %w", err)
	}
	return !exists, rdsIAM, nil
}

// Connector opens the master connection.
type Connector func(ctx context.Context) (*pgx.Conn, error)

// masterSecret is the JSON of an RDS-generated master secret.
type masterSecret struct {
	Username string          `json:"username"`
	Password string          `json:"password"`
	Host     string          `json:"host"`
	Port     json.RawMessage `json:"port"`
	DBName   string          `json:"dbname"`
}

// MasterConnector connects per cfg: to DATABASE_URL when set; otherwise as
// the master user of the secret QUEEN_DB_SECRET_ARN, read with read, at
// QUEEN_DB_HOST (else the secret's host), QUEEN_DB_PORT, QUEEN_DB_NAME (else
// the secret's dbname, else "postgres") with QUEEN_DB_SSLMODE.
func MasterConnector(cfg config.Config, read secrets.Reader) Connector {
	return func(ctx context.Context) (*pgx.Conn, error) {
		if cfg.DatabaseURL != "" {
			cc, err := dbconn.ConnConfig(cfg, "")
			if err != nil {
				return nil, err
			}
			return pgx.ConnectConfig(ctx, cc)
		}
		if cfg.DBSecretARN == "" {
			return nil, fmt.Errorf("no master credentials: set %s (or %s)", config.EnvDBSecretARN, config.EnvDatabaseURL)
		}
		raw, err := read(ctx, cfg.DBSecretARN)
		if err != nil {
			return nil, fmt.Errorf("read secret %s: %w", cfg.DBSecretARN, err)
		}
		var s masterSecret
		if err := json.Unmarshal([]byte(raw), &s); err != nil || s.Username == "" || s.Password == "" {
			// Never quote the secret.
			return nil, fmt.Errorf("secret %s: not an RDS master secret (JSON with username and password)", cfg.DBSecretARN)
		}
		mc := cfg
		mc.DBUser = s.Username
		if mc.DBHost == "" {
			mc.DBHost = s.Host
		}
		if mc.DBHost == "" {
			return nil, fmt.Errorf("no database host: set %s", config.EnvDBHost)
		}
		if mc.DBName == "" {
			mc.DBName = s.DBName
		}
		if mc.DBName == "" {
			mc.DBName = "postgres"
		}
		if cfg.DBPort == config.DefaultDBPort && len(s.Port) > 0 {
			if p, err := strconv.Atoi(strings.Trim(string(s.Port), `"`)); err == nil && p > 0 {
				mc.DBPort = p
			}
		}
		cc, err := dbconn.ConnConfig(mc, s.Password)
		if err != nil {
			return nil, err
		}
		return pgx.ConnectConfig(ctx, cc)
	}
}

// Handler is the migrate function's Lambda handler.
type Handler struct {
	Connect Connector
	// AppRole is the role to ensure (QUEEN_DB_USER); empty: none.
	AppRole string
	Logger  *slog.Logger
}

// Response is what the CDK provider framework expects from onEvent.
type Response struct {
	PhysicalResourceID string            `json:"PhysicalResourceId"`
	Data               map[string]string `json:"Data,omitempty"`
}

// Invoke handles a CloudFormation custom resource event: Create and Update
// provision the database, Delete does nothing (the data outlives the
// stack's schema resource). A direct invocation without RequestType ({})
// is a Create.
func (h *Handler) Invoke(ctx context.Context, raw json.RawMessage) (Response, error) {
	var ev cfn.Event
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &ev); err != nil {
			return Response{}, fmt.Errorf("decode event: %w", err)
		}
	}
	if ev.RequestType == "" {
		ev.RequestType = cfn.RequestCreate
	}
	log := h.Logger.With("requestType", string(ev.RequestType), "logicalResourceId", ev.LogicalResourceID)
	switch ev.RequestType {
	case cfn.RequestDelete:
		log.InfoContext(ctx, "delete: nothing to do, the database is kept")
		return Response{PhysicalResourceID: PhysicalResourceID}, nil
	case cfn.RequestCreate, cfn.RequestUpdate:
	default:
		return Response{}, fmt.Errorf("unknown RequestType %q", ev.RequestType)
	}
	conn, err := h.Connect(ctx)
	if err != nil {
		log.ErrorContext(ctx, "connect", "err", err)
		return Response{}, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	res, err := Run(ctx, conn, h.AppRole, pgstore.MigrateOptions{OnRetry: func(step string, attempt int, err error) {
		log.WarnContext(ctx, "migration step timed out waiting for a lock; trying again", "step", step, "attempt", attempt, "err", err)
	}})
	if err != nil {
		log.ErrorContext(ctx, "provision failed", "err", err)
		return Response{}, err
	}
	log.InfoContext(ctx, "provisioned", "applied", res.Applied, "routinesReplaced", res.RoutinesReplaced,
		"lockRetries", res.Retries, "dataChunks", res.Chunks,
		"role", res.Role, "roleCreated", res.RoleCreated, "rdsIam", res.RDSIAM)
	if len(res.Ahead) > 0 {
		log.WarnContext(ctx, "the database was migrated by a newer release (a rollback): nothing applied, routines left as they are",
			"ahead", res.Ahead)
	}
	return Response{PhysicalResourceID: PhysicalResourceID, Data: map[string]string{
		"Applied":          strings.Join(res.Applied, ","),
		"RoutinesReplaced": strconv.FormatBool(res.RoutinesReplaced),
		"Role":             res.Role,
	}}, nil
}
