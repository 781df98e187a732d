package queenstack

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// MigrationResourceType is the CloudFormation type of the migration custom resource.
const MigrationResourceType = "Custom::QueenMigration"

// newMigration defines the custom resource whose create and update events invoke the
// migrate function through the provider framework (delete is a no-op for migrate). Its
// properties change whenever the migrate binary changes and, with a MigrationNonce,
// on every deploy. It waits for the database, migrate's network path to it (both sides
// of the security group rule) and the Secrets Manager endpoint, and not for the RDS
// Proxy: migrate logs in to the database directly, and the proxy's login role (the
// application user) only exists once migrate has created it.
func newMigration(s awscdk.Stack, p Props, st *Stack) awscdk.CustomResource {
	migrate := st.Functions["migrate"]
	providerLogs := newLogGroup(s, p, "MigrationProviderLogs", st.MonitoringKey)
	provider := customresources.NewProvider(s, jsii.String("MigrationProvider"), &customresources.ProviderProps{
		OnEventHandler: migrate,
		LogGroup:       providerLogs,
	})
	props := map[string]interface{}{
		"MigrateCodeSha256": fileSHA256(filepath.Join(p.AssetsDir, "migrate", "bootstrap")),
		"DatabaseName":      p.DatabaseName,
		"AppUser":           p.AppUser,
	}
	if p.MigrationNonce != "" {
		props["DeployNonce"] = p.MigrationNonce
	}
	cr := awscdk.NewCustomResource(s, jsii.String("Migration"), &awscdk.CustomResourceProps{
		ServiceToken:   provider.ServiceToken(),
		ResourceType:   jsii.String(MigrationResourceType),
		Properties:     &props,
		ServiceTimeout: awscdk.Duration_Seconds(jsii.Number(p.MigrateTimeoutSec + 60)),
	})
	cr.Node().AddDependency(st.Database.Construct, st.Network.SecretsEndpoint,
		st.Network.MigrateSG, st.Network.DatabaseSG, st.Network.EndpointSG, migrate)
	return cr
}

// fileSHA256 is the hex digest of a file; Validate has already checked that it exists.
func fileSHA256(path string) string {
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		panic(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// newReaperSchedule invokes the reaper every ReaperRateMinutes. A failed pass is not
// retried: the next tick does the same work. A pass ends before the next tick is due
// (ReaperTimeoutSec is shorter than the period), and a tick that waits (throttled:
// the account is out of concurrency, or the previous pass still holds the reaper's
// one reserved container) is dropped once the next tick is due, so passes never
// pile up.
func newReaperSchedule(s awscdk.Stack, p Props, reaper awslambda.Function) awsevents.Rule {
	reaper.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(p.ReaperRateMinutes)),
	})
	return awsevents.NewRule(s, jsii.String("ReaperSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Queen reaper: expire leases, prune dedup keys, apply retention, publish metrics"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(p.ReaperRateMinutes))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(reaper, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(p.ReaperRateMinutes)),
		})},
	})
}

// Lambda's defaults for asynchronous invocations, written out for push.
const (
	pushAsyncRetryAttempts = 2
	pushAsyncMaxEventAge   = 6 // hours
)

// newPushFailureDestination keeps what push's asynchronous invocations fail to
// store. SNS and EventBridge (and any invoke with --invocation-type Event) invoke push
// asynchronously: Lambda retries a failed event twice, and keeps it for up to six
// hours while push is throttled, then sends it, with the error, to this queue
// (SQS-managed encryption, TLS only, 14 days) instead of dropping it. Push's role
// gets sqs:SendMessage on the queue. Its depth is alarmed (monitoring.go).
func newPushFailureDestination(s awscdk.Stack, p Props, push awslambda.Function) awssqs.Queue {
	q := awssqs.NewQueue(s, jsii.String("PushFailedEventsQueue"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   removal(p),
	})
	push.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(pushAsyncRetryAttempts),
		MaxEventAge:   awscdk.Duration_Hours(jsii.Number(pushAsyncMaxEventAge)),
		OnFailure:     awslambdadestinations.NewSqsDestination(q),
	})
	return q
}

// newIngest defines the SQS ingest queue with its own dead-letter queue and maps it to
// the push function with partial batch responses. The mapping starts only after the
// migration and runs at most IngestMaxConcurrency push containers. A message push
// cannot store becomes visible again after the visibility timeout and moves to the
// DLQ after IngestMaxReceiveCount receives, i.e. after about IngestRetryMinutes: a
// database outage or failover shorter than that needs no redrive.
func newIngest(s awscdk.Stack, p Props, push awslambda.Function, migration constructs.IConstruct) (awssqs.Queue, awssqs.Queue) {
	dlq := awssqs.NewQueue(s, jsii.String("IngestDeadLetterQueue"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   removal(p),
	})
	q := awssqs.NewQueue(s, jsii.String("IngestQueue"), &awssqs.QueueProps{
		Encryption: awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL: jsii.Bool(true),
		// AWS recommends at least six times the function timeout.
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(p.IngestVisibilityTimeoutSec())),
		RetentionPeriod:   awscdk.Duration_Days(jsii.Number(4)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(p.IngestMaxReceiveCount)},
		RemovalPolicy:     removal(p),
	})
	q.GrantConsumeMessages(push)
	mapping := awslambda.NewEventSourceMapping(s, jsii.String("IngestMapping"), &awslambda.EventSourceMappingProps{
		Target:                  push,
		EventSourceArn:          q.QueueArn(),
		BatchSize:               jsii.Number(p.IngestBatchSize),
		MaxBatchingWindow:       batchingWindow(p.IngestBatchSize),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(p.IngestMaxConcurrency),
	})
	mapping.Node().AddDependency(migration)
	return q, dlq
}

// batchingWindow: SQS batches above 10 messages require a batching window.
func batchingWindow(batch float64) awscdk.Duration {
	if batch > 10 {
		return awscdk.Duration_Seconds(jsii.Number(1))
	}
	return nil
}
