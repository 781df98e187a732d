package pgcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrBinariesNotFound is returned by Start when no PostgreSQL server binaries
// (pg_ctl, initdb, postgres) can be found on PATH or under
// /usr/lib/postgresql/*/bin.
var ErrBinariesNotFound = errors.New("PostgreSQL server binaries not found: install them (Debian: apt-get install postgresql) or set DATABASE_URL")

// debianBinGlob is where Debian and Ubuntu install the server binaries, one
// directory per major version.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// binaries are the absolute paths of the server programs the cluster needs.
type binaries struct {
	dir    string
	pgCtl  string
	initdb string
}

// findBinaries looks for pg_ctl, initdb and postgres side by side: first
// the directory of pg_ctl on PATH, then the highest major version matching
// glob.
func findBinaries(glob string) (binaries, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		// Follow links (/usr/local/bin/pg_ctl -> /usr/lib/postgresql/15/bin):
		// the real directory holds the matching initdb and postgres.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if abs, err := filepath.Abs(real); err == nil {
				if b, ok := binariesIn(filepath.Dir(abs)); ok {
					return b, nil
				}
			}
		}
	}
	dirs, _ := filepath.Glob(glob)
	best, bestVersion := "", -1.0
	for _, dir := range dirs {
		// The version is the path element above bin: 15, 16, 9.6.
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		if err != nil || v <= bestVersion {
			continue
		}
		if _, ok := binariesIn(dir); ok {
			best, bestVersion = dir, v
		}
	}
	if best == "" {
		return binaries{}, ErrBinariesNotFound
	}
	b, _ := binariesIn(best)
	return b, nil
}

// binariesIn reports whether dir holds all three server programs.
func binariesIn(dir string) (binaries, bool) {
	for _, name := range []string{"pg_ctl", "initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return binaries{}, false
		}
	}
	return binaries{
		dir:    dir,
		pgCtl:  filepath.Join(dir, "pg_ctl"),
		initdb: filepath.Join(dir, "initdb"),
	}, true
}

// serverEnv is the environment for the server programs: ours without the
// libpq variables (PGPORT, PGDATA, PGHOST, ...), which would otherwise
// change the server's defaults.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
