//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// children returns the processes whose parent is ppid.
func children(ppid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.ppid == ppid && st.state != 'Z' {
			out = append(out, pid)
		}
	}
	return out, nil
}

// processesIn returns the live processes whose working directory is dir:
// a PostgreSQL server's processes all run in its data directory.
func processesIn(dir string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && cwd == dir {
			out = append(out, pid)
		}
	}
	return out, nil
}

type procStatus struct {
	state byte
	ppid  int
}

// procStat reads a process's state and parent from /proc/<pid>/stat; ok is
// false when the process does not exist.
func procStat(pid int) (procStatus, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStatus{}, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStatus{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return procStatus{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStatus{}, false
	}
	return procStatus{state: f[0][0], ppid: ppid}, true
}

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
	st, ok := procStat(pid)
	return !ok || st.state == 'Z'
}

// signal sends sig to pid; a process that is already gone is not an error.
func signal(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill -%d %d: %w", sig, pid, err)
	}
	return nil
}
