// Package pgcluster starts and stops a PostgreSQL cluster from the server
// binaries installed on this machine. It is the embedded default database:
// with no DATABASE_URL, `queen serve` and the tests run their own cluster on
// their own port and a private unix socket, and never touch a server the user
// did not name.
//
// A cluster is either throwaway (the default: a fresh data directory,
// removed by Stop, or by a watchdog within a couple of seconds if the owning
// process dies without calling Stop) or persistent (Options.Persistent: the
// data directory survives Stop and is reused by the next Start).
//
// PostgreSQL refuses to run as root. When this process runs as root, the
// server programs run as the unprivileged user ServerUser, which then owns the
// data and socket directories.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

const (
	// Superuser is the database superuser initdb creates. Connections from
	// URL authenticate as it, trusted without a password.
	Superuser = "postgres"

	// MaxConnections is the cluster's max_connections.
	MaxConnections = 200

	// SharedBuffers is the cluster's shared_buffers.
	SharedBuffers = "128MB"

	// LogFile is the server log, relative to the data directory. The server
	// never logs to this process's stdout or stderr.
	LogFile = "server.log"

	// confFile holds the settings written on every start; postgresql.conf
	// includes it.
	confFile = "queen.conf"

	// startAttempts bounds the retries when an automatically chosen port
	// was taken between choosing it and binding it.
	startAttempts = 5

	// sockPrefix names the socket directories of persistent clusters, so a
	// later run can recognise one it may remove.
	sockPrefix = "queen-pgsock-"
)

// relocateBase is where a persistent cluster's data lives when this process
// runs as root and ServerUser cannot reach the requested data directory.
var relocateBase = "/var/lib/queen-serverless"

// Options configures Start. The zero value is a throwaway, non-durable
// cluster on a free port.
type Options struct {
	// DataDir is the cluster's data directory. Empty means a fresh
	// directory in a temp dir, removed by Stop. A non-empty DataDir for a
	// throwaway cluster must be missing or empty, and is removed by Stop too.
	DataDir string

	// Port is the TCP port on 127.0.0.1 (and the number in the unix socket
	// name). 0 picks a free port.
	Port int

	// Persistent keeps the data: an initialized DataDir (required) is reused
	// as is, a missing or empty one is initialized, and Stop leaves it in
	// place. This is what `queen serve` uses, with data in an ignored
	// project folder such as .queen/pgdata.
	//
	// If a server from an earlier run is still running on DataDir (the
	// process died without Stop), Start adopts it instead of failing: it
	// rewrites the settings, reloads, and returns a Cluster whose Stop stops
	// that server. Only when Port asks for a different port is it restarted.
	// Two processes sharing a server this way share its lifetime: the first
	// Stop ends it for both.
	//
	// When this process runs as root and ServerUser cannot reach DataDir
	// (e.g. a project under /root, mode 0700), the data lives in
	// /var/lib/queen-serverless/pgdata-<hash of DataDir> and DataDir becomes
	// a symbolic link to it. Removing the link discards that data on the
	// next Start.
	Persistent bool

	// Durable keeps PostgreSQL's crash-safety defaults. When false (tests,
	// scratch data) the cluster runs with fsync, synchronous_commit and
	// full_page_writes off, which is much faster and loses data on an
	// operating system crash.
	Durable bool

	// Logf, if set, receives a line for each step (initdb, start, stop).
	Logf func(format string, args ...any)
}

// Cluster is a running PostgreSQL cluster. It listens on 127.0.0.1:Port and
// on a unix socket in SocketDir, a directory private to the cluster. Its
// methods are safe for concurrent use.
type Cluster struct {
	bin        binaries
	own        *owner
	persistent bool
	durable    bool
	logf       func(format string, args ...any)

	dataDir    string
	sockDir    string
	port       int
	tempRoot   string // removed by Stop unless persistent
	removeData bool   // dataDir was given for a throwaway cluster
	removeSock bool   // sockDir is ours to remove
	watchdog   *exec.Cmd

	mu      sync.Mutex
	stopped bool
	stopErr error
}

// Start initializes the data directory if needed (initdb: trust
// authentication, superuser Superuser, UTF8, locale C), starts the server with
// pg_ctl and returns once it accepts connections. ctx bounds the start; the
// cluster then runs until Stop.
//
// Start fails with an error wrapping ErrBinariesNotFound when the server
// binaries are not installed.
func Start(ctx context.Context, opt Options) (*Cluster, error) {
	if opt.Port < 0 || opt.Port > 65535 {
		return nil, fmt.Errorf("pgcluster: port %d out of range", opt.Port)
	}
	if opt.Persistent && opt.DataDir == "" {
		return nil, errors.New("pgcluster: a persistent cluster needs a DataDir")
	}
	bin, err := findBinaries(debianBinGlob)
	if err != nil {
		return nil, err
	}
	own, err := serverOwner()
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{
		bin:        bin,
		own:        own,
		persistent: opt.Persistent,
		durable:    opt.Durable,
		logf:       opt.Logf,
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if err := c.start(ctx, opt); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	return c, nil
}

// URL returns a pgx connection URL for database dbname as Superuser over the
// unix socket, e.g.
// postgres://postgres@/dbname?host=%2Ftmp%2Fqueen-pg-1&port=40001&sslmode=disable.
func (c *Cluster) URL(dbname string) string {
	q := url.Values{}
	q.Set("host", c.sockDir)
	q.Set("port", strconv.Itoa(c.port))
	q.Set("sslmode", "disable")
	u := url.URL{Scheme: "postgres", User: url.User(Superuser), Path: "/" + dbname, RawQuery: q.Encode()}
	return u.String()
}

// Port returns the server's port.
func (c *Cluster) Port() int { return c.port }

// SocketDir returns the directory holding the server's unix socket.
func (c *Cluster) SocketDir() string { return c.sockDir }

// DataDir returns the data directory (after following a relocation link).
func (c *Cluster) DataDir() string { return c.dataDir }

// PostmasterPID returns the process id of the running server's postmaster,
// from postmaster.pid.
func (c *Cluster) PostmasterPID() (int, error) {
	lines, err := readLines(filepath.Join(c.dataDir, "postmaster.pid"), 1)
	if err != nil {
		return 0, fmt.Errorf("pgcluster: %w", err)
	}
	if len(lines) == 0 {
		return 0, errors.New("pgcluster: postmaster.pid is empty")
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pgcluster: postmaster.pid: bad pid %q", lines[0])
	}
	return pid, nil
}

// Restart starts the server again on the same data directory, port and
// socket after it went away — stopped, or killed by a crash test, in which
// case PostgreSQL runs crash recovery first. It returns once the server
// accepts connections. The old postmaster and its children must be gone
// (a killed process reaped by its parent): PostgreSQL refuses to start while
// a process named in its lock files exists or one still holds its shared
// memory.
func (c *Cluster) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("pgcluster: restart of a stopped cluster")
	}
	if err := c.launch(ctx, c.port); err != nil {
		return fmt.Errorf("pgcluster: restart: %w", err)
	}
	return nil
}

// Stop shuts the server down (fast mode: sessions are disconnected) and
// removes the data directory unless the cluster is persistent. Calling it
// again returns the first call's result.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	c.stopErr = c.stop()
	return c.stopErr
}

func (c *Cluster) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var err error
	if c.dataDir != "" && exists(filepath.Join(c.dataDir, "postmaster.pid")) {
		c.logf("pgcluster: stopping the server in %s", c.dataDir)
		if err = c.pgCtl(ctx, "stop", "-m", "fast", "-t", "60"); err != nil {
			if c.pgCtl(ctx, "stop", "-m", "immediate", "-t", "30") == nil {
				err = nil
			}
		}
	}
	if !c.persistent {
		for _, p := range c.removable() {
			if rmErr := os.RemoveAll(p); rmErr != nil {
				err = errors.Join(err, rmErr)
			}
		}
	}
	if c.removeSock {
		_ = os.RemoveAll(c.sockDir)
	}
	stopWatchdog(c.watchdog)
	if err != nil {
		return fmt.Errorf("pgcluster: stop: %w", err)
	}
	return nil
}

// removable lists what a throwaway cluster removes when it goes.
func (c *Cluster) removable() []string {
	var paths []string
	if c.tempRoot != "" {
		paths = append(paths, c.tempRoot)
	}
	if c.removeData {
		paths = append(paths, c.dataDir)
	}
	return paths
}
