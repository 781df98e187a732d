// Command migrate is the deploy-time migration entry point: the onEvent
// handler of the CDK custom resource provider. On Create and Update it
// applies the schema migrations and ensures the application role
// (QUEEN_DB_USER, granted rds_iam on RDS); on Delete it does nothing. It
// logs in as the master user with the credentials of QUEEN_DB_SECRET_ARN,
// read at run time (or DATABASE_URL when set). A direct invocation with {}
// is a Create.
package main

import (
	"github.com/queen-serverless/queen/core/dbconn"
	"github.com/queen-serverless/queen/core/lambdafn"
	"github.com/queen-serverless/queen/core/provision"
	"github.com/queen-serverless/queen/core/secrets"
)

func main() {
	fn := lambdafn.Init("migrate")
	h := &provision.Handler{
		Connect: provision.MasterConnector(fn.Config, secrets.SecretsManager(dbconn.LoadDefaultAWSConfig)),
		AppRole: fn.Config.DBUser,
		Logger:  fn.Logger,
	}
	fn.Start(lambdafn.Bounded(h.Invoke))
}
