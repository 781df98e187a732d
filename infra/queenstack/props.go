package queenstack

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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
	// DefaultReaperTimeoutSec 0 derives the reaper's timeout from its period:
	// ReaperRateMinutes × 60 − ReaperTickMarginSec, at most 900 (50 s every minute).
	DefaultReaperTimeoutSec = 0
	// ReaperTickMarginSec is how long before the next tick a reaper pass must end.
	ReaperTickMarginSec = 10
	// DefaultReaperBehindPasses is how many reaper periods in a row must each have
	// only passes that ran out of time before the ReaperBehind alarm fires.
	DefaultReaperBehindPasses = 5
	DefaultMigrateTimeoutSec  = 840
	DefaultMaxWaitMS          = 20000 // config.DefaultMaxWaitLambda; a test holds them equal
	DefaultLogLevel           = "info"
	// DefaultRetentionSeconds and DefaultCompletedRetentionSeconds are the functions'
	// own defaults (core/config): a week, and none beyond it.
	DefaultRetentionSeconds          = config.DefaultRetentionSeconds
	DefaultCompletedRetentionSeconds = config.DefaultCompletedRetentionSeconds
	// KeepForever in DefaultRetentionSeconds or DefaultCompletedRetentionSeconds
	// keeps messages for ever (the variable's 0).
	KeepForever                 = -1
	DefaultLogRetentionDays     = 30
	DefaultAuthorizer           = AuthorizerIAM
	DefaultThrottleRateLimit    = 500
	DefaultThrottleBurstLimit   = 1000
	DefaultReaperRateMinutes    = 1
	DefaultIngestQueue          = true
	DefaultEventQueue           = "events"
	DefaultEventPartition       = config.DefaultPartition
	DefaultIngestBatchSize      = 10
	DefaultIngestRetryMinutes   = 30
	DefaultIngestMaxConcurrency = 10
	// DefaultProxyBorrowTimeoutSec 0 derives the borrow timeout from the function
	// timeouts: half the shortest one (see Props.ProxyBorrowTimeoutSec).
	DefaultProxyBorrowTimeoutSec          = 0
	DefaultProxyMaxConnectionsPercent     = 90
	DefaultProxyMaxIdleConnectionsPercent = 50
	DefaultRemovalPolicy                  = awscdk.RemovalPolicy_SNAPSHOT
	// Unreserved in a *ReservedConcurrency prop reserves no concurrency.
	Unreserved                       = -1
	DefaultPushReservedConcurrency   = Unreserved
	DefaultPopReservedConcurrency    = Unreserved
	DefaultAckReservedConcurrency    = Unreserved
	DefaultDLQReservedConcurrency    = Unreserved
	DefaultAdminReservedConcurrency  = Unreserved
	DefaultReaperReservedConcurrency = Unreserved
	// LambdaMinUnreservedConcurrency is what Lambda keeps unreserved in every
	// account: it refuses a reservation that would leave less.
	LambdaMinUnreservedConcurrency         = 100
	DefaultGroupLagThreshold               = 10000
	DefaultDBCPUCreditBalanceThreshold     = 50
	DefaultDBFreeableMemoryMiBThreshold    = 128
	DefaultDBCPUUtilizationThreshold       = 80
	DefaultDBFreeStorageGiBThreshold       = 2
	DefaultProxyBorrowLatencyMsThreshold   = 1000
	DefaultProxyClientConnectionsThreshold = 1000
	DefaultAPI5xxThreshold                 = 10
	DefaultIngestMessageAgeSecThreshold    = 600
	DefaultDBPort                          = config.DefaultDBPort
	// MaxMigrateTimeoutSec is the longest migrate may run: CDK's provider framework
	// function, which invokes it synchronously, has a timeout of 900 s, and keeps a
	// minute to report the outcome.
	MaxMigrateTimeoutSec = 840
	// APIGatewayTimeoutSec is the hard limit of an HTTP API integration.
	APIGatewayTimeoutSec = 30
	// APIGatewayAccountRateLimit and APIGatewayAccountBurstLimit are API Gateway's
	// default quotas per account and Region, shared by all its APIs: a stage's
	// throttle above them is not reached (request an increase first).
	APIGatewayAccountRateLimit  = 10000
	APIGatewayAccountBurstLimit = 5000
)

// The documented load the production profile of cdk.json is sized for: messages a
// day, each pushed, popped and acknowledged once, and the ratio of the peak rate to
// the day's average. docs/aws.md (Sizing) derives the profile's instance class,
// storage and throttles from it; the tests hold the profile to it.
const (
	DocumentedMessagesPerDay = 50_000_000
	DocumentedPeakToAverage  = 3
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
	// only). Default DefaultInstanceType (t4g.small, 2 burstable vCPUs, for
	// development). The production profile sets m7g.2xlarge (8 vCPUs, 32 GiB): at
	// the documented load, one message at a time, `make bench` figures put the
	// database at ~2.2 cores on average and ~6.6 at a 3× peak, counting the bench's
	// own clients (docs/aws.md, Sizing).
	InstanceType string
	// AllocatedStorageGiB is the initial gp3 storage (EngineInstance only). Default
	// 20; the production profile sets 400, which holds a week of the documented load
	// (see DBFreeStorageGiBThreshold) and is where RDS's gp3 baseline rises from 3,000
	// to 12,000 IOPS (and 125 to 500 MiB/s) at no extra charge.
	AllocatedStorageGiB float64
	// MaxAllocatedStorageGiB is the ceiling of storage autoscaling: RDS adds space
	// (10 % or more at a time, at most every 6 hours) once less than 10 % is free,
	// up to this size. It must be at least 10 % above AllocatedStorageGiB. Default
	// 100; production 1,000, which covers the documented load's week of retention
	// (~255 GiB) about four times over: room for a retention raised on some queues or
	// load above the documented one, and ~25 days of writes with retention stopped.
	MaxAllocatedStorageGiB float64
	// MultiAZ runs a standby in a second zone: a Multi-AZ RDS instance, or with
	// EngineAurora a Serverless v2 reader that scales with the writer (the failover
	// target). Default false; the production profile sets it.
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

	// ProxyBorrowTimeoutSec is how long a request waits for a free database
	// connection in the RDS Proxy before the proxy refuses it (the function then
	// answers 503). It must be shorter than every timeout of a function that
	// connects through the proxy, so callers see a 503 rather than a Lambda timeout.
	// Default 0: half the shortest of FunctionTimeoutSec, PopTimeoutSec and
	// ReaperTimeoutSec, rounded down (5 s with the default timeouts).
	ProxyBorrowTimeoutSec float64
	// ProxyMaxConnectionsPercent is the share of the database's max_connections the
	// proxy may open (1–100). The rest stays free for migrate, which logs in directly
	// as the master user during a deploy, and for an operator. Default 90.
	ProxyMaxConnectionsPercent float64
	// ProxyMaxIdleConnectionsPercent is the share of max_connections the proxy keeps
	// open while idle (1–ProxyMaxConnectionsPercent). Default 50.
	ProxyMaxIdleConnectionsPercent float64

	// FunctionMemoryMB for every function. Default 256.
	FunctionMemoryMB float64
	// FunctionTimeoutSec for push, ack, dlq and admin. Default 10.
	FunctionTimeoutSec float64
	// PopTimeoutSec must exceed MaxWaitMS and stay below API Gateway's 30 s. Default 29.
	PopTimeoutSec float64
	// ReaperTimeoutSec bounds one reaper pass, which works in short transactions
	// until it has caught up or its deadline less a margin (10 s, core/reaper) is
	// near: the longer it is, the more a pass can catch up. It must stay below the
	// schedule period so that a pass ends before the next tick starts another.
	// Default 0: ReaperRateMinutes × 60 − 10 s, at most Lambda's 900 s (50 s with
	// the 1-minute default, 290 s every 5 minutes).
	ReaperTimeoutSec float64
	// MigrateTimeoutSec bounds the deploy-time migration: the migrate function's
	// timeout, whose deadline is migrate's time budget. A schema change that waits
	// for a lock gives up after its lock_timeout and is retried, and data
	// migrations over big tables run in resumable batches, so a deploy behind a
	// long reaper pass or over a large log needs minutes, not seconds. Default 840
	// (14 minutes), the most the custom resource allows: CDK's provider framework,
	// which invokes migrate and waits for it, stops after 15 minutes, and needs the
	// last one to report the outcome to CloudFormation (the resource's
	// ServiceTimeout is MigrateTimeoutSec + 60 s).
	MigrateTimeoutSec float64
	// MaxWaitMS caps long-poll pops (QUEEN_MAX_WAIT_MS). Default 20000.
	MaxWaitMS float64
	// DefaultRetentionSeconds (QUEEN_DEFAULT_RETENTION_SECONDS) is how long a queue
	// whose retentionSeconds is unset (0) or disabled keeps its messages, consumed
	// or not; DefaultCompletedRetentionSeconds (QUEEN_DEFAULT_COMPLETED_RETENTION_
	// SECONDS) likewise how long it keeps what every group has consumed. A queue's
	// own setting wins. 0 means the default, KeepForever (-1) keeps for ever.
	// Defaults 604,800 (7 days) and 0 (consumed messages stay until the 7 days are
	// up). A default deployment must not fill its disk under its documented load:
	// a week of it is ~212 GiB (see DBFreeStorageGiBThreshold), which the
	// production profile's 400 GiB hold; and since retention removes a message
	// whether or not it was consumed, consumers that are down for the whole week
	// add nothing to it. Keeping consumed messages for the week costs no disk
	// beyond that worst case, which must be provisioned anyway, and keeps replay
	// (seek) and new groups reading from the start possible for a week.
	DefaultRetentionSeconds          float64
	DefaultCompletedRetentionSeconds float64
	// LogLevel of the functions (QUEEN_LOG_LEVEL). Default "info".
	LogLevel string
	// LogRetentionDays for function and access logs; must be a CloudWatch retention
	// value (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, ...). Default 30.
	LogRetentionDays float64

	// Reserved concurrency of each function: a cap on its containers that is also
	// held back for it from the account's quota. 0 means the default; Unreserved
	// (-1) reserves nothing (the function shares the account's unreserved pool).
	// Every function defaults to Unreserved, so that a first deploy succeeds in a
	// new account, whose Lambda quota can be as low as 10 concurrent executions.
	//
	// Quota: Lambda refuses a reservation that leaves the account fewer than
	// LambdaMinUnreservedConcurrency (100) unreserved, so the account's
	// "Concurrent executions" quota (Service Quotas, AWS Lambda) must be at least
	// the sum of the reservations plus 100: 201 for the production profile, which
	// reserves pop 100 and reaper 1. Request the increase before such a deploy.
	//
	// Why reserve: pop's long polls hold a container for up to MaxWaitMS each,
	// so 500 req/s of 20 s polls would otherwise take 10,000, and a reservation of
	// 100 keeps them from starving push and ack; a reaper reservation of 1 gives
	// every pass a container however busy the account is, and makes passes
	// strictly one at a time (without it, a pass still ends before the next tick,
	// since ReaperTimeoutSec is shorter than the period). Push's ingest share is
	// capped by IngestMaxConcurrency either way.
	PushReservedConcurrency   float64
	PopReservedConcurrency    float64
	AckReservedConcurrency    float64
	DLQReservedConcurrency    float64
	AdminReservedConcurrency  float64
	ReaperReservedConcurrency float64

	// Authorizer for every route. Default AuthorizerIAM.
	Authorizer Authorizer
	// JWTIssuer (an https URL) and JWTAudience are required with AuthorizerJWT.
	JWTIssuer   string
	JWTAudience []string
	// ThrottleRateLimit (requests/s) and ThrottleBurstLimit (the token bucket's
	// size) of the API stage: requests beyond them get 429 before they reach a
	// function. Default 500 and 1,000. The production profile sets 6,000 and 5,000:
	// the documented load sent one message per request is 3 requests a message ×
	// 50M / 86,400 s ≈ 1,740 requests/s on average and ~5,200 at a 3× peak. API
	// Gateway's own account quota (10,000 requests/s and a burst of 5,000 per
	// Region, shared by every API of the account) caps whatever the stage allows.
	ThrottleRateLimit  float64
	ThrottleBurstLimit float64

	// ReaperRateMinutes is the period of the reaper schedule. Default 1.
	ReaperRateMinutes float64
	// ReaperBehindPasses: alarm when the reaper has not caught up (every pass ran
	// out of time with work left, QueenServerless/ReaperBehind) for this many
	// periods in a row. Default 5; with ReaperRateMinutes at most 1,440 minutes
	// together (CloudWatch's limit on an alarm's window).
	ReaperBehindPasses float64

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
	// IngestRetryMinutes is how long the ingest queue keeps retrying a message that
	// push cannot store (a database outage, a failover) before it moves to the ingest
	// DLQ: IngestMaxReceiveCount defaults to this divided by the visibility timeout
	// (6 × FunctionTimeoutSec), rounded up. Default 30.
	IngestRetryMinutes float64
	// IngestMaxReceiveCount is how often a message is tried before the ingest DLQ
	// (1–1000). Default derived from IngestRetryMinutes (30 with the default timeouts).
	IngestMaxReceiveCount float64
	// IngestMaxConcurrency caps the push containers the ingest mapping runs at once
	// (the mapping's MaximumConcurrency, 2–1000), so a backlog cannot take the
	// account's Lambda concurrency or the proxy's connections. Default 10.
	IngestMaxConcurrency float64

	// RemovalPolicy of stateful resources. RETAIN keeps the database (with deletion
	// protection), its secret, the payload encryption key, queues and logs; SNAPSHOT
	// (default) takes a final snapshot, keeps the encryption key (the snapshot's
	// encrypted payloads need it) and deletes the rest; DESTROY deletes everything.
	RemovalPolicy awscdk.RemovalPolicy

	// DLQDepthThreshold: alarm when QueenServerless/DLQDepth grows by more than this
	// within five minutes (new dead letters, not the ones already there, so the alarm
	// clears without draining the table). Default 0: any growth.
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
	// DBCPUCreditBalanceThreshold: alarm when a burstable (db.t*) instance has fewer
	// CPU credits left (it is then throttled to its baseline). Default 50.
	DBCPUCreditBalanceThreshold float64
	// DBFreeableMemoryMiBThreshold: alarm when the database has less free memory,
	// in MiB, for 15 minutes. Default 128.
	DBFreeableMemoryMiBThreshold float64
	// DBCPUUtilizationThreshold: alarm when the database's CPU is above this
	// percentage for 15 minutes: time for a larger class, or for consumers to pop
	// in batches. Default 80.
	DBCPUUtilizationThreshold float64
	// DBFreeStorageGiBThreshold: alarm when the instance has less free storage, in
	// GiB, for 15 minutes (EngineInstance only: Aurora's storage grows by itself).
	// Size it in days of writes. The documented load, 50M messages a day of ~500 B
	// payload plus ~120 B of log, index and dedup overhead and a 36 B client-made id
	// (~650 B each), writes 50e6 × 650 B = 32.5 GB ≈ 30 GiB a day; with the default
	// retention of 7 days the database holds ~212 GiB, ~255 GiB with 20 % for dead
	// tuples, index slack and WAL. The production profile sets 60 GiB: two days of
	// those writes. With 400 GiB allocated it fires once more than 340 GiB are used,
	// three days of writes past the steady state (retention behind, or load above
	// the documented one), while storage autoscaling still has ~25 days of writes to
	// grow into; and once autoscaling has reached MaxAllocatedStorageGiB it fires
	// with two days left even if retention stopped altogether. Keep it below 10 % of
	// the allocation where you can: autoscaling lets free space fall to 10 % before
	// it adds more, so a higher threshold also fires during that growth. Default 2
	// (10 % of the default 20 GiB).
	DBFreeStorageGiBThreshold float64
	// ProxyBorrowLatencyMsThreshold: alarm when borrowing a database connection from
	// the RDS Proxy takes longer on average for 10 minutes (the pool is saturated;
	// at ProxyBorrowTimeoutSec requests fail with 503). Default 1000.
	ProxyBorrowLatencyMsThreshold float64
	// ProxyClientConnectionsThreshold: alarm when more clients (function containers,
	// one connection each) are connected to the proxy. Default 1000.
	ProxyClientConnectionsThreshold float64
	// API5xxThreshold: alarm when the HTTP API answers more 5xx in five minutes.
	// Default 10.
	API5xxThreshold float64
	// IngestMessageAgeSecThreshold: alarm when the oldest ingest message is older, in
	// seconds (push is failing or cannot keep up). Default 600.
	IngestMessageAgeSecThreshold float64
	// AlarmEmail, when set, subscribes this address to the alarm topic.
	AlarmEmail string

	// Profile is the name of the context profile PropsFromContext applied ("" for
	// none); a stack with a profile gets CloudFormation termination protection.
	Profile string

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
	num(&p.MigrateTimeoutSec, DefaultMigrateTimeoutSec)
	num(&p.MaxWaitMS, DefaultMaxWaitMS)
	str(&p.LogLevel, DefaultLogLevel)
	num(&p.DefaultRetentionSeconds, DefaultRetentionSeconds)
	num(&p.DefaultCompletedRetentionSeconds, DefaultCompletedRetentionSeconds)
	num(&p.LogRetentionDays, DefaultLogRetentionDays)
	if p.Authorizer == "" {
		p.Authorizer = DefaultAuthorizer
	}
	num(&p.ThrottleRateLimit, DefaultThrottleRateLimit)
	num(&p.ThrottleBurstLimit, DefaultThrottleBurstLimit)
	num(&p.ReaperRateMinutes, DefaultReaperRateMinutes)
	num(&p.ReaperTimeoutSec, min(p.ReaperRateMinutes*60-ReaperTickMarginSec, 900))
	num(&p.ReaperBehindPasses, DefaultReaperBehindPasses)
	if p.IngestQueue == nil {
		v := DefaultIngestQueue
		p.IngestQueue = &v
	}
	str(&p.EventQueue, DefaultEventQueue)
	str(&p.EventPartition, DefaultEventPartition)
	num(&p.IngestBatchSize, DefaultIngestBatchSize)
	num(&p.IngestRetryMinutes, DefaultIngestRetryMinutes)
	num(&p.IngestMaxReceiveCount, math.Ceil(p.IngestRetryMinutes*60/p.IngestVisibilityTimeoutSec()))
	num(&p.IngestMaxConcurrency, DefaultIngestMaxConcurrency)
	num(&p.ProxyBorrowTimeoutSec, math.Max(1, math.Floor(p.shortestProxyClientTimeoutSec()/2)))
	num(&p.ProxyMaxConnectionsPercent, DefaultProxyMaxConnectionsPercent)
	num(&p.ProxyMaxIdleConnectionsPercent, DefaultProxyMaxIdleConnectionsPercent)
	num(&p.PushReservedConcurrency, DefaultPushReservedConcurrency)
	num(&p.PopReservedConcurrency, DefaultPopReservedConcurrency)
	num(&p.AckReservedConcurrency, DefaultAckReservedConcurrency)
	num(&p.DLQReservedConcurrency, DefaultDLQReservedConcurrency)
	num(&p.AdminReservedConcurrency, DefaultAdminReservedConcurrency)
	num(&p.ReaperReservedConcurrency, DefaultReaperReservedConcurrency)
	if p.RemovalPolicy == "" {
		p.RemovalPolicy = DefaultRemovalPolicy
	}
	num(&p.GroupLagThreshold, DefaultGroupLagThreshold)
	num(&p.DBCPUCreditBalanceThreshold, DefaultDBCPUCreditBalanceThreshold)
	num(&p.DBFreeableMemoryMiBThreshold, DefaultDBFreeableMemoryMiBThreshold)
	num(&p.DBCPUUtilizationThreshold, DefaultDBCPUUtilizationThreshold)
	num(&p.DBFreeStorageGiBThreshold, DefaultDBFreeStorageGiBThreshold)
	num(&p.ProxyBorrowLatencyMsThreshold, DefaultProxyBorrowLatencyMsThreshold)
	num(&p.ProxyClientConnectionsThreshold, DefaultProxyClientConnectionsThreshold)
	num(&p.API5xxThreshold, DefaultAPI5xxThreshold)
	num(&p.IngestMessageAgeSecThreshold, DefaultIngestMessageAgeSecThreshold)
	return p
}

// Burstable reports whether the database is a burstable (db.t*) instance, which runs
// on CPU credits.
func (p Props) Burstable() bool {
	return p.Engine == EngineInstance && strings.HasPrefix(p.InstanceType, "t")
}

// Ingest reports whether the SQS ingest queue is enabled (after WithDefaults).
func (p Props) Ingest() bool { return p.IngestQueue == nil || *p.IngestQueue }

// IngestVisibilityTimeoutSec is the ingest queue's visibility timeout: six times the
// push timeout, as AWS recommends for a queue that feeds a function.
func (p Props) IngestVisibilityTimeoutSec() float64 { return 6 * p.FunctionTimeoutSec }

// shortestProxyClientTimeoutSec is the shortest timeout of a function that connects
// through the proxy (every one but migrate).
func (p Props) shortestProxyClientTimeoutSec() float64 {
	return min(p.FunctionTimeoutSec, p.PopTimeoutSec, p.ReaperTimeoutSec)
}

// ReservedConcurrency is the reserved concurrency of each function but migrate (after
// WithDefaults); Unreserved means none. Migrate runs once per deploy and reserves none.
func (p Props) ReservedConcurrency() map[string]float64 {
	return map[string]float64{
		"push": p.PushReservedConcurrency, "pop": p.PopReservedConcurrency, "ack": p.AckReservedConcurrency,
		"dlq": p.DLQReservedConcurrency, "admin": p.AdminReservedConcurrency, "reaper": p.ReaperReservedConcurrency,
	}
}

// LambdaQuotaNeeded is the smallest account quota of concurrent executions Lambda
// accepts these reservations in: their sum plus LambdaMinUnreservedConcurrency, or 0
// when nothing is reserved (any account, a new one with a quota of 10 too).
func (p Props) LambdaQuotaNeeded() float64 {
	var sum float64
	for _, c := range p.ReservedConcurrency() {
		if c != Unreserved {
			sum += c
		}
	}
	if sum == 0 {
		return 0
	}
	return sum + LambdaMinUnreservedConcurrency
}

// RetentionEnv is the value of QUEEN_DEFAULT_RETENTION_SECONDS or
// QUEEN_DEFAULT_COMPLETED_RETENTION_SECONDS for a retention prop (after
// WithDefaults): its seconds, "0" for KeepForever.
func RetentionEnv(seconds float64) string {
	if seconds == KeepForever {
		return "0"
	}
	return strconv.FormatFloat(seconds, 'f', -1, 64)
}

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
	} else if p.ReaperBehindPasses < 1 || p.ReaperBehindPasses != math.Trunc(p.ReaperBehindPasses) || p.ReaperBehindPasses*p.ReaperRateMinutes > 1440 {
		bad("reaperBehindPasses %v: want a whole number >= 1, and at most a day of reaper periods", p.ReaperBehindPasses)
	}
	if p.MigrateTimeoutSec < 60 || p.MigrateTimeoutSec > MaxMigrateTimeoutSec {
		bad("migrateTimeoutSec %v: want 60..%d (the provider framework that invokes migrate stops at 900 s and needs a minute to report)", p.MigrateTimeoutSec, MaxMigrateTimeoutSec)
	}
	for _, r := range []struct {
		key string
		v   float64
	}{{"defaultRetentionSeconds", p.DefaultRetentionSeconds}, {"defaultCompletedRetentionSeconds", p.DefaultCompletedRetentionSeconds}} {
		if r.v < KeepForever || r.v != math.Trunc(r.v) {
			bad("%s %v: want whole seconds, or %d to keep for ever", r.key, r.v, KeepForever)
		}
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
	if p.AllocatedStorageGiB < 20 || p.AllocatedStorageGiB > 65536 {
		bad("allocatedStorageGib %v: want 20..65536 (gp3)", p.AllocatedStorageGiB)
	}
	if p.MaxAllocatedStorageGiB < 1.1*p.AllocatedStorageGiB || p.MaxAllocatedStorageGiB > 65536 {
		bad("maxAllocatedStorageGib %v: want at least 10 %% above allocatedStorageGib %v (RDS's rule for autoscaling), at most 65536", p.MaxAllocatedStorageGiB, p.AllocatedStorageGiB)
	}
	if p.Engine == EngineInstance && (p.DBFreeStorageGiBThreshold <= 0 || p.DBFreeStorageGiBThreshold >= p.AllocatedStorageGiB) {
		bad("dbFreeStorageGibThreshold %v: want above 0 and below allocatedStorageGib %v, or the alarm fires on an empty database", p.DBFreeStorageGiBThreshold, p.AllocatedStorageGiB)
	}
	if p.AuroraMinCapacity < 0 || p.AuroraMaxCapacity < p.AuroraMinCapacity {
		bad("aurora capacity %v..%v is not a valid range", p.AuroraMinCapacity, p.AuroraMaxCapacity)
	}
	if p.ProxyBorrowTimeoutSec < 1 || p.ProxyBorrowTimeoutSec >= p.shortestProxyClientTimeoutSec() || p.ProxyBorrowTimeoutSec != math.Trunc(p.ProxyBorrowTimeoutSec) {
		bad("proxyBorrowTimeoutSec %v: want whole seconds >= 1, shorter than the shortest function timeout %v", p.ProxyBorrowTimeoutSec, p.shortestProxyClientTimeoutSec())
	}
	if p.ProxyMaxConnectionsPercent < 1 || p.ProxyMaxConnectionsPercent > 100 {
		bad("proxyMaxConnectionsPercent %v: want 1..100 (below 100 leaves room for migrate)", p.ProxyMaxConnectionsPercent)
	}
	if p.ProxyMaxIdleConnectionsPercent < 1 || p.ProxyMaxIdleConnectionsPercent > p.ProxyMaxConnectionsPercent {
		bad("proxyMaxIdleConnectionsPercent %v: want 1..proxyMaxConnectionsPercent (%v)", p.ProxyMaxIdleConnectionsPercent, p.ProxyMaxConnectionsPercent)
	}
	for _, name := range FunctionNames {
		if c, ok := p.ReservedConcurrency()[name]; ok && c != Unreserved && (c < 1 || c != math.Trunc(c)) {
			bad("%sReservedConcurrency %v: want a whole number >= 1, or %d for none", name, c, Unreserved)
		}
	}
	if p.IngestMaxReceiveCount < 1 || p.IngestMaxReceiveCount > 1000 {
		bad("ingestMaxReceiveCount %v: want 1..1000", p.IngestMaxReceiveCount)
	}
	if p.IngestMaxConcurrency < 2 || p.IngestMaxConcurrency > 1000 {
		bad("ingestMaxConcurrency %v: want 2..1000", p.IngestMaxConcurrency)
	}
	if p.Ingest() && p.PushReservedConcurrency != Unreserved && p.PushReservedConcurrency < p.IngestMaxConcurrency {
		bad("pushReservedConcurrency %v is below ingestMaxConcurrency %v: the mapping would be throttled and dead-letter messages", p.PushReservedConcurrency, p.IngestMaxConcurrency)
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
//
// Profiles: the context key "profiles" (in cdk.json) maps a profile name to settings,
// and the key "profile" selects one. A selected profile's settings hold as if given
// as context, and they are fixed: the same key given elsewhere (cdk.json, -c) with
// another value is an error, so a deploy cannot quietly weaken them; to change one,
// edit the profile. A profile's "require" lists keys that must be given outside it
// (cdk.json beside "profile", or -c), such as the alarm e-mail and the authorizer,
// which differ between deployments but must not silently revert. Select the profile
// in the deployment's cdk.json ("profile": "production"), not with -c, so that a
// deploy without flags keeps it.
func PropsFromContext(lookup func(key string) any) (Props, error) {
	var p Props
	var errs []error
	profile, err := selectProfile(lookup)
	if err != nil {
		return p, err
	}
	if profile.name != "" {
		p.Profile = profile.name
		base := lookup
		lookup = func(key string) any {
			v, fixed := profile.settings[key]
			if !fixed {
				return base(key)
			}
			if given := base(key); given != nil && !sameSetting(given, v) {
				errs = append(errs, fmt.Errorf("context %s=%v: profile %q fixes it to %v (edit the profile in cdk.json to change it)", key, given, profile.name, v))
			}
			return v
		}
		for _, key := range profile.require {
			if v := lookup(key); v == nil || strings.TrimSpace(fmt.Sprint(v)) == "" {
				errs = append(errs, fmt.Errorf("context %s: profile %q requires it (set it in cdk.json beside \"profile\", so every deploy has it)", key, profile.name))
			}
		}
	}
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
	num("allocatedStorageGib", &p.AllocatedStorageGiB)
	num("maxAllocatedStorageGib", &p.MaxAllocatedStorageGiB)
	if b := boolean("multiAz"); b != nil {
		p.MultiAZ = *b
	}
	num("backupRetentionDays", &p.BackupRetentionDays)
	num("auroraMinCapacity", &p.AuroraMinCapacity)
	num("auroraMaxCapacity", &p.AuroraMaxCapacity)
	num("functionMemoryMb", &p.FunctionMemoryMB)
	str("logLevel", &p.LogLevel)
	num("defaultRetentionSeconds", &p.DefaultRetentionSeconds)
	num("defaultCompletedRetentionSeconds", &p.DefaultCompletedRetentionSeconds)
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
	num("reaperBehindPasses", &p.ReaperBehindPasses)
	num("proxyBorrowTimeoutSec", &p.ProxyBorrowTimeoutSec)
	num("proxyMaxConnectionsPercent", &p.ProxyMaxConnectionsPercent)
	num("proxyMaxIdleConnectionsPercent", &p.ProxyMaxIdleConnectionsPercent)
	num("pushReservedConcurrency", &p.PushReservedConcurrency)
	num("popReservedConcurrency", &p.PopReservedConcurrency)
	num("ackReservedConcurrency", &p.AckReservedConcurrency)
	num("dlqReservedConcurrency", &p.DLQReservedConcurrency)
	num("adminReservedConcurrency", &p.AdminReservedConcurrency)
	num("reaperReservedConcurrency", &p.ReaperReservedConcurrency)
	num("ingestMaxConcurrency", &p.IngestMaxConcurrency)
	num("ingestMaxReceiveCount", &p.IngestMaxReceiveCount)
	num("ingestRetryMinutes", &p.IngestRetryMinutes)
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
	num("dbCpuCreditBalanceThreshold", &p.DBCPUCreditBalanceThreshold)
	num("dbFreeableMemoryMibThreshold", &p.DBFreeableMemoryMiBThreshold)
	num("dbCpuUtilizationThreshold", &p.DBCPUUtilizationThreshold)
	num("dbFreeStorageGibThreshold", &p.DBFreeStorageGiBThreshold)
	num("proxyBorrowLatencyMsThreshold", &p.ProxyBorrowLatencyMsThreshold)
	num("proxyClientConnectionsThreshold", &p.ProxyClientConnectionsThreshold)
	num("api5xxThreshold", &p.API5xxThreshold)
	num("ingestMessageAgeSecThreshold", &p.IngestMessageAgeSecThreshold)
	return p, errors.Join(errs...)
}

// ProfileProduction is the profile cdk.json defines for production deployments:
// Multi-AZ, RETAIN (which turns on deletion protection), longer backups, and an alarm
// e-mail and an explicit authorizer required.
const ProfileProduction = "production"

// profile is a selected context profile.
type profile struct {
	name     string
	settings map[string]any
	require  []string
}

// selectProfile reads the "profile" and "profiles" context keys.
func selectProfile(lookup func(key string) any) (profile, error) {
	v := lookup("profile")
	if v == nil || strings.TrimSpace(fmt.Sprint(v)) == "" {
		return profile{}, nil
	}
	name := strings.TrimSpace(fmt.Sprint(v))
	all, _ := lookup("profiles").(map[string]any)
	def, ok := all[name].(map[string]any)
	if !ok {
		known := make([]string, 0, len(all))
		for k := range all {
			known = append(known, k)
		}
		slices.Sort(known)
		return profile{}, fmt.Errorf("context profile=%s: no such profile in the context key \"profiles\" (cdk.json); known: %s", name, strings.Join(known, ", "))
	}
	p := profile{name: name, settings: map[string]any{}}
	for k, v := range def {
		if k == "require" {
			list, _ := v.([]any)
			for _, r := range list {
				p.require = append(p.require, fmt.Sprint(r))
			}
			continue
		}
		p.settings[k] = v
	}
	return p, nil
}

// sameSetting compares two context values the way PropsFromContext reads them: a
// string "true" from -c is the JSON true of cdk.json, "retain" is "RETAIN".
func sameSetting(a, b any) bool {
	return strings.EqualFold(strings.TrimSpace(fmt.Sprint(a)), strings.TrimSpace(fmt.Sprint(b)))
}
