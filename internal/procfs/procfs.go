// Package procfs reads what the dev tools need of Linux's /proc: a
// process's state, parent and CPU time, and a process's children. Elsewhere
// every read fails (ok false, or an error).
package procfs

import (
	"os"
	"strconv"
	"strings"
)

// Stat is part of /proc/<pid>/stat.
type Stat struct {
	State byte  // R, S, D, Z, T, …
	PPID  int   // parent
	Ticks int64 // user + system CPU time, in USER_HZ (1/100 s)
	// ChildTicks is the user + system CPU time of its children that have
	// exited and been waited for: what leaves Ticks of the live children
	// when one exits.
	ChildTicks int64
}

// Read reads process pid's Stat; ok is false when it cannot (gone, or no
// /proc).
func Read(pid int) (Stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, state
	if len(f) < 15 || len(f[0]) != 1 {
		return Stat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Stat{}, false
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	cutime, _ := strconv.ParseInt(f[13], 10, 64)
	cstime, _ := strconv.ParseInt(f[14], 10, 64)
	return Stat{State: f[0][0], PPID: ppid, Ticks: utime + stime, ChildTicks: cutime + cstime}, true
}

// Children returns the live (not zombie) processes whose parent is ppid.
func Children(ppid int) ([]int, error) {
	return find(func(pid int) bool {
		st, ok := Read(pid)
		return ok && st.PPID == ppid && st.State != 'Z'
	})
}

// InDir returns the processes whose working directory is dir (a
// PostgreSQL server's processes all run in its data directory).
func InDir(dir string) ([]int, error) {
	return find(func(pid int) bool {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		return err == nil && cwd == dir
	})
}

// find returns the processes for which match holds.
func find(match func(pid int) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && match(pid) {
			out = append(out, pid)
		}
	}
	return out, nil
}
