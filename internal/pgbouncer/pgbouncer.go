// Package pgbouncer runs PgBouncer in transaction mode in front of a
// PostgreSQL database: the local stand-in for RDS Proxy, for the pooler
// test and the chaos harness.
package pgbouncer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled means pgbouncer is not installed.
var ErrNotInstalled = errors.New("pgbouncer is not installed (Debian: apt-get install pgbouncer; .ci/run installs it)")

// settings are the pooler's settings beyond the connection and the pool
// size: the local stand-in for RDS Proxy, in transaction mode. server_login_retry
// (default 15 s) is how long PgBouncer waits after a failed login to the
// server before it tries again; RDS Proxy keeps trying, so 1 s here.
// query_wait_timeout makes a query that waits for a server connection
// longer than that fail (the engine must answer 503), as RDS Proxy's
// connection borrow timeout does.
const settings = `pool_mode = transaction
max_client_conn = 200
server_reset_query =
server_login_retry = 1
server_connect_timeout = 5
query_wait_timeout = 10
`

// Bouncer is one PgBouncer process in front of a database, restartable
// on the same port.
type Bouncer struct {
	bin  string
	dir  string
	port int
	user string
	cred *syscall.Credential
	cmd  *exec.Cmd
	exit chan struct{} // closed when cmd has been waited for
}

// Find returns the pgbouncer binary, or ErrNotInstalled.
func Find() (string, error) {
	if bin, err := exec.LookPath("pgbouncer"); err == nil {
		return bin, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// New writes the configuration for a PgBouncer in front of dbURL (exposed
// as database "queen") in dir, on a free port, with poolSize server
// connections. It does not start it. Run as root, it runs as the postgres
// user, which must be able to reach dir.
func New(dir, dbURL string, poolSize int) (*Bouncer, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	cc, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	b := &Bouncer{bin: bin, dir: dir, port: port, user: cc.User}
	ini := fmt.Sprintf(`[databases]
queen = host=%s port=%d dbname=%s user=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
logfile = %s
default_pool_size = %d
%s`, cc.Host, cc.Port, cc.Database, cc.User, port,
		filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"), poolSize, settings)
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", cc.User)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() == 0 { // pgbouncer refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs a postgres user for pgbouncer: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		b.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	return b, nil
}

// URL is the connection URL of database "queen" through the pooler.
func (b *Bouncer) URL() string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/queen?sslmode=disable", b.user, b.port)
}

// Start runs pgbouncer and returns once it accepts connections.
func (b *Bouncer) Start(ctx context.Context) error {
	cmd := exec.Command(b.bin, filepath.Join(b.dir, "pgbouncer.ini"))
	cmd.Dir = "/"
	cmd.SysProcAttr = childAttrs(b.cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start pgbouncer: %w", err)
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	b.cmd, b.exit = cmd, exit
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exit:
			log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
			return fmt.Errorf("pgbouncer exited at start: %s", Tail(string(log), 2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgbouncer does not accept connections on %s: %w", addr, err)
		}
	}
}

// Kill ends pgbouncer with SIGKILL (every client and server connection
// drops at once) and waits for it to be gone.
func (b *Bouncer) Kill() error {
	if b.cmd == nil {
		return nil
	}
	if err := b.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill pgbouncer: %w", err)
	}
	<-b.exit
	b.cmd = nil
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
