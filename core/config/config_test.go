package config_test

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/egress"
	"github.com/queen-serverless/queen/core/queen"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestFromEnvDefaults(t *testing.T) {
	t.Parallel()
	local, err := config.FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	// A queue that sets no retention keeps a week; 0 in the environment
	// keeps for ever.
	if st := local.Store(nil, nil); st.DefaultRetentionSeconds != 7*24*3600 || st.DefaultCompletedRetentionSeconds != 0 {
		t.Errorf("default retention %+v", st)
	}
	forever, err := config.FromEnv(env(map[string]string{"QUEEN_DEFAULT_RETENTION_SECONDS": "0"}))
	if err != nil || forever.Store(nil, nil).DefaultRetentionSeconds != 0 {
		t.Errorf("QUEEN_DEFAULT_RETENTION_SECONDS=0: %+v %v", forever.Retention, err)
	}
	if local.Lambda || local.MaxWait != 30*time.Second || local.Port != 6632 || local.MaxBodyBytes != 6<<20 ||
		local.LogLevel != slog.LevelInfo || local.ReaperInterval != config.DefaultReaperInterval ||
		local.DefaultPartition != "Default" || local.DBPort != 5432 || local.HasDatabase() {
		t.Errorf("local defaults: %+v", local)
	}

	lambda, err := config.FromEnv(env(map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME": "queen-pop",
		"QUEEN_DB_HOST":            "proxy.example", "QUEEN_DB_NAME": "queen", "QUEEN_DB_USER": "queen_app",
		"QUEEN_DB_IAM_AUTH": "true", "QUEEN_DB_SSLMODE": "verify-full",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !lambda.Lambda || lambda.MaxWait != 20*time.Second || !lambda.DBIAMAuth || lambda.DBSSLMode != "verify-full" || !lambda.HasDatabase() {
		t.Errorf("lambda config: %+v", lambda)
	}
}

func TestFromEnvParses(t *testing.T) {
	t.Parallel()
	c, err := config.FromEnv(env(map[string]string{
		"DATABASE_URL":      "postgres://localhost/queen",
		"QUEEN_MAX_WAIT_MS": "1500", "QUEEN_MAX_BODY_BYTES": "1024", "QUEEN_LOG_LEVEL": "debug",
		"QUEEN_PORT": "7000", "QUEEN_REAPER_INTERVAL": "2s", "QUEEN_DB_PORT": "6543",
		"QUEEN_DEFAULT_QUEUE": "events", "QUEEN_DEFAULT_PARTITION": "p 1", "QUEEN_EVENT_PARTITION_FIELD": "customer.id",
		"QUEEN_DEFAULT_RETENTION_SECONDS": "3600", "QUEEN_DEFAULT_COMPLETED_RETENTION_SECONDS": "60",
		"QUEEN_DEFAULT_DLQ_RETENTION_SECONDS": "86400",
		"QUEEN_SUBSCRIPTION_URLS":             "private, hooks.example.com", "QUEEN_SUBSCRIPTION_FUNCTIONS": "a, arn:aws:lambda:eu-west-1:1:function:b",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Config{
		SubscriptionURLs:      egress.Policy{Private: true, Hosts: []string{"hooks.example.com"}},
		SubscriptionFunctions: []string{"a", "arn:aws:lambda:eu-west-1:1:function:b"},
		DatabaseURL:           "postgres://localhost/queen", DBPort: 6543, DBSSLMode: "require",
		MaxWait: 1500 * time.Millisecond, MaxBodyBytes: 1024, LogLevel: slog.LevelDebug,
		Port: 7000, ReaperInterval: 2 * time.Second, Retention: queen.RetentionDefaults{Seconds: 3600, CompletedSeconds: 60, DLQSeconds: 86400},
		DefaultQueue: "events", DefaultPartition: "p 1", EventPartitionField: "customer.id",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

// URL targets default to the developer's machine and the public internet
// under queen serve, and are off on Lambda until the stack lists what they
// may reach; a bad allow list is refused at start.
func TestSubscriptionURLDefaults(t *testing.T) {
	t.Parallel()
	local, err := config.FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p := local.SubscriptionURLs; !p.Loopback || !p.Public || p.Private {
		t.Errorf("queen serve's default: %v, want public and loopback", p)
	}
	lambda, err := config.FromEnv(env(map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "admin", "QUEEN_DB_HOST": "proxy",
		"QUEEN_DB_NAME": "queen", "QUEEN_DB_USER": "queen_app"}))
	if err != nil {
		t.Fatal(err)
	}
	if !lambda.SubscriptionURLs.Off() {
		t.Errorf("Lambda's default: %v, want URL targets off", lambda.SubscriptionURLs)
	}
	_, err = config.FromEnv(env(map[string]string{"QUEEN_SUBSCRIPTION_URLS": "loopback,10.0.0.0/99"}))
	if err == nil || !strings.Contains(err.Error(), "QUEEN_SUBSCRIPTION_URLS") {
		t.Errorf("a bad allow list: %v, want an error naming QUEEN_SUBSCRIPTION_URLS", err)
	}
}

func TestFromEnvRejects(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env  map[string]string
		want []string // every one must be named in the error
	}{
		"numbers": {map[string]string{"QUEEN_MAX_WAIT_MS": "-1", "QUEEN_PORT": "99999", "QUEEN_DB_IAM_AUTH": "yes please"},
			[]string{"QUEEN_MAX_WAIT_MS", "QUEEN_PORT", "QUEEN_DB_IAM_AUTH"}},
		"level":         {map[string]string{"QUEEN_LOG_LEVEL": "loud"}, []string{"QUEEN_LOG_LEVEL"}},
		"interval":      {map[string]string{"QUEEN_REAPER_INTERVAL": "10"}, []string{"QUEEN_REAPER_INTERVAL"}},
		"host needs db": {map[string]string{"QUEEN_DB_HOST": "h"}, []string{"QUEEN_DB_NAME", "QUEEN_DB_USER"}},
		"iam needs host": {map[string]string{"QUEEN_DB_IAM_AUTH": "true", "QUEEN_DB_USER": "u"},
			[]string{"QUEEN_DB_HOST"}},
		"iam needs tls": {map[string]string{"QUEEN_DB_HOST": "h", "QUEEN_DB_NAME": "n", "QUEEN_DB_USER": "u",
			"QUEEN_DB_IAM_AUTH": "true", "QUEEN_DB_SSLMODE": "disable"}, []string{"QUEEN_DB_SSLMODE"}},
		"sslmode":       {map[string]string{"QUEEN_DB_SSLMODE": "maybe"}, []string{"QUEEN_DB_SSLMODE"}},
		"queue name":    {map[string]string{"QUEEN_DEFAULT_QUEUE": "no spaces"}, []string{"QUEEN_DEFAULT_QUEUE"}},
		"wait too long": {map[string]string{"QUEEN_MAX_WAIT_MS": "3600000"}, []string{"QUEEN_MAX_WAIT_MS"}},
		"retention": {map[string]string{"QUEEN_DEFAULT_RETENTION_SECONDS": "1w", "QUEEN_DEFAULT_COMPLETED_RETENTION_SECONDS": "-5"},
			[]string{"QUEEN_DEFAULT_RETENTION_SECONDS", "QUEEN_DEFAULT_COMPLETED_RETENTION_SECONDS"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.FromEnv(env(tc.env))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

func TestSecretArnStandsInForNameAndUser(t *testing.T) {
	t.Parallel()
	// The migrate function may take database name and user from the secret.
	_, err := config.FromEnv(env(map[string]string{"QUEEN_DB_HOST": "db", "QUEEN_DB_SECRET_ARN": "arn:aws:secretsmanager:x"}))
	if err != nil {
		t.Fatal(err)
	}
}

func TestLogValueHidesPassword(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("config", "config", config.Config{DatabaseURL: "postgres://queen:hunter2@db/queen"}.WithDefaults())
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), "xxxxx") {
		t.Errorf("log line %s", buf.String())
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=pw":             "postgres://u@h/db?password=xxxxx",
		"postgres://u@h/db":                         "postgres://u@h/db",
		"postgres://u:pw@h:notaport/db":             "postgres://u:xxxxx@h:notaport/db",
		"host=h user=u password=pw dbname=d":        "host=h user=u password=xxxxx dbname=d",
	} {
		if got := config.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEncryptionKeyIsCheckedAndNeverShown(t *testing.T) {
	t.Parallel()
	const key = "k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	c, err := config.FromEnv(env(map[string]string{"QUEEN_ENCRYPTION_KEY": key}))
	if err != nil || c.EncryptionKey != key {
		t.Fatalf("a valid key ring: %v", err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("cfg", "config", c)
	if strings.Contains(buf.String(), "0a0b0c0d") || !strings.Contains(buf.String(), "not shown") {
		t.Errorf("log line shows the key or hides that one is set: %s", buf.String())
	}
	const short = "k1:000102030405060708090a0b0c0d0e0f1011121314151617"
	_, err = config.FromEnv(env(map[string]string{"QUEEN_ENCRYPTION_KEY": short}))
	if err == nil || !strings.Contains(err.Error(), "QUEEN_ENCRYPTION_KEY") || !strings.Contains(err.Error(), "24 bytes") {
		t.Fatalf("a short key: %v, want an error naming the variable and the length", err)
	}
	if strings.Contains(err.Error(), "0a0b0c0d") {
		t.Errorf("the error echoes key material: %v", err)
	}
}
