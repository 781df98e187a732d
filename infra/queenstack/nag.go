package queenstack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Every stack runs cdk-nag's AwsSolutions and Serverless packs when it is synthesized
// (New adds them as aspects, so `cdk synth`, `cdk deploy` and the tests all do): an
// error-level finding that is neither fixed nor suppressed below fails the synth,
// and the infra tests fail on any finding, warnings included, of every stack
// variant. Each suppression names one rule on the constructs it concerns, with the
// reason; the reasons also land in the template's metadata, so a reviewer sees them
// there.
// Fixed rather than suppressed: VPC flow logs (VPC7), the master secret's rotation
// (SMG4, RDS-managed password), Multi-AZ and deletion protection (RDS3, RDS10) in the
// production profile.

// NagPacks are the cdk-nag rule packs every stack is checked against.
var NagPacks = []string{"AwsSolutions", "Serverless"}

// applyNag checks every construct of scope against NagPacks when it is synthesized.
// Findings become error or warning annotations; with the feature flag
// @aws-cdk/core:annotationsInValidationReport (cdk.json) errors fail the synth with
// a validation report.
func applyNag(scope constructs.IConstruct) {
	packs := &cdknag.NagPackProps{Reports: jsii.Bool(false)}
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(packs), nil)
	awscdk.Aspects_Of(scope).Add(cdknag.NewServerlessChecks(packs), nil)
}

// suppress records why rule does not apply to c (and its children).
func suppress(c constructs.IConstruct, rule, reason string, appliesTo ...string) {
	sup := &cdknag.NagPackSuppression{Id: jsii.String(rule), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		list := make([]interface{}, len(appliesTo))
		for i, a := range appliesTo {
			list[i] = a
		}
		sup.AppliesTo = &list
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{sup}, jsii.Bool(true))
}

// Managed policies CDK attaches to the role of every function in a VPC.
const (
	lambdaBasicExecutionPolicy = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
	lambdaVPCExecutionPolicy   = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
)

// suppressNagFindings records the reasons for the findings the stack keeps. Called
// once the stack is complete.
func suppressNagFindings(st *Stack) {
	p := st.Props
	for _, name := range p.Functions() {
		fn := st.Functions[name]
		suppress(fn, "AwsSolutions-IAM4",
			"AWS-managed execution policies of a function in a VPC: CloudWatch Logs writes and the ENI "+
				"actions Lambda needs to attach the function to its subnets (which only work on \"*\", as ENI ids "+
				"are not known in advance). An inline copy would grant the same and stop following AWS's updates. "+
				"Every grant beyond them (rds-db:connect, GetSecretValue) is scoped to one resource.",
			lambdaBasicExecutionPolicy, lambdaVPCExecutionPolicy)
		suppress(fn, "Serverless-LambdaTracing",
			"The Go functions carry no X-Ray SDK, so active tracing would record only Lambda's own invoke "+
				"segment, at a cost per trace and with an xray:Put* grant on \"*\". A request is followed by its "+
				"request id, which the API access log and the function's log both carry.")
		suppress(fn, "Serverless-LambdaDLQ", lambdaDLQReason[name])
	}

	suppress(st.ReaperRule, "Serverless-EventBusDLQ",
		"The rule only fires the reaper's schedule: a tick that cannot be delivered is superseded by the "+
			"next one a period later, which does the same bounded pass. Nothing would ever read a DLQ of ticks.")
	suppress(st.Functions["reaper"], "Serverless-LambdaAsyncFailureDestination",
		"A failed reaper pass is not retried and needs no record: the next tick repeats it, and failures "+
			"raise the reaper's Errors alarm (and, when the reaper stops, the DLQ-depth and lag alarms).")

	// Push's asynchronous invocations are compliant with Serverless-LambdaAsyncFailureDestination
	// (PushFailedEventsQueue is their on-failure destination); the queue is the end of the line.
	failedEventsReason := "This queue is the on-failure destination of push's asynchronous invocations " +
		"(SNS, EventBridge), the end of the line: its records wait (14 days, alarmed) for an operator, who " +
		"re-publishes the event after fixing the cause."
	suppress(st.PushFailedEvents, "AwsSolutions-SQS3", failedEventsReason)
	suppress(st.PushFailedEvents, "Serverless-SQSRedrivePolicy", failedEventsReason)

	// The migration provider is CDK's custom resource framework (one Node.js function
	// that relays the CloudFormation event to migrate).
	provider := st.Stack.Node().FindChild(jsii.String("MigrationProvider"))
	frameworkReason := "CDK's custom resource provider framework, invoked once per deploy by CloudFormation; "
	suppress(provider, "AwsSolutions-IAM4", frameworkReason+"its role has the basic execution policy only (its logs).",
		lambdaBasicExecutionPolicy)
	migrateArn := "Resource::<" + *st.Stack.GetLogicalId(st.Functions["migrate"].Node().DefaultChild().(awscdk.CfnElement)) + ".Arn>:*"
	suppress(provider, "AwsSolutions-IAM5", frameworkReason+"the wildcard is the migrate function's versions "+
		"and aliases (<migrate ARN>:*), which the framework grants itself beside the function's ARN.", migrateArn)
	suppress(provider, "Serverless-LambdaTracing", frameworkReason+"it has nothing to trace.")
	suppress(provider, "Serverless-LambdaDLQ", frameworkReason+"synchronously: a failure fails the deploy, which CloudFormation reports.")
	suppress(provider, "Serverless-LambdaDefaultMemorySize", frameworkReason+"128 MB is plenty for relaying one event.")

	if st.DispatchFailedRuns != nil {
		// The dispatcher's asynchronous invocations are compliant with
		// Serverless-LambdaAsyncFailureDestination: this queue is their destination.
		failedRunsReason := "This queue is the on-failure destination of the dispatcher's asynchronous " +
			"invocations, the end of the line: a record tells which run failed and why (14 days), for a " +
			"look. Nothing in it needs replaying: the reaper's next pass wakes the subscription again."
		suppress(st.DispatchFailedRuns, "AwsSolutions-SQS3", failedRunsReason)
		suppress(st.DispatchFailedRuns, "Serverless-SQSRedrivePolicy", failedRunsReason)
	}

	if st.IngestQueue != nil {
		mapping := st.Stack.Node().FindChild(jsii.String("IngestMapping"))
		suppress(mapping, "Serverless-LambdaEventSourceMappingDestination",
			"An on-failure destination applies to stream and Kafka sources only; an SQS source's failed "+
				"messages go to the queue's own redrive DLQ (IngestDeadLetterQueue), which is alarmed.")
		suppress(st.IngestDLQ, "Serverless-SQSRedrivePolicy",
			"This queue is the ingest queue's dead-letter queue, the end of the line: its messages wait "+
				"(14 days, alarmed) for an operator's redrive.")
	}
	if p.AlarmEmail != "" {
		suppress(st.AlarmTopic, "Serverless-SNSRedrivePolicy",
			"The only subscription is the alarm e-mail. A notification that cannot be delivered loses no "+
				"state: CloudWatch keeps each alarm's state and history, and the dashboard shows them.")
	}

	db := st.Database.Construct
	suppress(db, "AwsSolutions-RDS11",
		"The database listens on PostgreSQL's port 5432 in isolated subnets (no route in or out of the "+
			"VPC), and its security group admits only the proxy and migrate. A non-default port would hide "+
			"nothing from either and only add a setting to every client.")
	if !p.MultiAZ {
		suppress(db, "AwsSolutions-RDS3",
			"Single-AZ by default to keep development stacks cheap; the production profile (cdk.json) sets "+
				"multiAz, which a later deploy cannot drop.")
	}
	if p.RemovalPolicy != awscdk.RemovalPolicy_RETAIN {
		suppress(db, "AwsSolutions-RDS10",
			"Deletion protection follows the removal policy: on with RETAIN (the production profile), off "+
				"otherwise so that a development stack can be destroyed (SNAPSHOT still takes a final snapshot).")
	}
}

// lambdaDLQReason is why each function has no dead-letter queue: push and dispatch
// keep their failed asynchronous invocations in an on-failure destination instead,
// and no other function is invoked asynchronously with an event worth keeping.
var lambdaDLQReason = map[string]string{
	"push": "Invoked synchronously by API Gateway (the caller gets the error) and by the SQS mapping " +
		"(failed messages go to the ingest queue's own DLQ), and asynchronously by SNS and EventBridge: " +
		"those events, once Lambda's retries fail, go to the on-failure destination PushFailedEventsQueue " +
		"(alarmed), which AWS recommends over a DLQ as it also records the error. A DLQ beside it would " +
		"receive every failed event a second time.",
	"pop":   "Invoked synchronously by API Gateway only: the caller gets every error.",
	"ack":   "Invoked synchronously by API Gateway only: the caller gets every error.",
	"dlq":   "Invoked synchronously by API Gateway only: the caller gets every error.",
	"admin": "Invoked synchronously by API Gateway only: the caller gets every error.",
	"reaper": "Invoked asynchronously by its schedule, but a failed pass is not worth keeping: the next " +
		"tick repeats the same bounded work (RetryAttempts 0, events expire after one period).",
	"migrate": "Invoked synchronously by the custom resource provider: a failure fails the deploy.",
	DispatchFunction: "Invoked asynchronously (woken by pushes and the reaper, and by itself), with the " +
		"on-failure destination DispatchFailedRunsQueue, which AWS recommends over a DLQ as it also " +
		"records the error; a DLQ beside it would receive every failed run a second time. A failed run " +
		"is not retried: the reaper's next pass wakes every subscription with backlog and no live lease.",
}
