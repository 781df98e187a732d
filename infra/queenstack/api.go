package queenstack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// accessLogFormat is one JSON object per request. Variables that do not apply to the
// chosen authorizer are logged as "-".
const accessLogFormat = `{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",` +
	`"requestTime":"$context.requestTime","method":"$context.httpMethod","routeKey":"$context.routeKey",` +
	`"path":"$context.path","status":"$context.status","protocol":"$context.protocol",` +
	`"responseLength":"$context.responseLength","latencyMs":"$context.responseLatency",` +
	`"integrationLatencyMs":"$context.integrationLatency","integrationError":"$context.integrationErrorMessage",` +
	`"authorizerError":"$context.authorizer.error","iamUser":"$context.identity.userArn",` +
	`"jwtSub":"$context.authorizer.claims.sub"}`

// newAPI defines the HTTP API: every route of Routes on its function's Lambda proxy
// integration (payload format 2.0), the chosen authorizer on every route, and one
// auto-deployed $default stage with throttling and JSON access logs.
func newAPI(s awscdk.Stack, p Props, fns map[string]awslambda.Function, logKey awskms.IKey) (awsapigatewayv2.HttpApi, awsapigatewayv2.HttpStage) {
	var auth awsapigatewayv2.IHttpRouteAuthorizer
	switch p.Authorizer {
	case AuthorizerJWT:
		auth = awsapigatewayv2authorizers.NewHttpJwtAuthorizer(jsii.String("JwtAuthorizer"), jsii.String(p.JWTIssuer),
			&awsapigatewayv2authorizers.HttpJwtAuthorizerProps{JwtAudience: jsii.Strings(p.JWTAudience...)})
	default:
		auth = awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	}
	api := awsapigatewayv2.NewHttpApi(s, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String(*s.StackName() + "-api"),
		Description:        jsii.String("Queen Serverless v1 API"),
		CreateDefaultStage: jsii.Bool(false),
		DefaultAuthorizer:  auth,
	})

	integrations := make(map[string]awsapigatewayv2integrations.HttpLambdaIntegration)
	for _, name := range FunctionNames {
		integrations[name] = awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(name+"Integration"), fns[name],
			&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
				PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
				// One invoke permission per function for the whole API keeps the
				// function policies small (admin serves eleven routes).
				ScopePermissionToRoute: jsii.Bool(false),
			})
	}
	for _, r := range Routes {
		opts := &awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
			Integration: integrations[r.Function],
		}
		if p.Authorizer == AuthorizerJWT {
			opts.AuthorizationScopes = jsii.Strings(r.Scopes()...)
		}
		api.AddRoutes(opts)
	}

	accessLogs := newLogGroup(s, p, "ApiAccessLogs", logKey)
	stage := api.AddStage(jsii.String("DefaultStage"), &awsapigatewayv2.HttpStageOptions{
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(p.ThrottleRateLimit),
			BurstLimit: jsii.Number(p.ThrottleBurstLimit),
		},
	})
	cfnStage := stage.Node().DefaultChild().(awsapigatewayv2.CfnStage)
	cfnStage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format:         jsii.String(accessLogFormat),
	})
	return api, stage
}
