package procfs_test

import (
	"os"
	"runtime"
	"slices"
	"testing"

	"github.com/queen-serverless/queen/internal/procfs"
)

func TestReadsThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs reads Linux's /proc")
	}
	st, ok := procfs.Read(os.Getpid())
	if !ok || st.PPID != os.Getppid() || (st.State != 'R' && st.State != 'S') {
		t.Fatalf("this process: %+v %v, want parent %d, running or sleeping", st, ok, os.Getppid())
	}
	kids, err := procfs.Children(os.Getppid())
	if err != nil || !slices.Contains(kids, os.Getpid()) {
		t.Fatalf("children of %d: %v %v, want this process among them", os.Getppid(), kids, err)
	}
	if _, ok := procfs.Read(-1); ok {
		t.Fatal("read a process that cannot exist")
	}
}
