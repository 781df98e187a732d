package secrets_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/secrets"
)

const hexKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func TestKeyLoader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if secrets.KeyLoader(config.Config{}, nil) != nil {
		t.Error("a loader without any key source")
	}

	// The secret is read when the loader runs, not before, and its value
	// is the key ring (a generated secret is a bare 64-digit hex key).
	reads := 0
	value := hexKey
	read := func(_ context.Context, arn string) (string, error) {
		reads++
		if arn != "arn:aws:secretsmanager:eu-west-1:1:secret:key" {
			t.Errorf("read %s", arn)
		}
		return value, nil
	}
	load := secrets.KeyLoader(config.Config{EncryptionKeySecretARN: "arn:aws:secretsmanager:eu-west-1:1:secret:key",
		EncryptionKey: "k9:" + hexKey}, read)
	if reads != 0 {
		t.Fatal("the secret was read before it was needed")
	}
	ring, err := load(ctx)
	if err != nil || reads != 1 || ring.Current() != "k1" {
		t.Fatalf("loaded %v %v after %d reads, want the secret's key k1", ring, err, reads)
	}

	// A malformed secret names the secret, never its value.
	value = "k2:" + hexKey[:40]
	if _, err := load(ctx); err == nil || !strings.Contains(err.Error(), "secret:key") || strings.Contains(err.Error(), hexKey[:40]) {
		t.Errorf("malformed secret: %v", err)
	}
	failing := secrets.KeyLoader(config.Config{EncryptionKeySecretARN: "arn:x"},
		func(context.Context, string) (string, error) { return "", errors.New("AccessDenied") })
	if _, err := failing(ctx); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("failed read: %v", err)
	}

	// Locally: QUEEN_ENCRYPTION_KEY.
	ring, err = secrets.KeyLoader(config.Config{EncryptionKey: "k9:" + hexKey}, nil)(ctx)
	if err != nil || ring.Current() != "k9" {
		t.Fatalf("env key: %v %v", ring, err)
	}
}
