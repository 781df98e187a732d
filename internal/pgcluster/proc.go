package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ServerUser is the unprivileged account the server programs run as when
// this process runs as root: initdb, pg_ctl and postgres all refuse root.
const ServerUser = "postgres"

// owner is the account the server programs run as: nil means as ourselves.
type owner struct {
	uid, gid int
}

// serverOwner returns nil when we are not root, else the ServerUser account.
func serverOwner() (*owner, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(ServerUser)
	if err != nil {
		return nil, fmt.Errorf("running as root: PostgreSQL refuses to run as root and there is no user %q to run it as (create one: useradd --system %s): %w", ServerUser, ServerUser, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", ServerUser, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", ServerUser, u.Gid, err)
	}
	return &owner{uid: uid, gid: gid}, nil
}

// chown gives path to the server account; a no-op when not root.
func (o *owner) chown(path string) error {
	if o == nil {
		return nil
	}
	return os.Lchown(path, o.uid, o.gid)
}

// owns reports whether path belongs to the server account (always true when
// not root).
func (o *owner) owns(fi fs.FileInfo) bool {
	if o == nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == o.uid
}

// command prepares a server program to run as the server account, in "/"
// (always reachable by it), without the libpq environment variables.
func (o *owner) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "/"
	cmd.Env = serverEnv()
	cmd.WaitDelay = 5 * time.Second
	if o != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: uint32(o.uid), Gid: uint32(o.gid), Groups: []uint32{},
		}}
	}
	return cmd
}

// run runs a server program and returns its combined output in the error.
func (o *owner) run(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := o.command(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			return fmt.Errorf("%s: %w", filepath.Base(name), err)
		}
		return fmt.Errorf("%s: %w: %s", filepath.Base(name), err, msg)
	}
	return nil
}

// canUse reports whether the server account can enter and write dir, which
// requires every parent to be searchable by it (a project under /root is
// not). Always true when not root.
func (o *owner) canUse(dir string) bool {
	if o == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return o.run(ctx, "/bin/sh", "-c", `test -d "$1" && test -x "$1" && test -w "$1"`, "sh", dir) == nil
}

// writeFile writes a file the server reads, owned by the server account.
func (o *owner) writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return o.chown(path)
}

// watchdogScript waits for the process $1 to die, then shuts the cluster in
// data directory $2 down immediately (SIGQUIT to the postmaster) and removes
// the remaining arguments. It is how a cluster owned by a process that dies
// without calling Stop (a panicking test binary, a SIGKILL) goes away within
// a couple of seconds.
const watchdogScript = `
parent=$1 data=$2
shift 2
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
n=0
while [ -f "$data/postmaster.pid" ] && [ $n -lt 100 ]; do
	pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null)
	case "$pid" in ''|*[!0-9]*) break ;; esac
	kill -0 "$pid" 2>/dev/null || break
	kill -QUIT "$pid" 2>/dev/null
	sleep 0.1
	n=$((n+1))
done
rm -rf "$@"
`

// startWatchdog starts the detached watchdog for the cluster in dataDir,
// removing paths once this process is gone. It runs in its own session (a
// Ctrl-C of the test run does not reach it) with stdio on /dev/null, so it
// never holds the pipes `go test` reads from.
func startWatchdog(dataDir string, paths ...string) (*exec.Cmd, error) {
	args := append([]string{"-c", watchdogScript, "queen-pgcluster-watchdog", strconv.Itoa(os.Getpid()), dataDir}, paths...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir = "/"
	// nil Stdin, Stdout and Stderr are /dev/null.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start watchdog: %w", err)
	}
	return cmd, nil
}

// stopWatchdog kills the watchdog's process group (the shell and its sleep)
// and reaps it.
func stopWatchdog(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = cmd.Process.Kill()
	}
	_ = cmd.Wait()
}
