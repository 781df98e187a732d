package provision

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// The master login to RDS verifies the server against the RDS CAs when
// sslmode asks for verification, and changes nothing otherwise.
func TestTrustRDS(t *testing.T) {
	for mode, wantPool := range map[string]bool{"verify-full": true, "verify-ca": true, "require": false, "disable": false, "prefer": false} {
		cc, err := pgx.ParseConfig("postgres://queen_admin@db.example.eu-west-1.rds.amazonaws.com:5432/queen?sslmode=" + mode)
		if err != nil {
			t.Fatal(err)
		}
		if err := trustRDS(cc); err != nil {
			t.Fatal(err)
		}
		got := cc.TLSConfig != nil && cc.TLSConfig.RootCAs != nil
		if got != wantPool {
			t.Errorf("sslmode=%s: RDS CA pool set %v, want %v", mode, got, wantPool)
		}
		if mode == "verify-full" && cc.TLSConfig.ServerName != "db.example.eu-west-1.rds.amazonaws.com" {
			t.Errorf("verify-full checks the name %q", cc.TLSConfig.ServerName)
		}
	}
}
