package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/queen-serverless/queen/internal/pgcluster"
)

// database is the embedded cluster the faults act on.
type database struct {
	cluster *pgcluster.Cluster

	mu      sync.Mutex
	stopped []int // processes under SIGSTOP, to continue whatever happens
}

// killPostmaster kills the postmaster with SIGKILL, waits until it and every
// process of the server (backends, checkpointer, …: orphans now, which
// notice the postmaster's death and exit) are gone, leaves the database
// down for down, and restarts the server on the same data directory;
// PostgreSQL runs crash recovery. It returns the killed pid.
func (d *database) killPostmaster(ctx context.Context, down time.Duration) (int, error) {
	pid, err := d.cluster.PostmasterPID()
	if err != nil {
		return 0, err
	}
	if err := signal(pid, syscall.SIGKILL); err != nil {
		return 0, err
	}
	if err := d.waitGone(ctx, pid, time.Minute); err != nil {
		return pid, fmt.Errorf("after killing the postmaster %d: %w", pid, err)
	}
	pause(ctx, down)
	if err := d.cluster.Restart(ctx); err != nil {
		return pid, err
	}
	return pid, nil
}

// waitGone waits until the postmaster pid has exited and no process runs
// in the data directory any more, reaping those that are ours (as a
// subreaper, the orphans), polling /proc. A new server refuses to start
// while one of them still holds the old one's shared memory.
func (d *database) waitGone(ctx context.Context, pid int, limit time.Duration) error {
	dir, err := filepath.EvalSymlinks(d.cluster.DataDir())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	postmasterGone := false
	for {
		left, err := processesIn(dir)
		if err != nil {
			return err
		}
		if !postmasterGone {
			// Once: reaped, its pid may be reused by anyone.
			postmasterGone = exited(pid)
		}
		left = slices.DeleteFunc(left, exited)
		if len(left) == 0 && postmasterGone {
			return nil
		}
		if !postmasterGone {
			left = append(left, pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still running after %v", left, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stall stops the postmaster and every process it started with SIGSTOP,
// and continues them with SIGCONT when ctx ends or after d: the database
// stops answering without closing a connection. It returns the number of
// processes stopped.
func (d *database) stall(ctx context.Context, dur time.Duration) (int, error) {
	pid, err := d.cluster.PostmasterPID()
	if err != nil {
		return 0, err
	}
	// The postmaster first, so it forks nothing new while its children are
	// listed and stopped.
	if err := d.stop(pid); err != nil {
		return 0, err
	}
	kids, err := children(pid)
	if err != nil {
		d.resume()
		return 0, err
	}
	for _, k := range kids {
		if err := d.stop(k); err != nil {
			d.resume()
			return 0, err
		}
	}
	t := time.NewTimer(dur)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	n := len(kids) + 1
	return n, d.resume()
}

func (d *database) stop(pid int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = append(d.stopped, pid)
	return signal(pid, syscall.SIGSTOP)
}

// resume continues every stopped process, children before the postmaster.
func (d *database) resume() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var first error
	for i := len(d.stopped) - 1; i >= 0; i-- {
		if err := signal(d.stopped[i], syscall.SIGCONT); err != nil && first == nil {
			first = err
		}
	}
	d.stopped = nil
	return first
}
