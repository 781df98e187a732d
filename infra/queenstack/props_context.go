package queenstack

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

// PropsFromContext builds Props from CDK context values (strings from `-c`, or typed
// values from cdk.json); lookup returns nil for an absent key. Unset keys keep their
// zero value, so WithDefaults applies. It is the only place stack settings are parsed;
// the keys are those read below, documented in docs/aws.md (Configuration).
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
	// list reads a comma-separated string (-c), or a JSON array of strings (cdk.json).
	list := func(key string, dst *[]string) {
		if arr, ok := lookup(key).([]any); ok {
			for _, a := range arr {
				if a := strings.TrimSpace(fmt.Sprint(a)); a != "" {
					*dst = append(*dst, a)
				}
			}
			return
		}
		if s, ok := get(key); ok {
			for _, a := range strings.Split(s, ",") {
				if a = strings.TrimSpace(a); a != "" {
					*dst = append(*dst, a)
				}
			}
		}
	}
	list("jwtAudience", &p.JWTAudience)
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
	num("dispatchReservedConcurrency", &p.DispatchReservedConcurrency)
	list("subscriptionTargets", &p.SubscriptionTargets)
	list("subscriptionUrlAllow", &p.SubscriptionURLAllow)
	var ports []string
	list("subscriptionUrlPorts", &ports)
	for _, port := range ports {
		f, err := strconv.ParseFloat(port, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("context subscriptionUrlPorts: %q is not a number", port))
			continue
		}
		p.SubscriptionURLPorts = append(p.SubscriptionURLPorts, f)
	}
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
	num("subscriptionLagThreshold", &p.SubscriptionLagThreshold)
	num("subscriptionIteratorAgeSecThreshold", &p.SubscriptionIteratorAgeSecThreshold)
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
