package queenstack

import (
	"path/filepath"
	"slices"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/queen-serverless/queen/core/config"
)

// Environment variable names the functions read: core/config's, the one
// place each is written down. None of them ever holds a secret.
const (
	EnvDBHost              = config.EnvDBHost
	EnvDBPort              = config.EnvDBPort
	EnvDBName              = config.EnvDBName
	EnvDBUser              = config.EnvDBUser
	EnvDBIAMAuth           = config.EnvDBIAMAuth
	EnvDBSSLMode           = config.EnvDBSSLMode
	EnvDBSecretARN         = config.EnvDBSecretARN
	EnvMaxWaitMS           = config.EnvMaxWaitMS
	EnvLogLevel            = config.EnvLogLevel
	EnvDefaultQueue        = config.EnvDefaultQueue
	EnvDefaultPartition    = config.EnvDefaultPartition
	EnvEventPartitionField = config.EnvEventPartitionField
	EnvDefaultRetention    = config.EnvDefaultRetention
	EnvDefaultCompleted    = config.EnvDefaultCompleted

	// EnvEncryptionKeySecretARN is the ARN (never the value) of the payload key ring
	// secret, which PayloadFunctions read with GetSecretValue the first time an
	// encrypted queue needs it. Locally the ring itself comes from
	// QUEEN_ENCRYPTION_KEY, which no function here ever gets.
	EnvEncryptionKeySecretARN = config.EnvEncryptionKeySecret

	// EnvDispatchFunction names the dispatch function to the functions that start it
	// (DispatchStarters) and to itself (subscriptions.go).
	EnvDispatchFunction = config.EnvDispatchFunction

	// EnvSubscriptionURLs and EnvSubscriptionFuncs tell admin and the dispatcher what
	// subscriptions' targets may be (subscriptionEnv in subscriptions.go).
	EnvSubscriptionURLs  = config.EnvSubscriptionURLs
	EnvSubscriptionFuncs = config.EnvSubscriptionFuncs
)

var functionDescriptions = map[string]string{
	"push":    "Queen push: POST /api/v1/push, SQS/SNS/EventBridge events, direct invoke",
	"pop":     "Queen pop: pop (long poll) and lease extend",
	"ack":     "Queen ack: ack, ack batch, transaction",
	"dlq":     "Queen dead-letter queue: list, get, delete, retry",
	"admin":   "Queen admin: configure, queues, consumer groups, browse, health",
	"reaper":  "Queen reaper: one bounded maintenance pass per schedule tick",
	"migrate": "Queen migrate: applies schema migrations at deploy time (custom resource)",

	DispatchFunction: "Queen dispatch: delivers subscriptions to their targets (functions, URLs)",
}

// newFunctions defines every function of p.Functions() from its `make build` asset: arm64,
// provided.al2023, handler bootstrap, in the function subnets, with its own log group
// (encrypted with logKey).
// All but migrate log in to the proxy as the application user with an IAM token;
// PayloadFunctions may also read the payload key secret.
func newFunctions(s awscdk.Stack, p Props, n *Network, d *Database, proxy awsrds.DatabaseProxy, key awssecretsmanager.ISecret, logKey awskms.IKey) map[string]awslambda.Function {
	common := map[string]string{
		EnvDBHost:    *proxy.Endpoint(),
		EnvDBPort:    strconv.Itoa(DefaultDBPort),
		EnvDBName:    p.DatabaseName,
		EnvDBUser:    p.AppUser,
		EnvDBIAMAuth: "true",
		EnvDBSSLMode: DBSSLMode, // verify-full: see tls.go
		EnvMaxWaitMS: strconv.FormatFloat(p.MaxWaitMS, 'f', -1, 64),
		EnvLogLevel:  p.LogLevel,
		// Every function applies the deployment's retention defaults (a push
		// creates queues, configure and the listings echo options, the reaper
		// applies retention).
		EnvDefaultRetention: RetentionEnv(p.DefaultRetentionSeconds),
		EnvDefaultCompleted: RetentionEnv(p.DefaultCompletedRetentionSeconds),
	}
	timeouts := map[string]float64{
		"push": p.FunctionTimeoutSec, "pop": p.PopTimeoutSec, "ack": p.FunctionTimeoutSec,
		"dlq": p.FunctionTimeoutSec, "admin": p.FunctionTimeoutSec,
		"reaper": p.ReaperTimeoutSec, "migrate": p.MigrateTimeoutSec,
		DispatchFunction: DispatchTimeoutSec,
	}

	fns := make(map[string]awslambda.Function, len(p.Functions()))
	for _, name := range p.Functions() {
		env := make(map[string]string, len(common)+4)
		for k, v := range common {
			env[k] = v
		}
		for k, v := range subscriptionEnv(p, name) {
			env[k] = v
		}
		sg := n.FunctionsSG
		if slices.Contains(PayloadFunctions, name) {
			env[EnvEncryptionKeySecretARN] = *key.SecretArn()
		}
		switch name {
		case "push":
			env[EnvDefaultQueue] = p.EventQueue
			env[EnvDefaultPartition] = p.EventPartition
			if p.EventPartitionField != "" {
				env[EnvEventPartitionField] = p.EventPartitionField
			}
		case "migrate":
			// Migrate logs in directly to the database as the master user with the
			// password it reads from the secret at run time, creates the schema and
			// the application role (granted rds_iam), then exits.
			env[EnvDBHost] = *d.Host
			env[EnvDBIAMAuth] = "false"
			env[EnvDBSecretARN] = *d.Secret.SecretArn()
			// The database's certificate comes from the RDS CA, which the layer
			// below provides (tls.go).
			env[EnvPGSSLRootCert] = RDSCABundlePath
			sg = n.MigrateSG
		case DispatchFunction:
			// It starts its own next run when its time runs out: its own name, as
			// the functions that start it get it (subscriptions.go).
			env[EnvDispatchFunction] = dispatchFunctionName(s)
			// With URL targets allowed it has a group of its own, which lets it out
			// to them (network.go).
			if n.DispatchSG != nil {
				sg = n.DispatchSG
			}
		}
		fns[name] = newFunction(s, p, n, name, timeouts[name], sg, env, logKey)
		if name == "migrate" {
			fns[name].AddLayers(newRDSCALayer(s))
		}
		if c, ok := p.ReservedConcurrency()[name]; ok && c != Unreserved {
			fns[name].Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(jsii.Number(c))
		}
	}

	for _, name := range p.Functions() {
		if name != "migrate" {
			proxy.GrantConnect(fns[name], jsii.String(p.AppUser))
		}
	}
	// Only migrate may read the master secret, and only GetSecretValue on that one.
	fns["migrate"].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
		Resources: jsii.Strings(*d.Secret.SecretArn()),
	}))
	// PayloadFunctions may read the payload key, and only GetSecretValue on that one
	// secret (DescribeSecret, which GrantRead would add, is not needed).
	for _, name := range p.Functions() {
		if !slices.Contains(PayloadFunctions, name) {
			continue
		}
		fns[name].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
			Resources: jsii.Strings(*key.SecretArn()),
		}))
	}
	return fns
}

func newFunction(s awscdk.Stack, p Props, n *Network, name string, timeoutSec float64, sg awsec2.ISecurityGroup, env map[string]string, logKey awskms.IKey) awslambda.Function {
	id := upperFirst(name)
	logs := newLogGroup(s, p, id+"Logs", logKey)
	envp := make(map[string]*string, len(env))
	for k, v := range env {
		envp[k] = jsii.String(v)
	}
	fp := &awslambda.FunctionProps{
		Description:    jsii.String(functionDescriptions[name]),
		Runtime:        awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:   awslambda.Architecture_ARM_64(),
		Handler:        jsii.String("bootstrap"),
		Code:           awslambda.Code_FromAsset(jsii.String(filepath.Join(p.AssetsDir, name)), nil),
		MemorySize:     jsii.Number(p.FunctionMemoryMB),
		Timeout:        awscdk.Duration_Seconds(jsii.Number(timeoutSec)),
		Environment:    &envp,
		Vpc:            n.Vpc,
		VpcSubnets:     n.FunctionSubnets,
		SecurityGroups: &[]awsec2.ISecurityGroup{sg},
		LogGroup:       logs,
	}
	if name == DispatchFunction {
		dispatchFunctionProps(s, fp)
	}
	return awslambda.NewFunction(s, jsii.String(id+"Function"), fp)
}
