package queenstack

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"

	"github.com/queen-serverless/queen/core/config"
)

// Engine selects the PostgreSQL flavour behind the RDS Proxy.
type Engine string

const (
	// EngineInstance is a single RDS for PostgreSQL instance (optionally Multi-AZ).
	EngineInstance Engine = "instance"
	// EngineAurora is an Aurora PostgreSQL cluster with one Serverless v2 writer.
	EngineAurora Engine = "aurora"
)

// Authorizer selects how callers authenticate to the HTTP API.
type Authorizer string

const (
	// AuthorizerIAM requires SigV4-signed requests from principals allowed execute-api:Invoke.
	AuthorizerIAM Authorizer = "iam"
	// AuthorizerJWT requires a bearer JWT from the configured issuer and audience.
	AuthorizerJWT Authorizer = "jwt"
)

// FunctionNames lists the Lambda functions of the stack, in a fixed order. Each one is
// built by `make build` as <AssetsDir>/<name>/bootstrap.
var FunctionNames = []string{"push", "pop", "ack", "dlq", "admin", "reaper", "migrate"}

// Documented defaults. Zero values in Props are replaced by these in WithDefaults.
const (
	DefaultAssetsDir              = "../build/lambda"
	DefaultEngine                 = EngineInstance
	DefaultInstanceType           = "t4g.small"
	DefaultAllocatedStorageGiB    = 20
	DefaultMaxAllocatedStorageGiB = 100
	DefaultAuroraMinCapacity      = 0.5
	DefaultAuroraMaxCapacity      = 4
	DefaultDatabaseName           = "queen"
	DefaultAppUser                = "queen_app"
	DefaultMasterUser             = "queen_admin"
	DefaultBackupRetentionDays    = 7
	DefaultFunctionMemoryMB       = 256
	DefaultFunctionTimeoutSec     = 10
	DefaultPopTimeoutSec          = 29
	DefaultReaperTimeoutSec       = 55
	DefaultMigrateTimeoutSec      = 300
	DefaultMaxWaitMS              = 20000 // config.DefaultMaxWaitLambda; a test holds them equal
	DefaultLogLevel               = "info"
	DefaultLogRetentionDays       = 30
	DefaultAuthorizer             = AuthorizerIAM
	DefaultThrottleRateLimit      = 500
	DefaultThrottleBurstLimit     = 1000
	DefaultReaperRateMinutes      = 1
	DefaultIngestQueue            = true
	DefaultEventQueue             = "events"
	DefaultEventPartition         = config.DefaultPartition
	DefaultIngestBatchSize        = 10
	DefaultIngestMaxReceiveCount  = 5
	DefaultRemovalPolicy          = awscdk.RemovalPolicy_SNAPSHOT
	DefaultGroupLagThreshold      = 10000
	DefaultDBPort                 = config.DefaultDBPort
	// APIGatewayTimeoutSec is the hard limit of an HTTP API integration.
	APIGatewayTimeoutSec = 30
)

// Props configures the Queen stack. The zero value is valid: WithDefaults fills every
// unset field with the Default* constant of the same name.
type Props struct {
	// AssetsDir holds <function>/bootstrap for every name in FunctionNames, relative to
	// the working directory of the synth (infra/). Default DefaultAssetsDir.
	AssetsDir string

	// Engine chooses an RDS instance or Aurora Serverless v2. Default EngineInstance.
	Engine Engine
	// InstanceType is the RDS instance class without the "db." prefix (EngineInstance
	// only). Default DefaultInstanceType.
	InstanceType string
	// AllocatedStorageGiB is the initial gp3 storage (EngineInstance only); storage
	// grows automatically up to MaxAllocatedStorageGiB.
	AllocatedStorageGiB    float64
	MaxAllocatedStorageGiB float64
	// MultiAZ runs a standby instance in a second zone (EngineInstance only).
	MultiAZ bool
	// AuroraMinCapacity and AuroraMaxCapacity bound the Serverless v2 writer, in ACUs.
	AuroraMinCapacity float64
	AuroraMaxCapacity float64
	// DatabaseName is the database the schema lives in. Default "queen".
	DatabaseName string
	// AppUser is the database role the functions log in as through IAM auth; the
	// migrate function creates it with rds_iam granted. Default "queen_app".
	AppUser string
	// MasterUser is the administrator whose generated password is kept in Secrets
	// Manager and read only by the migrate function. Default "queen_admin".
	MasterUser string
	// BackupRetentionDays of automated backups (1–35). Default 7.
	BackupRetentionDays float64

	// FunctionMemoryMB for every function. Default 256.
	FunctionMemoryMB float64
	// FunctionTimeoutSec for push, ack, dlq and admin. Default 10.
	FunctionTimeoutSec float64
	// PopTimeoutSec must exceed MaxWaitMS and stay below API Gateway's 30 s. Default 29.
	PopTimeoutSec float64
	// ReaperTimeoutSec bounds one reaper pass; keep it below the schedule period.
	ReaperTimeoutSec float64
	// MigrateTimeoutSec bounds the deploy-time migration. Default 300.
	MigrateTimeoutSec float64
	// MaxWaitMS caps long-poll pops (QUEEN_MAX_WAIT_MS). Default 20000.
	MaxWaitMS float64
	// LogLevel of the functions (QUEEN_LOG_LEVEL). Default "info".
	LogLevel string
	// LogRetentionDays for function and access logs; must be a CloudWatch retention
	// value (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, ...). Default 30.
	LogRetentionDays float64

	// Authorizer for every route. Default AuthorizerIAM.
	Authorizer Authorizer
	// JWTIssuer (an https URL) and JWTAudience are required with AuthorizerJWT.
	JWTIssuer   string
	JWTAudience []string
	// ThrottleRateLimit (requests/s) and ThrottleBurstLimit of the API stage.
	ThrottleRateLimit  float64
	ThrottleBurstLimit float64

	// ReaperRateMinutes is the period of the reaper schedule. Default 1.
	ReaperRateMinutes float64

	// IngestQueue adds an SQS queue (with its own DLQ) feeding the push function.
	// nil means DefaultIngestQueue.
	IngestQueue *bool
	// EventQueue, EventPartition and EventPartitionField configure how the push
	// function maps SQS/SNS/EventBridge events without explicit targets.
	EventQueue          string
	EventPartition      string
	EventPartitionField string
	// IngestBatchSize is the SQS batch size (1–10000). Default 10.
	IngestBatchSize float64
	// IngestMaxReceiveCount is how often a message is tried before the ingest DLQ.
	IngestMaxReceiveCount float64

	// RemovalPolicy of stateful resources. RETAIN keeps the database (with deletion
	// protection), its secret, the payload encryption key, queues and logs; SNAPSHOT
	// (default) takes a final snapshot, keeps the encryption key (the snapshot's
	// encrypted payloads need it) and deletes the rest; DESTROY deletes everything.
	RemovalPolicy awscdk.RemovalPolicy

	// DLQDepthThreshold: alarm when QueenServerless/DLQDepth exceeds it. Default 0.
	DLQDepthThreshold float64
	// GroupLagThreshold: alarm when QueenServerless/MaxGroupLag exceeds it for 15
	// minutes. Default 10000.
	GroupLagThreshold float64
	// FunctionErrorsThreshold and FunctionThrottlesThreshold: alarm when a function's
	// Errors / Throttles sum over 5 minutes exceeds them. Default 0.
	FunctionErrorsThreshold    float64
	FunctionThrottlesThreshold float64
	// PinnedConnectionsThreshold: alarm when the proxy holds more pinned sessions.
	// Default 0: the code never pins, so any pinned session is a bug.
	PinnedConnectionsThreshold float64
	// AlarmEmail, when set, subscribes this address to the alarm topic.
	AlarmEmail string

	// MigrationNonce is passed to the migration custom resource. A value that changes
	// on every synth (main uses the synth time) makes CloudFormation run the
	// migrations on every deploy; empty runs them on create and whenever the migrate
	// binary changes.
	MigrationNonce string
}

// WithDefaults returns a copy of p with every unset field set to its default.
func (p Props) WithDefaults() Props {
	str := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	num := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	str(&p.AssetsDir, DefaultAssetsDir)
	if p.Engine == "" {
		p.Engine = DefaultEngine
	}
	str(&p.InstanceType, DefaultInstanceType)
	num(&p.AllocatedStorageGiB, DefaultAllocatedStorageGiB)
	num(&p.MaxAllocatedStorageGiB, DefaultMaxAllocatedStorageGiB)
	num(&p.AuroraMinCapacity, DefaultAuroraMinCapacity)
	num(&p.AuroraMaxCapacity, DefaultAuroraMaxCapacity)
	str(&p.DatabaseName, DefaultDatabaseName)
	str(&p.AppUser, DefaultAppUser)
	str(&p.MasterUser, DefaultMasterUser)
	num(&p.BackupRetentionDays, DefaultBackupRetentionDays)
	num(&p.FunctionMemoryMB, DefaultFunctionMemoryMB)
	num(&p.FunctionTimeoutSec, DefaultFunctionTimeoutSec)
	num(&p.PopTimeoutSec, DefaultPopTimeoutSec)
	num(&p.ReaperTimeoutSec, DefaultReaperTimeoutSec)
	num(&p.MigrateTimeoutSec, DefaultMigrateTimeoutSec)
	num(&p.MaxWaitMS, DefaultMaxWaitMS)
	str(&p.LogLevel, DefaultLogLevel)
	num(&p.LogRetentionDays, DefaultLogRetentionDays)
	if p.Authorizer == "" {
		p.Authorizer = DefaultAuthorizer
	}
	num(&p.ThrottleRateLimit, DefaultThrottleRateLimit)
	num(&p.ThrottleBurstLimit, DefaultThrottleBurstLimit)
	num(&p.ReaperRateMinutes, DefaultReaperRateMinutes)
	if p.IngestQueue == nil {
		v := DefaultIngestQueue
		p.IngestQueue = &v
	}
	str(&p.EventQueue, DefaultEventQueue)
	str(&p.EventPartition, DefaultEventPartition)
	num(&p.IngestBatchSize, DefaultIngestBatchSize)
	num(&p.IngestMaxReceiveCount, DefaultIngestMaxReceiveCount)
	if p.RemovalPolicy == "" {
		p.RemovalPolicy = DefaultRemovalPolicy
	}
	num(&p.GroupLagThreshold, DefaultGroupLagThreshold)
	return p
}

// Ingest reports whether the SQS ingest queue is enabled (after WithDefaults).
func (p Props) Ingest() bool { return p.IngestQueue == nil || *p.IngestQueue }

// retentionDays maps the retention periods CloudWatch Logs accepts, in days, to CDK's enum.
var retentionDays = map[float64]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS,
	5: awslogs.RetentionDays_FIVE_DAYS, 7: awslogs.RetentionDays_ONE_WEEK,
	14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS,
	120: awslogs.RetentionDays_FOUR_MONTHS, 150: awslogs.RetentionDays_FIVE_MONTHS,
	180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS,
	731: awslogs.RetentionDays_TWO_YEARS, 1096: awslogs.RetentionDays_THREE_YEARS,
	1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS,
	3288: awslogs.RetentionDays_NINE_YEARS, 3653: awslogs.RetentionDays_TEN_YEARS,
}

// Validate reports every invalid field of p (call it after WithDefaults), including
// missing Lambda assets, which would otherwise make the synth panic.
func (p Props) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	switch p.Engine {
	case EngineInstance, EngineAurora:
	default:
		bad("engine %q: want %q or %q", p.Engine, EngineInstance, EngineAurora)
	}
	switch p.Authorizer {
	case AuthorizerIAM:
	case AuthorizerJWT:
		if u, err := url.Parse(p.JWTIssuer); p.JWTIssuer == "" || err != nil || u.Scheme != "https" || u.Host == "" {
			bad("jwtIssuer %q: the JWT authorizer needs an https issuer URL", p.JWTIssuer)
		}
		if len(p.JWTAudience) == 0 {
			bad("jwtAudience: the JWT authorizer needs at least one audience")
		}
	default:
		bad("authorizer %q: want %q or %q", p.Authorizer, AuthorizerIAM, AuthorizerJWT)
	}
	switch p.RemovalPolicy {
	case awscdk.RemovalPolicy_RETAIN, awscdk.RemovalPolicy_SNAPSHOT, awscdk.RemovalPolicy_DESTROY:
	default:
		bad("removalPolicy %q: want RETAIN, SNAPSHOT or DESTROY", p.RemovalPolicy)
	}
	if p.MaxWaitMS < 0 || p.PopTimeoutSec*1000 <= p.MaxWaitMS {
		bad("popTimeoutSec %v must exceed maxWaitMs %v", p.PopTimeoutSec, p.MaxWaitMS)
	}
	if p.PopTimeoutSec >= APIGatewayTimeoutSec {
		bad("popTimeoutSec %v must stay below API Gateway's %d s", p.PopTimeoutSec, APIGatewayTimeoutSec)
	}
	if p.FunctionTimeoutSec >= APIGatewayTimeoutSec {
		bad("functionTimeoutSec %v must stay below API Gateway's %d s", p.FunctionTimeoutSec, APIGatewayTimeoutSec)
	}
	if p.ReaperRateMinutes < 1 || p.ReaperRateMinutes != float64(int(p.ReaperRateMinutes)) {
		bad("reaperRateMinutes %v: want a whole number of minutes >= 1", p.ReaperRateMinutes)
	} else if p.ReaperTimeoutSec >= p.ReaperRateMinutes*60 || p.ReaperTimeoutSec > 900 {
		bad("reaperTimeoutSec %v must be shorter than the reaper period and at most 900", p.ReaperTimeoutSec)
	}
	if p.MigrateTimeoutSec > 900 {
		bad("migrateTimeoutSec %v: Lambda allows at most 900", p.MigrateTimeoutSec)
	}
	if p.FunctionMemoryMB < 128 || p.FunctionMemoryMB > 10240 {
		bad("functionMemoryMb %v: want 128..10240", p.FunctionMemoryMB)
	}
	if _, ok := retentionDays[p.LogRetentionDays]; !ok {
		bad("logRetentionDays %v is not a CloudWatch Logs retention period", p.LogRetentionDays)
	}
	if p.BackupRetentionDays < 1 || p.BackupRetentionDays > 35 {
		bad("backupRetentionDays %v: want 1..35 (backups stay on)", p.BackupRetentionDays)
	}
	if p.AuroraMinCapacity < 0 || p.AuroraMaxCapacity < p.AuroraMinCapacity {
		bad("aurora capacity %v..%v is not a valid range", p.AuroraMinCapacity, p.AuroraMaxCapacity)
	}
	if p.IngestBatchSize < 1 || p.IngestBatchSize > 10000 {
		bad("ingestBatchSize %v: want 1..10000", p.IngestBatchSize)
	}
	if p.ThrottleRateLimit <= 0 || p.ThrottleBurstLimit <= 0 {
		bad("throttle limits must be positive")
	}
	for _, n := range []struct{ field, v string }{{"databaseName", p.DatabaseName}, {"appUser", p.AppUser}, {"masterUser", p.MasterUser}} {
		if !isIdentifier(n.v) {
			bad("%s %q: want a lower-case SQL identifier", n.field, n.v)
		}
	}
	if p.AppUser == p.MasterUser {
		bad("appUser and masterUser must differ")
	}
	for _, name := range FunctionNames {
		if _, err := os.Stat(filepath.Join(p.AssetsDir, name, "bootstrap")); err != nil {
			bad("lambda asset %s: %v (run `make build`, or point assetsDir at placeholders)", filepath.Join(p.AssetsDir, name, "bootstrap"), errors.Unwrap(err))
		}
	}
	return errors.Join(errs...)
}

func isIdentifier(s string) bool {
	if s == "" || len(s) > 63 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// PropsFromContext builds Props from CDK context values (strings from `-c`, or typed
// values from cdk.json); lookup returns nil for an absent key. Unset keys keep their
// zero value, so WithDefaults applies. It is the only place stack settings are parsed;
// the keys are those read below, documented in README.md (Deploying to AWS, Configuration).
func PropsFromContext(lookup func(key string) any) (Props, error) {
	var p Props
	var errs []error
	get := func(key string) (string, bool) {
		v := lookup(key)
		if v == nil {
			return "", false
		}
		s := strings.TrimSpace(fmt.Sprint(v))
		return s, s != ""
	}
	str := func(key string, dst *string) {
		if s, ok := get(key); ok {
			*dst = s
		}
	}
	num := func(key string, dst *float64) {
		if s, ok := get(key); ok {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s=%q: not a number", key, s))
				return
			}
			*dst = f
		}
	}
	boolean := func(key string) *bool {
		s, ok := get(key)
		if !ok {
			return nil
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s=%q: want true or false", key, s))
			return nil
		}
		return &b
	}

	str("assetsDir", &p.AssetsDir)
	if s, ok := get("engine"); ok {
		p.Engine = Engine(strings.ToLower(s))
	}
	str("instanceType", &p.InstanceType)
	if b := boolean("multiAz"); b != nil {
		p.MultiAZ = *b
	}
	num("auroraMinCapacity", &p.AuroraMinCapacity)
	num("auroraMaxCapacity", &p.AuroraMaxCapacity)
	num("functionMemoryMb", &p.FunctionMemoryMB)
	str("logLevel", &p.LogLevel)
	num("logRetentionDays", &p.LogRetentionDays)
	if s, ok := get("authorizer"); ok {
		p.Authorizer = Authorizer(strings.ToLower(s))
	}
	str("jwtIssuer", &p.JWTIssuer)
	if s, ok := get("jwtAudience"); ok {
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				p.JWTAudience = append(p.JWTAudience, a)
			}
		}
	}
	num("throttleRateLimit", &p.ThrottleRateLimit)
	num("throttleBurstLimit", &p.ThrottleBurstLimit)
	num("reaperRateMinutes", &p.ReaperRateMinutes)
	p.IngestQueue = boolean("ingestQueue")
	str("eventQueue", &p.EventQueue)
	str("eventPartition", &p.EventPartition)
	str("eventPartitionField", &p.EventPartitionField)
	if s, ok := get("removalPolicy"); ok {
		p.RemovalPolicy = awscdk.RemovalPolicy(strings.ToUpper(s))
	}
	str("alarmEmail", &p.AlarmEmail)
	num("dlqDepthThreshold", &p.DLQDepthThreshold)
	num("groupLagThreshold", &p.GroupLagThreshold)
	return p, errors.Join(errs...)
}
