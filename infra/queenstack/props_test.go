package queenstack

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/queen-serverless/queen/core/config"
)

func TestWithDefaults(t *testing.T) {
	p := Props{}.WithDefaults()
	if p.AssetsDir != DefaultAssetsDir || p.Engine != EngineInstance || p.Authorizer != AuthorizerIAM ||
		p.ReaperRateMinutes != 1 || !p.Ingest() || p.RemovalPolicy != awscdk.RemovalPolicy_SNAPSHOT ||
		p.AppUser != "queen_app" || p.DatabaseName != "queen" || p.MaxWaitMS != 20000 || p.PopTimeoutSec != 29 {
		t.Errorf("defaults not applied: %+v", p)
	}
	if p.ProxyBorrowTimeoutSec != 5 || p.ProxyMaxConnectionsPercent != 90 || p.ProxyMaxIdleConnectionsPercent != 50 {
		t.Errorf("proxy pool defaults: borrow %v s, max %v%%, idle %v%%", p.ProxyBorrowTimeoutSec, p.ProxyMaxConnectionsPercent, p.ProxyMaxIdleConnectionsPercent)
	}
	// Nothing reserved: a first deploy succeeds in a new account (quota 10).
	if want := map[string]float64{"push": Unreserved, "pop": Unreserved, "ack": Unreserved, "dlq": Unreserved, "admin": Unreserved, "reaper": Unreserved}; !equal(p.ReservedConcurrency(), want) {
		t.Errorf("reserved concurrency %v, want %v", p.ReservedConcurrency(), want)
	}
	if q := p.LambdaQuotaNeeded(); q != 0 {
		t.Errorf("defaults need a Lambda quota of %v, want none", q)
	}
	if p.IngestMaxConcurrency != 10 || p.IngestMaxReceiveCount != 30 {
		t.Errorf("ingest: max concurrency %v, max receive count %v", p.IngestMaxConcurrency, p.IngestMaxReceiveCount)
	}
	if p.ReaperTimeoutSec != 50 || p.ReaperBehindPasses != 5 {
		t.Errorf("reaper: timeout %v s (want 50: the minute less 10 s), behind after %v passes", p.ReaperTimeoutSec, p.ReaperBehindPasses)
	}
	if r := (Props{ReaperRateMinutes: 20}).WithDefaults(); r.ReaperTimeoutSec != 900 {
		t.Errorf("20-minute reaper: timeout %v s, want Lambda's 900", r.ReaperTimeoutSec)
	}
	// The derived defaults follow the props they derive from.
	d := Props{FunctionTimeoutSec: 3, PopTimeoutSec: 25}.WithDefaults()
	if d.ProxyBorrowTimeoutSec != 1 || d.IngestMaxReceiveCount != 100 {
		t.Errorf("3 s functions: borrow %v s (want 1), max receives %v (want 30 min / 18 s = 100)", d.ProxyBorrowTimeoutSec, d.IngestMaxReceiveCount)
	}
	off := false
	if (Props{IngestQueue: &off}).WithDefaults().Ingest() {
		t.Errorf("an explicit IngestQueue=false was overridden")
	}
	// Subscriptions only with targets; the dispatcher reserves nothing unless asked.
	if p.Subscriptions() || slices.Contains(p.Functions(), DispatchFunction) {
		t.Errorf("defaults deliver subscriptions: %v", p.Functions())
	}
	sub := Props{SubscriptionTargets: []string{"billing"}}.WithDefaults()
	if !sub.Subscriptions() || !slices.Contains(sub.Functions(), DispatchFunction) || len(sub.Functions()) != len(FunctionNames)+1 {
		t.Errorf("with targets: functions %v", sub.Functions())
	}
	if c, ok := sub.ReservedConcurrency()[DispatchFunction]; !ok || c != Unreserved || sub.LambdaQuotaNeeded() != 0 {
		t.Errorf("dispatch reserved concurrency %v (%v), quota needed %v; want none by default", c, ok, sub.LambdaQuotaNeeded())
	}
	if q := (Props{SubscriptionTargets: []string{"billing"}, DispatchReservedConcurrency: 11}).WithDefaults().LambdaQuotaNeeded(); q != 111 {
		t.Errorf("a dispatcher reservation of 11 needs a quota of %v, want 111", q)
	}
	urls := Props{SubscriptionURLAllow: []string{"public"}}.WithDefaults()
	if !urls.Subscriptions() || !slices.Contains(urls.Functions(), DispatchFunction) {
		t.Errorf("with URL targets allowed: functions %v", urls.Functions())
	}
	if sub.SubscriptionLagThreshold != 10000 || sub.SubscriptionIteratorAgeSecThreshold != 300 {
		t.Errorf("subscription alarms: lag %v, iterator age %v s", sub.SubscriptionLagThreshold, sub.SubscriptionIteratorAgeSecThreshold)
	}
}

func TestValidate(t *testing.T) {
	ok := Props{AssetsDir: assetsDir}.WithDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults with assets: %v", err)
	}
	cases := map[string]struct {
		mutate func(*Props)
		want   string
	}{
		"jwt without issuer":     {func(p *Props) { p.Authorizer = AuthorizerJWT; p.JWTAudience = []string{"a"} }, "jwtIssuer"},
		"jwt http issuer":        {func(p *Props) { p.Authorizer = AuthorizerJWT; p.JWTIssuer = "http://x"; p.JWTAudience = []string{"a"} }, "jwtIssuer"},
		"jwt without audience":   {func(p *Props) { p.Authorizer = AuthorizerJWT; p.JWTIssuer = "https://x/" }, "jwtAudience"},
		"unknown authorizer":     {func(p *Props) { p.Authorizer = "basic" }, "authorizer"},
		"unknown engine":         {func(p *Props) { p.Engine = "mysql" }, "engine"},
		"pop shorter than wait":  {func(p *Props) { p.PopTimeoutSec = 20 }, "popTimeoutSec"},
		"pop at gateway limit":   {func(p *Props) { p.PopTimeoutSec = 30 }, "popTimeoutSec"},
		"reaper overlaps":        {func(p *Props) { p.ReaperTimeoutSec = 60 }, "reaperTimeoutSec"},
		"fractional rate":        {func(p *Props) { p.ReaperRateMinutes = 1.5 }, "reaperRateMinutes"},
		"retention below -1":     {func(p *Props) { p.DefaultRetentionSeconds = -2 }, "defaultRetentionSeconds"},
		"no behind passes":       {func(p *Props) { p.ReaperBehindPasses = 0.5 }, "reaperBehindPasses"},
		"behind past a day":      {func(p *Props) { p.ReaperRateMinutes, p.ReaperTimeoutSec, p.ReaperBehindPasses = 60, 900, 25 }, "reaperBehindPasses"},
		"bad retention":          {func(p *Props) { p.LogRetentionDays = 31 }, "logRetentionDays"},
		"no backups":             {func(p *Props) { p.BackupRetentionDays = 40 }, "backupRetentionDays"},
		"bad removal":            {func(p *Props) { p.RemovalPolicy = "KEEP" }, "removalPolicy"},
		"sql in user":            {func(p *Props) { p.AppUser = "app; drop" }, "appUser"},
		"same users":             {func(p *Props) { p.AppUser = p.MasterUser }, "must differ"},
		"missing assets":         {func(p *Props) { p.AssetsDir = t.TempDir() }, "run `make build`"},
		"borrow too long":        {func(p *Props) { p.ProxyBorrowTimeoutSec = 10 }, "proxyBorrowTimeoutSec"},
		"proxy takes all":        {func(p *Props) { p.ProxyMaxConnectionsPercent = 101 }, "proxyMaxConnectionsPercent"},
		"idle above max":         {func(p *Props) { p.ProxyMaxIdleConnectionsPercent = 95 }, "proxyMaxIdleConnectionsPercent"},
		"fractional reserve":     {func(p *Props) { p.AckReservedConcurrency = 2.5 }, "ackReservedConcurrency"},
		"negative reserve":       {func(p *Props) { p.PopReservedConcurrency = -5 }, "popReservedConcurrency"},
		"ingest cap of one":      {func(p *Props) { p.IngestMaxConcurrency = 1 }, "ingestMaxConcurrency"},
		"push below ingest":      {func(p *Props) { p.PushReservedConcurrency = 5 }, "pushReservedConcurrency"},
		"too many receives":      {func(p *Props) { p.IngestMaxReceiveCount = 1001 }, "ingestMaxReceiveCount"},
		"migrate past framework": {func(p *Props) { p.MigrateTimeoutSec = 900 }, "migrateTimeoutSec"},
		"storage ceiling low":    {func(p *Props) { p.MaxAllocatedStorageGiB = 21 }, "maxAllocatedStorageGib"},
		"storage too small":      {func(p *Props) { p.AllocatedStorageGiB = 10 }, "allocatedStorageGib"},
		"storage alarm at once":  {func(p *Props) { p.DBFreeStorageGiBThreshold = 20 }, "dbFreeStorageGibThreshold"},

		"dispatch reserve, no targets": {func(p *Props) { p.DispatchReservedConcurrency = 5 }, "no dispatch function"},
		"dispatch reserve past proxy": {func(p *Props) {
			p.SubscriptionTargets, p.DispatchReservedConcurrency = []string{"billing"}, 1000
		}, "proxyClientConnectionsThreshold"},
		"fractional dispatch reserve": {func(p *Props) { p.SubscriptionTargets, p.DispatchReservedConcurrency = []string{"billing"}, 0.5 }, "dispatchReservedConcurrency"},
		"wildcard target":             {func(p *Props) { p.SubscriptionTargets = []string{"*"} }, "subscriptionTargets"},
		"wildcard qualifier":          {func(p *Props) { p.SubscriptionTargets = []string{"billing:*"} }, "subscriptionTargets"},
		"wildcard ARN": {func(p *Props) {
			p.SubscriptionTargets = []string{"arn:aws:lambda:us-east-1:123456789012:function:*"}
		}, "subscriptionTargets"},
		"not a function ARN": {func(p *Props) {
			p.SubscriptionTargets = []string{"arn:aws:sqs:us-east-1:123456789012:billing"}
		}, "subscriptionTargets"},
		"name too long":      {func(p *Props) { p.SubscriptionTargets = []string{strings.Repeat("f", 65)} }, "subscriptionTargets"},
		"target twice":       {func(p *Props) { p.SubscriptionTargets = []string{"billing", "billing"} }, "listed twice"},
		"URL ports, no URLs": {func(p *Props) { p.SubscriptionURLPorts = []float64{8443} }, "subscriptionUrlPorts"},
		"URL port zero": {func(p *Props) {
			p.SubscriptionURLAllow, p.SubscriptionURLPorts = []string{"public"}, []float64{0}
		}, "subscriptionUrlPorts: 0"},
		"URL port too high": {func(p *Props) {
			p.SubscriptionURLAllow, p.SubscriptionURLPorts = []string{"public"}, []float64{65536}
		}, "subscriptionUrlPorts: 65536"},
		"fractional URL port": {func(p *Props) {
			p.SubscriptionURLAllow, p.SubscriptionURLPorts = []string{"public"}, []float64{8443.5}
		}, "subscriptionUrlPorts: 8443.5"},
		"no dispatch asset": {func(p *Props) {
			dir := t.TempDir()
			if err := writePlaceholderAssets(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(dir, DispatchFunction, "bootstrap")); err != nil {
				t.Fatal(err)
			}
			p.AssetsDir, p.SubscriptionTargets = dir, []string{"billing"}
		}, "dispatch/bootstrap"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := ok
			c.mutate(&p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate() = %v, want an error about %q", err, c.want)
			}
		})
	}
	// Every form of a target Lambda's Invoke takes but the partial ARN.
	good := ok
	good.SubscriptionTargets = append([]string{"a_b-1", "billing:$LATEST", "billing:7", "arn:aws-cn:lambda:cn-north-1:123456789012:function:x",
		"arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:x:live"}, testSubscriptionTargets...)
	if err := good.Validate(); err != nil {
		t.Errorf("valid targets: %v", err)
	}
	// A stack without targets needs no dispatch asset.
	dir := t.TempDir()
	for _, name := range FunctionNames {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "bootstrap"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := (Props{AssetsDir: dir}).WithDefaults().Validate(); err != nil {
		t.Errorf("no targets, no dispatch asset: %v", err)
	}
}

func TestPropsFromContext(t *testing.T) {
	ctx := map[string]any{
		"assetsDir": "/tmp/a", "engine": "Aurora", "authorizer": "JWT", "jwtIssuer": "https://i/",
		"jwtAudience": "a, b,", "reaperRateMinutes": "5", "ingestQueue": "false", "removalPolicy": "destroy",
		"functionMemoryMb": 512.0, "multiAz": true, "groupLagThreshold": "250",
		"popReservedConcurrency": "-1", "reaperReservedConcurrency": 2.0, "ingestMaxConcurrency": "20", "proxyBorrowTimeoutSec": "3",
		"allocatedStorageGib": "50", "maxAllocatedStorageGib": 500.0,
		"subscriptionTargets":         "billing-handler, arn:aws:lambda:us-east-1:123456789012:function:audit:live,",
		"subscriptionUrlAllow":        "hooks.example.com, 10.20.0.0/16",
		"subscriptionUrlPorts":        "8443, 9000",
		"dispatchReservedConcurrency": "4", "subscriptionLagThreshold": 50.0, "subscriptionIteratorAgeSecThreshold": "60",
	}
	p, err := PropsFromContext(func(k string) any { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if p.AssetsDir != "/tmp/a" || p.Engine != EngineAurora || p.Authorizer != AuthorizerJWT || p.JWTIssuer != "https://i/" ||
		strings.Join(p.JWTAudience, "|") != "a|b" || p.ReaperRateMinutes != 5 || p.Ingest() ||
		p.RemovalPolicy != awscdk.RemovalPolicy_DESTROY || p.FunctionMemoryMB != 512 || !p.MultiAZ || p.GroupLagThreshold != 250 ||
		p.PopReservedConcurrency != Unreserved || p.ReaperReservedConcurrency != 2 || p.IngestMaxConcurrency != 20 || p.ProxyBorrowTimeoutSec != 3 ||
		p.AllocatedStorageGiB != 50 || p.MaxAllocatedStorageGiB != 500 ||
		strings.Join(p.SubscriptionTargets, "|") != "billing-handler|arn:aws:lambda:us-east-1:123456789012:function:audit:live" ||
		strings.Join(p.SubscriptionURLAllow, "|") != "hooks.example.com|10.20.0.0/16" ||
		!equal(p.SubscriptionURLPorts, []float64{8443, 9000}) ||
		p.DispatchReservedConcurrency != 4 || p.SubscriptionLagThreshold != 50 || p.SubscriptionIteratorAgeSecThreshold != 60 {
		t.Errorf("parsed %+v", p)
	}
	if _, err := PropsFromContext(func(k string) any { return map[string]any{"reaperRateMinutes": "often", "ingestQueue": "maybe"}[k] }); err == nil ||
		!strings.Contains(err.Error(), "reaperRateMinutes") || !strings.Contains(err.Error(), "ingestQueue") {
		t.Errorf("bad values: err %v", err)
	}
	// cdk.json may give a list as a JSON array.
	if p, err := PropsFromContext(func(k string) any {
		return map[string]any{
			"subscriptionTargets": []any{"billing", " reports:v2 "}, "subscriptionUrlAllow": []any{"*.example.com", "private"},
			"subscriptionUrlPorts": []any{8443.0, "9000"},
		}[k]
	}); err != nil || strings.Join(p.SubscriptionTargets, "|") != "billing|reports:v2" || strings.Join(p.SubscriptionURLAllow, "|") != "*.example.com|private" ||
		!equal(p.SubscriptionURLPorts, []float64{8443, 9000}) {
		t.Errorf("lists from JSON arrays: targets %q, URL allow list %q, URL ports %v, %v", p.SubscriptionTargets, p.SubscriptionURLAllow, p.SubscriptionURLPorts, err)
	}
	if _, err := PropsFromContext(func(k string) any { return map[string]any{"subscriptionUrlPorts": "8443,https"}[k] }); err == nil ||
		!strings.Contains(err.Error(), `subscriptionUrlPorts: "https" is not a number`) {
		t.Errorf("URL port not a number: err %v", err)
	}
	empty, err := PropsFromContext(func(string) any { return nil })
	if err != nil || empty.IngestQueue != nil || empty.Engine != "" {
		t.Errorf("no context: %+v, %v", empty, err)
	}
}

// The stack's defaults that the functions also know are the functions'.
func TestDefaultsAreTheFunctions(t *testing.T) {
	if DefaultMaxWaitMS != float64(config.DefaultMaxWaitLambda/time.Millisecond) {
		t.Errorf("DefaultMaxWaitMS %v, the functions' default %v", DefaultMaxWaitMS, config.DefaultMaxWaitLambda)
	}
}

// The production profile of cdk.json: its settings hold without any -c flag, a flag
// cannot weaken them, and it refuses to deploy without an alarm e-mail and an
// explicit authorizer.
func TestPropsFromContextProductionProfile(t *testing.T) {
	ctx, err := cdkContext()
	if err != nil {
		t.Fatal(err)
	}
	with := func(extra map[string]any) func(string) any {
		return func(k string) any {
			if v, ok := extra[k]; ok {
				return v
			}
			return ctx[k]
		}
	}
	base := map[string]any{"profile": "production", "alarmEmail": "ops@example.com", "authorizer": "jwt"}
	p, err := PropsFromContext(with(base))
	if err != nil {
		t.Fatal(err)
	}
	if !p.MultiAZ || p.RemovalPolicy != awscdk.RemovalPolicy_RETAIN || p.BackupRetentionDays < 14 ||
		p.AlarmEmail != "ops@example.com" || p.Authorizer != AuthorizerJWT || p.Profile != ProfileProduction {
		t.Errorf("production profile: %+v", p)
	}
	// Repeating a fixed value is fine (a string from -c equals cdk.json's JSON value).
	if _, err := PropsFromContext(with(map[string]any{"profile": "production", "alarmEmail": "a@b", "authorizer": "iam", "multiAz": "true", "removalPolicy": "retain"})); err != nil {
		t.Errorf("repeating the profile's values: %v", err)
	}
	for name, c := range map[string]struct {
		extra map[string]any
		want  []string
	}{
		"no alarm e-mail":      {map[string]any{"alarmEmail": nil}, []string{"alarmEmail", "requires"}},
		"no authorizer":        {map[string]any{"authorizer": ""}, []string{"authorizer", "requires"}},
		"weakened removal":     {map[string]any{"removalPolicy": "DESTROY"}, []string{"removalPolicy=DESTROY", "fixes it to RETAIN"}},
		"single zone":          {map[string]any{"multiAz": "false"}, []string{"multiAz=false"}},
		"unknown profile":      {map[string]any{"profile": "prod"}, []string{"profile=prod", "production"}},
		"both e-mail and zone": {map[string]any{"alarmEmail": "", "multiAz": false}, []string{"alarmEmail", "multiAz"}},
	} {
		t.Run(name, func(t *testing.T) {
			extra := map[string]any{}
			for k, v := range base {
				extra[k] = v
			}
			for k, v := range c.extra {
				extra[k] = v
			}
			_, err := PropsFromContext(with(extra))
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err %v, want it to mention %q", err, w)
				}
			}
		})
	}
	// Without "profile", cdk.json's profiles change nothing.
	if p, err := PropsFromContext(with(nil)); err != nil || p.MultiAZ || p.RemovalPolicy != "" || p.Profile != "" {
		t.Errorf("no profile selected: %+v, %v", p, err)
	}
}
