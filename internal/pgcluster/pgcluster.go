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
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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

func (c *Cluster) start(ctx context.Context, opt Options) error {
	if opt.Persistent {
		reused, err := c.preparePersistent(ctx, opt)
		if err != nil || reused {
			return err
		}
	} else if err := c.prepareThrowaway(opt); err != nil {
		return err
	}
	if !exists(filepath.Join(c.dataDir, "PG_VERSION")) {
		c.logf("pgcluster: initdb %s (%s)", c.dataDir, c.bin.dir)
		args := []string{"-D", c.dataDir, "-U", Superuser, "-A", "trust", "-E", "UTF8", "--locale=C"}
		if !c.durable {
			args = append(args, "--no-sync")
		}
		if err := c.own.run(ctx, c.bin.initdb, args...); err != nil {
			return err
		}
	}
	if err := c.includeConf(); err != nil {
		return err
	}
	return c.launch(ctx, opt.Port)
}

// prepareThrowaway creates the temp dir holding the socket (and the data,
// unless DataDir is given) and starts the watchdog that removes them if this
// process dies.
func (c *Cluster) prepareThrowaway(opt Options) error {
	root, err := os.MkdirTemp(tempParent(c.own), "queen-pg-")
	if err != nil {
		return err
	}
	c.tempRoot = root
	if err := c.own.chown(root); err != nil {
		return err
	}
	c.sockDir = root
	c.dataDir = filepath.Join(root, "data")
	if opt.DataDir != "" {
		dir, err := filepath.Abs(opt.DataDir)
		if err != nil {
			return err
		}
		empty, err := isEmptyDir(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
		case err != nil:
			return err
		case !empty:
			return fmt.Errorf("data dir %s is not empty: a throwaway cluster needs a missing or empty one (or set Persistent to reuse it)", dir)
		}
		c.dataDir, c.removeData = dir, true
		if err := c.own.chown(dir); err != nil {
			return err
		}
		if !c.own.canUse(dir) {
			return fmt.Errorf("user %s cannot reach data dir %s: a parent directory is not searchable by it", ServerUser, dir)
		}
	}
	cmd, err := startWatchdog(c.dataDir, c.removable()...)
	if err != nil {
		return err
	}
	c.watchdog = cmd
	return nil
}

// preparePersistent readies the data directory of a persistent cluster and
// reports whether a server already running on it was adopted.
func (c *Cluster) preparePersistent(ctx context.Context, opt Options) (reused bool, err error) {
	link, err := filepath.Abs(opt.DataDir)
	if err != nil {
		return false, err
	}
	dir := link
	if real, err := filepath.EvalSymlinks(link); err == nil {
		dir = real // a relocation link from an earlier run
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	empty, err := isEmptyDir(dir)
	if err != nil {
		return false, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return false, err
	}
	if !c.own.owns(fi) {
		if !empty {
			return false, fmt.Errorf("data dir %s belongs to another user; the server runs as %s (chown -R %s %s, or remove it)", dir, ServerUser, ServerUser, dir)
		}
		if err := c.own.chown(dir); err != nil {
			return false, err
		}
	}
	if !c.own.canUse(dir) {
		if !empty || dir != link {
			return false, fmt.Errorf("user %s cannot reach data dir %s: a parent directory is not searchable by it", ServerUser, dir)
		}
		if dir, err = c.relocate(ctx, link); err != nil {
			return false, err
		}
		empty = true
	}
	c.dataDir = dir

	if exists(filepath.Join(dir, "PG_VERSION")) {
		reused, err := c.adopt(ctx, opt.Port)
		if err != nil || reused {
			return reused, err
		}
	} else if !empty {
		return false, fmt.Errorf("data dir %s is neither empty nor a PostgreSQL data directory (no PG_VERSION)", dir)
	}

	sock, err := os.MkdirTemp(tempParent(c.own), sockPrefix)
	if err != nil {
		return false, err
	}
	c.sockDir, c.removeSock = sock, true
	return false, c.own.chown(sock)
}

// relocate moves an unreachable, empty persistent data directory to
// relocateBase and leaves a symbolic link in its place.
func (c *Cluster) relocate(ctx context.Context, link string) (string, error) {
	sum := sha256.Sum256([]byte(link))
	target := filepath.Join(relocateBase, "pgdata-"+hex.EncodeToString(sum[:6]))
	if exists(target) {
		// The link was removed, and with it the data: start afresh.
		old := &Cluster{bin: c.bin, own: c.own, dataDir: target, logf: c.logf}
		if exists(filepath.Join(target, "postmaster.pid")) {
			_ = old.pgCtl(ctx, "stop", "-m", "immediate", "-t", "30")
		}
		if err := os.RemoveAll(target); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(relocateBase, 0o755); err != nil {
		return "", err
	}
	if err := os.Mkdir(target, 0o700); err != nil {
		return "", err
	}
	if err := c.own.chown(target); err != nil {
		return "", err
	}
	if !c.own.canUse(target) {
		return "", fmt.Errorf("user %s cannot reach %s either", ServerUser, target)
	}
	if err := os.Remove(link); err != nil {
		return "", err
	}
	if err := os.Symlink(target, link); err != nil {
		return "", err
	}
	c.logf("pgcluster: user %s cannot reach %s; the data lives in %s (linked from there)", ServerUser, link, target)
	return target, nil
}

// adopt looks for a server from an earlier run on the data directory. It
// reuses it (reporting true) when it answers and no other port is asked for,
// and stops it otherwise.
func (c *Cluster) adopt(ctx context.Context, port int) (bool, error) {
	pidFile := filepath.Join(c.dataDir, "postmaster.pid")
	lines, err := readLines(pidFile, 5)
	if err != nil || len(lines) < 5 {
		return false, nil // not running; a stale file is postgres's business
	}
	pid, _ := strconv.Atoi(lines[0])
	if pid <= 0 || !c.isPostmaster(pid) {
		return false, nil
	}
	runningPort, _ := strconv.Atoi(lines[3])
	c.sockDir, c.port = lines[4], runningPort
	c.removeSock = strings.HasPrefix(filepath.Base(c.sockDir), sockPrefix)
	if c.ping(ctx) == nil && (port == 0 || port == runningPort) {
		if err := c.writeConf(); err != nil {
			return false, err
		}
		if err := c.pgCtl(ctx, "reload"); err != nil {
			return false, err
		}
		c.logf("pgcluster: reusing the server already running in %s (pid %d, port %d)", c.dataDir, pid, c.port)
		return true, nil
	}
	c.logf("pgcluster: stopping the server left running in %s (pid %d)", c.dataDir, pid)
	if err := c.pgCtl(ctx, "stop", "-m", "fast", "-t", "60"); err != nil {
		return false, fmt.Errorf("a server (pid %d) is running in %s and could not be stopped: %w", pid, c.dataDir, err)
	}
	if c.removeSock {
		_ = os.RemoveAll(c.sockDir)
	}
	c.sockDir, c.port, c.removeSock = "", 0, false
	return false, nil
}

// launch writes the settings and starts the server, retrying with another
// port if an automatically chosen one was taken meanwhile.
func (c *Cluster) launch(ctx context.Context, port int) error {
	logPath := filepath.Join(c.dataDir, LogFile)
	for attempt := 1; ; attempt++ {
		c.port = port
		if port == 0 {
			p, err := freePort()
			if err != nil {
				return err
			}
			c.port = p
		}
		if err := c.writeConf(); err != nil {
			return err
		}
		logStart := fileSize(logPath)
		err := c.pgCtl(ctx, "start", "-t", "60", "-l", logPath)
		if err == nil {
			break
		}
		tail := readFrom(logPath, logStart)
		if port == 0 && attempt < startAttempts && strings.Contains(tail, "could not bind") {
			continue
		}
		if tail != "" {
			return fmt.Errorf("start server: %w\n%s:\n%s", err, logPath, tail)
		}
		return fmt.Errorf("start server: %w", err)
	}
	if err := c.ping(ctx); err != nil {
		return fmt.Errorf("server started but does not accept connections: %w", err)
	}
	c.logf("pgcluster: PostgreSQL running in %s on port %d, socket in %s", c.dataDir, c.port, c.sockDir)
	return nil
}

// includeConf makes postgresql.conf include confFile, once.
func (c *Cluster) includeConf() error {
	path := filepath.Join(c.dataDir, "postgresql.conf")
	conf, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	line := "include_if_exists = '" + confFile + "'"
	if strings.Contains(string(conf), "\n"+line+"\n") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "\n# Settings of the queen embedded cluster, rewritten on every start.\n%s\n", line)
	return errors.Join(err, f.Close())
}

// writeConf writes the settings read at the next start or reload.
func (c *Cluster) writeConf() error {
	var b strings.Builder
	b.WriteString("# Written by queen's pgcluster on every start: edits here are lost.\n")
	fmt.Fprintf(&b, "port = %d\n", c.port)
	b.WriteString("listen_addresses = '127.0.0.1'\n")
	fmt.Fprintf(&b, "unix_socket_directories = %s\n", confQuote(c.sockDir))
	fmt.Fprintf(&b, "max_connections = %d\n", MaxConnections)
	fmt.Fprintf(&b, "shared_buffers = %s\n", confQuote(SharedBuffers))
	if !c.durable {
		b.WriteString("# Not durable: fast, and an OS crash can lose or corrupt data.\n")
		b.WriteString("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
	}
	return c.own.writeFile(filepath.Join(c.dataDir, confFile), []byte(b.String()))
}

// pgCtl runs pg_ctl on the cluster's data directory, waiting for the action
// to complete, silently.
func (c *Cluster) pgCtl(ctx context.Context, action string, args ...string) error {
	return c.own.run(ctx, c.bin.pgCtl, append([]string{action, "-D", c.dataDir, "-w", "-s"}, args...)...)
}

// ping opens and closes one connection.
func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// safeTempDir matches temp dirs usable as is in a socket path and a
// configuration value.
var safeTempDir = regexp.MustCompile(`^/[A-Za-z0-9/._-]*$`)

// tempParent is where temp and socket dirs go: os.TempDir() when it is short
// (unix socket paths are limited to about 100 bytes), plain and reachable by
// the server account, else /tmp.
func tempParent(o *owner) string {
	dir := os.TempDir()
	if len(dir) <= 64 && safeTempDir.MatchString(dir) && (dir == "/tmp" || o.canUse(dir)) {
		return dir
	}
	return "/tmp"
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// confQuote quotes s as a postgresql.conf string value.
func confQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// isPostmaster reports whether process pid is the postmaster of this data
// directory, and not an unrelated process that got the pid of a stale
// postmaster.pid after a reboot (pg_ctl stop would signal it). Where /proc
// is missing it can only tell whether pid exists.
func (c *Cluster) isPostmaster(pid int) bool {
	if !exists("/proc/self/cwd") {
		return alive(pid)
	}
	// The postmaster runs in its data directory.
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(c.dataDir)
	return err == nil && cwd == want
}

// alive reports whether process pid exists (possibly as another user).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the end of a log file from offset on, at most 4 KiB.
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if size := fileSize(path); size-offset > 4096 {
		offset = size - 4096
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// readLines returns up to n lines of a file.
func readLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for len(lines) < n && s.Scan() {
		lines = append(lines, strings.TrimSpace(s.Text()))
	}
	return lines, s.Err()
}
