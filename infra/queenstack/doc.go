// Package queenstack defines the AWS CDK stack of Queen Serverless: one env-agnostic
// CloudFormation stack that needs no AWS account to synthesize.
//
// The request path is
//
//	caller ──HTTPS──▶ HTTP API (IAM or JWT authorizer, throttled, access-logged)
//	       ──▶ push | pop | ack | dlq | admin  (Lambda, arm64, provided.al2023, in the VPC)
//	       ──IAM token, TLS verify-full──▶ RDS Proxy (end-to-end IAM auth, TLS required)
//	       ──IAM──▶ PostgreSQL (RDS instance or Aurora Serverless v2, encrypted, private)
//
// and beside it: the reaper on an EventBridge schedule, an optional SQS ingest queue
// feeding push with partial-batch responses, an alarmed SQS queue keeping the events of
// push's asynchronous invocations (SNS, EventBridge) that still fail after Lambda's two
// retries (its on-failure destination), and a custom resource that invokes the
// migrate function on every create and update, before the API, the schedule, the
// ingest mapping and the code of every other function are created or updated (so an
// upgrade never runs new code against old SQL routines). Migrate is the only function that reads the master secret; it
// connects directly to the database (the proxy only admits IAM logins of roles granted
// rds_iam, which migrate is the one to create). Payloads of queues with
// encryptionEnabled are sealed in the functions with a key ring kept in a second secret,
// which push, pop, ack, dlq and admin read at run time (never through the environment).
//
// With SubscriptionTargets declared or URL targets allowed (SubscriptionURLAllow), a
// dispatch function delivers subscriptions (docs/subscriptions.md): push, ack, dlq,
// admin and the reaper start it with an asynchronous invoke, it invokes the declared
// target functions synchronously, posts to URL targets through the egress fence, and
// hands over to its next run by invoking itself; the functions reach the Lambda API
// through an interface endpoint. Without either none of it exists; admin, which checks
// a subscription's target when one is created, is told what the deployment allows
// either way (URL targets "none" by default).
//
// What the stack records about itself (every log group, the database's exported logs,
// Performance Insights, the alarm topic) is encrypted with its own KMS key.
//
// The VPC has isolated subnets only (no NAT, no internet gateway). Security groups allow
// functions → proxy → database on 5432, migrate → database on 5432, migrate and the
// functions → the Secrets Manager interface endpoint on 443, with subscriptions the
// functions → the Lambda interface endpoint on 443, and nothing else; but for a
// dispatcher that may reach URL targets (SubscriptionURLAllow), which has a group of
// its own with the same rules and TCP out to those targets on 80, 443 and
// SubscriptionURLPorts (the stack adds no route to them).
package queenstack
