package queenstack

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"
)

const (
	databaseSubnetGroup = "database"
	functionSubnetGroup = "functions"
)

// newNetwork defines a two-zone VPC with isolated subnets only and one security group
// per tier, all with outbound traffic closed unless a rule below opens it.
func newNetwork(s awscdk.Stack, p Props, logKey awskms.IKey) *Network {
	vpc := awsec2.NewVpc(s, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:                       jsii.Number(2),
		NatGateways:                  jsii.Number(0),
		CreateInternetGateway:        jsii.Bool(false),
		RestrictDefaultSecurityGroup: jsii.Bool(true),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String(databaseSubnetGroup), SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED, CidrMask: jsii.Number(24)},
			{Name: jsii.String(functionSubnetGroup), SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED, CidrMask: jsii.Number(22)},
		},
	})
	// Flow logs of rejected traffic only (cdk-nag AwsSolutions-VPC7): what a security
	// group refused is what one needs to debug a connection, and accepted traffic
	// (every request's proxy connection) would cost more to keep than it tells.
	flowLogs := newLogGroup(s, p, "VpcFlowLogs", logKey)
	vpc.AddFlowLog(jsii.String("FlowLog"), &awsec2.FlowLogOptions{
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(flowLogs, nil),
		TrafficType: awsec2.FlowLogTrafficType_REJECT,
	})
	n := &Network{
		Vpc:             vpc,
		DatabaseSubnets: &awsec2.SubnetSelection{SubnetGroupName: jsii.String(databaseSubnetGroup)},
		FunctionSubnets: &awsec2.SubnetSelection{SubnetGroupName: jsii.String(functionSubnetGroup)},
	}
	sg := func(id, desc string) awsec2.SecurityGroup {
		return awsec2.NewSecurityGroup(s, jsii.String(id), &awsec2.SecurityGroupProps{
			Vpc: vpc, Description: jsii.String(desc), AllowAllOutbound: jsii.Bool(false),
		})
	}
	n.FunctionsSG = sg("FunctionsSecurityGroup", "Queen functions: out to the RDS Proxy only")
	n.MigrateSG = sg("MigrateSecurityGroup", "Queen migrate function: out to the database and Secrets Manager only")
	n.ProxySG = sg("ProxySecurityGroup", "Queen RDS Proxy: in from the functions, out to the database")
	n.DatabaseSG = sg("DatabaseSecurityGroup", "Queen database: in from the proxy and the migrate function")
	n.EndpointSG = sg("SecretsEndpointSecurityGroup", "Secrets Manager endpoint: in from the migrate function")

	pg := awsec2.Port_Tcp(jsii.Number(DefaultDBPort))
	n.ProxySG.Connections().AllowFrom(n.FunctionsSG, pg, jsii.String("functions to proxy"))
	// proxy → database on the database port is added by the proxy's target binding.
	n.DatabaseSG.Connections().AllowFrom(n.MigrateSG, pg, jsii.String("migrate to database"))
	https := awsec2.Port_Tcp(jsii.Number(443))
	n.EndpointSG.Connections().AllowFrom(n.MigrateSG, https, jsii.String("migrate to Secrets Manager"))
	// The payload functions read the encryption key ring through the endpoint too. Both
	// sides are security groups, so this adds the endpoint's ingress and the matching
	// egress on the functions' group (whose outbound traffic is otherwise closed). The
	// two groups' descriptions predate this rule and stay as they are: a changed
	// GroupDescription replaces the group, which detaching Lambda ENIs makes slow.
	n.EndpointSG.Connections().AllowFrom(n.FunctionsSG, https, jsii.String("functions to Secrets Manager (payload key)"))

	// With URL targets allowed the dispatcher has a group of its own: the shared
	// group's egress (both sides of each rule, as above) and its way to the URL
	// targets (dispatchURLEgress). The other functions keep the shared group.
	if len(p.SubscriptionURLAllow) > 0 {
		n.DispatchSG = sg("DispatchSecurityGroup", "Queen dispatch function: out to the RDS Proxy, the endpoints and subscription URL targets")
		n.ProxySG.Connections().AllowFrom(n.DispatchSG, pg, jsii.String("dispatch to proxy"))
		n.EndpointSG.Connections().AllowFrom(n.DispatchSG, https, jsii.String("dispatch to Secrets Manager (payload key)"))
		dispatchURLEgress(s, p, n.DispatchSG)
	}

	// The functions have no route out of the VPC; they read their secrets (migrate the
	// master credentials, the payload functions the encryption key) through this
	// endpoint.
	n.SecretsEndpoint = vpc.AddInterfaceEndpoint(jsii.String("SecretsManagerEndpoint"), &awsec2.InterfaceVpcEndpointOptions{
		Service:           awsec2.InterfaceVpcEndpointAwsService_SECRETS_MANAGER(),
		Subnets:           n.FunctionSubnets,
		SecurityGroups:    &[]awsec2.ISecurityGroup{n.EndpointSG},
		Open:              jsii.Bool(false),
		PrivateDnsEnabled: jsii.Bool(true),
	})

	// With subscriptions the functions call the Lambda API: the starters invoke the
	// dispatcher, the dispatcher its targets and itself (subscriptions.go). Private
	// DNS sends the SDK's regional endpoint here. The rule admits the functions'
	// group, so pop, which shares it, reaches the endpoint too; its role may invoke
	// nothing. A dispatcher with a group of its own is admitted too: it invokes its
	// function targets and itself through the endpoint, whatever URLs it may reach.
	if p.Subscriptions() {
		n.LambdaEndpointSG = sg("LambdaEndpointSecurityGroup", "Lambda endpoint: in from the functions")
		n.LambdaEndpointSG.Connections().AllowFrom(n.FunctionsSG, https, jsii.String("functions to the Lambda API (subscriptions)"))
		if n.DispatchSG != nil {
			n.LambdaEndpointSG.Connections().AllowFrom(n.DispatchSG, https, jsii.String("dispatch to the Lambda API (subscriptions)"))
		}
		n.LambdaEndpoint = vpc.AddInterfaceEndpoint(jsii.String("LambdaEndpoint"), &awsec2.InterfaceVpcEndpointOptions{
			Service:           awsec2.InterfaceVpcEndpointAwsService_LAMBDA(),
			Subnets:           n.FunctionSubnets,
			SecurityGroups:    &[]awsec2.ISecurityGroup{n.LambdaEndpointSG},
			Open:              jsii.Bool(false),
			PrivateDnsEnabled: jsii.Bool(true),
		})
	}
	return n
}

// vpcIPv6 is whether the VPC of newNetwork has IPv6: it has not (no IpProtocol
// DUAL_STACK), so the function subnets have no IPv6 address or route, and an IPv6
// range in SubscriptionURLAllow opens nothing (dispatchURLEgress warns).
const vpcIPv6 = false

// Security group rules: EC2's default quota of outbound rules per group (per address
// family; adjustable), and the dispatcher's rules to other groups (the proxy, the
// Secrets Manager and Lambda endpoints), which count against it.
const (
	securityGroupRulesQuota = 60
	dispatchGroupRules      = 3
)

// Ids of dispatchURLEgress's warnings, which the synth prints after each message.
const (
	urlAllowIPv6Warning = "queen:subscriptionUrlAllowIPv6"
	urlRulesWarning     = "queen:subscriptionUrlRules"
)

// dispatchURLEgress opens the dispatcher's group to its URL targets: TCP on each port
// of urlEgressPorts to each destination of urlEgressRanges. The application's fence
// (core/egress) checks every address the dispatcher connects to against the list;
// the group keeps it to those destinations and ports. It warns about IPv6 entries,
// which the VPC cannot use, and about more rules than the default quota.
func dispatchURLEgress(s awscdk.Stack, p Props, sg awsec2.SecurityGroup) {
	ranges, ignored := urlEgressRanges(p.SubscriptionURLAllow, vpcIPv6)
	ports := urlEgressPorts(p)
	rules := map[bool]int{}
	for _, r := range ranges {
		peer := awsec2.Peer_Ipv4(jsii.String(r.String()))
		if !r.Addr().Is4() {
			peer = awsec2.Peer_Ipv6(jsii.String(r.String()))
		}
		for _, port := range ports {
			sg.AddEgressRule(peer, awsec2.Port_Tcp(jsii.Number(port)),
				jsii.String(fmt.Sprintf("subscription URL targets: %s port %d", r, port)), nil)
		}
		rules[r.Addr().Is4()] += len(ports)
	}
	if len(ignored) > 0 {
		list := make([]string, len(ignored))
		for i, pfx := range ignored {
			list[i] = pfx.String()
		}
		awscdk.Annotations_Of(sg).AddWarningV2(jsii.String(urlAllowIPv6Warning), jsii.String(fmt.Sprintf(
			"subscriptionUrlAllow: %s opens nothing: the stack's VPC has no IPv6, so the dispatcher cannot reach an IPv6 target",
			strings.Join(list, ", "))), nil)
	}
	for v4, n := range rules {
		if n+dispatchGroupRules > securityGroupRulesQuota {
			family := map[bool]string{true: "IPv4", false: "IPv6"}[v4]
			awscdk.Annotations_Of(sg).AddWarningV2(jsii.String(urlRulesWarning), jsii.String(fmt.Sprintf(
				"the dispatcher's security group has %d outbound %s rules (%d destinations × %d ports, and %d to the proxy and the endpoints), "+
					"above EC2's default quota of %d per group: raise the quota, or list fewer ranges or subscriptionUrlPorts",
				n+dispatchGroupRules, family, n/len(ports), len(ports), dispatchGroupRules, securityGroupRulesQuota)), nil)
		}
	}
}
