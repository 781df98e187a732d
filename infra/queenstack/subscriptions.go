package queenstack

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/queen-serverless/queen/core/egress"
)

// Subscriptions on AWS (docs/subscriptions.md): with SubscriptionTargets declared or
// URL targets allowed (SubscriptionURLAllow) the stack adds the dispatch function,
// which invokes the target functions synchronously and posts to the URL targets
// through the egress fence (core/egress), the Lambda interface endpoint the functions
// reach the Lambda API through (network.go), and the subscription alarms
// (monitoring.go). Without either it adds nothing. Whatever it declares, the admin
// function checks a subscription's target against it when one is created
// (subscriptionEnv).

// DispatchStarters are the functions that start the dispatcher with an asynchronous
// invoke: push after its commit, ack for the pushes of a transaction, dlq when it
// re-pushes a dead letter, admin when a subscription is created or changed, and the
// reaper, whose pass is the safety net. Each gets EnvDispatchFunction and
// lambda:InvokeFunction on the dispatch function; the dispatcher gets both for itself
// too, as it starts its own next run when its time runs out.
var DispatchStarters = []string{"push", "ack", "dlq", "admin", "reaper"}

// Asynchronous invocations of the dispatcher (its wakes and handovers).
const (
	// dispatchAsyncRetryAttempts: Lambda does not run a failed run again. Its
	// leases expire, and the reaper's next pass wakes every subscription with
	// backlog and no live lease; a retry would only race that.
	dispatchAsyncRetryAttempts = 0
	// dispatchAsyncMaxEventAge (hours, Lambda's longest): a wake that finds no free
	// container (the dispatcher's reservation is busy, or the account's quota) waits
	// for one rather than being dropped.
	dispatchAsyncMaxEventAge = 6
)

// Lambda's forms of a function, as the Invoke API takes them, but for the partial ARN:
// a name, name:qualifier (a version, an alias or $LATEST), and the function's ARN with
// or without its qualifier. A wildcard matches none of them.
var (
	functionNameForm = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}(:(\$LATEST|[a-zA-Z0-9_-]{1,128}))?$`)
	functionARNForm  = regexp.MustCompile(`^arn:aws[a-zA-Z-]*:lambda:[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d:\d{12}:function:[a-zA-Z0-9_-]{1,64}(:(\$LATEST|[a-zA-Z0-9_-]{1,128}))?$`)
)

// checkSubscriptionTarget reports a declared target that is none of Lambda's forms.
func checkSubscriptionTarget(target string) error {
	if functionNameForm.MatchString(target) || functionARNForm.MatchString(target) {
		return nil
	}
	return fmt.Errorf("%q: want a function name, name:qualifier or a function ARN (no wildcards)", target)
}

// loopbackRanges are what "loopback" names, as the fence judges an address (IPv4
// as itself, however written).
var loopbackRanges = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// checkSubscriptionURLAllow reports every entry of SubscriptionURLAllow the functions
// would not read (egress.ParsePolicy), and every one that allows loopback: on Lambda,
// loopback is the function itself and its runtime API, never a target. "none" is
// refused too: the empty list is the one way to say it.
func checkSubscriptionURLAllow(allow []string) []error {
	var errs []error
	for _, entry := range allow {
		policy, err := egress.ParsePolicy(entry)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case policy.Off():
			errs = append(errs, fmt.Errorf("%q: leave the list empty for no URL targets", entry))
		case policy.Loopback:
			errs = append(errs, fmt.Errorf("%q: on Lambda loopback is the function itself and its runtime API, never a target; "+
				"a target on AWS is reached over the VPC (list its host, range, %q or %q)", entry, egress.Private, egress.Public))
		}
		for _, pfx := range policy.Prefixes {
			for _, lo := range loopbackRanges {
				if pfx.Overlaps(lo) {
					errs = append(errs, fmt.Errorf("%q includes loopback (%s), which on Lambda is the function itself; "+
						"list %q or %q, or narrower ranges", entry, lo, egress.Public, egress.Private))
				}
			}
		}
		for _, h := range policy.Hosts {
			if name := strings.TrimPrefix(h, "*."); name == "localhost" || strings.HasSuffix(name, ".localhost") {
				errs = append(errs, fmt.Errorf("%q names loopback, which on Lambda is the function itself", entry))
			}
		}
	}
	return errs
}

// Ports the dispatcher's security group opens to the destinations of
// SubscriptionURLAllow: http's and https's defaults always, SubscriptionURLPorts
// beside them.
var urlEgressBasePorts = []int{80, 443}

// privateRanges are what the class "private" names, as the fence judges an address
// (egress.Private): fd00:ec2::/32 in fc00::/7 stays refused by the fence.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
}

// Every address of each family: where the list names a host, a domain or "public",
// whose addresses only the fence can judge, when the dispatcher connects.
var (
	anyIPv4 = netip.MustParsePrefix("0.0.0.0/0")
	anyIPv6 = netip.MustParsePrefix("::/0")
)

// urlEgressRanges are the destinations the dispatcher's security group lets it out to
// for URL targets (dispatchURLEgress in network.go): each range and address of allow
// as itself, the private ranges for "private", and every address (0.0.0.0/0, and
// ::/0 with IPv6) as soon as the list names a host, a domain or "public". A range
// inside another (or given twice) is left out. Without IPv6 (the stack's VPC:
// vpcIPv6) the IPv6 ranges come back in ignored instead: the function subnets have
// no IPv6, so nothing could use them. Entries egress.ParsePolicy does not read are
// skipped (Validate reports them).
func urlEgressRanges(allow []string, ipv6 bool) (ranges, ignored []netip.Prefix) {
	var all []netip.Prefix
	for _, entry := range allow {
		policy, err := egress.ParsePolicy(entry)
		if err != nil {
			continue
		}
		if policy.Public || len(policy.Hosts) > 0 {
			all = append(all, anyIPv4, anyIPv6)
		}
		if policy.Private {
			all = append(all, privateRanges...)
		}
		for _, pfx := range policy.Prefixes {
			if !pfx.Addr().Is4() && !ipv6 && !slices.Contains(ignored, pfx) {
				ignored = append(ignored, pfx) // as listed; a class's IPv6 range is no news
			}
		}
		all = append(all, policy.Prefixes...)
	}
	for _, pfx := range all {
		if !ipv6 && !pfx.Addr().Is4() {
			continue
		}
		covered := slices.ContainsFunc(all, func(o netip.Prefix) bool {
			return o != pfx && o.Bits() <= pfx.Bits() && o.Contains(pfx.Addr())
		})
		if !covered && !slices.Contains(ranges, pfx) {
			ranges = append(ranges, pfx)
		}
	}
	return ranges, ignored
}

// urlEgressPorts are the TCP ports the dispatcher's security group opens to the
// destinations of urlEgressRanges: 80, 443 and SubscriptionURLPorts, ascending.
func urlEgressPorts(p Props) []int {
	ports := slices.Clone(urlEgressBasePorts)
	for _, port := range p.SubscriptionURLPorts {
		ports = append(ports, int(port))
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// checkSubscriptionURLPorts reports every port of SubscriptionURLPorts that is not
// one, and the list given without URL targets to open it to.
func checkSubscriptionURLPorts(p Props) []error {
	var errs []error
	if len(p.SubscriptionURLPorts) > 0 && len(p.SubscriptionURLAllow) == 0 {
		errs = append(errs, errors.New("URL targets are off (subscriptionUrlAllow is empty): there is nothing to open ports to"))
	}
	for _, port := range p.SubscriptionURLPorts {
		if port < 1 || port > 65535 || port != math.Trunc(port) {
			errs = append(errs, fmt.Errorf("%v: want a TCP port, 1..65535", port))
		}
	}
	return errs
}

// subscriptionEnv is what the functions that check or reach subscription targets are
// told of them: admin, which checks a target when a subscription is created, the
// declared functions (EnvSubscriptionFuncs, when there are any: none is the functions'
// default everywhere) and the URL allow list (EnvSubscriptionURLs); the dispatcher,
// which connects to URL targets through the fence, the allow list. The list is
// written out as "none" when empty, so that neither function rests on its default.
// Other functions get nothing.
func subscriptionEnv(p Props, function string) map[string]string {
	urls := strings.Join(p.SubscriptionURLAllow, ",")
	if urls == "" {
		urls = egress.None
	}
	switch function {
	case "admin":
		env := map[string]string{EnvSubscriptionURLs: urls}
		if len(p.SubscriptionTargets) > 0 {
			env[EnvSubscriptionFuncs] = strings.Join(p.SubscriptionTargets, ",")
		}
		return env
	case DispatchFunction:
		return map[string]string{EnvSubscriptionURLs: urls}
	}
	return nil
}

// subscriptionTargetARN is the ARN the dispatcher's grant names for a declared
// target: an ARN as given, a name (with its qualifier, if any) in the stack's
// account and Region. IAM matches Lambda ARNs exactly: the unqualified ARN covers
// unqualified invokes only, a qualified one that version or alias only. No
// "<function>:*" is added, so the dispatcher may invoke exactly the forms declared.
func subscriptionTargetARN(s awscdk.Stack, target string) *string {
	if strings.HasPrefix(target, "arn:") {
		return jsii.String(target)
	}
	return s.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("lambda"),
		Resource:     jsii.String("function"),
		ResourceName: jsii.String(target),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// dispatchFunctionName is the dispatch function's name: <stack name>-dispatch, the
// stack name cut and given a hash where the whole would pass Lambda's 64 characters.
// Unlike the others the function has a fixed name, as it tells itself its name
// (EnvDispatchFunction): a Ref to itself in its own environment would be a cycle.
func dispatchFunctionName(s awscdk.Stack) string {
	const suffix, maxLen = "-" + DispatchFunction, 64
	name := *s.StackName()
	if len(name)+len(suffix) > maxLen {
		sum := sha256.Sum256([]byte(name))
		name = name[:maxLen-len(suffix)-9] + "-" + hex.EncodeToString(sum[:4])
	}
	return name + suffix
}

// dispatchFunctionProps sets what the dispatch function has beyond the common
// settings of newFunction: its name, and its recursion setting.
func dispatchFunctionProps(s awscdk.Stack, fp *awslambda.FunctionProps) {
	fp.FunctionName = jsii.String(dispatchFunctionName(s))
	// A run hands over to the next by invoking its own function, so under a steady
	// backlog the dispatcher invokes itself for as long as the backlog lasts. Where
	// Lambda's recursive loop detection follows such a chain (through the trace
	// header), it stops it after 16 invocations, leaving the backlog to the reaper's
	// safety net: Allow lets the chain run. It ends by itself, as a run hands over
	// only while something is due.
	fp.RecursiveLoop = awslambda.RecursiveLoop_ALLOW
}

// newSubscriptions wires the dispatch function (defined by newFunctions) to the rest
// of the stack, and returns the on-failure destination of its asynchronous
// invocations:
//   - DispatchStarters get its name and lambda:InvokeFunction on it; so does the
//     dispatcher, in a policy of its own (in its role's default policy, which the
//     function waits for, the grant on its own ARN would be a cycle);
//   - the dispatcher may invoke exactly the declared targets (subscriptionTargetARN),
//     and no function at all but itself when none is declared (URL targets only);
//   - the starters and the dispatcher wait for the Lambda endpoint, their way to the
//     Lambda API;
//   - its asynchronous invocations are not retried and keep for six hours while no
//     container is free; a run that failed, or a wake that waited longer, goes with
//     its error to an SQS queue (SQS-managed encryption, TLS only, 14 days) to look
//     at. Nothing there needs replaying: the reaper's next pass has woken the
//     subscription again. Failed runs raise the dispatcher's Errors alarm.
func newSubscriptions(s awscdk.Stack, p Props, st *Stack) awssqs.Queue {
	dispatch := st.Functions[DispatchFunction]
	invoke := func(arns ...*string) awsiam.PolicyStatement {
		return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("lambda:InvokeFunction"),
			Resources: &arns,
		})
	}
	for _, name := range DispatchStarters {
		fn := st.Functions[name]
		fn.AddEnvironment(jsii.String(EnvDispatchFunction), dispatch.FunctionName(), nil)
		fn.AddToRolePolicy(invoke(dispatch.FunctionArn()))
		fn.Node().AddDependency(st.Network.LambdaEndpoint)
	}
	dispatch.Node().AddDependency(st.Network.LambdaEndpoint)
	awsiam.NewPolicy(s, jsii.String("DispatchSelfInvokePolicy"), &awsiam.PolicyProps{
		Roles:      &[]awsiam.IRole{dispatch.Role()},
		Statements: &[]awsiam.PolicyStatement{invoke(dispatch.FunctionArn())},
	})

	if len(p.SubscriptionTargets) > 0 { // a statement on no resource is invalid
		targets := make([]*string, len(p.SubscriptionTargets))
		for i, t := range p.SubscriptionTargets {
			targets[i] = subscriptionTargetARN(s, t)
		}
		dispatch.AddToRolePolicy(invoke(targets...))
	}

	failed := awssqs.NewQueue(s, jsii.String("DispatchFailedRunsQueue"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   removal(p),
	})
	dispatch.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(dispatchAsyncRetryAttempts),
		MaxEventAge:   awscdk.Duration_Hours(jsii.Number(dispatchAsyncMaxEventAge)),
		OnFailure:     awslambdadestinations.NewSqsDestination(failed),
	})
	return failed
}
