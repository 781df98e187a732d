// Command infra is the AWS CDK app of Queen Serverless. The CDK CLI runs it (cdk.json:
// `go run .`); settings come from `-c key=value` context (queenstack.PropsFromContext), plus
// stackName, migrateEveryDeploy and migrationNonce read here. The stack checks itself
// with cdk-nag as it is synthesized (queenstack.NagPacks): `cdk synth` and `cdk deploy`
// fail on a finding that is neither fixed nor suppressed with a reason.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/queen-serverless/queen/infra/queenstack"
)

// DefaultStackName is the CloudFormation stack name unless `-c stackName=...` is given.
const DefaultStackName = "QueenServerless"

func main() {
	defer jsii.Close()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run() error {
	app := awscdk.NewApp(nil)
	lookup := func(key string) any { return app.Node().TryGetContext(jsii.String(key)) }

	props, err := queenstack.PropsFromContext(lookup)
	if err != nil {
		return err
	}
	// Run the migrations on every deploy unless -c migrateEveryDeploy=false; a fixed
	// -c migrationNonce=... makes the template reproducible.
	props.MigrationNonce = time.Now().UTC().Format(time.RFC3339Nano)
	if v := lookup("migrateEveryDeploy"); v != nil {
		if every, err := strconv.ParseBool(fmt.Sprint(v)); err != nil {
			return fmt.Errorf("context migrateEveryDeploy=%v: want true or false", v)
		} else if !every {
			props.MigrationNonce = ""
		}
	}
	if v := lookup("migrationNonce"); v != nil {
		props.MigrationNonce = fmt.Sprint(v)
	}

	name := DefaultStackName
	if v := lookup("stackName"); v != nil {
		name = fmt.Sprint(v)
	}
	if _, err := queenstack.New(app, name, &awscdk.StackProps{StackName: jsii.String(name)}, props); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}
