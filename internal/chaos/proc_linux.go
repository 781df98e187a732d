//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/queen-serverless/queen/internal/procfs"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// becomeSubreaper makes this process adopt its orphaned descendants. pg_ctl
// starts the postmaster and exits, so the postmaster is an orphan; killed,
// it stays a zombie until its parent reaps it, and PostgreSQL refuses to
// start while the pid in its lock file exists. Where the init process does
// not reap (containers), only a subreaper can.
func becomeSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	return nil
}

// children returns the live processes whose parent is ppid.
func children(ppid int) ([]int, error) { return procfs.Children(ppid) }

// processesIn returns the processes whose working directory is dir: a
// PostgreSQL server's processes all run in its data directory.
func processesIn(dir string) ([]int, error) { return procfs.InDir(dir) }

// exited reports whether process pid has ended, reaping it when it is this
// process's child (or orphan, as a subreaper).
func exited(pid int) bool {
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	switch {
	case got == pid:
		return true
	case err == nil:
		return false // our child, still running
	case !errors.Is(err, syscall.ECHILD):
		return false
	}
	st, ok := procfs.Read(pid)
	return !ok || st.State == 'Z'
}

// signal sends sig to pid; a process that is already gone is not an error.
func signal(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill -%d %d: %w", sig, pid, err)
	}
	return nil
}
