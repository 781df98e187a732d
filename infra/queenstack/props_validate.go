package queenstack

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
)

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
	for _, name := range p.Functions() {
		if c, ok := p.ReservedConcurrency()[name]; ok && c != Unreserved && (c < 1 || c != math.Trunc(c)) {
			bad("%sReservedConcurrency %v: want a whole number >= 1, or %d for none", name, c, Unreserved)
		}
	}
	if !p.Subscriptions() && p.DispatchReservedConcurrency != Unreserved {
		bad("dispatchReservedConcurrency %v: there is no dispatch function without subscriptionTargets or subscriptionUrlAllow", p.DispatchReservedConcurrency)
	} else if p.DispatchReservedConcurrency != Unreserved && p.DispatchReservedConcurrency >= p.ProxyClientConnectionsThreshold {
		bad("dispatchReservedConcurrency %v: want fewer than proxyClientConnectionsThreshold %v (each run is a client of the proxy)", p.DispatchReservedConcurrency, p.ProxyClientConnectionsThreshold)
	}
	seen := map[string]bool{}
	for _, t := range p.SubscriptionTargets {
		if seen[t] {
			bad("subscriptionTargets: %q is listed twice", t)
		}
		seen[t] = true
		if err := checkSubscriptionTarget(t); err != nil {
			bad("subscriptionTargets: %v", err)
		}
	}
	for _, err := range checkSubscriptionURLAllow(p.SubscriptionURLAllow) {
		bad("subscriptionUrlAllow: %v", err)
	}
	for _, err := range checkSubscriptionURLPorts(p) {
		bad("subscriptionUrlPorts: %v", err)
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
	for _, name := range p.Functions() {
		if _, err := os.Stat(filepath.Join(p.AssetsDir, name, "bootstrap")); err != nil {
			bad("lambda asset %s: %v (run `make build`, or point assetsDir at placeholders)", filepath.Join(p.AssetsDir, name, "bootstrap"), errors.Unwrap(err))
		}
	}
	return errors.Join(errs...)
}

// isIdentifier reports whether s is a lower-case SQL identifier PostgreSQL
// takes unquoted (at most 63 bytes, not starting with a digit).
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
