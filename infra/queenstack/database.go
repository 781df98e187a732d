package queenstack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/jsii-runtime-go"
	"github.com/queen-serverless/queen/core/pgstore"
)

// newDatabase defines the PostgreSQL server: private, encrypted, IAM authentication on,
// automated backups on. The master password is RDS-managed: RDS generates it into a
// Secrets Manager secret it owns and rotates every 7 days (cdk-nag AwsSolutions-SMG4),
// and deletes it with the database. Only migrate reads it, at deploy time, so a
// rotation never disturbs traffic (the functions log in with IAM tokens).
//
// Performance Insights is on (7 days, the free tier), encrypted with key, and the
// server's logs go to CloudWatch Logs (DatabaseLogExports; see newDatabaseLogGroups).
// A parameter group of its own sets pgstore.ServerSettings, the parameters the engine
// is tuned for.
func newDatabase(s awscdk.Stack, p Props, n *Network, key awskms.IKey) *Database {
	creds := awsrds.Credentials_FromUsername(jsii.String(p.MasterUser), nil)
	protect := jsii.Bool(p.RemovalPolicy == awscdk.RemovalPolicy_RETAIN)
	sgs := &[]awsec2.ISecurityGroup{n.DatabaseSG}

	var d Database
	switch p.Engine {
	case EngineAurora:
		engine := awsrds.DatabaseClusterEngine_AuroraPostgres(&awsrds.AuroraPostgresClusterEngineProps{
			Version: awsrds.AuroraPostgresEngineVersion_VER_17_7(),
		})
		var readers *[]awsrds.IClusterInstance
		if p.MultiAZ {
			// A reader in the same tier as the writer scales with it, so it can
			// take over at once.
			readers = &[]awsrds.IClusterInstance{awsrds.ClusterInstance_ServerlessV2(jsii.String("reader"), &awsrds.ServerlessV2ClusterInstanceProps{
				PubliclyAccessible:              jsii.Bool(false),
				AutoMinorVersionUpgrade:         jsii.Bool(true),
				ScaleWithWriter:                 jsii.Bool(true),
				EnablePerformanceInsights:       jsii.Bool(true),
				PerformanceInsightEncryptionKey: key,
				PerformanceInsightRetention:     awsrds.PerformanceInsightRetention_DEFAULT,
			})}
		}
		c := awsrds.NewDatabaseCluster(s, jsii.String("Database"), &awsrds.DatabaseClusterProps{
			Engine:         engine,
			ParameterGroup: newParameterGroup(s, engine),
			Writer: awsrds.ClusterInstance_ServerlessV2(jsii.String("writer"), &awsrds.ServerlessV2ClusterInstanceProps{
				PubliclyAccessible:      jsii.Bool(false),
				AutoMinorVersionUpgrade: jsii.Bool(true),
				// The cluster's Performance Insights, said again so that CDK
				// sees the instances agree.
				EnablePerformanceInsights:       jsii.Bool(true),
				PerformanceInsightEncryptionKey: key,
				PerformanceInsightRetention:     awsrds.PerformanceInsightRetention_DEFAULT,
			}),
			Readers:                         readers,
			CloudwatchLogsExports:           jsii.Strings(DatabaseLogExports(EngineAurora)...),
			EnablePerformanceInsights:       jsii.Bool(true),
			PerformanceInsightEncryptionKey: key,
			PerformanceInsightRetention:     awsrds.PerformanceInsightRetention_DEFAULT,
			ServerlessV2MinCapacity:         jsii.Number(p.AuroraMinCapacity),
			ServerlessV2MaxCapacity:         jsii.Number(p.AuroraMaxCapacity),
			Vpc:                             n.Vpc,
			VpcSubnets:                      n.DatabaseSubnets,
			SecurityGroups:                  sgs,
			Credentials:                     creds,
			ManageMasterUserPassword:        jsii.Bool(true),
			DefaultDatabaseName:             jsii.String(p.DatabaseName),
			IamAuthentication:               jsii.Bool(true),
			StorageEncrypted:                jsii.Bool(true),
			Backup:                          &awsrds.BackupProps{Retention: awscdk.Duration_Days(jsii.Number(p.BackupRetentionDays))},
			CopyTagsToSnapshot:              jsii.Bool(true),
			DeletionProtection:              protect,
			RemovalPolicy:                   p.RemovalPolicy,
		})
		d = Database{
			Construct:   c,
			Resource:    c.Node().DefaultChild().(awscdk.CfnResource),
			ResourceID:  c.ClusterResourceIdentifier(),
			Host:        c.ClusterEndpoint().Hostname(),
			Secret:      c.Secret(),
			Target:      awsrds.ProxyTarget_FromCluster(c),
			CPU:         c.MetricCPUUtilization(nil),
			Connections: c.MetricDatabaseConnections(nil),
			Metric: func(name string, opts *awscloudwatch.MetricOptions) awscloudwatch.Metric {
				return c.Metric(jsii.String(name), opts)
			},
		}
	default:
		engine := awsrds.DatabaseInstanceEngine_Postgres(&awsrds.PostgresInstanceEngineProps{
			// Major version only: RDS picks the current minor and upgrades it.
			Version: awsrds.PostgresEngineVersion_VER_17(),
		})
		i := awsrds.NewDatabaseInstance(s, jsii.String("Database"), &awsrds.DatabaseInstanceProps{
			Engine:                          engine,
			ParameterGroup:                  newParameterGroup(s, engine),
			InstanceType:                    awsec2.NewInstanceType(jsii.String(p.InstanceType)),
			Vpc:                             n.Vpc,
			VpcSubnets:                      n.DatabaseSubnets,
			SecurityGroups:                  sgs,
			Credentials:                     creds,
			ManageMasterUserPassword:        jsii.Bool(true),
			DatabaseName:                    jsii.String(p.DatabaseName),
			IamAuthentication:               jsii.Bool(true),
			StorageEncrypted:                jsii.Bool(true),
			PubliclyAccessible:              jsii.Bool(false),
			MultiAz:                         jsii.Bool(p.MultiAZ),
			StorageType:                     awsrds.StorageType_GP3,
			AllocatedStorage:                jsii.Number(p.AllocatedStorageGiB),
			MaxAllocatedStorage:             jsii.Number(p.MaxAllocatedStorageGiB),
			CloudwatchLogsExports:           jsii.Strings(DatabaseLogExports(EngineInstance)...),
			EnablePerformanceInsights:       jsii.Bool(true),
			PerformanceInsightEncryptionKey: key,
			PerformanceInsightRetention:     awsrds.PerformanceInsightRetention_DEFAULT,
			BackupRetention:                 awscdk.Duration_Days(jsii.Number(p.BackupRetentionDays)),
			AutoMinorVersionUpgrade:         jsii.Bool(true),
			CopyTagsToSnapshot:              jsii.Bool(true),
			DeletionProtection:              protect,
			RemovalPolicy:                   p.RemovalPolicy,
		})
		d = Database{
			Construct:   i,
			Resource:    i.Node().DefaultChild().(awscdk.CfnResource),
			ResourceID:  i.InstanceResourceId(),
			Host:        i.InstanceEndpoint().Hostname(),
			Secret:      i.Secret(),
			Target:      awsrds.ProxyTarget_FromInstance(i),
			CPU:         i.MetricCPUUtilization(nil),
			Connections: i.MetricDatabaseConnections(nil),
			Metric: func(name string, opts *awscloudwatch.MetricOptions) awscloudwatch.Metric {
				return i.Metric(jsii.String(name), opts)
			},
		}
	}
	return &d
}

// newProxy defines the RDS Proxy with end-to-end IAM authentication (clients and the
// proxy itself log in with IAM tokens, no secrets) and TLS required. Its role may
// connect to the database as the application user only. Its pool is bounded: a borrow
// waits at most ProxyBorrowTimeoutSec (shorter than every function timeout, so a
// saturated pool gives 503s, not Lambda timeouts), and the proxy opens at most
// ProxyMaxConnectionsPercent of max_connections, leaving the rest for migrate.
func newProxy(s awscdk.Stack, p Props, n *Network, d *Database) awsrds.DatabaseProxy {
	role := awsiam.NewRole(s, jsii.String("ProxyRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("rds.amazonaws.com"), nil),
		Description: jsii.String("RDS Proxy: IAM login to the database as the Queen application user"),
	})
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("rds-db:connect"),
		Resources: jsii.Strings(*dbUserArn(s, d.ResourceID, p.AppUser)),
	}))
	proxy := awsrds.NewDatabaseProxy(s, jsii.String("Proxy"), &awsrds.DatabaseProxyProps{
		ProxyTarget:       d.Target,
		Vpc:               n.Vpc,
		VpcSubnets:        n.DatabaseSubnets,
		SecurityGroups:    &[]awsec2.ISecurityGroup{n.ProxySG},
		DefaultAuthScheme: awsrds.DefaultAuthScheme_IAM_AUTH,
		IamAuth:           jsii.Bool(true),
		RequireTLS:        jsii.Bool(true),
		Role:              role,
		DebugLogging:      jsii.Bool(false),

		BorrowTimeout:             awscdk.Duration_Seconds(jsii.Number(p.ProxyBorrowTimeoutSec)),
		MaxConnectionsPercent:     jsii.Number(p.ProxyMaxConnectionsPercent),
		MaxIdleConnectionsPercent: jsii.Number(p.ProxyMaxIdleConnectionsPercent),
	})
	return proxy
}

// dbUserArn is arn:aws:rds-db:<region>:<account>:dbuser:<resourceID>/<user>.
func dbUserArn(s awscdk.Stack, resourceID *string, user string) *string {
	return s.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("rds-db"),
		Resource:     jsii.String("dbuser"),
		ResourceName: jsii.String(*resourceID + "/" + user),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// newParameterGroup is the database's parameter group: the engine family's defaults
// with pgstore.ServerSettings. Every one of them is dynamic: RDS applies a change at
// once. (Moving an existing database from the default group to this one takes effect
// at its next reboot.)
func newParameterGroup(s awscdk.Stack, engine awsrds.IEngine) awsrds.IParameterGroup {
	params := map[string]*string{}
	for name, value := range pgstore.ServerSettings {
		params[name] = jsii.String(value)
	}
	return awsrds.NewParameterGroup(s, jsii.String("DatabaseParameters"), &awsrds.ParameterGroupProps{
		Engine:      engine,
		Description: jsii.String("Queen: the server parameters the engine is tuned for"),
		Parameters:  &params,
	})
}
