package queenstack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// newMonitoringKey defines the customer-managed KMS key (rotated yearly) that encrypts
// what the stack records about itself: every log group (the functions', the API's
// access log, the VPC flow log, the migration provider's and the database's exported
// logs), the alarm topic and Performance Insights. Its policy lets CloudWatch Logs use
// it for log groups of this account and Region, and CloudWatch alarms publish to the
// encrypted topic (the AWS-managed SNS key would refuse them); the account's IAM
// policies decide the rest (CDK's default key policy). Payloads are sealed with their
// own key ring (encryption.go), not with this key.
//
// It is kept unless the removal policy is DESTROY, like the payload key: the
// database's exported log groups, which RDS owns, outlive the stack and stay readable
// only while the key exists.
func newMonitoringKey(s awscdk.Stack, p Props) awskms.Key {
	key := awskms.NewKey(s, jsii.String("MonitoringKey"), &awskms.KeyProps{
		Description:       jsii.String("Queen Serverless: log groups, alarm topic and Performance Insights of stack " + *s.StackName()),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     keyRemoval(p),
	})
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchLogsEncryptsThisAccountsLogGroups"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("logs."+*s.Region()+".amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]interface{}{
			"ArnLike": map[string]interface{}{"kms:EncryptionContext:aws:logs:arn": *s.FormatArn(&awscdk.ArnComponents{
				Service: jsii.String("logs"), Resource: jsii.String("log-group"), ResourceName: jsii.String("*"),
				ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
			})},
		},
	}), nil)
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublishToTheEncryptedTopic"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
	}), nil)
	return key
}

// newLogGroup is a log group of the stack: encrypted with the monitoring key, kept
// LogRetentionDays, deleted with the stack unless the removal policy is RETAIN.
func newLogGroup(s awscdk.Stack, p Props, id string, key awskms.IKey) awslogs.LogGroup {
	return awslogs.NewLogGroup(s, jsii.String(id), &awslogs.LogGroupProps{
		Retention:     retentionDays[p.LogRetentionDays],
		RemovalPolicy: removal(p),
		EncryptionKey: key,
	})
}
