package queenstack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/jsii-runtime-go"
)

// DatabaseLogExports are the PostgreSQL logs the database publishes to CloudWatch
// Logs: the server log (errors, slow statements, connections as the parameter group
// says) and, on an RDS instance, the log of major version upgrades (Aurora
// PostgreSQL has no such log).
func DatabaseLogExports(e Engine) []string {
	if e == EngineAurora {
		return []string{"postgresql"}
	}
	return []string{"postgresql", "upgrade"}
}

// newDatabaseLogGroups gives the database's exported log groups the stack's retention
// and encryption. RDS names them after the instance or cluster
// (/aws/rds/instance/<id>/<log>, /aws/rds/cluster/<id>/<log>) and creates them
// itself when it first writes, so CloudFormation cannot own them. Once the database
// exists, three AWS SDK calls per log (CDK's AwsCustomResource, one Node.js function
// outside the VPC) create the group encrypted with key unless RDS already did,
// associate key with it (which encrypts what RDS writes from then on) and set
// LogRetentionDays. The groups outlive the stack, as RDS's own would; with DESTROY
// the key is disassociated first, since it is deleted with the stack.
func newDatabaseLogGroups(s awscdk.Stack, p Props, d *Database, key awskms.IKey) []*string {
	kind := "instance"
	if p.Engine == EngineAurora {
		kind = "cluster"
	}
	// Ref of the DBInstance or DBCluster is its identifier.
	id := d.Resource.Ref()
	handlerLogs := newLogGroup(s, p, "DatabaseLogGroupsHandlerLogs", key)

	var names []*string
	for _, log := range DatabaseLogExports(p.Engine) {
		name := jsii.String("/aws/rds/" + kind + "/" + *id + "/" + log)
		names = append(names, name)
		arn := s.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("logs"), Resource: jsii.String("log-group"), ResourceName: name,
			ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
		})
		call := func(action string, params map[string]interface{}) *customresources.AwsSdkCall {
			return &customresources.AwsSdkCall{
				Service:            jsii.String("CloudWatchLogs"),
				Action:             jsii.String(action),
				Parameters:         params,
				PhysicalResourceId: customresources.PhysicalResourceId_Of(name),
			}
		}
		policy := func(action string) customresources.AwsCustomResourcePolicy {
			return customresources.AwsCustomResourcePolicy_FromStatements(&[]awsiam.PolicyStatement{
				awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Actions:   jsii.Strings("logs:" + action),
					Resources: &[]*string{arn, jsii.String(*arn + ":*")},
				}),
			})
		}
		// CloudWatch Logs evaluates a log group's actions against its ARN with the
		// ":*" of its streams, so each grant names both forms of this one group.
		wildcard := "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/rds/" + kind +
			"/<" + *s.GetLogicalId(d.Resource) + ">/" + log + ":*"
		sdk := func(cid string, props *customresources.AwsCustomResourceProps) customresources.AwsCustomResource {
			props.InstallLatestAwsSdk = jsii.Bool(false)
			props.LogGroup = handlerLogs
			cr := customresources.NewAwsCustomResource(s, jsii.String(cid), props)
			cr.Node().AddDependency(d.Construct)
			suppress(cr, "AwsSolutions-IAM5", "The grant names one log group, the database's "+log+" log, in both "+
				"forms CloudWatch Logs evaluates: its ARN and its ARN with \":*\" (the group's streams).", wildcard)
			return cr
		}
		id := "DatabaseLogs" + upperFirst(log)

		create := call("createLogGroup", map[string]interface{}{"logGroupName": name, "kmsKeyId": key.KeyArn()})
		create.IgnoreErrorCodesMatching = jsii.String("ResourceAlreadyExistsException")
		created := sdk(id+"Group", &customresources.AwsCustomResourceProps{
			OnCreate: create, OnUpdate: create, Policy: policy("CreateLogGroup"),
		})

		associate := call("associateKmsKey", map[string]interface{}{"logGroupName": name, "kmsKeyId": key.KeyArn()})
		props := &customresources.AwsCustomResourceProps{OnCreate: associate, OnUpdate: associate, Policy: policy("AssociateKmsKey")}
		if keyRemoval(p) == awscdk.RemovalPolicy_DESTROY {
			disassociate := call("disassociateKmsKey", map[string]interface{}{"logGroupName": name})
			disassociate.IgnoreErrorCodesMatching = jsii.String("ResourceNotFoundException")
			props.OnDelete = disassociate
			props.Policy = customresources.AwsCustomResourcePolicy_FromStatements(&[]awsiam.PolicyStatement{
				awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Actions:   jsii.Strings("logs:AssociateKmsKey", "logs:DisassociateKmsKey"),
					Resources: &[]*string{arn, jsii.String(*arn + ":*")},
				}),
			})
		}
		sdk(id+"Encryption", props).Node().AddDependency(created)

		retention := call("putRetentionPolicy", map[string]interface{}{"logGroupName": name, "retentionInDays": p.LogRetentionDays})
		sdk(id+"Retention", &customresources.AwsCustomResourceProps{
			OnCreate: retention, OnUpdate: retention, Policy: policy("PutRetentionPolicy"),
		}).Node().AddDependency(created)
	}
	suppressSDKCallFunction(s)
	return names
}

// sdkCallFunctionID is the construct id CDK gives the one function behind every
// AwsCustomResource of a stack.
const sdkCallFunctionID = "AWS679f53fac002430cb0da5b7982bd2287"

// suppressSDKCallFunction records why cdk-nag's findings on the function behind the
// AwsCustomResources do not apply.
func suppressSDKCallFunction(s awscdk.Stack) {
	fn := s.Node().TryFindChild(jsii.String(sdkCallFunctionID))
	if fn == nil {
		return
	}
	why := "CDK's AwsCustomResource function, invoked by CloudFormation on deploys only to make a few SDK calls " +
		"on the database's log groups: "
	suppress(fn, "AwsSolutions-IAM4", why+"its role has the basic execution policy (its own logs, encrypted); "+
		"each call's grant is a separate policy scoped to one log group.", lambdaBasicExecutionPolicy)
	suppress(fn, "Serverless-LambdaTracing", why+"it has nothing to trace.")
	suppress(fn, "Serverless-LambdaDLQ", why+"synchronously: a failure fails the deploy, which CloudFormation reports.")
	suppress(fn, "Serverless-LambdaDefaultMemorySize", why+"128 MB is plenty for one SDK call.")
}
