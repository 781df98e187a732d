// Package config is the configuration of every Queen Serverless process: the
// Lambda functions and `queen serve`. The environment is read in exactly one
// place, FromEnv; everything else takes a Config.
//
// The database is named one of two ways. DATABASE_URL (local runs and tests)
// takes precedence. Otherwise QUEEN_DB_HOST, QUEEN_DB_PORT, QUEEN_DB_NAME and
// QUEEN_DB_USER name it and the password comes from elsewhere: an RDS IAM auth
// token built per connection (QUEEN_DB_IAM_AUTH, the functions behind RDS
// Proxy) or the master secret read at run time from Secrets Manager
// (QUEEN_DB_SECRET_ARN, the migrate function only). No variable ever holds a
// secret, and Config never logs one (see LogValue).
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/queen-serverless/queen/core/crypt"
	"github.com/queen-serverless/queen/core/egress"
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
)

// Environment variables read by FromEnv.
const (
	EnvDatabaseURL         = "DATABASE_URL"
	EnvDBHost              = "QUEEN_DB_HOST"
	EnvDBPort              = "QUEEN_DB_PORT"
	EnvDBName              = "QUEEN_DB_NAME"
	EnvDBUser              = "QUEEN_DB_USER"
	EnvDBIAMAuth           = "QUEEN_DB_IAM_AUTH"
	EnvDBSSLMode           = "QUEEN_DB_SSLMODE"
	EnvDBSecretARN         = "QUEEN_DB_SECRET_ARN"
	EnvMaxWaitMS           = "QUEEN_MAX_WAIT_MS"
	EnvMaxBodyBytes        = "QUEEN_MAX_BODY_BYTES"
	EnvLogLevel            = "QUEEN_LOG_LEVEL"
	EnvPort                = "QUEEN_PORT"
	EnvReaperInterval      = "QUEEN_REAPER_INTERVAL"
	EnvDefaultRetention    = "QUEEN_DEFAULT_RETENTION_SECONDS"
	EnvDefaultCompleted    = "QUEEN_DEFAULT_COMPLETED_RETENTION_SECONDS"
	EnvDefaultDLQRetention = "QUEEN_DEFAULT_DLQ_RETENTION_SECONDS"
	EnvDefaultQueue        = "QUEEN_DEFAULT_QUEUE"
	EnvDefaultPartition    = "QUEEN_DEFAULT_PARTITION"
	EnvEventPartitionField = "QUEEN_EVENT_PARTITION_FIELD"
	EnvJWTSecret           = "QUEEN_JWT_SECRET"
	EnvJWTJWKSURL          = "QUEEN_JWT_JWKS_URL"
	EnvJWTIssuer           = "QUEEN_JWT_ISSUER"
	EnvJWTAudience         = "QUEEN_JWT_AUDIENCE"
	EnvEncryptionKey       = "QUEEN_ENCRYPTION_KEY"
	EnvEncryptionKeySecret = "QUEEN_ENCRYPTION_KEY_SECRET_ARN"
	EnvDispatchFunction    = "QUEEN_DISPATCH_FUNCTION"
	EnvSubscriptionURLs    = "QUEEN_SUBSCRIPTION_URLS"
	EnvSubscriptionFuncs   = "QUEEN_SUBSCRIPTION_FUNCTIONS"

	// EnvLambdaFunctionName is set by AWS Lambda (and the Runtime Interface
	// Emulator) in every function: its presence means "running on Lambda".
	EnvLambdaFunctionName = "AWS_LAMBDA_FUNCTION_NAME"
)

// Defaults, applied by WithDefaults to zero fields.
const (
	// DefaultDBPort is the PostgreSQL port.
	DefaultDBPort = 5432
	// DefaultDBSSLMode is the TLS mode when the database is named by host:
	// encrypted, as RDS Proxy requires. verify-full also checks the server
	// certificate against the system roots.
	DefaultDBSSLMode = "require"
	// DefaultMaxWaitLambda caps long-poll pops on Lambda: API Gateway cuts
	// requests at 30 s.
	DefaultMaxWaitLambda = 20 * time.Second
	// DefaultMaxWaitLocal caps long-poll pops of `queen serve`: the HTTP
	// API's own default.
	DefaultMaxWaitLocal = httpapi.DefaultMaxWait
	// DefaultMaxBodyBytes is the request body limit: the Lambda payload
	// limit, the HTTP API's own default.
	DefaultMaxBodyBytes = httpapi.DefaultMaxBodyBytes
	// DefaultLogLevel is the minimum level logged.
	DefaultLogLevel = slog.LevelInfo
	// DefaultPort is the port of `queen serve`.
	DefaultPort = 6632
	// DefaultReaperInterval is how often `queen serve` runs a reaper pass
	// (on AWS an EventBridge schedule runs it every minute). Lease expiries
	// are also noticed by the next pop, so this bounds only how late the
	// reaper's counting, dedup pruning and retention happen.
	DefaultReaperInterval = 10 * time.Second
	// DefaultPartition is the partition of event-source messages that name
	// none (QUEEN_DEFAULT_PARTITION).
	DefaultPartition = queen.DefaultPartition
	// DefaultRetentionSeconds is how long a queue that sets no retention
	// keeps its messages: a week, Kafka's default, so that a deployment's
	// disk is bounded by a week of its writes (see docs/aws.md).
	DefaultRetentionSeconds = 7 * 24 * 3600
	// DefaultCompletedRetentionSeconds is how long a queue that sets no
	// completedRetentionSeconds keeps what every group consumed: 0, until
	// the retention above, so that a week of replay stays possible.
	DefaultCompletedRetentionSeconds = 0
	// DefaultDLQRetentionSeconds is how long dead letters are kept in a
	// queue that sets no dlqRetentionSeconds: 14 days, SQS's longest, so
	// that a DLQ nobody empties does not grow for ever.
	DefaultDLQRetentionSeconds = 14 * 24 * 3600
)

// Limits checked by Validate.
const (
	// MaxMaxWait is the largest QUEEN_MAX_WAIT_MS accepted: 15 minutes, the
	// Lambda limit.
	MaxMaxWait = 15 * time.Minute
	// MinReaperInterval is the shortest QUEEN_REAPER_INTERVAL accepted.
	MinReaperInterval = 100 * time.Millisecond
)

// SSL modes accepted in QUEEN_DB_SSLMODE (libpq's names).
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// Config is the configuration of a process. The zero value plus WithDefaults
// is a local server on the embedded database.
type Config struct {
	// DatabaseURL (DATABASE_URL) names the database; it takes precedence
	// over the DB* fields. It may carry a password: it is only for local
	// runs and tests, never set on AWS.
	DatabaseURL string

	// DBHost (QUEEN_DB_HOST), DBPort (QUEEN_DB_PORT, default DefaultDBPort),
	// DBName (QUEEN_DB_NAME) and DBUser (QUEEN_DB_USER) name the database
	// when DatabaseURL is empty.
	DBHost string
	DBPort int
	DBName string
	DBUser string
	// DBIAMAuth (QUEEN_DB_IAM_AUTH) logs in with an RDS IAM auth token
	// built for each new connection instead of a password.
	DBIAMAuth bool
	// DBSSLMode (QUEEN_DB_SSLMODE, default DefaultDBSSLMode) is the libpq
	// sslmode used with DBHost.
	DBSSLMode string
	// DBSecretARN (QUEEN_DB_SECRET_ARN, the migrate function only) is the
	// Secrets Manager secret holding the master credentials, read at run
	// time.
	DBSecretARN string

	// MaxWait (QUEEN_MAX_WAIT_MS) caps long-poll pops. Default
	// DefaultMaxWaitLambda on Lambda, DefaultMaxWaitLocal elsewhere.
	MaxWait time.Duration
	// MaxBodyBytes (QUEEN_MAX_BODY_BYTES) limits request bodies. Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// LogLevel (QUEEN_LOG_LEVEL: debug, info, warn or error). Default
	// DefaultLogLevel.
	LogLevel slog.Level

	// Port (QUEEN_PORT) is the TCP port of `queen serve`. Default DefaultPort.
	Port int
	// ReaperInterval (QUEEN_REAPER_INTERVAL, a Go duration such as "10s")
	// is the reaper period of `queen serve`. Default DefaultReaperInterval.
	ReaperInterval time.Duration

	// Retention (QUEEN_DEFAULT_RETENTION_SECONDS,
	// QUEEN_DEFAULT_COMPLETED_RETENTION_SECONDS and
	// QUEEN_DEFAULT_DLQ_RETENTION_SECONDS; 0 there: keep for ever) is the
	// deployment's retention for queues that set none of a kind or turned
	// retention off (dead letters: that set no dlqRetentionSeconds). Zero
	// fields: DefaultRetentionSeconds, DefaultCompletedRetentionSeconds and
	// DefaultDLQRetentionSeconds; a negative field keeps for ever.
	Retention queen.RetentionDefaults

	// DefaultQueue (QUEEN_DEFAULT_QUEUE) is the queue of event-source
	// messages that name none; EventBridge events always go there.
	DefaultQueue string
	// DefaultPartition (QUEEN_DEFAULT_PARTITION) is the partition of
	// event-source messages that name none. Default DefaultPartition.
	DefaultPartition string
	// EventPartitionField (QUEEN_EVENT_PARTITION_FIELD) names the field of
	// an EventBridge event's detail whose value is the partition; a dotted
	// path reaches into nested objects.
	EventPartitionField string

	// Lambda is true when running on AWS Lambda (AWS_LAMBDA_FUNCTION_NAME
	// is set). It changes defaults (MaxWait) and the pool (one connection).
	Lambda bool

	// JWT authentication of `queen serve` (on AWS, API Gateway's
	// authorizer does it): an HS256 secret (QUEEN_JWT_SECRET) or a JWKS URL
	// (QUEEN_JWT_JWKS_URL); issuer and audience checked when set. Neither
	// set: no authentication.
	JWTSecret, JWTJWKSURL, JWTIssuer, JWTAudience string

	// EncryptionKey (QUEEN_ENCRYPTION_KEY, local runs) is the key ring that
	// seals the payloads of encrypted queues: "id:key" entries, newest
	// first (see package crypt). Never logged.
	EncryptionKey string
	// EncryptionKeySecretARN (QUEEN_ENCRYPTION_KEY_SECRET_ARN, on AWS) is
	// the Secrets Manager secret holding that key ring, read the first time
	// an encrypted queue needs it. It takes precedence over EncryptionKey.
	EncryptionKeySecretARN string

	// DispatchFunction (QUEEN_DISPATCH_FUNCTION, on AWS) is the name or
	// ARN of the dispatch function, which delivers subscriptions
	// (docs/subscriptions.md): pushes and the reaper start it with an
	// asynchronous invoke. Empty: nothing starts it.
	DispatchFunction string

	// SubscriptionURLs (QUEEN_SUBSCRIPTION_URLS) is what subscriptions' URL
	// targets may reach (egress.ParsePolicy: loopback, private, public,
	// CIDR ranges, host names; "none"). Default egress.DefaultLocal, on
	// Lambda egress.DefaultLambda (URL targets off).
	SubscriptionURLs egress.Policy
	// SubscriptionFunctions (QUEEN_SUBSCRIPTION_FUNCTIONS, comma-separated;
	// set by the stack from its subscriptionTargets) are the functions
	// subscriptions may deliver to. Default none.
	SubscriptionFunctions []string
}

// FromEnv reads the configuration from the environment through getenv
// (os.Getenv in production), applies the defaults and validates it.
func FromEnv(getenv func(string) string) (Config, error) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	c := Config{
		DatabaseURL:         get(EnvDatabaseURL),
		DBHost:              get(EnvDBHost),
		DBName:              get(EnvDBName),
		DBUser:              get(EnvDBUser),
		DBSSLMode:           get(EnvDBSSLMode),
		DBSecretARN:         get(EnvDBSecretARN),
		DefaultQueue:        get(EnvDefaultQueue),
		DefaultPartition:    getenv(EnvDefaultPartition), // partition names may have spaces
		EventPartitionField: get(EnvEventPartitionField),
		Lambda:              get(EnvLambdaFunctionName) != "",
		JWTSecret:           get(EnvJWTSecret),
		JWTJWKSURL:          get(EnvJWTJWKSURL),
		JWTIssuer:           get(EnvJWTIssuer),
		JWTAudience:         get(EnvJWTAudience),

		EncryptionKey:          get(EnvEncryptionKey),
		EncryptionKeySecretARN: get(EnvEncryptionKeySecret),
		DispatchFunction:       get(EnvDispatchFunction),
	}
	var errs []error
	parse := func(name string, f func(string) error) {
		if v := get(name); v != "" {
			if err := f(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	}
	parse(EnvDBPort, func(v string) (err error) { c.DBPort, err = parsePort(v); return err })
	parse(EnvPort, func(v string) (err error) { c.Port, err = parsePort(v); return err })
	parse(EnvDBIAMAuth, func(v string) (err error) { c.DBIAMAuth, err = strconv.ParseBool(v); return err })
	parse(EnvMaxWaitMS, func(v string) error {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return errors.New("must be a positive number of milliseconds")
		}
		c.MaxWait = time.Duration(ms) * time.Millisecond
		return nil
	})
	parse(EnvMaxBodyBytes, func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return errors.New("must be a positive number of bytes")
		}
		c.MaxBodyBytes = n
		return nil
	})
	parse(EnvLogLevel, func(v string) error { return c.LogLevel.UnmarshalText([]byte(v)) })
	parse(EnvReaperInterval, func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return errors.New(`must be a duration such as "10s"`)
		}
		c.ReaperInterval = d
		return nil
	})
	seconds := func(dst *int) func(string) error {
		return func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return errors.New("must be a number of seconds, 0 to keep for ever")
			}
			*dst = n
			if n == 0 {
				*dst = -1
			}
			return nil
		}
	}
	parse(EnvDefaultRetention, seconds(&c.Retention.Seconds))
	parse(EnvDefaultCompleted, seconds(&c.Retention.CompletedSeconds))
	parse(EnvDefaultDLQRetention, seconds(&c.Retention.DLQSeconds))
	urls := get(EnvSubscriptionURLs)
	if urls == "" {
		urls = egress.DefaultLocal
		if c.Lambda {
			urls = egress.DefaultLambda
		}
	}
	var err error
	if c.SubscriptionURLs, err = egress.ParsePolicy(urls); err != nil {
		errs = append(errs, fmt.Errorf("%s=%q: %w", EnvSubscriptionURLs, urls, err))
	}
	for _, f := range strings.Split(get(EnvSubscriptionFuncs), ",") {
		if f = strings.TrimSpace(f); f != "" {
			c.SubscriptionFunctions = append(c.SubscriptionFunctions, f)
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	c = c.WithDefaults()
	return c, c.Validate()
}

func parsePort(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return 0, errors.New("must be a port number 1-65535")
	}
	return n, nil
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.DBPort == 0 {
		c.DBPort = DefaultDBPort
	}
	if c.DBSSLMode == "" {
		c.DBSSLMode = DefaultDBSSLMode
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWaitLocal
		if c.Lambda {
			c.MaxWait = DefaultMaxWaitLambda
		}
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.ReaperInterval == 0 {
		c.ReaperInterval = DefaultReaperInterval
	}
	if c.DefaultPartition == "" {
		c.DefaultPartition = DefaultPartition
	}
	if c.Retention.Seconds == 0 {
		c.Retention.Seconds = DefaultRetentionSeconds
	}
	if c.Retention.CompletedSeconds == 0 {
		c.Retention.CompletedSeconds = DefaultCompletedRetentionSeconds
	}
	if c.Retention.DLQSeconds == 0 {
		c.Retention.DLQSeconds = DefaultDLQRetentionSeconds
	}
	return c
}

// Validate reports every invalid field at once. It does not require a
// database: `queen serve` without one starts the embedded cluster; the
// functions check with HasDatabase.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if c.DatabaseURL == "" {
		if c.DBHost == "" && (c.DBName != "" || c.DBUser != "" || c.DBIAMAuth) {
			bad(EnvDBHost, "is required with %s, %s or %s", EnvDBName, EnvDBUser, EnvDBIAMAuth)
		}
		if c.DBHost != "" && c.DBSecretARN == "" {
			if c.DBName == "" {
				bad(EnvDBName, "is required with %s", EnvDBHost)
			}
			if c.DBUser == "" {
				bad(EnvDBUser, "is required with %s", EnvDBHost)
			}
		}
	}
	if c.DBPort < 1 || c.DBPort > 65535 {
		bad(EnvDBPort, "%d is not a port number", c.DBPort)
	}
	if !slices.Contains(sslModes, c.DBSSLMode) {
		bad(EnvDBSSLMode, "%q is not one of %s", c.DBSSLMode, strings.Join(sslModes, ", "))
	}
	if c.DBIAMAuth && c.DBSSLMode == "disable" {
		bad(EnvDBSSLMode, "IAM authentication needs TLS: sslmode disable is not allowed")
	}
	if c.MaxWait <= 0 || c.MaxWait > MaxMaxWait {
		bad(EnvMaxWaitMS, "%v is out of range (1 ms to %v)", c.MaxWait, MaxMaxWait)
	}
	if c.MaxBodyBytes <= 0 {
		bad(EnvMaxBodyBytes, "must be positive")
	}
	if c.Port < 1 || c.Port > 65535 {
		bad(EnvPort, "%d is not a port number", c.Port)
	}
	if c.ReaperInterval < MinReaperInterval {
		bad(EnvReaperInterval, "%v is shorter than %v", c.ReaperInterval, MinReaperInterval)
	}
	if c.DefaultQueue != "" {
		if err := queen.ValidateQueueName(EnvDefaultQueue, c.DefaultQueue); err != nil {
			errs = append(errs, err)
		}
	}
	if err := queen.ValidateText(EnvDefaultPartition, c.DefaultPartition); err != nil {
		errs = append(errs, err)
	}
	if c.EncryptionKey != "" {
		if _, err := crypt.Parse(c.EncryptionKey); err != nil { // its errors never echo key material
			bad(EnvEncryptionKey, "%v", err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return nil
}

// API is the HTTP API's configuration: the limits configured here and
// log. Every entry point — the Lambda functions, `queen serve` and the tests
// of the API — builds the API from it, so a limit only one of them sets
// cannot hide a defect; each adds only what is its own (the caller's
// identity, metrics).
func (c Config) API(log *slog.Logger) httpapi.Config {
	return httpapi.Config{MaxBodyBytes: c.MaxBodyBytes, MaxWait: c.MaxWait, Logger: log, Targets: c.Fence()}
}

// Fence is the egress fence of subscriptions' targets: the API checks a
// target with it when a subscription is created, the dispatcher connects
// through it.
func (c Config) Fence() *egress.Fence {
	return &egress.Fence{URLs: c.SubscriptionURLs, Functions: slices.Clone(c.SubscriptionFunctions)}
}

// Store is the engine's configuration: the deployment's retention
// defaults, log, and keys (the key ring of encrypted queues, nil: none).
// Every entry point builds its store from it, as it builds the API from
// API.
func (c Config) Store(log *slog.Logger, keys pgstore.KeyLoader) pgstore.Config {
	return pgstore.Config{Logger: log, Keys: keys,
		DefaultRetentionSeconds:          max(c.Retention.Seconds, 0),
		DefaultCompletedRetentionSeconds: max(c.Retention.CompletedSeconds, 0),
		DefaultDLQRetentionSeconds:       max(c.Retention.DLQSeconds, 0)}
}

// HasDatabase reports whether the configuration names a database.
func (c Config) HasDatabase() bool { return c.DatabaseURL != "" || c.DBHost != "" }

// LogValue makes slog print the configuration without secrets: the password
// of DatabaseURL is masked.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Bool("lambda", c.Lambda)}
	if c.DatabaseURL != "" {
		attrs = append(attrs, slog.String("databaseUrl", RedactURL(c.DatabaseURL)))
	} else if c.DBHost != "" {
		attrs = append(attrs,
			slog.String("dbHost", c.DBHost), slog.Int("dbPort", c.DBPort),
			slog.String("dbName", c.DBName), slog.String("dbUser", c.DBUser),
			slog.Bool("dbIamAuth", c.DBIAMAuth), slog.String("dbSslMode", c.DBSSLMode))
		if c.DBSecretARN != "" {
			attrs = append(attrs, slog.String("dbSecretArn", c.DBSecretARN))
		}
	}
	switch {
	case c.EncryptionKeySecretARN != "":
		attrs = append(attrs, slog.String("encryptionKeySecretArn", c.EncryptionKeySecretARN))
	case c.EncryptionKey != "":
		attrs = append(attrs, slog.String("encryptionKey", "set (not shown)"))
	}
	attrs = append(attrs,
		slog.Duration("maxWait", c.MaxWait), slog.Int64("maxBodyBytes", c.MaxBodyBytes),
		slog.String("logLevel", c.LogLevel.String()))
	if c.DefaultQueue != "" {
		attrs = append(attrs, slog.String("defaultQueue", c.DefaultQueue))
	}
	if c.EventPartitionField != "" {
		attrs = append(attrs, slog.String("eventPartitionField", c.EventPartitionField))
	}
	attrs = append(attrs, slog.String("subscriptionUrls", c.SubscriptionURLs.String()))
	if len(c.SubscriptionFunctions) > 0 {
		attrs = append(attrs, slog.String("subscriptionFunctions", strings.Join(c.SubscriptionFunctions, ",")))
	}
	return slog.GroupValue(attrs...)
}

// RedactURL returns a connection URL with its password masked, for logs
// and messages. Strings that are not URLs (keyword/value connection strings)
// have any password=... setting masked.
func RedactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		// Not parseable as a URL: mask whatever follows a colon in the
		// user info.
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if user, _, hasPw := strings.Cut(rest[:at], ":"); hasPw {
				return scheme + "://" + user + ":xxxxx" + rest[at:]
			}
		}
		return s
	}
	fields := strings.Fields(s)
	for i, f := range fields {
		if strings.HasPrefix(strings.ToLower(f), "password=") {
			fields[i] = "password=xxxxx"
		}
	}
	return strings.Join(fields, " ")
}
