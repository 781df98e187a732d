package soak

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/dbconn"
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/pgstore"
)

// server is the HTTP API in this process, built as `queen serve` builds it
// (config.FromEnv, dbconn.NewPool, pgstore.New with config.Config.Store,
// httpapi.New with config.Config.API) on loopback, and its store, whose
// reaper pass the run calls.
type server struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	srv   *http.Server
	base  string
}

func startServer(ctx context.Context, url string, cfg Config) (*server, error) {
	env := map[string]string{config.EnvDatabaseURL: url, config.EnvLogLevel: "warn"}
	c, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(cfg.ServerLog, &slog.HandlerOptions{Level: c.LogLevel}))
	pool, err := dbconn.NewPool(ctx, c, dbconn.Options{})
	if err != nil {
		return nil, err
	}
	store := pgstore.New(pool, c.Store(log, nil))
	api := httpapi.New(store, c.API(log))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &server{pool: pool, store: store, base: "http://" + ln.Addr().String(),
		srv: &http.Server{Handler: api.Handler(httpapi.AllGroups...), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "err", err)
		}
	}()
	return s, nil
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	s.pool.Close()
}
