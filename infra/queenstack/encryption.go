package queenstack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
)

// PayloadFunctions are the functions that seal or open message payloads of queues with
// encryptionEnabled: push writes them, pop returns them, ack writes them (a transaction
// pushes), dlq returns and re-enqueues them, admin browses them, dispatch (when the
// stack has it) delivers them to subscription targets. Each one gets
// EnvEncryptionKeySecretARN and GetSecretValue on the key secret; the reaper and migrate
// never see a payload and get neither.
var PayloadFunctions = []string{"push", "pop", "ack", "dlq", "admin", DispatchFunction}

// Payload key generation: 64 characters from 0-9a-f, i.e. a bare AES-256 key in hex,
// which the key ring reads as its only key, id "k1". Secrets Manager draws from lower-
// and upper-case letters, digits and punctuation (and the space when asked); removing
// the upper case, the punctuation and g-z leaves exactly the hex digits.
const (
	payloadKeyLength   = 64
	payloadKeyExcluded = "ghijklmnopqrstuvwxyz"
)

// newEncryptionKey defines the Secrets Manager secret holding the payload key ring, in
// QUEEN_ENCRYPTION_KEY's form. The functions fetch it at run time, the first time an
// encrypted queue needs it; its value never appears in the template or an environment.
//
// Encryption at rest: the AWS-managed key aws/secretsmanager. Access is decided by IAM
// on this one secret (GetSecretValue for PayloadFunctions only); a customer-managed KMS
// key would add $1/month and a key policy to keep in step with those grants, and buys
// nothing this stack uses (cross-account access, a key policy separate from IAM). In
// cdk-nag, the rule that asks for one (SecretsManagerUsingKMSKey) belongs to the
// compliance packs (HIPAA, NIST 800-53, PCI DSS), not to AwsSolutions or Serverless.
//
// No automatic rotation (cdk-nag AwsSolutions-SMG4 flags that; suppressed below with
// this reason): a rotation Lambda that replaced the value would drop the old key and
// with it every payload the old key sealed. Rotation is manual and additive: the
// operator sets the value to "k2:<64 new hex digits>,k1:<the current value>" (newest
// first; with several entries each needs its id, and the generated bare key is k1).
// New payloads are sealed with k2 once a container fetches the ring again (a new
// container); rows sealed with k1 stay readable as long as k1 stays in the ring.
//
// Never change the construct id or the generation settings after the first deploy:
// CloudFormation replaces the secret (or generates a new value) when they change, and
// the functions would then hold a new key that opens none of the stored payloads.
func newEncryptionKey(s awscdk.Stack, p Props) awssecretsmanager.Secret {
	key := awssecretsmanager.NewSecret(s, jsii.String("EncryptionKeySecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("Queen payload encryption key ring for encryptionEnabled queues: " +
			"id:key entries (64 hex digits), newest first; a bare key is k1. Rotate by prepending, never by replacing."),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:          jsii.Number(payloadKeyLength),
			ExcludeUppercase:        jsii.Bool(true),
			ExcludePunctuation:      jsii.Bool(true),
			ExcludeCharacters:       jsii.String(payloadKeyExcluded),
			IncludeSpace:            jsii.Bool(false),
			RequireEachIncludedType: jsii.Bool(false),
		},
		RemovalPolicy: keyRemoval(p),
	})
	suppress(key, "AwsSolutions-SMG4",
		"Rotation is manual and additive: a rotation function that replaced the value would drop the old key "+
			"and with it every payload sealed with it. Rotate by prepending a new key to the ring (see newEncryptionKey).")
	return key
}

// keyRemoval is the removal policy of the payload key: kept whenever the database's data
// outlives the stack, deleted only with DESTROY. Unlike the master secret (removal(p)),
// it is kept under SNAPSHOT too: the final snapshot holds sealed payloads that this key
// alone opens, whereas a restored snapshot simply gets a new master password. Losing the
// key loses every encrypted payload, so it is also kept when CloudFormation replaces it.
func keyRemoval(p Props) awscdk.RemovalPolicy {
	if p.RemovalPolicy == awscdk.RemovalPolicy_DESTROY {
		return awscdk.RemovalPolicy_DESTROY
	}
	return awscdk.RemovalPolicy_RETAIN
}
