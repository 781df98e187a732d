package rdsca_test

import (
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/queen-serverless/queen/core/rdsca"
)

// The bundle holds the RDS root CAs of the 2024 rotation, every one a
// valid CA certificate, and builds a pool.
func TestBundle(t *testing.T) {
	rest := rdsca.PEM()
	var roots []string
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !c.IsCA {
			t.Errorf("%s is not a CA certificate", c.Subject)
		}
		roots = append(roots, c.Subject.CommonName)
	}
	if len(roots) < 100 {
		t.Fatalf("%d certificates, want the bundle of every region", len(roots))
	}
	for _, want := range []string{"Amazon RDS us-east-1 Root CA RSA2048 G1", "Amazon RDS eu-west-1 Root CA ECC384 G1"} {
		found := false
		for _, r := range roots {
			found = found || strings.EqualFold(r, want)
		}
		if !found {
			t.Errorf("no %q in the bundle", want)
		}
	}
	if _, err := rdsca.Pool(); err != nil {
		t.Fatal(err)
	}
}
