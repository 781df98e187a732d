package queenstack

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

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
	num(&p.DispatchReservedConcurrency, DefaultDispatchReservedConcurrency)
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
	num(&p.SubscriptionLagThreshold, DefaultSubscriptionLagThreshold)
	num(&p.SubscriptionIteratorAgeSecThreshold, DefaultSubscriptionIteratorAgeSecThreshold)
	return p
}

// Burstable reports whether the database is a burstable (db.t*) instance, which runs
// on CPU credits.
func (p Props) Burstable() bool {
	return p.Engine == EngineInstance && strings.HasPrefix(p.InstanceType, "t")
}

// Subscriptions reports whether the stack delivers subscriptions on AWS: it declares
// SubscriptionTargets or allows URL targets (SubscriptionURLAllow), and so has the
// dispatch function.
func (p Props) Subscriptions() bool {
	return len(p.SubscriptionTargets) > 0 || len(p.SubscriptionURLAllow) > 0
}

// Functions lists the Lambda functions of the stack: FunctionNames, and
// DispatchFunction when it delivers subscriptions.
func (p Props) Functions() []string {
	if p.Subscriptions() {
		return append(slices.Clip(FunctionNames), DispatchFunction)
	}
	return FunctionNames
}

// Ingest reports whether the SQS ingest queue is enabled (after WithDefaults).
func (p Props) Ingest() bool { return p.IngestQueue == nil || *p.IngestQueue }

// IngestVisibilityTimeoutSec is the ingest queue's visibility timeout: six times the
// push timeout, as AWS recommends for a queue that feeds a function.
func (p Props) IngestVisibilityTimeoutSec() float64 { return 6 * p.FunctionTimeoutSec }

// shortestProxyClientTimeoutSec is the shortest timeout of a function that connects
// through the proxy (every one but migrate; the dispatcher's DispatchTimeoutSec is
// the longest Lambda allows).
func (p Props) shortestProxyClientTimeoutSec() float64 {
	return min(p.FunctionTimeoutSec, p.PopTimeoutSec, p.ReaperTimeoutSec)
}

// ReservedConcurrency is the reserved concurrency of each function of the stack but
// migrate (after WithDefaults); Unreserved means none. Migrate runs once per deploy
// and reserves none.
func (p Props) ReservedConcurrency() map[string]float64 {
	r := map[string]float64{
		"push": p.PushReservedConcurrency, "pop": p.PopReservedConcurrency, "ack": p.AckReservedConcurrency,
		"dlq": p.DLQReservedConcurrency, "admin": p.AdminReservedConcurrency, "reaper": p.ReaperReservedConcurrency,
	}
	if p.Subscriptions() {
		r[DispatchFunction] = p.DispatchReservedConcurrency
	}
	return r
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
