package pgcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

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
