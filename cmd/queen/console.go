package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/queen-serverless/queen/core/console"
)

// Defaults of `queen console`.
const (
	// defaultConsolePort is next to the API's default port (6632), so both
	// can run on one machine.
	defaultConsolePort = 6633
	// tokenEnv holds the bearer token when -token is not given.
	tokenEnv = "QUEEN_TOKEN"
)

// consoleOptions are the flags of `queen console`.
type consoleOptions struct {
	api     string
	host    string
	port    int
	auth    string
	token   string
	region  string
	profile string
}

// awsConfigLoader loads the AWS configuration (credentials and region)
// from the default chain: environment, shared files (profile), SSO, the
// instance or container role.
type awsConfigLoader func(ctx context.Context, profile string) (aws.Config, error)

func loadAWSConfig(ctx context.Context, profile string) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(profile))
	}
	return awsconfig.LoadDefaultConfig(ctx, opts...)
}

// consoleCmd serves the web console on localhost and forwards its API
// calls to a deployed Queen API, signed with SigV4 or carrying a bearer
// token, until ctx ends.
func consoleCmd(ctx context.Context, args []string, getenv func(string) string, loadAWS awsConfigLoader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opt consoleOptions
	fs.StringVar(&opt.api, "api", "", "base URL of the Queen API, e.g. the stack's ApiUrl output https://abc123.execute-api.eu-west-1.amazonaws.com/ (required)")
	fs.StringVar(&opt.host, "host", "127.0.0.1", "address to listen on (loopback only: the proxy acts with your credentials)")
	fs.IntVar(&opt.port, "port", defaultConsolePort, "port to listen on")
	fs.StringVar(&opt.auth, "auth", "auto", "how API calls are authenticated: sigv4 (IAM authorizer, credentials from the AWS config chain), bearer (JWT authorizer), none, or auto (bearer when a token is given, else sigv4)")
	fs.StringVar(&opt.token, "token", "", "bearer token for a JWT authorizer (default $"+tokenEnv+")")
	fs.StringVar(&opt.region, "region", "", "region of the API for SigV4 (default: from an execute-api URL, else the AWS config's region)")
	fs.StringVar(&opt.profile, "profile", "", "AWS profile for SigV4 (default: $AWS_PROFILE or the default profile)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if opt.token == "" {
		opt.token = getenv(tokenEnv)
	}
	if opt.api == "" {
		return errors.New("console: -api is required: the base URL of the Queen API (the stack's ApiUrl output, or http://localhost:6632 for queen serve)")
	}
	api, err := url.Parse(opt.api)
	if err != nil || (api.Scheme != "https" && api.Scheme != "http") || api.Host == "" {
		return fmt.Errorf("console: -api %q is not an http(s) URL", opt.api)
	}
	if ip := net.ParseIP(opt.host); opt.host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("console: -host %s is not a loopback address: the console acts with your credentials, so it listens on this machine only", opt.host)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	authz, mode, desc, err := consoleAuth(ctx, opt, api, loadAWS)
	if err != nil {
		return err
	}
	ui := console.Handler(console.Options{API: api.Redacted(), Auth: mode})
	proxy := console.NewProxy(api, authz, log)
	handler := withConsole(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if console.IsProxied(r.URL.Path) {
			proxy.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}), ui)

	ln, err := net.Listen("tcp", net.JoinHostPort(opt.host, strconv.Itoa(opt.port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "\nQueen console on %s/console/\n  API:  %s\n  auth: %s\n\nPress Ctrl-C to stop.\n",
		baseURL(ln.Addr()), api.Redacted(), desc)

	select {
	case err = <-serveErr:
		return fmt.Errorf("console: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// consoleAuth picks how forwarded calls are authenticated and describes it
// for the banner. SigV4 credentials are retrieved once here, so a missing
// login fails at start, not at the first click.
func consoleAuth(ctx context.Context, opt consoleOptions, api *url.URL, loadAWS awsConfigLoader) (authz console.Authorizer, mode, desc string, err error) {
	mode = opt.auth
	if mode == "auto" {
		mode = console.AuthSigV4
		if opt.token != "" {
			mode = console.AuthBearer
		}
	}
	switch mode {
	case console.AuthNone:
		return console.NoAuth{}, mode, "none (calls are forwarded without credentials)", nil
	case console.AuthBearer:
		if opt.token == "" {
			return nil, "", "", fmt.Errorf("console: -auth bearer needs -token or $%s", tokenEnv)
		}
		return console.Bearer(opt.token), mode, "bearer token", nil
	case console.AuthSigV4:
		cfg, err := loadAWS(ctx, opt.profile)
		if err != nil {
			return nil, "", "", fmt.Errorf("console: AWS configuration: %w", err)
		}
		region := opt.region
		if region == "" {
			region = console.RegionOf(api)
		}
		if region == "" {
			region = cfg.Region
		}
		if region == "" {
			return nil, "", "", errors.New("console: no region for SigV4: pass -region (the API's region), or set AWS_REGION")
		}
		source, err := console.CheckCredentials(ctx, cfg.Credentials)
		if err != nil {
			return nil, "", "", fmt.Errorf("console: no usable AWS credentials for SigV4 (log in, e.g. aws sso login, or set AWS_PROFILE; "+
				"for a JWT authorizer pass -token): %w", err)
		}
		return console.SigV4{Credentials: cfg.Credentials, Region: region}, mode,
			fmt.Sprintf("SigV4 (%s, region %s, credentials from %s)", console.SigV4Service, region, source), nil
	}
	return nil, "", "", fmt.Errorf("console: -auth %q: want sigv4, bearer, none or auto", opt.auth)
}
