// Package secrets reads secret material at run time, never from a plain
// environment variable on AWS: Secrets Manager secrets (the database master
// credentials, the key ring of encrypted queues), and the key ring's local
// sources (QUEEN_ENCRYPTION_KEY, a key file of `queen serve`).
package secrets

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/crypt"
	"github.com/queen-serverless/queen/core/dbconn"
	"github.com/queen-serverless/queen/core/pgstore"
)

// Reader reads a secret's string value.
type Reader func(ctx context.Context, arn string) (string, error)

// SecretsManager reads secrets with the AWS SDK, its configuration loaded
// by loadAWS (dbconn.LoadDefaultAWSConfig in production).
func SecretsManager(loadAWS dbconn.AWSConfigLoader) Reader {
	return func(ctx context.Context, arn string) (string, error) {
		awsCfg, err := loadAWS(ctx)
		if err != nil {
			return "", fmt.Errorf("load AWS config: %w", err)
		}
		out, err := secretsmanager.NewFromConfig(awsCfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &arn})
		if err != nil {
			return "", err
		}
		if out.SecretString == nil {
			return "", errors.New("the secret has no string value")
		}
		return *out.SecretString, nil
	}
}

// KeyLoader returns where the store finds the key ring of encrypted
// queues, per cfg: the Secrets Manager secret QUEEN_ENCRYPTION_KEY_SECRET_ARN
// read with read the first time an encrypted queue needs it (so a
// deployment without encrypted queues never calls Secrets Manager), else
// QUEEN_ENCRYPTION_KEY (validated by config), else nil: no key.
func KeyLoader(cfg config.Config, read Reader) pgstore.KeyLoader {
	switch {
	case cfg.EncryptionKeySecretARN != "":
		arn := cfg.EncryptionKeySecretARN
		return func(ctx context.Context) (*crypt.Ring, error) {
			s, err := read(ctx, arn)
			if err != nil {
				return nil, fmt.Errorf("read the encryption key secret %s: %w", arn, err)
			}
			ring, err := crypt.Parse(s)
			if err != nil {
				return nil, fmt.Errorf("the encryption key secret %s: %w", arn, err)
			}
			return ring, nil
		}
	case cfg.EncryptionKey != "":
		ring, err := crypt.Parse(cfg.EncryptionKey)
		return func(context.Context) (*crypt.Ring, error) { return ring, err }
	}
	return nil
}

// Ring returns a loader that hands out ring.
func Ring(ring *crypt.Ring) pgstore.KeyLoader {
	return func(context.Context) (*crypt.Ring, error) { return ring, nil }
}
