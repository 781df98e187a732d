package queenstack

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/egress"
)

// testSubscriptionTargets are the subscriptions variant's declared targets, one of each
// form: a name, a name with an alias, a qualified ARN in another account, an
// unqualified ARN.
var testSubscriptionTargets = []string{
	"billing-handler",
	"reports:v2",
	"arn:aws:lambda:us-east-1:123456789012:function:audit:live",
	"arn:aws:lambda:us-east-1:210987654321:function:ledger",
}

// testSubscriptionURLAllow is what the subscriptionURLs variant lets URL targets reach:
// one entry of each kind the stack takes but the classes (subscriptionsBoth allows
// "public"; "private" is checked below, not deployed, as the word trips the test that
// looks for secrets in the functions' environment).
var testSubscriptionURLAllow = []string{"hooks.example.com", "*.partner.example", "10.20.0.0/16", "203.0.113.7", "2001:db8::/32"}

// testSubscriptionCIDRs is what the subscriptionCIDRs variant lets URL targets reach:
// ranges and an address only, one range inside another.
var testSubscriptionCIDRs = []string{"10.20.0.0/16", "10.20.5.0/24", "203.0.113.7"}

// wantTargetGrants are the resources of the dispatcher's grant on those targets as the
// template renders them: a name in the stack's account and Region, an ARN as given,
// each exactly (no "<function>:*").
var wantTargetGrants = []string{
	"arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:billing-handler",
	"arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:reports:v2",
	"arn:aws:lambda:us-east-1:123456789012:function:audit:live",
	"arn:aws:lambda:us-east-1:210987654321:function:ledger",
}

// wantStarters start the dispatcher (push, a transaction's pushes, a dead letter's
// retry, a subscription's change, the reaper's safety net), written out independently
// of DispatchStarters.
var wantStarters = []string{"push", "ack", "dlq", "admin", "reaper"}

// invokeGrants is, per function of the stack, every resource its role may
// lambda:InvokeFunction, rendered, with the policy granting it.
func (s *synthesized) invokeGrants(t *testing.T) map[string]map[string]string {
	t.Helper()
	roleOf := map[string]string{}
	for name, fn := range s.stack.Functions {
		roleOf[s.id(fn.Role())] = name
	}
	out := map[string]map[string]string{}
	for id, pol := range s.resources("AWS::IAM::Policy") {
		p := props(pol)
		for _, st := range asList(path(p, "PolicyDocument", "Statement")) {
			var invoke bool
			for _, a := range asStrings(path(st, "Action")) {
				invoke = invoke || strings.EqualFold(a, "lambda:InvokeFunction") || a == "*" || strings.EqualFold(a, "lambda:*")
			}
			if !invoke {
				continue
			}
			for _, role := range refsOf(p["Roles"]) {
				name, ours := roleOf[role]
				if !ours {
					continue // CDK's migration provider invokes migrate
				}
				if out[name] == nil {
					out[name] = map[string]string{}
				}
				for _, r := range asList(path(st, "Resource")) {
					out[name][render(r)] = id
				}
			}
		}
	}
	return out
}

// A stack without subscription targets is what it was before subscriptions: no
// dispatch function, no grant to invoke a function, no variable naming one, no Lambda
// endpoint, no subscription alarm or output.
func TestNoSubscriptionsAddNothing(t *testing.T) {
	for _, name := range []string{"defaults", "custom", "production"} {
		t.Run(name, func(t *testing.T) {
			s := variants[name].get(t)
			if s.stack.Props.Subscriptions() || s.stack.Functions[DispatchFunction] != nil || s.stack.DispatchFailedRuns != nil ||
				s.stack.Network.LambdaEndpoint != nil || s.stack.Network.LambdaEndpointSG != nil {
				t.Fatalf("subscriptions wired without targets")
			}
			for id, r := range s.resources("AWS::Lambda::Function") {
				p := props(r)
				if p["RecursiveLoop"] != nil || p["FunctionName"] != nil {
					t.Errorf("function %s: RecursiveLoop %v, FunctionName %v", id, p["RecursiveLoop"], p["FunctionName"])
				}
				if vars, _ := path(p, "Environment", "Variables").(map[string]any); vars[EnvDispatchFunction] != nil {
					t.Errorf("function %s has %s", id, EnvDispatchFunction)
				}
			}
			if g := s.invokeGrants(t); len(g) != 0 {
				t.Errorf("functions may invoke functions: %v", g)
			}
			if n := len(s.resources("AWS::EC2::VPCEndpoint")); n != 1 {
				t.Errorf("%d VPC endpoints, want Secrets Manager's only", n)
			}
			if n := len(s.resources("AWS::Lambda::EventInvokeConfig")); n != 2 {
				t.Errorf("%d async invoke configs, want push's and the reaper's", n)
			}
			for id, a := range s.resources("AWS::CloudWatch::Alarm") {
				if m := props(a)["MetricName"]; m == MetricMaxSubscriptionLag || m == MetricSubscriptionIteratorAge {
					t.Errorf("alarm %s on %v", id, m)
				}
			}
			for o := range s.json["Outputs"].(map[string]any) {
				if strings.HasPrefix(o, "Dispatch") {
					t.Errorf("output %s", o)
				}
			}
		})
	}
}

// The dispatch function: built like the others (TestFunctionsAreArm64ProvidedAL2023,
// TestTLSVerifyFull, TestNoSecretValueInFunctionEnvironment check it with them), named
// for its stack so it can name itself, Lambda's longest timeout, recursion allowed.
func TestDispatchFunction(t *testing.T) {
	s := subscriptions.get(t)
	fnID := s.id(s.stack.Functions[DispatchFunction])
	p := props(s.resources("AWS::Lambda::Function")[fnID])
	if p["FunctionName"] != "QueenTest-dispatch" {
		t.Errorf("FunctionName %v, want QueenTest-dispatch", p["FunctionName"])
	}
	if p["RecursiveLoop"] != "Allow" {
		t.Errorf("RecursiveLoop %v, want Allow: a run hands over to the next by invoking itself", p["RecursiveLoop"])
	}
	if p["Timeout"] != 900.0 || p["MemorySize"] != s.stack.Props.FunctionMemoryMB {
		t.Errorf("timeout %v s, memory %v MB; want 900 (Lambda's longest) and %v like the others", p["Timeout"], p["MemorySize"], s.stack.Props.FunctionMemoryMB)
	}
	// In the function subnets, in the functions' group (to the proxy, the endpoints).
	if sgs := path(p, "VpcConfig", "SecurityGroupIds"); len(asList(sgs)) != 1 || getAtt(asList(sgs)[0], "GroupId") != s.id(s.stack.Network.FunctionsSG) {
		t.Errorf("security groups %s, want the functions' group", toJSON(t, sgs))
	}
	for _, sn := range refsOf(path(p, "VpcConfig", "SubnetIds")) {
		if !strings.Contains(sn, "functions") {
			t.Errorf("in subnet %s, want the function subnets", sn)
		}
	}
	// Its own log group, shared with no other function.
	logs := ref(path(p, "LoggingConfig", "LogGroup"))
	if s.resources("AWS::Logs::LogGroup")[logs] == nil {
		t.Errorf("log group %s is not one of the stack's", logs)
	}
	for name, fn := range s.stack.Functions {
		if other := props(s.resources("AWS::Lambda::Function")[s.id(fn)]); name != DispatchFunction && ref(path(other, "LoggingConfig", "LogGroup")) == logs {
			t.Errorf("dispatch shares its log group with %s", name)
		}
	}
	// It waits for the migration and for its way to the Lambda API.
	deps := dependsOn(s.resources("AWS::Lambda::Function")[fnID])
	for what, id := range map[string]string{"migration": s.id(s.stack.Migration), "Lambda endpoint": s.id(s.stack.Network.LambdaEndpoint)} {
		if !contains(deps, id) {
			t.Errorf("dispatch does not wait for the %s; DependsOn %v", what, deps)
		}
	}
	for _, o := range []string{"DispatchFunctionName", "DispatchRoleArn", "DispatchFailedRunsQueueUrl"} {
		if path(s.json, "Outputs", o) == nil {
			t.Errorf("output %s missing", o)
		}
	}
}

// The functions that start the dispatcher, and the dispatcher itself, are told its
// name; no other function is.
func TestDispatchFunctionNamedToItsStarters(t *testing.T) {
	s := subscriptions.get(t)
	dispatch := s.id(s.stack.Functions[DispatchFunction])
	for name, fn := range s.stack.Functions {
		r := s.resources("AWS::Lambda::Function")[s.id(fn)]
		v := path(props(r), "Environment", "Variables", EnvDispatchFunction)
		switch {
		case name == DispatchFunction:
			if v != props(r)["FunctionName"] || v == nil {
				t.Errorf("dispatch: %s = %s, want its own name %v", EnvDispatchFunction, toJSON(t, v), props(r)["FunctionName"])
			}
		case contains(wantStarters, name):
			if ref(v) != dispatch {
				t.Errorf("%s: %s = %s, want the dispatch function's name (Ref %s)", name, EnvDispatchFunction, toJSON(t, v), dispatch)
			}
			if !contains(dependsOn(r), s.id(s.stack.Network.LambdaEndpoint)) {
				t.Errorf("%s starts the dispatcher before the Lambda endpoint exists", name)
			}
		default:
			if v != nil {
				t.Errorf("%s: %s = %s, but it never starts the dispatcher", name, EnvDispatchFunction, toJSON(t, v))
			}
		}
	}
}

// Who may invoke what: the dispatcher exactly the declared targets and itself (the
// latter in a policy the function does not wait for), the starters exactly the
// dispatcher, nobody else anything.
func TestDispatchInvokeGrants(t *testing.T) {
	s := subscriptions.get(t)
	dispatch := s.id(s.stack.Functions[DispatchFunction])
	self := "${" + dispatch + ".Arn}"
	grants := s.invokeGrants(t)

	want := map[string]bool{self: true}
	for _, g := range wantTargetGrants {
		want[g] = true
	}
	got := map[string]bool{}
	for r := range grants[DispatchFunction] {
		got[r] = true
	}
	if !equal(got, want) {
		t.Errorf("dispatch may invoke %v, want exactly %v", keys(got), keys(want))
	}
	for _, name := range wantStarters {
		if g := grants[name]; len(g) != 1 || g[self] == "" {
			t.Errorf("%s may invoke %v, want exactly the dispatch function", name, g)
		}
	}
	for name := range grants {
		if name != DispatchFunction && !contains(wantStarters, name) {
			t.Errorf("%s may invoke %v", name, grants[name])
		}
	}
	for name, g := range grants {
		for r := range g {
			if strings.Contains(r, "*") {
				t.Errorf("%s may invoke the wildcard %s", name, r)
			}
		}
	}

	// The grant on itself is in a policy of its own, which the function does not
	// need before it is created (else: a dependency cycle).
	policy := grants[DispatchFunction][self]
	if policy == "" {
		t.Fatal("dispatch may not invoke itself")
	}
	if contains(s.requires(dispatch), policy) {
		t.Errorf("the dispatch function needs the policy %s that grants the invoke on itself: a cycle", policy)
	}
	for r, p := range grants[DispatchFunction] {
		if r != self && p == policy {
			t.Errorf("target %s is granted in the self-invoke policy %s; want it in the role's own policy", r, p)
		}
	}
}

// The dispatcher's asynchronous invocations: no retry (the reaper restarts a lost
// run), six hours to wait for a container, and an on-failure destination, kept
// encrypted and TLS only, that the dispatcher may send to.
func TestDispatchAsyncInvoke(t *testing.T) {
	s := subscriptions.get(t)
	dispatch := s.id(s.stack.Functions[DispatchFunction])
	var config map[string]any
	for _, c := range s.resources("AWS::Lambda::EventInvokeConfig") {
		if ref(props(c)["FunctionName"]) == dispatch {
			if config != nil {
				t.Errorf("dispatch has more than one async invoke config")
			}
			config = props(c)
		}
	}
	if config == nil {
		t.Fatal("no async invoke config on dispatch")
	}
	if config["MaximumRetryAttempts"] != 0.0 || config["MaximumEventAgeInSeconds"] != 6*3600.0 || config["Qualifier"] != "$LATEST" {
		t.Errorf("dispatch async invoke: %v retries, events kept %v s, qualifier %v; want 0, 21600 s, $LATEST",
			config["MaximumRetryAttempts"], config["MaximumEventAgeInSeconds"], config["Qualifier"])
	}
	queue := getAtt(path(config, "DestinationConfig", "OnFailure", "Destination"), "Arn")
	if queue == "" || queue != s.id(s.stack.DispatchFailedRuns) {
		t.Fatalf("on-failure destination %s, want Stack.DispatchFailedRuns", toJSON(t, config["DestinationConfig"]))
	}
	q := props(s.resources("AWS::SQS::Queue")[queue])
	if q["SqsManagedSseEnabled"] != true || q["MessageRetentionPeriod"] != 14*24*3600.0 {
		t.Errorf("failed-runs queue: %s, want SQS-managed encryption and 14 days", toJSON(t, q))
	}
	var tlsOnly, send bool
	for _, pol := range s.resources("AWS::SQS::QueuePolicy") {
		if contains(refsOf(props(pol)["Queues"]), queue) {
			for _, st := range asList(path(props(pol), "PolicyDocument", "Statement")) {
				tlsOnly = tlsOnly || (path(st, "Effect") == "Deny" && path(st, "Condition", "Bool", "aws:SecureTransport") == "false")
			}
		}
	}
	role := s.id(s.stack.Functions[DispatchFunction].Role())
	for _, pol := range s.resources("AWS::IAM::Policy") {
		if contains(refsOf(props(pol)["Roles"]), role) {
			for _, st := range asList(path(props(pol), "PolicyDocument", "Statement")) {
				send = send || (contains(asStrings(path(st, "Action")), "sqs:SendMessage") && getAtt(path(st, "Resource"), "Arn") == queue)
			}
		}
	}
	if !tlsOnly || !send {
		t.Errorf("failed-runs queue: TLS only %v; dispatch may send to it %v", tlsOnly, send)
	}
}

// The functions reach the Lambda API through an interface endpoint in their subnets,
// with private DNS, admitting the functions' group on 443 only
// (TestSecurityGroupsAllowOnlyFunctionsToProxyToDatabase checks the rules).
func TestLambdaEndpoint(t *testing.T) {
	s := subscriptions.get(t)
	id := s.id(s.stack.Network.LambdaEndpoint)
	e, ok := s.resources("AWS::EC2::VPCEndpoint")[id]
	if !ok {
		t.Fatalf("no Lambda endpoint %s", id)
	}
	p := props(e)
	if svc := render(p["ServiceName"]); !strings.HasSuffix(svc, ".lambda") || p["VpcEndpointType"] != "Interface" || p["PrivateDnsEnabled"] != true {
		t.Errorf("endpoint %s: %v, private DNS %v; want the Lambda interface endpoint with private DNS", svc, p["VpcEndpointType"], p["PrivateDnsEnabled"])
	}
	subnets := refsOf(p["SubnetIds"])
	if len(subnets) != 2 {
		t.Errorf("endpoint in %d subnets, want one per zone", len(subnets))
	}
	for _, sn := range subnets {
		if !strings.Contains(sn, "functions") {
			t.Errorf("endpoint in subnet %s, want the function subnets", sn)
		}
	}
	if sgs := asList(p["SecurityGroupIds"]); len(sgs) != 1 || getAtt(sgs[0], "GroupId") != s.id(s.stack.Network.LambdaEndpointSG) {
		t.Errorf("endpoint security groups %s, want the Lambda endpoint's group", toJSON(t, p["SecurityGroupIds"]))
	}
}

// Subscription lag, the dispatcher's iterator age and its errors raise alarms on the
// alarm topic, and the dashboard shows the subscription metrics.
func TestSubscriptionAlarms(t *testing.T) {
	s := subscriptions.get(t)
	topic := s.id(s.stack.AlarmTopic)
	dispatch := s.id(s.stack.Functions[DispatchFunction])
	type want struct {
		ns, metric, stat   string
		threshold, periods float64
	}
	wants := map[string]want{
		"lag":          {MetricsNamespace, MetricMaxSubscriptionLag, "Maximum", DefaultSubscriptionLagThreshold, 3},
		"iterator age": {MetricsNamespace, MetricSubscriptionIteratorAge, "Maximum", DefaultSubscriptionIteratorAgeSecThreshold * 1000, 3},
		"errors":       {"AWS/Lambda", "Errors", "Sum", 0, 1},
	}
	found := map[string]bool{}
	for id, a := range s.resources("AWS::CloudWatch::Alarm") {
		p := props(a)
		for what, w := range wants {
			if p["Namespace"] != w.ns || p["MetricName"] != w.metric {
				continue
			}
			if w.ns == "AWS/Lambda" && ref(path(p, "Dimensions", 0, "Value")) != dispatch {
				continue
			}
			if w.ns == MetricsNamespace && p["Dimensions"] != nil {
				t.Errorf("alarm %s: dimensions %s, want none (as the metric is written)", id, toJSON(t, p["Dimensions"]))
			}
			found[what] = true
			if p["Statistic"] != w.stat || p["Threshold"] != w.threshold || p["EvaluationPeriods"] != w.periods ||
				p["ComparisonOperator"] != "GreaterThanThreshold" || p["TreatMissingData"] != "notBreaching" {
				t.Errorf("%s alarm %s: %v %v %v over %v periods, missing %v; want %s > %v over %v, not breaching",
					what, id, p["Statistic"], p["ComparisonOperator"], p["Threshold"], p["EvaluationPeriods"], p["TreatMissingData"], w.stat, w.threshold, w.periods)
			}
			if !contains(refsOf(p["AlarmActions"]), topic) {
				t.Errorf("%s alarm %s does not notify the alarm topic", what, id)
			}
		}
	}
	for what := range wants {
		if !found[what] {
			t.Errorf("no %s alarm", what)
		}
	}
	_, dash := s.one(t, "AWS::CloudWatch::Dashboard")
	body := toJSON(t, props(dash)["DashboardBody"])
	for _, m := range []string{MetricMaxSubscriptionLag, MetricSubscriptionIteratorAge, MetricSubscriptionSettled, MetricSubscriptionDeliveryErrors} {
		if !strings.Contains(body, m) {
			t.Errorf("dashboard does not show %s", m)
		}
	}
	if !strings.Contains(body, dispatch) || !strings.Contains(body, s.id(s.stack.DispatchFailedRuns)) {
		t.Errorf("dashboard does not show the dispatch function and its failed runs")
	}
}

// The dispatch function's name fits Lambda's 64 characters whatever the stack's name.
func TestDispatchFunctionNameFitsLambda(t *testing.T) {
	app := awscdk.NewApp(nil)
	valid := regexp.MustCompile(`^[a-zA-Z0-9-_]{1,64}$`)
	long := strings.Repeat("Queen", 25) // 125 characters, a valid stack name
	for stack, want := range map[string]string{"QueenServerless": "QueenServerless-dispatch", long: ""} {
		st := awscdk.NewStack(app, jsii.String(fmt.Sprintf("S%d", len(stack))), &awscdk.StackProps{StackName: jsii.String(stack)})
		got := dispatchFunctionName(st)
		if !valid.MatchString(got) || !strings.HasSuffix(got, "-dispatch") || (want != "" && got != want) {
			t.Errorf("stack %s: dispatch function %q (%d characters)", stack, got, len(got))
		}
	}
	a := awscdk.NewStack(app, jsii.String("A"), &awscdk.StackProps{StackName: jsii.String(long + "A")})
	b := awscdk.NewStack(app, jsii.String("B"), &awscdk.StackProps{StackName: jsii.String(long + "B")})
	if dispatchFunctionName(a) == dispatchFunctionName(b) {
		t.Errorf("two long stack names share the dispatch function name %s", dispatchFunctionName(a))
	}
}

// The scripts that check or stand in for the Lambda assets know every function.
func TestScriptsKnowEveryFunction(t *testing.T) {
	for _, script := range []string{"synth.sh", "cdk.sh"} {
		raw, err := os.ReadFile(filepath.Join("..", script))
		if err != nil {
			t.Fatal(err)
		}
		var list string
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, "push pop ack") {
				list = line
			}
		}
		for _, name := range append(slices.Clip(FunctionNames), DispatchFunction) {
			if !regexp.MustCompile(`\b` + name + `\b`).MatchString(list) {
				t.Errorf("%s: its list of functions %q lacks %s", script, strings.TrimSpace(list), name)
			}
		}
	}
}

// What admin (which checks a subscription's target when it is created) and the
// dispatcher (which connects to URL targets) are told about targets, read back the way
// the functions read it on Lambda (core/config): admin the declared functions as
// declared and the URL allow list, the dispatcher the allow list; "none" written out
// when nothing is allowed. No other function is told anything.
func TestSubscriptionTargetsReachAdminAndDispatch(t *testing.T) {
	const declared = "billing-handler,reports:v2,arn:aws:lambda:us-east-1:123456789012:function:audit:live,arn:aws:lambda:us-east-1:210987654321:function:ledger"
	for name, want := range map[string]struct {
		urls, functions string
		dispatch        bool
	}{
		"defaults":          {urls: "none"},
		"custom":            {urls: "none"},
		"production":        {urls: "none"},
		"subscriptions":     {urls: "none", functions: declared, dispatch: true},
		"subscriptionURLs":  {urls: "hooks.example.com,*.partner.example,10.20.0.0/16,203.0.113.7,2001:db8::/32", dispatch: true},
		"subscriptionsBoth": {urls: "public", functions: declared, dispatch: true},
		"subscriptionCIDRs": {urls: "10.20.0.0/16,10.20.5.0/24,203.0.113.7", dispatch: true},
	} {
		t.Run(name, func(t *testing.T) {
			s := variants[name].get(t)
			if got := s.stack.Functions[DispatchFunction] != nil; got != want.dispatch {
				t.Fatalf("dispatch function deployed: %v, want %v", got, want.dispatch)
			}
			wantPolicy, err := egress.ParsePolicy(want.urls)
			if err != nil {
				t.Fatal(err)
			}
			for fn, f := range s.stack.Functions {
				vars, _ := path(props(s.resources("AWS::Lambda::Function")[s.id(f)]), "Environment", "Variables").(map[string]any)
				urls, functions := vars[EnvSubscriptionURLs], vars[EnvSubscriptionFuncs]
				switch fn {
				case "admin", DispatchFunction:
					if urls != want.urls {
						t.Errorf("%s: %s = %v, want %q", fn, EnvSubscriptionURLs, urls, want.urls)
					}
				default:
					if urls != nil || functions != nil {
						t.Errorf("%s: %s = %v, %s = %v; it neither checks nor reaches targets", fn, EnvSubscriptionURLs, urls, EnvSubscriptionFuncs, functions)
					}
					continue
				}
				if fn == DispatchFunction && functions != nil {
					t.Errorf("dispatch: %s = %v; only admin checks function targets", EnvSubscriptionFuncs, functions)
				}
				if fn == "admin" && (want.functions == "" && functions != nil || want.functions != "" && functions != want.functions) {
					t.Errorf("admin: %s = %v, want %q", EnvSubscriptionFuncs, functions, want.functions)
				}
				// As the function reads it, on Lambda (where an unset list means none).
				c, err := config.FromEnv(func(k string) string {
					if k == config.EnvLambdaFunctionName {
						return fn
					}
					if v, ok := vars[k]; ok {
						return render(v)
					}
					return ""
				})
				if err != nil {
					t.Fatalf("%s: %v", fn, err)
				}
				fence := c.Fence()
				if !equal(fence.URLs, wantPolicy) || fence.URLs.Off() != (want.urls == "none") {
					t.Errorf("%s reads URL targets %s, want %s", fn, fence.URLs, wantPolicy)
				}
				if fn != "admin" {
					continue
				}
				for _, target := range testSubscriptionTargets {
					if err := fence.CheckFunction(target); (err == nil) != (want.functions != "") {
						t.Errorf("admin: target function %s: %v (functions declared: %q)", target, err, want.functions)
					}
				}
				if err := fence.CheckFunction("undeclared"); err == nil {
					t.Errorf("admin accepts a function the stack does not declare")
				}
			}
		})
	}
}

// A stack that allows URL targets and declares no function still delivers them: the
// dispatch function with everything it comes with (its endpoint, its queue, its
// alarms, its outputs), started by the same functions; it may invoke itself and
// nothing else.
func TestURLTargetsOnlyDeployTheDispatcher(t *testing.T) {
	s := subscriptionURLs.get(t)
	if !s.stack.Props.Subscriptions() || s.stack.Functions[DispatchFunction] == nil || s.stack.DispatchFailedRuns == nil || s.stack.Network.LambdaEndpoint == nil {
		t.Fatalf("URL targets allowed, but the dispatcher is not wired: functions %v", s.stack.Props.Functions())
	}
	dispatch := s.id(s.stack.Functions[DispatchFunction])
	self := "${" + dispatch + ".Arn}"
	grants := s.invokeGrants(t)
	if g := grants[DispatchFunction]; len(g) != 1 || g[self] == "" {
		t.Errorf("dispatch may invoke %v, want itself alone (no function target is declared)", g)
	}
	for _, name := range wantStarters {
		if g := grants[name]; len(g) != 1 || g[self] == "" {
			t.Errorf("%s may invoke %v, want exactly the dispatch function", name, g)
		}
	}
	alarms := map[string]bool{}
	for _, a := range s.resources("AWS::CloudWatch::Alarm") {
		p := props(a)
		if m := p["MetricName"]; m == MetricMaxSubscriptionLag || m == MetricSubscriptionIteratorAge {
			alarms[m.(string)] = true
		} else if m == "Errors" && ref(path(p, "Dimensions", 0, "Value")) == dispatch {
			alarms["dispatch errors"] = true
		}
	}
	if len(alarms) != 3 {
		t.Errorf("subscription alarms %v, want lag, iterator age and dispatch errors", keys(alarms))
	}
	for _, o := range []string{"DispatchFunctionName", "DispatchRoleArn", "DispatchFailedRunsQueueUrl"} {
		if path(s.json, "Outputs", o) == nil {
			t.Errorf("output %s missing", o)
		}
	}
}

// No statement lets a role invoke functions without naming them: a statement with no
// resource is refused by IAM, and the dispatcher without declared functions must not
// have one.
func TestNoInvokeStatementWithoutResources(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		for id, pol := range s.resources("AWS::IAM::Policy") {
			for _, st := range asList(path(props(pol), "PolicyDocument", "Statement")) {
				for _, a := range asStrings(path(st, "Action")) {
					if strings.EqualFold(a, "lambda:InvokeFunction") && len(asList(path(st, "Resource"))) == 0 {
						t.Errorf("policy %s: lambda:InvokeFunction on no resource: %s", id, toJSON(t, st))
					}
				}
			}
		}
	})
}

// The synth refuses an allow list the functions would not read, with every bad entry
// at once, and loopback in any spelling: on Lambda it is the function itself and its
// runtime API. The lists of the variants above, one entry of each kind, are taken.
func TestSubscriptionURLAllowCheckedAtSynth(t *testing.T) {
	for name, c := range map[string]struct {
		allow []string
		want  []string
	}{
		"bad entries":       {[]string{"hooks.example.com", "bad_host!", "10.0.0.0/33"}, []string{`"bad_host!" is not`, `"10.0.0.0/33" is not a CIDR range`}},
		"loopback":          {[]string{"public", "loopback"}, []string{`"loopback"`, "the function itself"}},
		"loopback range":    {[]string{"127.0.0.0/8"}, []string{`"127.0.0.0/8" includes loopback`}},
		"loopback address":  {[]string{"::1"}, []string{`"::1" includes loopback`}},
		"every address":     {[]string{"0.0.0.0/0"}, []string{`"0.0.0.0/0" includes loopback`}},
		"loopback by name":  {[]string{"localhost"}, []string{`"localhost" names loopback`}},
		"none in the list":  {[]string{"none"}, []string{"leave the list empty"}},
		"none with another": {[]string{"none,public"}, []string{"must stand alone"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := synth(Props{AssetsDir: assetsDir, MigrationNonce: "nonce-1", SubscriptionURLAllow: c.allow})
			if err == nil {
				t.Fatalf("synth of subscriptionUrlAllow %q succeeded", c.allow)
			}
			for _, w := range append([]string{"subscriptionUrlAllow"}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("synth error %q does not mention %q", err, w)
				}
			}
		})
	}
	for _, allow := range [][]string{testSubscriptionURLAllow, {"public"}, {"private", "*.example.com"}} {
		p := Props{AssetsDir: assetsDir, SubscriptionURLAllow: allow, DispatchReservedConcurrency: 2}.WithDefaults()
		if err := p.Validate(); err != nil {
			t.Errorf("subscriptionUrlAllow %q (with a dispatcher reservation): %v", allow, err)
		}
	}
}

// dispatchEgressRules are the inline egress rules of the dispatcher's own group, as
// "<range>:<port>"; every one TCP on one port to an IPv4 range.
func (s *synthesized) dispatchEgressRules(t *testing.T) map[string]bool {
	t.Helper()
	sg := props(s.resources("AWS::EC2::SecurityGroup")[s.id(s.stack.Network.DispatchSG)])
	got := map[string]bool{}
	for _, r := range asList(sg["SecurityGroupEgress"]) {
		m, _ := r.(map[string]any)
		if m["IpProtocol"] != "tcp" || m["FromPort"] != m["ToPort"] || m["CidrIp"] == nil || m["CidrIpv6"] != nil {
			t.Errorf("dispatch egress %s, want TCP on one port to an IPv4 range", toJSON(t, m))
			continue
		}
		got[fmt.Sprintf("%v:%v", m["CidrIp"], m["FromPort"])] = true
	}
	return got
}

// With URL targets allowed the dispatcher's own group lets it out, on 80, 443 and
// subscriptionUrlPorts, to what the list names: ranges and addresses as themselves
// (one inside another adds nothing), every IPv4 address as soon as it names a host
// or "public" (the fence judges those addresses when the dispatcher connects). The
// VPC has no IPv6: an IPv6 entry adds no rule, and the synth warns about it.
// (TestSecurityGroupsAllowOnlyFunctionsToProxyToDatabase checks its rules to the
// proxy and the endpoints, and that no other function is in it.)
func TestDispatchURLEgress(t *testing.T) {
	for name, want := range map[string]struct {
		rules []string
		ipv6  string // the warning's entries, "" for none
	}{
		"subscriptionCIDRs": {rules: []string{
			"10.20.0.0/16:80", "10.20.0.0/16:443", "10.20.0.0/16:8443",
			"203.0.113.7/32:80", "203.0.113.7/32:443", "203.0.113.7/32:8443",
		}},
		// Host names, a domain, ranges, an address and an IPv6 range.
		"subscriptionURLs":  {rules: []string{"0.0.0.0/0:80", "0.0.0.0/0:443"}, ipv6: "2001:db8::/32"},
		"subscriptionsBoth": {rules: []string{"0.0.0.0/0:80", "0.0.0.0/0:443"}},
	} {
		t.Run(name, func(t *testing.T) {
			s := variants[name].get(t)
			wantRules := map[string]bool{}
			for _, r := range want.rules {
				wantRules[r] = true
			}
			if got := s.dispatchEgressRules(t); !equal(got, wantRules) {
				t.Errorf("dispatch egress %v, want exactly %v", keys(got), want.rules)
			}
			var warned []string
			for _, w := range s.warnings {
				if strings.Contains(w, urlAllowIPv6Warning) {
					warned = append(warned, w)
				}
			}
			switch {
			case want.ipv6 == "" && len(warned) > 0:
				t.Errorf("IPv6 warning without IPv6 entries: %q", warned)
			case want.ipv6 != "" && (len(warned) != 1 || !strings.Contains(warned[0], want.ipv6+" opens nothing") || !strings.Contains(warned[0], "no IPv6")):
				t.Errorf("warnings %q, want one that %s opens nothing (the VPC has no IPv6)", warned, want.ipv6)
			}
		})
	}
	// A dispatcher for function targets alone keeps the functions' group.
	if s := subscriptions.get(t); s.stack.Network.DispatchSG != nil {
		t.Errorf("a group for the dispatcher without URL targets")
	}
	// The VPC really has no IPv6, which vpcIPv6 says.
	for _, s := range []*synthesized{subscriptionURLs.get(t), defaults.get(t)} {
		if n := len(s.resources("AWS::EC2::VPCCidrBlock")); n != 0 || vpcIPv6 {
			t.Errorf("%d extra VPC CIDR blocks, vpcIPv6 %v; want an IPv4-only VPC", n, vpcIPv6)
		}
		for id, sn := range s.resources("AWS::EC2::Subnet") {
			if props(sn)["Ipv6CidrBlock"] != nil || props(sn)["AssignIpv6AddressOnCreation"] == true {
				t.Errorf("subnet %s has IPv6", id)
			}
		}
	}
}

// The group's rules per allow list, with IPv6 and without.
func TestURLEgressRanges(t *testing.T) {
	str := func(ps []netip.Prefix) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, p.String())
		}
		slices.Sort(out)
		return out
	}
	private4 := []string{"10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16"}
	for _, c := range []struct {
		allow                []string
		ipv6                 bool
		wantRanges, wantSkip []string
	}{
		{testSubscriptionCIDRs, false, []string{"10.20.0.0/16", "203.0.113.7/32"}, []string{}},
		{[]string{"10.20.0.0/16", "10.20.0.0/16"}, false, []string{"10.20.0.0/16"}, []string{}},
		{[]string{"private"}, false, private4, []string{}},
		{[]string{"private"}, true, append(slices.Clone(private4), "fc00::/7"), []string{}},
		{[]string{"private", "10.1.2.3", "fd12::/16"}, false, private4, []string{"fd12::/16"}},
		{[]string{"private", "10.1.2.3", "fd12::/16"}, true, append(slices.Clone(private4), "fc00::/7"), []string{}},
		{[]string{"2001:db8::1"}, false, []string{}, []string{"2001:db8::1/128"}},
		{[]string{"2001:db8::1"}, true, []string{"2001:db8::1/128"}, []string{}},
		{[]string{"public"}, false, []string{"0.0.0.0/0"}, []string{}},
		{[]string{"public"}, true, []string{"0.0.0.0/0", "::/0"}, []string{}},
		{[]string{"*.partner.example", "private"}, false, []string{"0.0.0.0/0"}, []string{}},
		{testSubscriptionURLAllow, false, []string{"0.0.0.0/0"}, []string{"2001:db8::/32"}},
		{testSubscriptionURLAllow, true, []string{"0.0.0.0/0", "::/0"}, []string{}},
	} {
		ranges, skipped := urlEgressRanges(c.allow, c.ipv6)
		if got := str(ranges); !equal(got, c.wantRanges) {
			t.Errorf("%q (IPv6 %v): ranges %q, want %q", c.allow, c.ipv6, got, c.wantRanges)
		}
		if got := str(skipped); !equal(got, c.wantSkip) {
			t.Errorf("%q (IPv6 %v): ignored %q, want %q", c.allow, c.ipv6, got, c.wantSkip)
		}
	}
	if got := urlEgressPorts(Props{SubscriptionURLPorts: []float64{9000, 443, 8443, 9000}}); !equal(got, []int{80, 443, 8443, 9000}) {
		t.Errorf("ports %v, want 80, 443, 8443, 9000", got)
	}
}

// More rules than EC2's default quota per group deploy only where it was raised: the
// synth warns, naming the count.
func TestDispatchURLEgressRuleQuotaWarning(t *testing.T) {
	var allow []string
	for i := range 20 {
		allow = append(allow, fmt.Sprintf("10.%d.0.0/16", i))
	}
	s, err := synth(Props{AssetsDir: assetsDir, MigrationNonce: "nonce-1", SubscriptionURLAllow: allow, SubscriptionURLPorts: []float64{8443}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.dispatchEgressRules(t)); got != 60 {
		t.Errorf("%d rules, want 20 ranges × 3 ports", got)
	}
	var warned bool
	for _, w := range s.warnings {
		warned = warned || strings.Contains(w, urlRulesWarning) && strings.Contains(w, "63 outbound IPv4 rules")
	}
	if !warned {
		t.Errorf("warnings %q, want one about 63 outbound rules", s.warnings)
	}
}
