package queenstack

import (
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
	// nothing.
	if p.Subscriptions() {
		n.LambdaEndpointSG = sg("LambdaEndpointSecurityGroup", "Lambda endpoint: in from the functions")
		n.LambdaEndpointSG.Connections().AllowFrom(n.FunctionsSG, https, jsii.String("functions to the Lambda API (subscriptions)"))
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
