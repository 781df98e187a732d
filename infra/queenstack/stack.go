package queenstack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Stack is the synthesized Queen stack with handles on the parts tests and outputs
// refer to.
type Stack struct {
	awscdk.Stack

	// Props are the effective properties (defaults applied).
	Props Props

	Network  *Network
	Database *Database
	Proxy    awsrds.DatabaseProxy
	// EncryptionKey is the secret holding the payload key ring of encrypted queues.
	EncryptionKey awssecretsmanager.Secret
	// MonitoringKey is the KMS key of the log groups, the alarm topic and
	// Performance Insights.
	MonitoringKey awskms.Key
	// DatabaseLogGroups are the names of the log groups the database exports its
	// logs to (DatabaseLogExports), which RDS owns.
	DatabaseLogGroups []*string
	// Functions by name (Props.Functions).
	Functions map[string]awslambda.Function
	// Migration is the custom resource that runs the migrate function.
	Migration  awscdk.CustomResource
	API        awsapigatewayv2.HttpApi
	Stage      awsapigatewayv2.HttpStage
	ReaperRule awsevents.Rule
	// IngestQueue and IngestDLQ are nil when the ingest queue is disabled.
	IngestQueue awssqs.Queue
	IngestDLQ   awssqs.Queue
	// PushFailedEvents is the on-failure destination of push's asynchronous
	// invocations (SNS, EventBridge): events push failed to store after Lambda's
	// retries.
	PushFailedEvents awssqs.Queue
	// DispatchFailedRuns is the on-failure destination of the dispatcher's
	// asynchronous invocations; nil without subscriptions.
	DispatchFailedRuns awssqs.Queue
	AlarmTopic         awssns.Topic
	Alarms             []awscloudwatch.Alarm
	Dashboard          awscloudwatch.Dashboard
}

// Network is the VPC and the security groups of each tier.
type Network struct {
	Vpc awsec2.Vpc
	// DatabaseSubnets hold the database and the proxy; FunctionSubnets the functions
	// and the interface endpoints. Both are isolated (no route out of the VPC).
	DatabaseSubnets *awsec2.SubnetSelection
	FunctionSubnets *awsec2.SubnetSelection

	FunctionsSG awsec2.SecurityGroup
	MigrateSG   awsec2.SecurityGroup
	ProxySG     awsec2.SecurityGroup
	DatabaseSG  awsec2.SecurityGroup
	EndpointSG  awsec2.SecurityGroup
	// LambdaEndpointSG and LambdaEndpoint are nil without subscriptions.
	LambdaEndpointSG awsec2.SecurityGroup
	// DispatchSG is the dispatch function's group when URL targets are allowed
	// (SubscriptionURLAllow), nil otherwise (the dispatcher, if any, is in
	// FunctionsSG): the shared group's egress, and TCP out to the URL targets.
	DispatchSG awsec2.SecurityGroup

	SecretsEndpoint awsec2.InterfaceVpcEndpoint
	LambdaEndpoint  awsec2.InterfaceVpcEndpoint
}

// Database is the PostgreSQL server behind the proxy, either engine.
type Database struct {
	// Construct is the DatabaseInstance or DatabaseCluster.
	Construct constructs.Construct
	// Resource is its CloudFormation resource (AWS::RDS::DBInstance or DBCluster).
	Resource awscdk.CfnResource
	// ResourceID is the DbiResourceId / DbClusterResourceId used in rds-db ARNs.
	ResourceID *string
	// Host is the direct endpoint address, used by migrate only.
	Host   *string
	Secret awssecretsmanager.ISecret
	Target awsrds.ProxyTarget
	// CPU and Connections are the server's CloudWatch metrics.
	CPU         awscloudwatch.IMetric
	Connections awscloudwatch.IMetric
	// Metric is any AWS/RDS metric of the instance or cluster.
	Metric func(name string, opts *awscloudwatch.MetricOptions) awscloudwatch.Metric
}

// New validates props, applies defaults and defines the stack in scope. The stack is
// env-agnostic unless stackProps sets Env; it performs no context lookups.
func New(scope constructs.Construct, id string, stackProps *awscdk.StackProps, props Props) (*Stack, error) {
	p := props.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("queen stack props: %w", err)
	}
	if stackProps == nil {
		stackProps = &awscdk.StackProps{}
	}
	if p.Profile == ProfileProduction && stackProps.TerminationProtection == nil {
		stackProps.TerminationProtection = jsii.Bool(true)
	}
	if stackProps.Description == nil {
		stackProps.Description = jsii.String("Queen Serverless: partitioned message queue on Lambda, API Gateway and PostgreSQL")
	}
	s := &Stack{Stack: awscdk.NewStack(scope, jsii.String(id), stackProps), Props: p}
	awscdk.Tags_Of(s.Stack).Add(jsii.String("project"), jsii.String("queen-serverless"), nil)

	s.MonitoringKey = newMonitoringKey(s.Stack, p)
	s.Network = newNetwork(s.Stack, p, s.MonitoringKey)
	s.Database = newDatabase(s.Stack, p, s.Network, s.MonitoringKey)
	s.DatabaseLogGroups = newDatabaseLogGroups(s.Stack, p, s.Database, s.MonitoringKey)
	s.Proxy = newProxy(s.Stack, p, s.Network, s.Database)
	s.EncryptionKey = newEncryptionKey(s.Stack, p)
	s.Functions = newFunctions(s.Stack, p, s.Network, s.Database, s.Proxy, s.EncryptionKey, s.MonitoringKey)
	s.Migration = newMigration(s.Stack, p, s)
	s.API, s.Stage = newAPI(s.Stack, p, s.Functions, s.MonitoringKey)
	s.ReaperRule = newReaperSchedule(s.Stack, p, s.Functions["reaper"])
	s.PushFailedEvents = newPushFailureDestination(s.Stack, p, s.Functions["push"])
	if p.Ingest() {
		s.IngestQueue, s.IngestDLQ = newIngest(s.Stack, p, s.Functions["push"], s.Migration)
	}
	if p.Subscriptions() {
		s.DispatchFailedRuns = newSubscriptions(s.Stack, p, s)
	}
	// Nothing reaches the database before the schema exists, and no function code
	// that needs a migration runs before it: every function but migrate depends on
	// the migration, so CloudFormation creates or updates their code only after the
	// migration custom resource succeeded (on an upgrade too, where the resource
	// changes with the migrate binary). Migrate and the provider framework that
	// invokes it come before the migration, so they must not depend on it.
	for _, name := range p.Functions() {
		if name != "migrate" {
			s.Functions[name].Node().AddDependency(s.Migration)
		}
	}
	s.API.Node().AddDependency(s.Migration)
	s.ReaperRule.Node().AddDependency(s.Migration)

	s.AlarmTopic, s.Alarms, s.Dashboard = newMonitoring(s.Stack, p, s)
	s.outputs()
	suppressNagFindings(s)
	applyNag(s.Stack)
	return s, nil
}

func (s *Stack) outputs() {
	out := func(id, value, desc string) {
		awscdk.NewCfnOutput(s.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: jsii.String(value), Description: jsii.String(desc)})
	}
	out("ApiUrl", *s.Stage.Url(), "Base URL of the Queen HTTP API ("+string(s.Props.Authorizer)+" auth)")
	if s.IngestQueue != nil {
		out("IngestQueueUrl", *s.IngestQueue.QueueUrl(), "SQS queue whose messages the push function ingests")
		out("IngestDeadLetterQueueUrl", *s.IngestDLQ.QueueUrl(), "Ingest messages that failed IngestMaxReceiveCount times")
	}
	out("PushFailedEventsQueueUrl", *s.PushFailedEvents.QueueUrl(),
		"SNS/EventBridge (asynchronous) events push failed to store after Lambda's retries, with the error")
	if d := s.Functions[DispatchFunction]; d != nil {
		out("DispatchFunctionName", *d.FunctionName(), "Function that delivers subscriptions to their targets")
		out("DispatchRoleArn", *d.Role().RoleArn(),
			"Role the dispatcher invokes targets as: allow it in the resource policy of a target in another account")
		out("DispatchFailedRunsQueueUrl", *s.DispatchFailedRuns.QueueUrl(),
			"Dispatch runs that failed, and wakes that found no free container for 6 hours, with the error")
	}
	out("AlarmTopicArn", *s.AlarmTopic.TopicArn(), "SNS topic of every alarm; subscribe to be notified")
	out("DashboardName", *s.Dashboard.DashboardName(), "CloudWatch dashboard")
	out("ProxyEndpoint", *s.Proxy.Endpoint(), "RDS Proxy endpoint the functions connect to")
	out("DatabaseSecretArn", *s.Database.Secret.SecretArn(), "Master credentials (ARN only; read by the migrate function)")
	out("EncryptionKeySecretArn", *s.EncryptionKey.SecretArn(),
		"Payload encryption key ring of encryptionEnabled queues (ARN only; read by push, pop, ack, dlq and admin). "+
			"Rotate by prepending k2:<64 hex>, keeping k1; deleting it makes encrypted payloads unreadable")
}

// removal returns the removal policy for stateful resources other than the database:
// kept with RETAIN, deleted otherwise (SNAPSHOT applies to the database only).
func removal(p Props) awscdk.RemovalPolicy {
	if p.RemovalPolicy == awscdk.RemovalPolicy_RETAIN {
		return awscdk.RemovalPolicy_RETAIN
	}
	return awscdk.RemovalPolicy_DESTROY
}
