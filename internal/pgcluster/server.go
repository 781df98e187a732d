package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/queen-serverless/queen/core/pgstore"
)

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
	for _, name := range slices.Sorted(maps.Keys(pgstore.ServerSettings)) {
		fmt.Fprintf(&b, "%s = %s\n", name, confQuote(pgstore.ServerSettings[name]))
	}
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
