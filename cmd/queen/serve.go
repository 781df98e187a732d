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
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/auth"
	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/console"
	"github.com/queen-serverless/queen/core/crypt"
	"github.com/queen-serverless/queen/core/dbconn"
	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/prommetrics"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/core/reaper"
	"github.com/queen-serverless/queen/core/secrets"
	"github.com/queen-serverless/queen/internal/pgcluster"
)

// Defaults of `queen serve`.
const (
	// defaultDataDir holds the embedded cluster's data, relative to the
	// working directory (the project root under `make run`; ignored by git).
	defaultDataDir = ".queen/pgdata"
	// defaultKeyFile holds the local key ring of encrypted queues when
	// neither QUEEN_ENCRYPTION_KEY nor QUEEN_ENCRYPTION_KEY_SECRET_ARN is
	// set; created on first start.
	defaultKeyFile = ".queen/encryption.key"
	// embeddedDB is the database `queen serve` uses in the embedded cluster.
	embeddedDB = "queen"
	// shutdownGrace is how long requests in flight at shutdown may run on
	// before they are cancelled (long-polls then answer 204).
	shutdownGrace = time.Second
	// shutdownTimeout bounds the wait for requests in flight at shutdown.
	shutdownTimeout = 10 * time.Second
)

// serveOptions are the flags of `queen serve`.
type serveOptions struct {
	host      string
	dataDir   string
	keyFile   string
	noMigrate bool
}

// serve runs the local server: every route, the reaper on a ticker, on the
// database of DATABASE_URL or else on the embedded cluster, until ctx ends
// (SIGINT, SIGTERM). It reads its configuration through getenv, prints the
// banner to stdout and logs to stderr.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opt serveOptions
	fs.StringVar(&opt.host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface; set QUEEN_JWT_SECRET or QUEEN_JWT_JWKS_URL to require tokens)")
	fs.StringVar(&opt.dataDir, "data-dir", defaultDataDir, "data directory of the embedded PostgreSQL (used without DATABASE_URL)")
	fs.StringVar(&opt.keyFile, "key-file", defaultKeyFile, "key ring of encrypted queues, created on first start (used without QUEEN_ENCRYPTION_KEY)")
	fs.BoolVar(&opt.noMigrate, "no-migrate", false, "do not apply the schema migrations at start")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	// A closed terminal or pipe must not kill the server before it has
	// stopped the embedded PostgreSQL: writes to it just fail.
	signal.Ignore(syscall.SIGPIPE)
	cfg, err := config.FromEnv(getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))

	dbDesc := ""
	if !cfg.HasDatabase() {
		cluster, url, err := startEmbedded(ctx, opt.dataDir, log)
		if err != nil {
			return err
		}
		defer func() {
			log.Info("stopping PostgreSQL")
			if err := cluster.Stop(); err != nil {
				log.Error("stop PostgreSQL", "err", err)
			}
		}()
		cfg.DatabaseURL = url
		dbDesc = fmt.Sprintf("embedded PostgreSQL, data in %s", opt.dataDir)
		if real, err := filepath.EvalSymlinks(opt.dataDir); err == nil && filepath.Clean(real) != filepath.Clean(opt.dataDir) {
			// As root the cluster runs as postgres, which may not reach the
			// checkout: its data then lives elsewhere, behind a link.
			dbDesc += " (a link to " + real + ")"
		}
	} else {
		u, err := dbconn.URL(cfg)
		if err != nil {
			return err
		}
		dbDesc = config.RedactURL(u)
	}

	if !opt.noMigrate {
		if err := migrateWith(ctx, cfg, log); err != nil {
			return err
		}
	}

	pool, err := dbconn.NewPool(ctx, cfg, dbconn.Options{})
	if err != nil {
		return err
	}
	defer pool.Close()
	keys, err := localKeys(cfg, opt.keyFile, log)
	if err != nil {
		return err
	}
	store := pgstore.New(pool, cfg.Store(log, keys))
	apiCfg := cfg.API(log)
	apiCfg.Metrics = prommetrics.New()
	authCfg := auth.Config{Secret: cfg.JWTSecret, JWKSURL: cfg.JWTJWKSURL, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience}
	var authn *auth.Authenticator
	if authCfg.Enabled() {
		if authn, err = auth.New(ctx, authCfg); err != nil {
			return err
		}
		apiCfg.Identity = func(r *http.Request) string { return auth.Subject(r.Context()) }
		apiCfg.Admin = func(r *http.Request) bool { return auth.Granted(r.Context(), auth.Admin) }
	}
	// Subscriptions are delivered in process, woken by the pushes this
	// server commits (docs/subscriptions.md).
	disp := dispatch.New(dispatch.Config{Store: store, Logger: log, Fence: cfg.Fence()})
	apiCfg.OnPush = disp.Wake
	apiCfg.OnSubscription = func(_ context.Context, s queen.Subscription) { disp.Changed(s) }
	apiCfg.OnSubscriptionsGone = disp.Gone
	api := httpapi.New(store, apiCfg)
	var handler http.Handler = api.Handler(httpapi.AllGroups...)
	if authn != nil {
		handler = authn.Middleware(handler)
	}
	handler = withConsole(handler, console.Handler(console.Options{}))

	ln, err := net.Listen("tcp", net.JoinHostPort(opt.host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Requests see reqCtx, cancelled shortly after shutdown starts, so
	// long-polls answer (204) instead of holding the shutdown up.
	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	var wg sync.WaitGroup
	reaperCtx, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	wg.Go(func() { reaper.Loop(reaperCtx, store, cfg.ReaperInterval, log, disp.Due) })
	dispatchCtx, stopDispatch := context.WithCancel(ctx)
	defer stopDispatch()
	wg.Go(func() { disp.Run(dispatchCtx) })

	switch {
	case authn != nil:
		log.Info("JWT authentication on: every route but /health needs a bearer token with a role")
	case !isLoopback(ln.Addr()):
		log.Warn("LISTENING BEYOND LOOPBACK WITHOUT AUTHENTICATION: anyone who can reach " + ln.Addr().String() +
			" can push, pop, delete queues and change maintenance modes; set QUEEN_JWT_SECRET or QUEEN_JWT_JWKS_URL")
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	printBanner(stdout, baseURL(ln.Addr()), dbDesc)

	select {
	case err = <-serveErr:
		err = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		fmt.Fprintln(stdout, "\nShutting down…")
		err = nil
	}
	stopReaper()
	stopDispatch()
	// Requests in flight get a moment to finish; then the rest (long-polls)
	// are cancelled and answer 204.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(shutdownCtx) }()
	var serr error
	select {
	case serr = <-shut:
	case <-time.After(shutdownGrace):
		cancelRequests()
		serr = <-shut
	}
	if serr != nil {
		log.Warn("shutdown", "err", serr)
	}
	wg.Wait()
	return err
}

// withConsole serves the web console at /console/ (its files are public:
// they hold no data, and every call it makes goes through api and its
// authentication) and redirects / to it; everything else goes to api.
func withConsole(api, ui http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+console.Path, ui)
	mux.Handle("GET "+strings.TrimSuffix(console.Path, "/"), ui)
	mux.Handle("GET /{$}", http.RedirectHandler(console.Path, http.StatusFound))
	mux.Handle("/", api)
	return mux
}

// isLoopback reports whether addr is reachable from this machine only.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// startEmbedded starts (or reuses) the persistent local cluster and returns
// it with the URL of its queen database, created if missing.
// localKeys is where `queen serve` finds the key ring of encrypted queues:
// QUEEN_ENCRYPTION_KEY_SECRET_ARN or QUEEN_ENCRYPTION_KEY when set, else
// the key file, created with a fresh key on first start.
func localKeys(cfg config.Config, file string, log *slog.Logger) (pgstore.KeyLoader, error) {
	if keys := secrets.KeyLoader(cfg, secrets.SecretsManager(dbconn.LoadDefaultAWSConfig)); keys != nil {
		return keys, nil
	}
	ring, created, err := crypt.LoadOrCreate(file)
	if err != nil {
		return nil, fmt.Errorf("encryption key file: %w", err)
	}
	if created {
		log.Warn("created a local encryption key for queues with encryptionEnabled; back it up: "+
			"their payloads cannot be read without it (or set QUEEN_ENCRYPTION_KEY)", "file", file)
	} else {
		log.Info("encryption key ring loaded", "file", file, "key", ring.Current())
	}
	return secrets.Ring(ring), nil
}

func startEmbedded(ctx context.Context, dataDir string, log *slog.Logger) (*pgcluster.Cluster, string, error) {
	log.Info("starting the embedded PostgreSQL", "dataDir", dataDir)
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{
		Persistent: true,
		DataDir:    dataDir,
		Durable:    true,
		Logf:       func(format string, args ...any) { log.Debug(fmt.Sprintf(format, args...)) },
	})
	if err != nil {
		return nil, "", err
	}
	if err := ensureDatabase(ctx, cluster.URL("postgres"), embeddedDB); err != nil {
		_ = cluster.Stop()
		return nil, "", err
	}
	return cluster, cluster.URL(embeddedDB), nil
}

// ensureDatabase creates database name unless it exists.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to the embedded PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// migrateWith applies the migrations to the configured database.
func migrateWith(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	cc, err := dbconn.ConnConfig(cfg, "")
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(ctx)
	res, err := pgstore.MigrateWith(ctx, conn, pgstore.MigrateOptions{OnRetry: func(step string, attempt int, err error) {
		log.Warn("migration step timed out waiting for a lock; trying again", "step", step, "attempt", attempt, "err", err)
	}})
	if err != nil {
		return err
	}
	if len(res.Applied) > 0 || res.RoutinesReplaced {
		log.Info("schema migrated", "applied", res.Applied, "routinesReplaced", res.RoutinesReplaced)
	}
	if len(res.Ahead) > 0 {
		log.Warn("the database was migrated by a newer release: nothing applied, routines left as they are", "ahead", res.Ahead)
	}
	return nil
}

func baseURL(addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func printBanner(w io.Writer, base, db string) {
	fmt.Fprintf(w, `
Queen is serving on %[1]s
  database: %[2]s
  console:  %[1]s/console/
  metrics:  %[1]s/metrics/prometheus

Try it:
  curl -s -X POST %[1]s/api/v1/push -H 'Content-Type: application/json' \
    -d '{"items":[{"queue":"demo","payload":{"hello":"world"}}]}'
  curl -s '%[1]s/api/v1/pop/queue/demo?batch=10&wait=true&timeout=5000'

Press Ctrl-C to stop.
`, base, db)
}
