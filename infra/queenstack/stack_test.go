package queenstack

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/pgstore"
	routetable "github.com/queen-serverless/queen/core/routes"
)

// wantRoutes is the route table of docs/api.md as agreed with the functions,
// written out independently of Routes so that a wrong entry there fails
// here.
var wantRoutes = map[string]string{
	"POST /api/v1/push": "push",

	"GET /api/v1/pop/queue/{queue}":                       "pop",
	"GET /api/v1/pop/queue/{queue}/partition/{partition}": "pop",
	"POST /api/v1/lease/{leaseId}/extend":                 "pop",

	"POST /api/v1/ack":         "ack",
	"POST /api/v1/ack/batch":   "ack",
	"POST /api/v1/transaction": "ack",

	"GET /api/v1/dlq": "dlq",
	"GET /api/v1/messages/{partitionId}/{transactionId}":        "dlq",
	"DELETE /api/v1/messages/{partitionId}/{transactionId}":     "dlq",
	"POST /api/v1/messages/{partitionId}/{transactionId}/retry": "dlq",

	"POST /api/v1/configure":                                   "admin",
	"GET /api/v1/resources/queues":                             "admin",
	"GET /api/v1/resources/overview":                           "admin",
	"GET /api/v1/resources/queues/{queue}":                     "admin",
	"DELETE /api/v1/resources/queues/{queue}":                  "admin",
	"GET /api/v1/consumer-groups":                              "admin",
	"GET /api/v1/consumer-groups/{group}":                      "admin",
	"DELETE /api/v1/consumer-groups/{group}":                   "admin",
	"DELETE /api/v1/consumer-groups/{group}/queues/{queue}":    "admin",
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek": "admin",
	"GET /api/v1/messages":                                     "admin",
	"GET /api/v1/system/maintenance":                           "admin",
	"POST /api/v1/system/maintenance":                          "admin",
	"GET /api/v1/system/maintenance/pop":                       "admin",
	"POST /api/v1/system/maintenance/pop":                      "admin",
	"POST /api/v1/subscriptions":                               "admin",
	"GET /api/v1/subscriptions":                                "admin",
	"GET /api/v1/subscriptions/{queue}/{consumerGroup}":        "admin",
	"DELETE /api/v1/subscriptions/{queue}/{consumerGroup}":     "admin",
	"GET /health": "admin",
}

// The stack routes exactly the routes of the handlers' route table
// (core/routes) that a function serves: a route the handlers serve and the
// stack lacks (or back) fails here.
func TestRoutesAreTheRouteTable(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		want := map[string]bool{}
		for _, r := range routetable.Table {
			if r.Function != "" {
				want[r.Pattern()] = true
			}
		}
		got := map[string]bool{}
		for _, r := range s.resources("AWS::ApiGatewayV2::Route") {
			got[props(r)["RouteKey"].(string)] = true
		}
		for k := range want {
			if !got[k] {
				t.Errorf("the handlers serve %q, the stack does not route it", k)
			}
		}
		for k := range got {
			if !want[k] {
				t.Errorf("the stack routes %q, which no handler serves", k)
			}
		}
	})
}

func TestEveryRouteWiredToItsFunction(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		fnIDs := s.functionIDs()
		integrations := s.resources("AWS::ApiGatewayV2::Integration")
		routes := map[string]map[string]any{}
		for _, r := range s.resources("AWS::ApiGatewayV2::Route") {
			key := props(r)["RouteKey"].(string)
			if _, dup := routes[key]; dup {
				t.Errorf("route %q defined twice", key)
			}
			routes[key] = r
		}
		for key := range routes {
			if _, ok := wantRoutes[key]; !ok {
				t.Errorf("unexpected route %q", key)
			}
		}
		for key, fn := range wantRoutes {
			want := struct{ key, function string }{key, fn}
			r, ok := routes[want.key]
			if !ok {
				t.Errorf("route %q missing", want.key)
				continue
			}
			target := toJSON(t, props(r)["Target"])
			m := regexp.MustCompile(`"integrations/",\{"Ref":"([^"]+)"\}`).FindStringSubmatch(target)
			if m == nil {
				t.Errorf("route %q: target %s is not an integration", want.key, target)
				continue
			}
			in, ok := integrations[m[1]]
			if !ok {
				t.Errorf("route %q: integration %s not in template", want.key, m[1])
				continue
			}
			ip := props(in)
			got := fnIDs[getAtt(ip["IntegrationUri"], "Arn")]
			if got != want.function {
				t.Errorf("route %q goes to function %q, want %q", want.key, got, want.function)
			}
			if ip["IntegrationType"] != "AWS_PROXY" || ip["PayloadFormatVersion"] != "2.0" {
				t.Errorf("route %q: integration %v/%v, want AWS_PROXY payload 2.0", want.key, ip["IntegrationType"], ip["PayloadFormatVersion"])
			}
		}
		// API Gateway may invoke exactly the functions that serve routes.
		invokable := map[string]bool{}
		for _, perm := range s.resources("AWS::Lambda::Permission") {
			p := props(perm)
			if p["Principal"] == "apigateway.amazonaws.com" {
				invokable[fnIDs[getAtt(p["FunctionName"], "Arn")]] = true
				if !strings.Contains(toJSON(t, p["SourceArn"]), s.id(s.stack.API)) {
					t.Errorf("API invoke permission not scoped to the API: %s", toJSON(t, p["SourceArn"]))
				}
			}
		}
		for _, name := range []string{"push", "pop", "ack", "dlq", "admin"} {
			if !invokable[name] {
				t.Errorf("API Gateway has no permission to invoke %s", name)
			}
		}
		if invokable["migrate"] || invokable["reaper"] || invokable[DispatchFunction] {
			t.Errorf("API Gateway may invoke migrate, reaper or dispatch")
		}
	})
}

func TestFunctionsAreArm64ProvidedAL2023(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		fnIDs := s.functionIDs()
		if len(fnIDs) != len(s.stack.Props.Functions()) {
			t.Fatalf("stack has %d functions, want %d", len(fnIDs), len(s.stack.Props.Functions()))
		}
		codeKeys := map[string]string{}
		for id, r := range s.resources("AWS::Lambda::Function") {
			p := props(r)
			name, ours := fnIDs[id]
			if !ours {
				// Only CDK's own provider functions (migration framework, default
				// security group restriction) may exist beside ours.
				if rt, _ := p["Runtime"].(string); !strings.HasPrefix(rt, "nodejs") || p["VpcConfig"] != nil {
					t.Errorf("unexpected function %s (runtime %v)", id, p["Runtime"])
				}
				continue
			}
			if p["Runtime"] != "provided.al2023" {
				t.Errorf("%s: runtime %v, want provided.al2023", name, p["Runtime"])
			}
			if !equal(p["Architectures"], []any{"arm64"}) {
				t.Errorf("%s: architectures %v, want [arm64]", name, p["Architectures"])
			}
			if p["Handler"] != "bootstrap" {
				t.Errorf("%s: handler %v, want bootstrap", name, p["Handler"])
			}
			if p["VpcConfig"] == nil {
				t.Errorf("%s: not in the VPC", name)
			}
			key := toJSON(t, path(p, "Code", "S3Key"))
			if other, dup := codeKeys[key]; dup {
				t.Errorf("%s and %s share one code asset; each needs its own build/lambda/<name>", name, other)
			}
			codeKeys[key] = name
		}
	})
}

func TestFunctionTimeoutsFitTheAPI(t *testing.T) {
	s := defaults.get(t)
	timeout := func(name string) float64 {
		r := s.resources("AWS::Lambda::Function")[s.id(s.stack.Functions[name])]
		return props(r)["Timeout"].(float64)
	}
	if got := timeout("pop"); got*1000 <= DefaultMaxWaitMS || got >= APIGatewayTimeoutSec {
		t.Errorf("pop timeout %v s: must exceed QUEEN_MAX_WAIT_MS (%d ms) and stay below %d s", got, DefaultMaxWaitMS, APIGatewayTimeoutSec)
	}
	for _, name := range []string{"push", "ack", "dlq", "admin"} {
		if got := timeout(name); got >= APIGatewayTimeoutSec {
			t.Errorf("%s timeout %v s reaches API Gateway's limit", name, got)
		}
	}
	if got := timeout("reaper"); got >= DefaultReaperRateMinutes*60 {
		t.Errorf("reaper timeout %v s overlaps the next tick", got)
	}
}

// A reaper pass may use most of its period (it works until caught up or near its
// deadline) and still ends before the next tick: timeout = period - 10 s, at most 900.
func TestReaperTimeoutFollowsItsPeriod(t *testing.T) {
	for name, want := range map[string]float64{"defaults": 50, "custom": 290, "production": 50} {
		t.Run(name, func(t *testing.T) {
			s := variants[name].get(t)
			r := s.resources("AWS::Lambda::Function")[s.id(s.stack.Functions["reaper"])]
			if got := props(r)["Timeout"]; got != want {
				t.Errorf("reaper timeout %v s every %v min, want %v", got, s.stack.Props.ReaperRateMinutes, want)
			}
		})
	}
}

func TestProxyRequiresIAMAuthAndTLS(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		id, proxy := s.one(t, "AWS::RDS::DBProxy")
		if id != s.id(s.stack.Proxy) {
			t.Fatalf("proxy logical id %s, want %s", id, s.id(s.stack.Proxy))
		}
		p := props(proxy)
		if p["RequireTLS"] != true {
			t.Errorf("RequireTLS = %v, want true", p["RequireTLS"])
		}
		if p["DefaultAuthScheme"] != "IAM_AUTH" {
			t.Errorf("DefaultAuthScheme = %v, want IAM_AUTH (end-to-end IAM)", p["DefaultAuthScheme"])
		}
		if p["EngineFamily"] != "POSTGRESQL" {
			t.Errorf("EngineFamily = %v", p["EngineFamily"])
		}
		for _, a := range asList(p["Auth"]) {
			if path(a, "IAMAuth") != "REQUIRED" {
				t.Errorf("proxy auth entry without IAM required: %s", toJSON(t, a))
			}
		}
		// The proxy's role may log in to the database as the application user only.
		role := getAtt(p["RoleArn"], "Arn")
		var found bool
		for _, pol := range s.resources("AWS::IAM::Policy") {
			if !contains(refsOf(props(pol)["Roles"]), role) {
				continue
			}
			for _, st := range asList(path(props(pol), "PolicyDocument", "Statement")) {
				res := toJSON(t, path(st, "Resource"))
				if contains(asStrings(path(st, "Action")), "rds-db:connect") &&
					strings.Contains(res, s.id(s.stack.Database.Resource)) && strings.Contains(res, ":dbuser:") &&
					strings.Contains(res, `"/queen_app"`) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("proxy role lacks rds-db:connect on the database's dbuser/queen_app")
		}
	})
}

// The proxy's pool: a borrow gives up before any function that waits on it times
// out, and the proxy leaves part of max_connections to migrate.
func TestProxyPoolBounded(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		_, tg := s.one(t, "AWS::RDS::DBProxyTargetGroup")
		pool, _ := props(tg)["ConnectionPoolConfigurationInfo"].(map[string]any)
		borrow, _ := pool["ConnectionBorrowTimeout"].(float64)
		if borrow < 1 {
			t.Fatalf("ConnectionBorrowTimeout %v, want set (RDS's default is 120 s)", pool["ConnectionBorrowTimeout"])
		}
		for _, name := range []string{"push", "pop", "ack", "dlq", "admin", "reaper"} {
			fn := s.resources("AWS::Lambda::Function")[s.id(s.stack.Functions[name])]
			if timeout := props(fn)["Timeout"].(float64); borrow > timeout/2 {
				t.Errorf("borrow timeout %v s is not well under %s's timeout %v s", borrow, name, timeout)
			}
		}
		maxPct, _ := pool["MaxConnectionsPercent"].(float64)
		if maxPct != s.stack.Props.ProxyMaxConnectionsPercent || maxPct >= 100 || maxPct < 50 {
			t.Errorf("MaxConnectionsPercent %v, want %v (room left for migrate)", pool["MaxConnectionsPercent"], s.stack.Props.ProxyMaxConnectionsPercent)
		}
		if idle, _ := pool["MaxIdleConnectionsPercent"].(float64); idle < 1 || idle > maxPct || idle != s.stack.Props.ProxyMaxIdleConnectionsPercent {
			t.Errorf("MaxIdleConnectionsPercent %v, want %v", pool["MaxIdleConnectionsPercent"], s.stack.Props.ProxyMaxIdleConnectionsPercent)
		}
	})
	if got := defaults.get(t).stack.Props.ProxyBorrowTimeoutSec; got != 5 {
		t.Errorf("default borrow timeout %v s, want 5 (half the 10 s function timeout)", got)
	}
}

// Every function's concurrency is bounded by a prop, and the ingest mapping caps its
// share of push. By default nothing is reserved, so that a first deploy succeeds in a
// new account (a Lambda quota of 10 admits no reservation at all); the production
// profile reserves pop (long polls) and the reaper.
func TestConcurrencyBounded(t *testing.T) {
	for name, want := range map[string]map[string]any{
		"defaults":   {"pop": nil, "reaper": nil, "push": nil, "ack": nil, "dlq": nil, "admin": nil, "migrate": nil},
		"custom":     {"pop": nil, "reaper": nil, "push": 40.0, "ack": 25.0, "dlq": 2.0, "admin": 3.0, "migrate": nil},
		"production": {"pop": 100.0, "reaper": 1.0, "push": nil, "ack": nil, "dlq": nil, "admin": nil, "migrate": nil},
		// The dispatcher reserves only when asked to (TestWithDefaults: not by default).
		"subscriptions": {"pop": nil, "reaper": nil, "push": nil, "ack": nil, "dlq": nil, "admin": nil, "migrate": nil, DispatchFunction: 5.0},
	} {
		t.Run(name, func(t *testing.T) {
			s := variants[name].get(t)
			for fn, w := range want {
				r := s.resources("AWS::Lambda::Function")[s.id(s.stack.Functions[fn])]
				if got := props(r)["ReservedConcurrentExecutions"]; got != w {
					t.Errorf("%s: ReservedConcurrentExecutions %v, want %v", fn, got, w)
				}
			}
			// What the template reserves needs the quota the docs state.
			var sum float64
			for _, r := range s.resources("AWS::Lambda::Function") {
				if c, ok := props(r)["ReservedConcurrentExecutions"].(float64); ok {
					sum += c
				}
			}
			if q := s.stack.Props.LambdaQuotaNeeded(); (sum == 0 && q != 0) || (sum > 0 && q != sum+LambdaMinUnreservedConcurrency) {
				t.Errorf("reservations sum to %v; LambdaQuotaNeeded %v", sum, q)
			}
			// A reaper tick that waits for the previous pass is dropped by the next.
			reaper := s.id(s.stack.Functions["reaper"])
			var found bool
			for _, c := range s.resources("AWS::Lambda::EventInvokeConfig") {
				if ref(props(c)["FunctionName"]) == reaper {
					found = true
					if age := props(c)["MaximumEventAgeInSeconds"]; age != s.stack.Props.ReaperRateMinutes*60 {
						t.Errorf("reaper MaximumEventAgeInSeconds %v, want the period %v", age, s.stack.Props.ReaperRateMinutes*60)
					}
				}
			}
			if !found {
				t.Errorf("no async invoke config on the reaper")
			}
		})
	}
}

func refsOf(v any) []string {
	var out []string
	for _, x := range asList(v) {
		if r := ref(x); r != "" {
			out = append(out, r)
		}
	}
	return out
}

func TestDatabaseIsPrivateEncryptedAndBackedUp(t *testing.T) {
	t.Run("instance", func(t *testing.T) {
		s := defaults.get(t)
		id, db := s.one(t, "AWS::RDS::DBInstance")
		p := props(db)
		for k, want := range map[string]any{
			"PubliclyAccessible": false, "StorageEncrypted": true, "EnableIAMDatabaseAuthentication": true,
			"Engine": "postgres", "DBName": DefaultDatabaseName, "DeletionProtection": false,
		} {
			if !equal(p[k], want) {
				t.Errorf("DBInstance %s = %v, want %v", k, p[k], want)
			}
		}
		if v, _ := p["EngineVersion"].(string); !regexp.MustCompile(`^1[6-9]`).MatchString(v) {
			t.Errorf("EngineVersion %q, want PostgreSQL 16+", v)
		}
		if n, _ := p["BackupRetentionPeriod"].(float64); n < 1 {
			t.Errorf("backups off: BackupRetentionPeriod %v", p["BackupRetentionPeriod"])
		}
		if db["DeletionPolicy"] != "Snapshot" {
			t.Errorf("default DeletionPolicy %v, want Snapshot", db["DeletionPolicy"])
		}
		if id != s.id(s.stack.Database.Resource) {
			t.Errorf("database logical id %s, want %s", id, s.id(s.stack.Database.Resource))
		}
		storageAutoscales(t, p, s.stack.Props)
		masterPasswordRDSManaged(t, p)
		subnetsAreDatabaseSubnets(t, s)
	})
	t.Run("aurora", func(t *testing.T) {
		s := custom.get(t)
		_, cluster := s.one(t, "AWS::RDS::DBCluster")
		p := props(cluster)
		for k, want := range map[string]any{
			"StorageEncrypted": true, "EnableIAMDatabaseAuthentication": true, "Engine": "aurora-postgresql",
			"DatabaseName": DefaultDatabaseName, "DeletionProtection": true,
		} {
			if !equal(p[k], want) {
				t.Errorf("DBCluster %s = %v, want %v", k, p[k], want)
			}
		}
		if n, _ := p["BackupRetentionPeriod"].(float64); n < 1 {
			t.Errorf("backups off: BackupRetentionPeriod %v", p["BackupRetentionPeriod"])
		}
		masterPasswordRDSManaged(t, p)
		if path(p, "ServerlessV2ScalingConfiguration", "MinCapacity") != DefaultAuroraMinCapacity {
			t.Errorf("ServerlessV2ScalingConfiguration %v", p["ServerlessV2ScalingConfiguration"])
		}
		if cluster["DeletionPolicy"] != "Retain" {
			t.Errorf("RETAIN variant: DeletionPolicy %v", cluster["DeletionPolicy"])
		}
		for _, inst := range s.resources("AWS::RDS::DBInstance") {
			ip := props(inst)
			if ip["PubliclyAccessible"] != false || ip["DBInstanceClass"] != "db.serverless" {
				t.Errorf("Aurora instance: PubliclyAccessible %v class %v", ip["PubliclyAccessible"], ip["DBInstanceClass"])
			}
		}
		subnetsAreDatabaseSubnets(t, s)
	})
}

// storageAutoscales checks gp3 storage that grows by itself up to a ceiling at least
// 10 % above the allocation (RDS refuses less), and a free-storage alarm that cannot
// fire on an empty database.
func storageAutoscales(t *testing.T, p map[string]any, want Props) {
	t.Helper()
	alloc, _ := strconv.ParseFloat(fmt.Sprint(p["AllocatedStorage"]), 64)
	max, _ := p["MaxAllocatedStorage"].(float64)
	if p["StorageType"] != "gp3" || alloc != want.AllocatedStorageGiB || max != want.MaxAllocatedStorageGiB || max < 1.1*alloc {
		t.Errorf("storage %v: %v GiB growing to %v GiB, want gp3 %v growing to %v", p["StorageType"], p["AllocatedStorage"], p["MaxAllocatedStorage"], want.AllocatedStorageGiB, want.MaxAllocatedStorageGiB)
	}
	if want.DBFreeStorageGiBThreshold >= alloc {
		t.Errorf("free-storage alarm at %v GiB fires on an empty %v GiB database", want.DBFreeStorageGiBThreshold, alloc)
	}
}

// masterPasswordRDSManaged checks that RDS keeps (and rotates) the master password in
// Secrets Manager: no password in the template, not even a dynamic reference.
func masterPasswordRDSManaged(t *testing.T, p map[string]any) {
	t.Helper()
	if p["ManageMasterUserPassword"] != true || p["MasterUserPassword"] != nil || p["MasterUsername"] != DefaultMasterUser {
		t.Errorf("master credentials: ManageMasterUserPassword %v, MasterUserPassword %s, MasterUsername %v; want RDS-managed for %s",
			p["ManageMasterUserPassword"], toJSON(t, p["MasterUserPassword"]), p["MasterUsername"], DefaultMasterUser)
	}
}

// subnetsAreDatabaseSubnets checks the DB subnet group uses the isolated database subnets.
func subnetsAreDatabaseSubnets(t *testing.T, s *synthesized) {
	t.Helper()
	_, group := s.one(t, "AWS::RDS::DBSubnetGroup")
	for _, id := range refsOf(props(group)["SubnetIds"]) {
		if !strings.Contains(id, "database") {
			t.Errorf("database subnet group uses subnet %s", id)
		}
	}
}

func TestNetworkHasNoNATAndNoInternetRoute(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		for _, typ := range []string{"AWS::EC2::NatGateway", "AWS::EC2::InternetGateway", "AWS::EC2::EIP", "AWS::EC2::VPCGatewayAttachment", "AWS::EC2::EgressOnlyInternetGateway"} {
			if n := len(s.resources(typ)); n != 0 {
				t.Errorf("%d %s in the template, want none", n, typ)
			}
		}
		if n := len(s.resources("AWS::EC2::Route")); n != 0 {
			t.Errorf("%d routes out of the VPC, want none (isolated subnets)", n)
		}
		_, fl := s.one(t, "AWS::EC2::FlowLog")
		if p := props(fl); p["TrafficType"] != "REJECT" || ref(p["ResourceId"]) != s.id(s.stack.Network.Vpc) ||
			s.resources("AWS::Logs::LogGroup")[ref(p["LogGroupName"])] == nil {
			t.Errorf("flow log %s, want the VPC's rejected traffic into a log group of the stack", toJSON(t, p))
		}
		for id, sn := range s.resources("AWS::EC2::Subnet") {
			if props(sn)["MapPublicIpOnLaunch"] == true {
				t.Errorf("subnet %s maps public IPs", id)
			}
		}
	})
}

// Every group's rules, both sides: the functions to the proxy and the endpoints, the
// proxy and migrate to the database; with URL targets allowed, the dispatcher's own
// group has the same rules as the functions' group. No group but that one has egress
// to an address range (dispatchEgressRules checks its own), and so no function but a
// dispatcher that may reach URLs can leave the VPC's own groups.
func TestSecurityGroupsAllowOnlyFunctionsToProxyToDatabase(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		n := s.stack.Network
		sgName := map[string]string{
			s.id(n.FunctionsSG): "functions", s.id(n.MigrateSG): "migrate", s.id(n.ProxySG): "proxy",
			s.id(n.DatabaseSG): "database", s.id(n.EndpointSG): "endpoint",
		}
		if n.LambdaEndpointSG != nil {
			sgName[s.id(n.LambdaEndpointSG)] = "lambda endpoint"
		}
		urls := len(s.stack.Props.SubscriptionURLAllow) > 0
		if (n.DispatchSG != nil) != urls {
			t.Fatalf("dispatcher's own group %v, want one exactly when URL targets are allowed (%q)", n.DispatchSG, s.stack.Props.SubscriptionURLAllow)
		}
		if urls {
			sgName[s.id(n.DispatchSG)] = "dispatch"
		}
		got := map[string]bool{}
		for _, r := range s.resources("AWS::EC2::SecurityGroupIngress") {
			p := props(r)
			if p["CidrIp"] != nil || p["CidrIpv6"] != nil {
				t.Errorf("ingress from an address range: %s", toJSON(t, p))
			}
			from, to := sgName[getAtt(p["SourceSecurityGroupId"], "GroupId")], sgName[getAtt(p["GroupId"], "GroupId")]
			got[fmt.Sprintf("%s->%s:%s", from, to, port(p["FromPort"]))] = true
		}
		want := map[string]bool{
			"functions->proxy:5432": true, "proxy->database:5432": true,
			"migrate->database:5432": true, "migrate->endpoint:443": true,
			"functions->endpoint:443": true, // the payload functions read the encryption key
		}
		if s.stack.Props.Subscriptions() {
			want["functions->lambda endpoint:443"] = true // they start the dispatcher, which invokes targets
		}
		if urls { // the dispatcher, in its own group, is a payload function that invokes
			want["dispatch->proxy:5432"], want["dispatch->endpoint:443"], want["dispatch->lambda endpoint:443"] = true, true, true
		}
		if !equal(got, want) {
			t.Errorf("ingress rules %v, want exactly %v", keys(got), keys(want))
		}
		// Outbound traffic is closed by default, so every allowed path needs the same
		// rule as egress on the sending side.
		gotOut := map[string]bool{}
		for _, r := range s.resources("AWS::EC2::SecurityGroupEgress") {
			p := props(r)
			if p["CidrIp"] != nil || p["CidrIpv6"] != nil || p["DestinationPrefixListId"] != nil {
				t.Errorf("egress to an address range: %s", toJSON(t, p))
			}
			from, to := sgName[getAtt(p["GroupId"], "GroupId")], sgName[getAtt(p["DestinationSecurityGroupId"], "GroupId")]
			gotOut[fmt.Sprintf("%s->%s:%s", from, to, port(p["FromPort"]))] = true
		}
		if !equal(gotOut, want) {
			t.Errorf("egress rules %v, want exactly %v", keys(gotOut), keys(want))
		}
		for id, sg := range s.resources("AWS::EC2::SecurityGroup") {
			if _, ours := sgName[id]; !ours {
				continue
			}
			p := props(sg)
			if p["SecurityGroupIngress"] != nil {
				t.Errorf("%s has inline ingress %s", sgName[id], toJSON(t, p["SecurityGroupIngress"]))
			}
			if sgName[id] == "dispatch" {
				continue // dispatchEgressRules
			}
			// CDK's placeholder of a group with outbound traffic closed is the only
			// inline rule: no address range, 0.0.0.0/0 least of all.
			for _, r := range asList(p["SecurityGroupEgress"]) {
				if !isClosedEgressPlaceholder(r) {
					t.Errorf("%s has egress to an address range: %s", sgName[id], toJSON(t, r))
				}
			}
		}
		// Each function is in one group: migrate in its own, the dispatcher in its own
		// when it may reach URLs, every other in the functions' group. So only that
		// dispatcher can have egress to an address range.
		for name, fn := range s.stack.Functions {
			wantSG := "functions"
			switch {
			case name == "migrate":
				wantSG = "migrate"
			case name == DispatchFunction && urls:
				wantSG = "dispatch"
			}
			sgs := asList(path(props(s.resources("AWS::Lambda::Function")[s.id(fn)]), "VpcConfig", "SecurityGroupIds"))
			if len(sgs) != 1 || sgName[getAtt(sgs[0], "GroupId")] != wantSG {
				t.Errorf("%s is in groups %s, want the %s group alone", name, toJSON(t, sgs), wantSG)
			}
		}
	})
}

// isClosedEgressPlaceholder reports whether an inline egress rule is the one CDK adds
// to a group without outbound rules (AllowAllOutbound false): ICMP type 252 code 86
// to 255.255.255.255/32, which matches no traffic.
func isClosedEgressPlaceholder(r any) bool {
	m, _ := r.(map[string]any)
	return m["CidrIp"] == "255.255.255.255/32" && m["IpProtocol"] == "icmp" && m["FromPort"] == 252.0 && m["ToPort"] == 86.0 && len(m) == 5
}

// port renders a port that is a number or the database's Endpoint.Port attribute.
func port(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprint(f)
	}
	if getAtt(v, "Endpoint.Port") != "" {
		return "5432"
	}
	return fmt.Sprint(v)
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestNoWildcardResourceForDatabaseOrSecretAccess(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		roleOf := map[string]string{} // role logical id -> function name
		for name, fn := range s.stack.Functions {
			roleOf[s.id(fn.Role())] = name
		}
		proxyID := s.id(s.stack.Proxy)
		connectors := map[string]bool{}
		readers := map[string]map[string]bool{} // function -> "database" or "encryption key"
		for id, pol := range s.resources("AWS::IAM::Policy") {
			p := props(pol)
			for _, st := range asList(path(p, "PolicyDocument", "Statement")) {
				actions := asStrings(path(st, "Action"))
				var db, secret bool
				for _, a := range actions {
					a = strings.ToLower(a)
					db = db || hasPrefixFold(a, "rds-db:") || a == "*" || a == "rds:*"
					secret = secret || hasPrefixFold(a, "secretsmanager:")
				}
				if !db && !secret {
					continue
				}
				if path(st, "NotResource") != nil {
					t.Errorf("%s: NotResource on %v", id, actions)
				}
				for _, a := range actions {
					if strings.Contains(a, "*") {
						t.Errorf("%s: wildcard action %q", id, a)
					}
				}
				res := path(st, "Resource")
				for _, lit := range literals(res) {
					if strings.Contains(lit, "*") {
						t.Errorf("%s: %v on a wildcard resource %s", id, actions, toJSON(t, res))
					}
				}
				for _, role := range refsOf(p["Roles"]) {
					if name, ok := roleOf[role]; ok {
						if db {
							connectors[name] = true
							// Functions log in through the proxy: dbuser:<proxy resource id>/queen_app.
							js := toJSON(t, res)
							if !strings.Contains(js, proxyID) || !strings.Contains(js, `"/queen_app"`) {
								t.Errorf("%s: rds-db:connect on %s, want the proxy's dbuser/queen_app", name, js)
							}
						}
						if secret {
							if !equal(actions, []string{"secretsmanager:GetSecretValue"}) {
								t.Errorf("%s: secret actions %v, want GetSecretValue only", name, actions)
							}
							var which string
							switch r := ref(res); {
							case getAtt(res, "MasterUserSecret.SecretArn") == s.id(s.stack.Database.Resource):
								which = "database"
							case r == s.id(s.stack.EncryptionKey):
								which = "encryption key"
							default:
								t.Errorf("%s: reads secret %s, want one of the stack's two secrets", name, toJSON(t, res))
								continue
							}
							if readers[name] == nil {
								readers[name] = map[string]bool{}
							}
							readers[name][which] = true
						}
					}
				}
			}
		}
		for _, name := range s.stack.Props.Functions() {
			if name != "migrate" && !connectors[name] {
				t.Errorf("%s cannot rds-db:connect", name)
			}
		}
		if connectors["migrate"] {
			t.Errorf("migrate has rds-db:connect; it logs in with the master password")
		}
		// Migrate reads the master secret; the payload functions the encryption key,
		// each GetSecretValue on that one secret; the reaper no secret at all.
		want := map[string]map[string]bool{"migrate": {"database": true}}
		for _, name := range wantKeyReaders {
			if s.stack.Functions[name] != nil {
				want[name] = map[string]bool{"encryption key": true}
			}
		}
		if !equal(readers, want) {
			t.Errorf("secrets each function may read: %v, want %v", readers, want)
		}
	})
}

func TestNoSecretValueInFunctionEnvironment(t *testing.T) {
	secretish := regexp.MustCompile(`(?i)password|passwd|secretstring|token|private`)
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		fnIDs := s.functionIDs()
		secretIDs := map[string]bool{}
		for id := range s.resources("AWS::SecretsManager::Secret") {
			secretIDs[id] = true
		}
		for id := range s.resources("AWS::SecretsManager::SecretTargetAttachment") {
			secretIDs[id] = true
		}
		for id, r := range s.resources("AWS::Lambda::Function") {
			vars, _ := path(props(r), "Environment", "Variables").(map[string]any)
			for k, v := range vars {
				js := toJSON(t, v)
				if strings.Contains(js, "resolve:secretsmanager") || strings.Contains(js, "resolve:ssm-secure") || secretish.MatchString(k) || secretish.MatchString(js) {
					t.Errorf("%s: environment %s=%s looks like a secret", id, k, js)
				}
				if getAtt(v, "SecretString") != "" {
					t.Errorf("%s: %s holds a secret value", id, k)
				}
				if k == "QUEEN_ENCRYPTION_KEY" {
					t.Errorf("%s: the encryption key ring itself is in the environment", id)
				}
				name := fnIDs[id]
				allowed := (k == EnvDBSecretARN && name == "migrate") || (k == EnvEncryptionKeySecretARN && contains(wantKeyReaders, name))
				if secretIDs[ref(v)] && !allowed {
					t.Errorf("%s: %s names a secret; only migrate's %s and the payload functions' %s may", id, k, EnvDBSecretARN, EnvEncryptionKeySecretARN)
				}
			}
			if name := fnIDs[id]; name != "" {
				key := ref(vars[EnvEncryptionKeySecretARN])
				if contains(wantKeyReaders, name) && key != s.id(s.stack.EncryptionKey) {
					t.Errorf("%s: %s = %s, want the encryption key secret's ARN", name, EnvEncryptionKeySecretARN, toJSON(t, vars[EnvEncryptionKeySecretARN]))
				} else if !contains(wantKeyReaders, name) && vars[EnvEncryptionKeySecretARN] != nil {
					t.Errorf("%s: has %s but never handles a payload", name, EnvEncryptionKeySecretARN)
				}
				if name == "migrate" {
					if getAtt(vars[EnvDBSecretARN], "MasterUserSecret.SecretArn") != s.id(s.stack.Database.Resource) {
						t.Errorf("migrate: %s = %s, want the master secret's ARN", EnvDBSecretARN, toJSON(t, vars[EnvDBSecretARN]))
					}
				} else if getAtt(vars[EnvDBHost], "Endpoint") != s.id(s.stack.Proxy) {
					t.Errorf("%s: %s = %s, want the proxy endpoint", name, EnvDBHost, toJSON(t, vars[EnvDBHost]))
				}
				for k, want := range map[string]string{EnvDBPort: "5432", EnvDBName: "queen", EnvDBUser: "queen_app", EnvDBSSLMode: "verify-full", EnvMaxWaitMS: "20000", EnvLogLevel: "info"} {
					if vars[k] != want {
						t.Errorf("%s: %s = %v, want %q", name, k, vars[k], want)
					}
				}
				if name != "migrate" && vars[EnvDBIAMAuth] != "true" {
					t.Errorf("%s: %s = %v, want true", name, EnvDBIAMAuth, vars[EnvDBIAMAuth])
				}
			}
		}
	})
}

// Every function verifies the database's certificate and host name: the serving
// functions against the system roots (the proxy's certificate is from Amazon's public
// CA), migrate against the RDS CA bundle its layer provides.
func TestTLSVerifyFull(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		layers := s.resources("AWS::Lambda::LayerVersion")
		for name, fn := range s.stack.Functions {
			p := props(s.resources("AWS::Lambda::Function")[s.id(fn)])
			vars, _ := path(p, "Environment", "Variables").(map[string]any)
			if vars[EnvDBSSLMode] != "verify-full" {
				t.Errorf("%s: %s = %v, want verify-full", name, EnvDBSSLMode, vars[EnvDBSSLMode])
			}
			if name != "migrate" {
				if vars["PGSSLROOTCERT"] != nil || p["Layers"] != nil {
					t.Errorf("%s: root certificate %v, layers %v; the proxy's certificate verifies against the system roots", name, vars["PGSSLROOTCERT"], p["Layers"])
				}
				continue
			}
			if vars["PGSSLROOTCERT"] != "/opt/rds-ca-bundle.pem" {
				t.Errorf("migrate: PGSSLROOTCERT = %v, want /opt/rds-ca-bundle.pem", vars["PGSSLROOTCERT"])
			}
			ls := refsOf(p["Layers"])
			if len(ls) != 1 || layers[ls[0]] == nil {
				t.Fatalf("migrate: layers %v, want the RDS CA layer", p["Layers"])
			}
			// The layer's staged asset holds the bundle at the layer's root (/opt).
			key, _ := path(props(layers[ls[0]]), "Content", "S3Key").(string)
			asset := "asset." + strings.TrimSuffix(key, ".zip")
			got, err := os.ReadFile(filepath.Join(*awscdk.Stage_Of(s.stack.Stack).AssetOutdir(), asset, "rds-ca-bundle.pem"))
			if err != nil || !bytes.Equal(got, RDSCABundle) {
				t.Errorf("RDS CA layer asset %q does not hold the bundle: %v", asset, err)
			}
		}
	})
}

// The RDS CA bundle parses, is current, and has the CA that signs new RDS instances'
// certificates in the regions Queen is most often deployed to.
func TestRDSCABundle(t *testing.T) {
	rest := RDSCABundle
	subjects := map[string]bool{}
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !c.IsCA || time.Now().After(c.NotAfter) {
			t.Errorf("%s: CA %v, expires %v", c.Subject.CommonName, c.IsCA, c.NotAfter)
		}
		subjects[c.Subject.CommonName] = true
	}
	for _, region := range []string{"us-east-1", "eu-west-1", "ap-southeast-2"} {
		if cn := "Amazon RDS " + region + " Root CA RSA2048 G1"; !subjects[cn] {
			t.Errorf("bundle lacks %q (%d certificates)", cn, len(subjects))
		}
	}
}

func TestReaperScheduledAtConfiguredRate(t *testing.T) {
	for name, want := range map[string]string{"defaults": "rate(1 minute)", "custom": "rate(5 minutes)"} {
		t.Run(name, func(t *testing.T) {
			s := variants[name].get(t)
			_, rule := s.one(t, "AWS::Events::Rule")
			p := props(rule)
			if p["ScheduleExpression"] != want {
				t.Errorf("ScheduleExpression %v, want %q", p["ScheduleExpression"], want)
			}
			if p["State"] != "ENABLED" {
				t.Errorf("rule state %v", p["State"])
			}
			targets := asList(p["Targets"])
			if len(targets) != 1 || getAtt(path(targets[0], "Arn"), "Arn") != s.id(s.stack.Functions["reaper"]) {
				t.Errorf("rule targets %s, want the reaper function", toJSON(t, targets))
			}
		})
	}
}

// The migration waits for the database, migrate's network path to it and the
// Secrets Manager endpoint, and not for the RDS Proxy: migrate logs in directly, and
// the proxy's login role only exists once migrate created it.
func TestMigrationRunsAfterDatabaseAndBeforeTraffic(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		id, cr := s.one(t, MigrationResourceType)
		deps := dependsOn(cr)
		for what, dep := range map[string]string{
			"database": s.id(s.stack.Database.Resource), "migrate function": s.id(s.stack.Functions["migrate"]),
			"secrets endpoint": s.id(s.stack.Network.SecretsEndpoint),
		} {
			if !contains(deps, dep) {
				t.Errorf("migration does not depend on the %s (%s); DependsOn %v", what, dep, deps)
			}
		}
		// Both sides of every security group rule from migrate: its egress and the
		// database's and the endpoint's ingress.
		migrateSG := s.id(s.stack.Network.MigrateSG)
		for rid, r := range s.resources("AWS::EC2::SecurityGroupIngress") {
			if getAtt(props(r)["SourceSecurityGroupId"], "GroupId") == migrateSG && !contains(deps, rid) {
				t.Errorf("migration does not wait for the ingress rule %s from migrate", rid)
			}
		}
		for rid, r := range s.resources("AWS::EC2::SecurityGroupEgress") {
			if getAtt(props(r)["GroupId"], "GroupId") == migrateSG && !contains(deps, rid) {
				t.Errorf("migration does not wait for migrate's egress rule %s", rid)
			}
		}
		needs := s.requires(id)
		for what, typ := range map[string]string{"proxy": "AWS::RDS::DBProxy", "proxy target group": "AWS::RDS::DBProxyTargetGroup"} {
			for rid := range s.resources(typ) {
				if contains(needs, rid) {
					t.Errorf("the migration waits for the %s %s; migrate does not use it", what, rid)
				}
			}
		}

		// The service token is the provider framework, whose onEvent is migrate.
		p := props(cr)
		framework := s.resources("AWS::Lambda::Function")[getAtt(p["ServiceToken"], "Arn")]
		if getAtt(path(props(framework), "Environment", "Variables", "USER_ON_EVENT_FUNCTION_ARN"), "Arn") != s.id(s.stack.Functions["migrate"]) {
			t.Errorf("migration provider does not invoke the migrate function")
		}
		sum, err := os.ReadFile(filepath.Join(assetsDir, "migrate", "bootstrap"))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(sum)
		if p["MigrateCodeSha256"] != hex.EncodeToString(h[:]) {
			t.Errorf("MigrateCodeSha256 %v does not track the migrate binary", p["MigrateCodeSha256"])
		}
		if nonce := s.stack.Props.MigrationNonce; nonce != "" && p["DeployNonce"] != nonce {
			t.Errorf("DeployNonce %v, want %q (re-run on every deploy)", p["DeployNonce"], nonce)
		} else if nonce == "" && p["DeployNonce"] != nil {
			t.Errorf("DeployNonce %v without a nonce", p["DeployNonce"])
		}

		// No function code that needs the schema is created or updated before the
		// migration: every function but migrate depends on it, directly.
		for _, name := range s.stack.Props.Functions() {
			if name == "migrate" {
				continue
			}
			fn := s.resources("AWS::Lambda::Function")[s.id(s.stack.Functions[name])]
			if !contains(dependsOn(fn), id) {
				t.Errorf("function %s does not depend on the migration; DependsOn %v", name, dependsOn(fn))
			}
		}
		// And nothing the migration needs waits for it (CloudFormation would reject
		// the cycle at deploy time, which a synth does not check).
		for _, dep := range s.requires(id) {
			if contains(s.requires(dep), id) {
				t.Errorf("dependency cycle: the migration needs %s, which needs the migration", dep)
			}
		}
		for what, need := range map[string]string{"migrate function": s.id(s.stack.Functions["migrate"]), "provider": getAtt(p["ServiceToken"], "Arn")} {
			if !contains(s.requires(id), need) {
				t.Errorf("the migration does not need the %s (%s)", what, need)
			}
		}

		// Nothing that sends traffic to the database exists before the migration.
		for _, typ := range []string{"AWS::ApiGatewayV2::Api", "AWS::ApiGatewayV2::Route", "AWS::ApiGatewayV2::Integration", "AWS::ApiGatewayV2::Stage", "AWS::Events::Rule", "AWS::Lambda::EventSourceMapping"} {
			for rid, r := range s.resources(typ) {
				if !contains(dependsOn(r), id) {
					t.Errorf("%s %s does not depend on the migration", typ, rid)
				}
			}
		}
	})
}

// requires is every resource the resource id needs before CloudFormation may create or
// update it: its DependsOn, Ref and Fn::GetAtt targets, transitively.
func (s *synthesized) requires(id string) []string {
	resources := s.json["Resources"].(map[string]any)
	direct := func(id string) []string {
		r, _ := resources[id].(map[string]any)
		out := dependsOn(r)
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case []any:
				for _, x := range v {
					walk(x)
				}
			case map[string]any:
				for k, x := range v {
					if k == "Ref" {
						if s, ok := x.(string); ok && resources[s] != nil {
							out = append(out, s)
						}
					} else if k == "Fn::GetAtt" {
						if a, ok := x.([]any); ok && len(a) > 0 && resources[fmt.Sprint(a[0])] != nil {
							out = append(out, fmt.Sprint(a[0]))
						}
					}
					walk(x)
				}
			}
		}
		walk(r["Properties"])
		return out
	}
	seen := map[string]bool{}
	var out []string
	todo := direct(id)
	for len(todo) > 0 {
		next := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[next] {
			continue
		}
		seen[next] = true
		out = append(out, next)
		todo = append(todo, direct(next)...)
	}
	return out
}

func TestAlarmsAndDashboard(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		topic := s.id(s.stack.AlarmTopic)
		type key struct{ ns, metric, dim string }
		alarms := map[key]map[string]any{}
		for id, a := range s.resources("AWS::CloudWatch::Alarm") {
			p := props(a)
			if !contains(refsOf(p["AlarmActions"]), topic) {
				t.Errorf("alarm %s does not notify the alarm topic", id)
			}
			m := p
			for _, q := range asList(p["Metrics"]) { // a metric math alarm: its one metric
				if ms := path(q, "MetricStat", "Metric"); ms != nil {
					m = ms.(map[string]any)
				}
			}
			var dim string
			for _, d := range asList(m["Dimensions"]) {
				dim += toJSON(t, path(d, "Value"))
			}
			alarms[key{fmt.Sprint(m["Namespace"]), fmt.Sprint(m["MetricName"]), dim}] = p
		}
		th := s.stack.Props
		check := func(k key, op string, threshold float64, missing string) map[string]any {
			t.Helper()
			p, ok := alarms[k]
			if !ok {
				t.Errorf("no alarm on %s/%s %s", k.ns, k.metric, k.dim)
				return nil
			}
			if p["Threshold"] != threshold || p["ComparisonOperator"] != op {
				t.Errorf("alarm %s: %v %v, want %s %v", k.metric, p["ComparisonOperator"], p["Threshold"], op, threshold)
			}
			if p["TreatMissingData"] != missing {
				t.Errorf("alarm %s: TreatMissingData %v, want %s", k.metric, p["TreatMissingData"], missing)
			}
			return p
		}
		const gt, lt = "GreaterThanThreshold", "LessThanThreshold"
		// The reaper's metrics: a stopped reaper (no data) raises both alarms.
		dlq := check(key{MetricsNamespace, MetricDLQDepth, ""}, gt, th.DLQDepthThreshold, "breaching")
		// The dead-letter alarm fires on growth, not on a depth that stays.
		var expr []string
		for _, q := range asList(dlq["Metrics"]) {
			if e, ok := path(q, "Expression").(string); ok {
				expr = append(expr, e)
			}
		}
		if len(expr) != 1 || !strings.HasPrefix(expr[0], "DIFF(") {
			t.Errorf("DLQ alarm expressions %v, want the DIFF of the depth", expr)
		}
		check(key{MetricsNamespace, MetricMaxGroupLag, ""}, gt, th.GroupLagThreshold, "breaching")
		// The reaper has not caught up: every pass of N reaper periods in a row fell
		// behind (the period's minimum of a 0/1 metric is 1).
		if behind := check(key{MetricsNamespace, MetricReaperBehind, ""}, "GreaterThanOrEqualToThreshold", 1, "notBreaching"); behind != nil {
			if behind["Statistic"] != "Minimum" || behind["Period"] != th.ReaperRateMinutes*60 || behind["EvaluationPeriods"] != th.ReaperBehindPasses {
				t.Errorf("reaper-behind alarm: %v over %v s, %v periods; want Minimum over the reaper's period %v s, %v periods",
					behind["Statistic"], behind["Period"], behind["EvaluationPeriods"], th.ReaperRateMinutes*60, th.ReaperBehindPasses)
			}
		}

		proxy := fmt.Sprintf(`{"Ref":"%s"}`, s.id(s.stack.Proxy))
		check(key{"AWS/RDS", MetricProxyPinned, proxy}, gt, 0, "notBreaching")
		check(key{"AWS/RDS", "DatabaseConnectionsBorrowLatency", proxy}, gt, DefaultProxyBorrowLatencyMsThreshold*1000, "notBreaching")
		check(key{"AWS/RDS", "ClientConnections", proxy}, gt, DefaultProxyClientConnectionsThreshold, "notBreaching")
		db := fmt.Sprintf(`{"Ref":"%s"}`, s.id(s.stack.Database.Resource))
		check(key{"AWS/RDS", "FreeableMemory", db}, lt, DefaultDBFreeableMemoryMiBThreshold*1024*1024, "notBreaching")
		check(key{"AWS/RDS", "CPUUtilization", db}, gt, DefaultDBCPUUtilizationThreshold, "notBreaching")
		if s.stack.Props.Burstable() {
			check(key{"AWS/RDS", "CPUCreditBalance", db}, lt, DefaultDBCPUCreditBalanceThreshold, "notBreaching")
		}
		if s.stack.Props.Engine == EngineInstance {
			check(key{"AWS/RDS", "FreeStorageSpace", db}, lt, th.DBFreeStorageGiBThreshold*1024*1024*1024, "notBreaching")
		}
		for k := range alarms {
			if (k.metric == "CPUCreditBalance" && !s.stack.Props.Burstable()) || (k.metric == "FreeStorageSpace" && s.stack.Props.Engine != EngineInstance) {
				t.Errorf("the %s database has no %s, yet an alarm watches it", s.stack.Props.InstanceType, k.metric)
			}
		}
		check(key{"AWS/ApiGateway", "5xx", fmt.Sprintf(`{"Ref":"%s"}`, s.id(s.stack.API))}, gt, DefaultAPI5xxThreshold, "notBreaching")
		for _, name := range servingFunctions {
			fn := fmt.Sprintf(`{"Ref":"%s"}`, s.id(s.stack.Functions[name]))
			check(key{"AWS/Lambda", "Errors", fn}, gt, 0, "notBreaching")
			check(key{"AWS/Lambda", "Throttles", fn}, gt, 0, "notBreaching")
		}
		check(key{"AWS/SQS", "ApproximateNumberOfMessagesVisible", fmt.Sprintf(`{"Fn::GetAtt":["%s","QueueName"]}`, s.id(s.stack.PushFailedEvents))}, gt, 0, "notBreaching")
		if s.stack.Props.Ingest() {
			check(key{"AWS/SQS", "ApproximateNumberOfMessagesVisible", fmt.Sprintf(`{"Fn::GetAtt":["%s","QueueName"]}`, s.id(s.stack.IngestDLQ))}, gt, 0, "notBreaching")
			check(key{"AWS/SQS", "ApproximateAgeOfOldestMessage", fmt.Sprintf(`{"Fn::GetAtt":["%s","QueueName"]}`, s.id(s.stack.IngestQueue))}, gt, DefaultIngestMessageAgeSecThreshold, "notBreaching")
		}

		_, dash := s.one(t, "AWS::CloudWatch::Dashboard")
		body := toJSON(t, props(dash)["DashboardBody"])
		for _, want := range []string{MetricDLQDepth, MetricMaxGroupLag, MetricProxyPinned, MetricReaperBehind,
			MetricBacklogLeases, MetricBacklogDedup, MetricBacklogRetention, "AWS/ApiGateway", "CPUUtilization", "alarms", "DatabaseConnectionsBorrowLatency", "FreeableMemory"} {
			if !strings.Contains(body, want) {
				t.Errorf("dashboard does not show %s", want)
			}
		}
	})
}

func TestAuthorizerVariants(t *testing.T) {
	t.Run("iam", func(t *testing.T) {
		s := defaults.get(t)
		if n := len(s.resources("AWS::ApiGatewayV2::Authorizer")); n != 0 {
			t.Errorf("IAM variant has %d authorizer resources", n)
		}
		for id, r := range s.resources("AWS::ApiGatewayV2::Route") {
			if props(r)["AuthorizationType"] != "AWS_IAM" {
				t.Errorf("route %s (%v): AuthorizationType %v, want AWS_IAM", id, props(r)["RouteKey"], props(r)["AuthorizationType"])
			}
		}
	})
	t.Run("jwt", func(t *testing.T) {
		s := custom.get(t)
		authID, auth := s.one(t, "AWS::ApiGatewayV2::Authorizer")
		p := props(auth)
		if p["AuthorizerType"] != "JWT" || path(p, "JwtConfiguration", "Issuer") != "https://issuer.example.com/" ||
			!equal(path(p, "JwtConfiguration", "Audience"), []any{"queen-api", "queen-cli"}) {
			t.Errorf("JWT authorizer %s", toJSON(t, p))
		}
		if !equal(p["IdentitySource"], []any{"$request.header.Authorization"}) {
			t.Errorf("JWT identity source %v", p["IdentitySource"])
		}
		// Role scopes per route (any one grants it), written out here so a
		// wrong mapping in Route.Scopes fails.
		produce := []any{"queen/produce", "queen/admin"}
		consume := []any{"queen/consume", "queen/admin"}
		read := []any{"queen/read-only", "queen/consume", "queen/admin"}
		admin := []any{"queen/admin"}
		wantScopes := map[string][]any{
			"POST /api/v1/push": produce, "GET /api/v1/pop/queue/{queue}": consume,
			"POST /api/v1/lease/{leaseId}/extend": consume, "POST /api/v1/ack/batch": consume,
			"POST /api/v1/transaction": consume, "GET /api/v1/dlq": read, "GET /api/v1/messages": read,
			"GET /api/v1/system/maintenance": read, "POST /api/v1/system/maintenance": admin,
			"POST /api/v1/configure": admin, "DELETE /api/v1/resources/queues/{queue}": admin,
			"POST /api/v1/messages/{partitionId}/{transactionId}/retry": admin, "GET /health": read,
		}
		seen := 0
		for id, r := range s.resources("AWS::ApiGatewayV2::Route") {
			rp := props(r)
			if rp["AuthorizationType"] != "JWT" || ref(rp["AuthorizerId"]) != authID {
				t.Errorf("route %s (%v): %v %v, want the JWT authorizer", id, rp["RouteKey"], rp["AuthorizationType"], rp["AuthorizerId"])
			}
			if want, ok := wantScopes[rp["RouteKey"].(string)]; ok {
				seen++
				if !equal(rp["AuthorizationScopes"], want) {
					t.Errorf("route %v: scopes %v, want %v", rp["RouteKey"], rp["AuthorizationScopes"], want)
				}
			}
		}
		if seen != len(wantScopes) {
			t.Errorf("checked the scopes of %d routes, want %d", seen, len(wantScopes))
		}
	})
	t.Run("iam has no scopes", func(t *testing.T) {
		for _, r := range defaults.get(t).resources("AWS::ApiGatewayV2::Route") {
			if sc, ok := props(r)["AuthorizationScopes"]; ok {
				t.Errorf("route %v has scopes %v under IAM", props(r)["RouteKey"], sc)
			}
		}
	})
}

func TestAPIStageThrottledAndAccessLogged(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		_, stage := s.one(t, "AWS::ApiGatewayV2::Stage")
		p := props(stage)
		if p["StageName"] != "$default" || p["AutoDeploy"] != true {
			t.Errorf("stage %v autoDeploy %v", p["StageName"], p["AutoDeploy"])
		}
		rate, burst := path(p, "DefaultRouteSettings", "ThrottlingRateLimit"), path(p, "DefaultRouteSettings", "ThrottlingBurstLimit")
		if rate != s.stack.Props.ThrottleRateLimit || burst != s.stack.Props.ThrottleBurstLimit {
			t.Errorf("throttling %s, want %v/s burst %v", toJSON(t, p["DefaultRouteSettings"]), s.stack.Props.ThrottleRateLimit, s.stack.Props.ThrottleBurstLimit)
		}
		logs := getAtt(path(p, "AccessLogSettings", "DestinationArn"), "Arn")
		if _, ok := s.resources("AWS::Logs::LogGroup")[logs]; !ok {
			t.Errorf("access logs go to %v, not a log group of the stack", logs)
		}
		if f, _ := path(p, "AccessLogSettings", "Format").(string); !strings.Contains(f, "$context.requestId") || !strings.Contains(f, "$context.status") {
			t.Errorf("access log format %q", f)
		}
	})
}

func TestLogsRetained(t *testing.T) {
	for name, days := range map[string]float64{"defaults": DefaultLogRetentionDays, "custom": 90} {
		t.Run(name, func(t *testing.T) {
			s := variants[name].get(t)
			groups := s.resources("AWS::Logs::LogGroup")
			for fname, fn := range s.stack.Functions {
				r := s.resources("AWS::Lambda::Function")[s.id(fn)]
				g, ok := groups[ref(path(props(r), "LoggingConfig", "LogGroup"))]
				if !ok {
					t.Errorf("%s: no log group of the stack", fname)
					continue
				}
				if props(g)["RetentionInDays"] != days {
					t.Errorf("%s: retention %v days, want %v", fname, props(g)["RetentionInDays"], days)
				}
			}
		})
	}
}

func TestIngestQueue(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		s := defaults.get(t)
		queues := s.resources("AWS::SQS::Queue")
		delete(queues, s.id(s.stack.PushFailedEvents)) // TestPushAsyncFailuresKept
		q, ok := queues[s.id(s.stack.IngestQueue)]
		if !ok || len(queues) != 2 {
			t.Fatalf("want the ingest queue and its DLQ, got %d queues", len(queues))
		}
		p := props(q)
		if getAtt(path(p, "RedrivePolicy", "deadLetterTargetArn"), "Arn") != s.id(s.stack.IngestDLQ) {
			t.Errorf("redrive policy %s", toJSON(t, p["RedrivePolicy"]))
		}
		vt, _ := p["VisibilityTimeout"].(float64)
		if vt < 2*DefaultFunctionTimeoutSec || vt > 6*DefaultFunctionTimeoutSec {
			t.Errorf("visibility timeout %v s, want 2–6x the push timeout (%v s)", vt, DefaultFunctionTimeoutSec)
		}
		// A database outage of up to 30 minutes (DefaultIngestRetryMinutes) does not
		// dead-letter a message: it is received maxReceiveCount times, one visibility
		// timeout apart, before it moves to the DLQ.
		receives, _ := path(p, "RedrivePolicy", "maxReceiveCount").(float64)
		if receives*vt < 30*60 {
			t.Errorf("maxReceiveCount %v × visibility %v s = %v s: a 30-minute outage dead-letters ingest messages", receives, vt, receives*vt)
		}
		_, m := s.one(t, "AWS::Lambda::EventSourceMapping")
		mp := props(m)
		if ref(mp["FunctionName"]) != s.id(s.stack.Functions["push"]) || getAtt(mp["EventSourceArn"], "Arn") != s.id(s.stack.IngestQueue) {
			t.Errorf("mapping %s, want ingest queue → push", toJSON(t, mp))
		}
		if path(mp, "ScalingConfig", "MaximumConcurrency") != float64(DefaultIngestMaxConcurrency) {
			t.Errorf("mapping MaximumConcurrency %v, want %v", path(mp, "ScalingConfig", "MaximumConcurrency"), DefaultIngestMaxConcurrency)
		}
		if !equal(mp["FunctionResponseTypes"], []any{"ReportBatchItemFailures"}) {
			t.Errorf("mapping without partial batch responses: %v", mp["FunctionResponseTypes"])
		}
		if _, ok := path(s.json, "Outputs", "IngestQueueUrl").(map[string]any); !ok {
			t.Errorf("no IngestQueueUrl output")
		}
	})
	t.Run("off", func(t *testing.T) {
		s := custom.get(t)
		queues := s.resources("AWS::SQS::Queue")
		delete(queues, s.id(s.stack.PushFailedEvents)) // push's async failures, with or without ingest
		if n := len(queues) + len(s.resources("AWS::Lambda::EventSourceMapping")); n != 0 {
			t.Errorf("ingest disabled but %d queue/mapping resources", n)
		}
		if path(s.json, "Outputs", "IngestQueueUrl") != nil {
			t.Errorf("ingest disabled but IngestQueueUrl output present")
		}
	})
}

// pushFailureQueue is the logical id of the on-failure destination of push's
// asynchronous invocations (SNS, EventBridge, invoke --invocation-type Event), read
// from the template: the queue its EventInvokeConfig names, or "" without one.
func (s *synthesized) pushFailureQueue(t *testing.T) (string, map[string]any) {
	t.Helper()
	push := s.id(s.stack.Functions["push"])
	var queue string
	var config map[string]any
	for id, c := range s.resources("AWS::Lambda::EventInvokeConfig") {
		if ref(props(c)["FunctionName"]) != push {
			continue
		}
		if config != nil {
			t.Errorf("push has more than one async invoke config (%s)", id)
		}
		config = props(c)
		queue = getAtt(path(config, "DestinationConfig", "OnFailure", "Destination"), "Arn")
	}
	return queue, config
}

// SNS and EventBridge invoke push asynchronously: an event push still fails after
// Lambda's retries is kept in an encrypted, alarmed queue, never dropped.
func TestPushAsyncFailuresKept(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		queue, config := s.pushFailureQueue(t)
		if config == nil {
			t.Fatalf("no async invoke config on push: a failed SNS/EventBridge event is dropped")
		}
		q, ok := s.resources("AWS::SQS::Queue")[queue]
		if !ok {
			t.Fatalf("push's on-failure destination %s is not an SQS queue of the stack", toJSON(t, config["DestinationConfig"]))
		}
		if want := s.id(s.stack.PushFailedEvents); queue != want {
			t.Errorf("push's on-failure destination is %s, want Stack.PushFailedEvents (%s)", queue, want)
		}
		if config["MaximumRetryAttempts"] != 2.0 || config["MaximumEventAgeInSeconds"] != 6*3600.0 || config["Qualifier"] != "$LATEST" {
			t.Errorf("push async invoke: %v retries, events kept %v s, qualifier %v; want 2, 21600 s (Lambda's defaults), $LATEST",
				config["MaximumRetryAttempts"], config["MaximumEventAgeInSeconds"], config["Qualifier"])
		}
		if path(config, "DestinationConfig", "OnSuccess") != nil {
			t.Errorf("push has an on-success destination %s", toJSON(t, path(config, "DestinationConfig", "OnSuccess")))
		}

		// The queue: encrypted, TLS only, 14 days to look at a failed event.
		qp := props(q)
		if qp["SqsManagedSseEnabled"] != true && qp["KmsMasterKeyId"] == nil {
			t.Errorf("push failure queue not encrypted: %s", toJSON(t, qp))
		}
		if qp["MessageRetentionPeriod"] != 14*24*3600.0 {
			t.Errorf("push failure queue keeps messages %v s, want 14 days", qp["MessageRetentionPeriod"])
		}
		var tlsOnly bool
		for _, pol := range s.resources("AWS::SQS::QueuePolicy") {
			pp := props(pol)
			if !contains(refsOf(pp["Queues"]), queue) {
				continue
			}
			for _, st := range asList(path(pp, "PolicyDocument", "Statement")) {
				tlsOnly = tlsOnly || (path(st, "Effect") == "Deny" && path(st, "Condition", "Bool", "aws:SecureTransport") == "false")
			}
		}
		if !tlsOnly {
			t.Errorf("push failure queue does not deny requests without TLS")
		}

		// Push's role may send to it (Lambda sends the record as the function).
		pushRole := s.id(s.stack.Functions["push"].Role())
		var send bool
		for _, pol := range s.resources("AWS::IAM::Policy") {
			pp := props(pol)
			if !contains(refsOf(pp["Roles"]), pushRole) {
				continue
			}
			for _, st := range asList(path(pp, "PolicyDocument", "Statement")) {
				if path(st, "Effect") == "Allow" && contains(asStrings(path(st, "Action")), "sqs:SendMessage") &&
					getAtt(path(st, "Resource"), "Arn") == queue {
					send = true
				}
			}
		}
		if !send {
			t.Errorf("push's role may not sqs:SendMessage to its on-failure queue %s", queue)
		}

		// Any message in it raises an alarm on the alarm topic.
		topic := s.id(s.stack.AlarmTopic)
		var alarmed bool
		for id, a := range s.resources("AWS::CloudWatch::Alarm") {
			ap := props(a)
			if ap["Namespace"] != "AWS/SQS" || ap["MetricName"] != "ApproximateNumberOfMessagesVisible" ||
				getAtt(path(ap, "Dimensions", 0, "Value"), "QueueName") != queue {
				continue
			}
			alarmed = true
			if ap["ComparisonOperator"] != "GreaterThanThreshold" || ap["Threshold"] != 0.0 || ap["EvaluationPeriods"] != 1.0 {
				t.Errorf("alarm %s: %v %v over %v periods, want any visible message (> 0, one period)", id, ap["ComparisonOperator"], ap["Threshold"], ap["EvaluationPeriods"])
			}
			if !contains(refsOf(ap["AlarmActions"]), topic) {
				t.Errorf("alarm %s does not notify the alarm topic", id)
			}
		}
		if !alarmed {
			t.Errorf("no alarm on the visible messages of push's on-failure queue %s", queue)
		}

		if ref(path(s.json, "Outputs", "PushFailedEventsQueueUrl", "Value")) != queue {
			t.Errorf("output PushFailedEventsQueueUrl %s, want the URL of %s", toJSON(t, path(s.json, "Outputs", "PushFailedEventsQueueUrl")), queue)
		}
	})
}

func TestOutputsAndEnvAgnostic(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		url := toJSON(t, path(s.json, "Outputs", "ApiUrl", "Value"))
		if !strings.Contains(url, s.id(s.stack.API)) || !strings.Contains(url, "execute-api") {
			t.Errorf("ApiUrl output %s", url)
		}
		for _, o := range []string{"AlarmTopicArn", "DashboardName", "ProxyEndpoint", "DatabaseSecretArn", "EncryptionKeySecretArn"} {
			if path(s.json, "Outputs", o) == nil {
				t.Errorf("output %s missing", o)
			}
		}
		// Env-agnostic: no account or region literal anywhere, but in the ARNs of
		// subscription targets declared as such.
		js := toJSON(t, s.json)
		for _, target := range s.stack.Props.SubscriptionTargets {
			js = strings.ReplaceAll(js, target, "")
		}
		if m := regexp.MustCompile(`\b\d{12}\b|"(us|eu|ap|sa|ca|me|af)-[a-z]+-\d"`).FindString(js); m != "" {
			t.Errorf("template hard-codes %s", m)
		}
	})
}

// The production profile's template: Multi-AZ, deletion protection, retained data,
// alarms by e-mail, termination protection.
func TestProductionProfileStack(t *testing.T) {
	s := production.get(t)
	_, db := s.one(t, "AWS::RDS::DBInstance")
	if p := props(db); p["MultiAZ"] != true || p["DeletionProtection"] != true || db["DeletionPolicy"] != "Retain" || db["UpdateReplacePolicy"] != "Retain" {
		t.Errorf("database: MultiAZ %v, DeletionProtection %v, DeletionPolicy %v, UpdateReplacePolicy %v",
			p["MultiAZ"], p["DeletionProtection"], db["DeletionPolicy"], db["UpdateReplacePolicy"])
	}
	// Storage for the documented load (50M messages a day, ~30 GiB of writes a day,
	// ~255 GiB for a week of retention): the allocation holds the week, autoscaling
	// has room for four, and the free-storage alarm leaves two days of writes.
	storageAutoscales(t, props(db), s.stack.Props)
	if p := props(db); p["AllocatedStorage"] != "400" || p["MaxAllocatedStorage"] != 1000.0 {
		t.Errorf("production storage %v GiB growing to %v GiB, want 400 to 1000", p["AllocatedStorage"], p["MaxAllocatedStorage"])
	}
	const gib, dailyWritesGiB = 1 << 30, 30.0
	for _, a := range s.resources("AWS::CloudWatch::Alarm") {
		if ap := props(a); ap["MetricName"] == "FreeStorageSpace" {
			if days := ap["Threshold"].(float64) / gib / dailyWritesGiB; days < 2 {
				t.Errorf("free-storage alarm at %v GiB leaves %.1f days of the documented writes, want 2 or more", ap["Threshold"].(float64)/gib, days)
			}
		}
	}
	// The instance class and the API's throttles carry the documented load (docs/aws.md,
	// Sizing): 8 vCPUs for ~6.6 bench cores at a 3x peak of one message at a time, and
	// a stage that admits that peak's requests (push, pop and ack of each message)
	// within API Gateway's account quota.
	if p := props(db); p["DBInstanceClass"] != "db.m7g.2xlarge" {
		t.Errorf("production instance class %v, want db.m7g.2xlarge", p["DBInstanceClass"])
	}
	peak := 3.0 * DocumentedMessagesPerDay / 86400 * DocumentedPeakToAverage
	_, stage := s.one(t, "AWS::ApiGatewayV2::Stage")
	rate, _ := path(props(stage), "DefaultRouteSettings", "ThrottlingRateLimit").(float64)
	burst, _ := path(props(stage), "DefaultRouteSettings", "ThrottlingBurstLimit").(float64)
	if rate < peak || rate > APIGatewayAccountRateLimit || burst > APIGatewayAccountBurstLimit || burst < peak/2 {
		t.Errorf("production throttle %v/s burst %v: want at least the peak of %.0f requests/s, within the account's %d/s and burst %d",
			rate, burst, peak, APIGatewayAccountRateLimit, APIGatewayAccountBurstLimit)
	}
	var email bool
	for _, sub := range s.resources("AWS::SNS::Subscription") {
		p := props(sub)
		email = email || (p["Protocol"] == "email" && p["Endpoint"] == "ops@example.com" && ref(p["TopicArn"]) == s.id(s.stack.AlarmTopic))
	}
	if !email {
		t.Errorf("alarm topic has no e-mail subscription")
	}
	if !*s.stack.TerminationProtection() {
		t.Errorf("production stack without termination protection")
	}
	if *defaults.get(t).stack.TerminationProtection() {
		t.Errorf("default stack has termination protection")
	}
	// Aurora with Multi-AZ has a reader to fail over to.
	c := Props{AssetsDir: assetsDir, Engine: EngineAurora, MultiAZ: true, MigrationNonce: "n"}
	a, err := synth(c)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(a.resources("AWS::RDS::DBInstance")); n != 2 {
		t.Errorf("Aurora Multi-AZ has %d instances, want a writer and a reader", n)
	}
	for _, f := range a.nag { // TestCdkNag's check, for this variant too
		t.Errorf("cdk-nag: %s", f)
	}
}

// What the stack records about itself is encrypted with its own KMS key (rotated):
// every log group and the alarm topic, whose key policy lets CloudWatch Logs and
// CloudWatch alarms use it.
func TestLogsAndAlarmTopicEncrypted(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		keyID, key := s.one(t, "AWS::KMS::Key")
		if keyID != s.id(s.stack.MonitoringKey) || props(key)["EnableKeyRotation"] != true {
			t.Errorf("KMS key %s: rotation %v", keyID, props(key)["EnableKeyRotation"])
		}
		services := map[string][]string{}
		for _, st := range asList(path(props(key), "KeyPolicy", "Statement")) {
			svc := toJSON(t, path(st, "Principal", "Service"))
			services[svc] = append(services[svc], asStrings(path(st, "Action"))...)
		}
		var logs, alarms bool
		for svc, actions := range services {
			logs = logs || (strings.Contains(svc, `"logs.",{"Ref":"AWS::Region"}`) && contains(actions, "kms:GenerateDataKey*") && contains(actions, "kms:Decrypt*"))
			alarms = alarms || (svc == `"cloudwatch.amazonaws.com"` && contains(actions, "kms:GenerateDataKey*") && contains(actions, "kms:Decrypt"))
		}
		if !logs || !alarms {
			t.Errorf("key policy lets CloudWatch Logs use it: %v, CloudWatch alarms: %v (%v)", logs, alarms, services)
		}
		groups := s.resources("AWS::Logs::LogGroup")
		if len(groups) < len(FunctionNames)+3 {
			t.Errorf("%d log groups, want one per function, the access log, the flow log and more", len(groups))
		}
		for id, g := range groups {
			if getAtt(props(g)["KmsKeyId"], "Arn") != keyID {
				t.Errorf("log group %s: KmsKeyId %s, want the stack's key", id, toJSON(t, props(g)["KmsKeyId"]))
			}
		}
		_, topic := s.one(t, "AWS::SNS::Topic")
		if getAtt(props(topic)["KmsMasterKeyId"], "Arn") != keyID {
			t.Errorf("alarm topic KmsMasterKeyId %s, want the stack's key", toJSON(t, props(topic)["KmsMasterKeyId"]))
		}
	})
}

// The database exports its logs to CloudWatch Logs, into groups the stack encrypts
// and expires although RDS names and creates them, and runs Performance Insights
// encrypted with the stack's key.
func TestDatabaseLogsAndPerformanceInsights(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		key := s.id(s.stack.MonitoringKey)
		dbID := s.id(s.stack.Database.Resource)
		db := props(s.json["Resources"].(map[string]any)[dbID].(map[string]any))
		kind, want := "instance", []any{"postgresql", "upgrade"}
		if s.stack.Props.Engine == EngineAurora {
			kind, want = "cluster", []any{"postgresql"}
		}
		if !equal(db["EnableCloudwatchLogsExports"], want) {
			t.Errorf("database exports %v, want %v", db["EnableCloudwatchLogsExports"], want)
		}
		// Performance Insights: on the instance, or on the cluster (for its instances).
		on, keyRef, days := db["EnablePerformanceInsights"], db["PerformanceInsightsKMSKeyId"], db["PerformanceInsightsRetentionPeriod"]
		if kind == "cluster" {
			on, keyRef, days = db["PerformanceInsightsEnabled"], db["PerformanceInsightsKmsKeyId"], db["PerformanceInsightsRetentionPeriod"]
		}
		if on != true || getAtt(keyRef, "Arn") != key || days != 7.0 {
			t.Errorf("Performance Insights %v, key %s, %v days; want on, the stack's key, 7 days (free)", on, toJSON(t, keyRef), days)
		}
		for id, inst := range s.resources("AWS::RDS::DBInstance") {
			if ip := props(inst); ip["EnablePerformanceInsights"] != true || getAtt(ip["PerformanceInsightsKMSKeyId"], "Arn") != key {
				t.Errorf("instance %s: Performance Insights %v, key %s", id, ip["EnablePerformanceInsights"], toJSON(t, ip["PerformanceInsightsKMSKeyId"]))
			}
		}

		// Per exported log: create the group encrypted (unless RDS did), associate the
		// key, set the retention, each after the database exists.
		calls := map[string]map[string]map[string]any{}
		for id, r := range s.resources("Custom::AWS") {
			var call struct {
				Action     string         `json:"action"`
				Parameters map[string]any `json:"parameters"`
			}
			if err := json.Unmarshal([]byte(render(props(r)["Create"])), &call); err != nil {
				t.Errorf("%s: %v", id, err)
				continue
			}
			for _, log := range want {
				if call.Parameters["logGroupName"] != fmt.Sprintf("/aws/rds/%s/${%s}/%s", kind, dbID, log) {
					continue
				}
				if !contains(dependsOn(r), dbID) {
					t.Errorf("%s runs before the database exists", id)
				}
				if calls[log.(string)] == nil {
					calls[log.(string)] = map[string]map[string]any{}
				}
				calls[log.(string)][call.Action] = call.Parameters
			}
		}
		for _, log := range want {
			c := calls[log.(string)]
			for _, action := range []string{"createLogGroup", "associateKmsKey"} {
				if c[action]["kmsKeyId"] != "${"+key+".Arn}" {
					t.Errorf("the %s log group: %s %v, want it with the stack's key", log, action, c[action])
				}
			}
			if c["putRetentionPolicy"]["retentionInDays"] != s.stack.Props.LogRetentionDays {
				t.Errorf("the %s log group: putRetentionPolicy %v, want %v days", log, c["putRetentionPolicy"], s.stack.Props.LogRetentionDays)
			}
		}
	})
}

// Migrate has minutes for schema changes that wait for locks and retry, and for
// batched data migrations: its timeout, within what the provider framework that
// invokes it waits (with a minute left to report), and the custom resource's
// ServiceTimeout beyond both.
func TestMigrationTimeoutCoversRetriedLockWaits(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		fns := s.resources("AWS::Lambda::Function")
		migrate, _ := props(fns[s.id(s.stack.Functions["migrate"])])["Timeout"].(float64)
		if migrate != DefaultMigrateTimeoutSec || migrate < 600 {
			t.Errorf("migrate timeout %v s, want %v (minutes for retried lock waits and batches)", migrate, DefaultMigrateTimeoutSec)
		}
		_, cr := s.one(t, MigrationResourceType)
		framework, _ := props(fns[getAtt(props(cr)["ServiceToken"], "Arn")])["Timeout"].(float64)
		if framework < migrate+60 {
			t.Errorf("the provider framework waits %v s for migrate's %v s, want a minute more", framework, migrate)
		}
		if st, _ := strconv.ParseFloat(fmt.Sprint(props(cr)["ServiceTimeout"]), 64); st < migrate+60 {
			t.Errorf("migration ServiceTimeout %v, want at least %v", props(cr)["ServiceTimeout"], migrate+60)
		}
	})
}

// Every function gets the deployment's retention defaults, and reads them as the
// props say (through core/config, as the functions do): a week and nothing more by
// default; for ever and an hour for consumed messages in the custom variant.
func TestRetentionDefaultsReachEveryFunction(t *testing.T) {
	for name, want := range map[string][2]int{
		"defaults": {7 * 24 * 3600, 0}, "production": {7 * 24 * 3600, 0}, "custom": {0, 3600},
	} {
		t.Run(name, func(t *testing.T) {
			s := variants[name].get(t)
			for fn, f := range s.stack.Functions {
				vars, _ := path(props(s.resources("AWS::Lambda::Function")[s.id(f)]), "Environment", "Variables").(map[string]any)
				if vars[EnvDefaultRetention] == nil || vars[EnvDefaultCompleted] == nil {
					t.Errorf("%s: %s %v, %s %v", fn, EnvDefaultRetention, vars[EnvDefaultRetention], EnvDefaultCompleted, vars[EnvDefaultCompleted])
					continue
				}
				c, err := config.FromEnv(func(k string) string {
					if v, ok := vars[k]; ok {
						return render(v)
					}
					return ""
				})
				if err != nil {
					t.Errorf("%s: %v", fn, err)
					continue
				}
				st := c.WithDefaults().Store(nil, nil)
				if got := [2]int{st.DefaultRetentionSeconds, st.DefaultCompletedRetentionSeconds}; got != want {
					t.Errorf("%s reads retention %v s and completed retention %v s (0: none), want %v", fn, got[0], got[1], want)
				}
			}
		})
	}
}

// The cost model counts fewer than MaxAlarms alarms; the test fails before the docs
// go wrong.
func TestAlarmsWithinTheCostModel(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		n := len(s.resources("AWS::CloudWatch::Alarm"))
		if n >= MaxAlarms || n != len(s.stack.Alarms) {
			t.Errorf("%d alarms (Stack.Alarms: %d), docs/aws.md prices fewer than %d", n, len(s.stack.Alarms), MaxAlarms)
		}
		t.Logf("%d alarms", n)
	})
}

// The database runs with the server parameters the engine is tuned for
// (pgstore.ServerSettings), from a parameter group of its own.
func TestDatabaseParameterGroup(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		dbID := s.id(s.stack.Database.Resource)
		db := props(s.json["Resources"].(map[string]any)[dbID].(map[string]any))
		field, kind := "DBParameterGroupName", "AWS::RDS::DBParameterGroup"
		if s.stack.Props.Engine == EngineAurora {
			field, kind = "DBClusterParameterGroupName", "AWS::RDS::DBClusterParameterGroup"
		}
		ref, _ := db[field].(map[string]any)["Ref"].(string)
		group, ok := s.resources(kind)[ref]
		if !ok {
			t.Fatalf("database %s = %v, want a Ref to the stack's %s", field, db[field], kind)
		}
		params, _ := props(group)["Parameters"].(map[string]any)
		if len(pgstore.ServerSettings) == 0 {
			t.Fatal("no server settings to check")
		}
		for name, want := range pgstore.ServerSettings {
			if params[name] != want {
				t.Errorf("%s %s = %v, want %s", kind, name, params[name], want)
			}
		}
	})
}
