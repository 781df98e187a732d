package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func startCluster(t *testing.T, opt Options) *Cluster {
	t.Helper()
	opt.Logf = t.Logf
	c, err := Start(t.Context(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func queryString(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(t.Context(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// reachableTempDir makes a temp dir the server account can use even when
// the test runs as root (t.TempDir is private to root).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "queen-pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestStartStopThrowaway(t *testing.T) {
	t.Parallel()
	c := startCluster(t, Options{})
	dataDir, sockDir := c.DataDir(), c.SocketDir()
	if c.Port() <= 0 {
		t.Fatalf("Port() = %d", c.Port())
	}
	if len(filepath.Join(sockDir, ".s.PGSQL.65535")) > 100 {
		t.Errorf("socket path too long: %s", sockDir)
	}

	conn := connect(t, c.URL("postgres"))
	var one int
	if err := conn.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	for setting, want := range map[string]string{
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		"max_connections":    "200",
		"shared_buffers":     "128MB",
		"listen_addresses":   "127.0.0.1",
		"server_encoding":    "UTF8",
		"lc_collate":         "C",
	} {
		if got := queryString(t, conn, "SHOW "+setting); got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, LogFile)); err != nil {
		t.Errorf("server log: %v", err)
	}

	// TCP on 127.0.0.1 works too.
	tcp := connect(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port()))
	if err := tcp.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	tcp.Close(t.Context())

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{dataDir, sockDir} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Stop (%v)", dir, err)
		}
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := pgx.Connect(t.Context(), c.URL("postgres")); err == nil {
		t.Error("connected after Stop")
	}
}

func TestTwoClustersAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full lane (make test) starts these clusters")
	}
	t.Parallel()
	a := startCluster(t, Options{})
	b := startCluster(t, Options{})
	if a.Port() == b.Port() || a.SocketDir() == b.SocketDir() || a.DataDir() == b.DataDir() {
		t.Fatalf("clusters share a port or directory: %d %d, %s %s", a.Port(), b.Port(), a.SocketDir(), b.SocketDir())
	}
	ca, cb := connect(t, a.URL("postgres")), connect(t, b.URL("postgres"))
	if _, err := ca.Exec(t.Context(), "CREATE TABLE only_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, cb, "SELECT (to_regclass('only_in_a') IS NULL)::text"); got != "true" {
		t.Fatal("cluster b sees a's table")
	}
	if got := queryString(t, ca, "SHOW port"); got != strconv.Itoa(a.Port()) {
		t.Errorf("a: port %s, want %d", got, a.Port())
	}
}

func TestPersistent(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(reachableTempDir(t), "pgdata")
	opt := Options{DataDir: dir, Persistent: true, Durable: true}

	c := startCluster(t, opt)
	conn := connect(t, c.URL("postgres"))
	if got := queryString(t, conn, "SHOW fsync"); got != "on" {
		t.Errorf("durable cluster: fsync = %s", got)
	}
	if _, err := conn.Exec(t.Context(), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')"); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		t.Fatalf("data dir gone after Stop: %v", err)
	}
	if _, err := os.Stat(c.SocketDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket dir %s left behind (%v)", c.SocketDir(), err)
	}

	c2 := startCluster(t, opt)
	conn2 := connect(t, c2.URL("postgres"))
	if got := queryString(t, conn2, "SELECT v FROM kept"); got != "hello" {
		t.Fatalf("after restart: %q", got)
	}
	conn2.Close(t.Context())

	// The process owning c2 "dies" without Stop: the next Start adopts the
	// running server, with the settings of the new Options.
	c3 := startCluster(t, Options{DataDir: dir, Persistent: true})
	if c3.Port() != c2.Port() || c3.SocketDir() != c2.SocketDir() {
		t.Errorf("adopted server moved: port %d→%d, socket %s→%s", c2.Port(), c3.Port(), c2.SocketDir(), c3.SocketDir())
	}
	conn3 := connect(t, c3.URL("postgres"))
	if got := queryString(t, conn3, "SELECT v FROM kept"); got != "hello" {
		t.Fatalf("adopted: %q", got)
	}
	if got := queryString(t, conn3, "SHOW fsync"); got != "off" {
		t.Errorf("adopted with Durable false: fsync = %s", got)
	}
	conn3.Close(t.Context())
	if err := c3.Stop(); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(dir, "postmaster.pid")) {
		t.Error("server still running after Stop of the adopting cluster")
	}
}

func TestPersistentUnreachableDataDirIsRelocated(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full lane (make test) starts these clusters")
	}
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	base := reachableTempDir(t)
	old := relocateBase
	relocateBase = filepath.Join(base, "relocated")
	t.Cleanup(func() { relocateBase = old })

	private := t.TempDir() // 0700, owned by root
	link := filepath.Join(private, "pgdata")
	c := startCluster(t, Options{DataDir: link, Persistent: true})
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatalf("data dir is not a link: %v", err)
	}
	if c.DataDir() != target || !strings.HasPrefix(target, relocateBase) {
		t.Errorf("DataDir() = %s, link to %s, want under %s", c.DataDir(), target, relocateBase)
	}
	connect(t, c.URL("postgres")).Close(t.Context())
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	c2 := startCluster(t, Options{DataDir: link, Persistent: true})
	if c2.DataDir() != target {
		t.Errorf("second start: DataDir() = %s, want %s", c2.DataDir(), target)
	}
}

func TestThrowawayDataDirMustBeEmpty(t *testing.T) {
	t.Parallel()
	dir := reachableTempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(t.Context(), Options{DataDir: dir}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Start on a non-empty dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatalf("existing file touched: %v", err)
	}
}

func TestFindBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := t.TempDir()
	if _, err := findBinaries(filepath.Join(root, "*", "bin")); !errors.Is(err, ErrBinariesNotFound) {
		t.Fatalf("no binaries: err = %v", err)
	}
	if !strings.Contains(ErrBinariesNotFound.Error(), "apt-get install postgresql") {
		t.Errorf("error does not say what to install: %v", ErrBinariesNotFound)
	}
	install := func(version string, programs ...string) {
		dir := filepath.Join(root, version, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range programs {
			if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	install("9.6", "pg_ctl", "initdb", "postgres")
	install("15", "pg_ctl", "initdb", "postgres")
	install("16", "pg_ctl", "initdb") // incomplete: no server
	b, err := findBinaries(filepath.Join(root, "*", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "15", "bin"); b.dir != want {
		t.Errorf("picked %s, want %s", b.dir, want)
	}

	// pg_ctl on PATH wins when its siblings are there.
	t.Setenv("PATH", filepath.Join(root, "9.6", "bin"))
	if b, err := findBinaries(filepath.Join(root, "*", "bin")); err != nil || b.dir != filepath.Join(root, "9.6", "bin") {
		t.Errorf("PATH: %+v, %v", b, err)
	}
}

// TestOrphanedClusterIsRemoved runs a child test process that starts a
// cluster and exits without Stop, as a panicking test binary would.
func TestOrphanedClusterIsRemoved(t *testing.T) {
	if os.Getenv("PGCLUSTER_ORPHAN_HELPER") == "1" {
		c, err := Start(context.Background(), Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		pid, _ := readLines(filepath.Join(c.DataDir(), "postmaster.pid"), 1)
		fmt.Println(c.DataDir(), c.SocketDir(), pid[0])
		os.Exit(3)
	}
	if testing.Short() {
		t.Skip("-short: the full lane (make test) starts these clusters")
	}
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestOrphanedClusterIsRemoved$")
	cmd.Env = append(os.Environ(), "PGCLUSTER_ORPHAN_HELPER=1")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output() // returns only once nothing holds the pipe
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("helper: %v: %s", err, out)
	}
	fields := strings.Fields(strings.TrimSpace(string(out)))
	if len(fields) != 3 {
		t.Fatalf("helper output: %q", out)
	}
	dataDir, sockDir := fields[0], fields[1]
	pid, err := strconv.Atoi(fields[2])
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's own watchdog removes it once the helper is gone; it
	// reports to no one, so its work is seen by polling the process and
	// the directories (every 100 ms, for up to a minute).
	var gone bool
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !alive(pid) && !exists(dataDir) && !exists(sockDir) {
			gone = true
			break
		}
	}
	if !gone {
		t.Fatalf("orphaned cluster survived: postmaster %d alive=%v, %s exists=%v", pid, alive(pid), dataDir, exists(dataDir))
	}
}

// TestPortTakenIsAnError checks that an explicit port in use fails clearly
// rather than silently moving.
func TestPortTakenIsAnError(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full lane (make test) starts these clusters")
	}
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c, err := Start(t.Context(), Options{Port: port})
	if err == nil {
		c.Stop()
		t.Fatal("started on a taken port")
	}
	if !strings.Contains(err.Error(), "could not bind") && !strings.Contains(err.Error(), "in use") {
		t.Errorf("error does not say why: %v", err)
	}
	t.Log(err)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv("PGCLUSTER_ORPHAN_HELPER") == "" {
		// Nothing of ours may outlive the tests.
		leftovers, _ := filepath.Glob(filepath.Join(os.TempDir(), "queen-pg-*"))
		for _, p := range leftovers {
			if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) < time.Minute {
				fmt.Fprintln(os.Stderr, "leftover temp dir:", p)
			}
		}
	}
	os.Exit(code)
}
