package queenstack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"

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

// FunctionNames lists the Lambda functions every stack has, in a fixed order. Each one
// is built by `make build` as <AssetsDir>/<name>/bootstrap.
var FunctionNames = []string{"push", "pop", "ack", "dlq", "admin", "reaper", "migrate"}

// DispatchFunction is the function that delivers subscriptions (docs/subscriptions.md),
// built by `make build` as <AssetsDir>/dispatch/bootstrap. A stack has it only when it
// declares SubscriptionTargets or SubscriptionURLAllow (Props.Functions lists what a
// stack has).
const DispatchFunction = "dispatch"

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
	// DefaultDispatchReservedConcurrency: the dispatcher too reserves nothing unless
	// asked to (see Props.DispatchReservedConcurrency).
	DefaultDispatchReservedConcurrency = Unreserved
	// DispatchTimeoutSec is the dispatch function's timeout, Lambda's longest. A run
	// delivers one subscription, taking new batches until its deadline less a
	// margin (core/dispatch), then starts the next run by invoking itself. A call
	// still in flight when the invocation ends is cut off, its batch delivered again
	// once its lease expires (a call is bounded by the queue's lease, not by the
	// run), so the longer a run, the rarer such cut-offs and the handovers (each an
	// invoke and a fresh read of the subscription): one per 15 minutes of steady
	// backlog at most. It costs nothing while idle: a run is billed for what it
	// uses, and it ends as soon as it has caught up.
	DispatchTimeoutSec = 900
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
	DefaultSubscriptionLagThreshold        = 10000
	// DefaultSubscriptionIteratorAgeSecThreshold is five minutes: a first delivery
	// that late means the dispatcher is behind (a retried record is older by its
	// retryDelay, so queues with long retry delays may want more).
	DefaultSubscriptionIteratorAgeSecThreshold = 300
	DefaultDBPort                              = config.DefaultDBPort
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
	// AssetsDir holds <function>/bootstrap for every name in Functions(), relative to
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
	// DispatchReservedConcurrency caps the dispatch function's runs (with
	// SubscriptionTargets or SubscriptionURLAllow only; set without either it is an
	// error). Default Unreserved, by the rule above: a first deploy with
	// subscriptions succeeds in a new account too. A reservation needs the quota
	// above (the sum of the reservations plus 100, e.g. 111 for a dispatcher
	// reservation of 11 alone).
	// Why reserve: a run delivers one subscription, so as many run at once as
	// subscriptions have something due; each holds a container while it waits on
	// its target, and each synchronous call one of the target's, so many busy
	// subscriptions could otherwise take the concurrency push and ack need. Wakes
	// beyond the cap wait in Lambda's asynchronous queue (up to six hours, retried
	// as capacity frees) instead of failing. Each run is one client of the RDS
	// Proxy (a pool of one connection), borrowing a database connection only for
	// its statements, so the cap must stay below ProxyClientConnectionsThreshold:
	// the dispatcher alone must not raise that alarm.
	DispatchReservedConcurrency float64

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

	// SubscriptionTargets are the functions subscriptions may deliver to: names,
	// function ARNs or qualified (version or alias) ARNs, as a subscription's
	// target names them. The admin function gets them, joined by commas as
	// declared, in QUEEN_SUBSCRIPTION_FUNCTIONS, and refuses (400) a subscription
	// naming another function. Declaring any adds the dispatch function, which may
	// lambda:InvokeFunction on exactly these (a name becomes the function's ARN in
	// the stack's account and Region, name:qualifier likewise with its qualifier;
	// an ARN is taken as given), a Lambda interface endpoint for the functions, and
	// the subscription alarms (subscriptions.go). None (the default) adds nothing.
	// The grant follows IAM's rule for Lambda ARNs: an unqualified ARN covers
	// unqualified invokes only, a qualified one that version or alias only, so a
	// subscription must name its target in the form declared here. A target in
	// another account must also allow the dispatch role (output DispatchRoleArn) in
	// its resource policy; it must be in the stack's Region, whose Lambda API is the
	// only one the functions reach.
	SubscriptionTargets []string
	// SubscriptionURLAllow is what subscriptions' URL targets may reach on AWS
	// (core/egress): host names ("hooks.example.com"), every name below a domain
	// ("*.example.com"), CIDR ranges or addresses ("10.20.0.0/16", "203.0.113.7"),
	// and the classes "public" (every public unicast address) and "private"
	// (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7; the stack's own VPC
	// too). Empty (the default): URL targets are off. The admin function, which
	// checks a target when a subscription is created, and the dispatcher, which
	// connects through the fence, get it joined by commas in
	// QUEEN_SUBSCRIPTION_URLS, or "none" when empty, always written out so neither
	// rests on the functions' default. Allowing any URL adds the dispatch
	// function, as SubscriptionTargets do. Refused at synth: "loopback", and any
	// range, address or name that includes it (127.0.0.0/8, ::1, 0.0.0.0/0, localhost): on
	// Lambda loopback is the function itself and its runtime API; "none" (leave
	// the list empty instead); anything egress.ParsePolicy does not read. Whatever
	// is listed, the fence always refuses link-local addresses (169.254.0.0/16,
	// fe80::/10, with the instance metadata service), AWS's metadata, DNS and time
	// service (fd00:ec2::/32), unspecified, multicast, broadcast and reserved
	// addresses, and follows no redirect.
	//
	// Reaching a target. With any URL allowed the dispatcher gets a security group
	// of its own (Network.DispatchSG; the other functions keep the shared
	// Network.FunctionsSG, out to the proxy and the stack's endpoints only), with
	// the shared group's egress and TCP egress on SubscriptionURLPorts (80 and 443
	// always) to what the list names: each range and address as itself; the
	// private ranges for "private"; every address (0.0.0.0/0) as soon as the list
	// names a host, a domain or "public", whose addresses are known only when the
	// dispatcher connects, where the fence checks each one. The stack's VPC is IPv4
	// only, so an IPv6 range or address opens nothing (the synth warns): an IPv6
	// target cannot be reached. The group is not a route, though: the functions
	// run in isolated subnets with no route out of the VPC, and the stack creates
	// none. A URL target must be routable from the function subnets through
	// something the operator adds: an interface endpoint of the target's VPC
	// endpoint service (PrivateLink), a peered VPC or a transit gateway with routes
	// to it, or a NAT gateway (and internet gateway) for public targets. Listing a
	// host here allows it and opens the group; it does not make it reachable.
	// Function targets do not depend on it: the dispatcher reaches the Lambda API
	// through the Lambda endpoint, whichever group it is in.
	SubscriptionURLAllow []string
	// SubscriptionURLPorts are the TCP ports beyond 80 and 443 that URL targets
	// listen on (e.g. 8443 for https://hooks.example.com:8443/): the dispatcher's
	// security group opens 80, 443 and these to every destination of
	// SubscriptionURLAllow, and no other port, so a target on a port not listed
	// times out. Ports, not all of TCP: the fence judges addresses, not ports, so
	// the group is what keeps the dispatcher off other services of the allowed
	// ranges. Each port adds a rule per destination (EC2's default quota is 60
	// outbound rules per group; the synth warns beyond it). Only with
	// SubscriptionURLAllow; whole numbers 1..65535.
	SubscriptionURLPorts []float64

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
	// SubscriptionLagThreshold: alarm when the largest lag of a consumer group that
	// a subscription delivers (QueenServerless/MaxSubscriptionLag, from the reaper)
	// exceeds it for 15 minutes. Default 10000.
	SubscriptionLagThreshold float64
	// SubscriptionIteratorAgeSecThreshold: alarm when the oldest record a dispatch
	// run delivered (QueenServerless/SubscriptionIteratorAge) was older than this,
	// in seconds, when it was delivered, for 15 minutes. Default 300.
	SubscriptionIteratorAgeSecThreshold float64
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
