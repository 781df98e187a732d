package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutRoots are the folders whose packages the README's Layout table
// names one by one.
var layoutRoots = []string{"core", "internal"}

// TestLayoutNamesEveryPackage holds the README's Layout table to the tree:
// every package directly under core/ and internal/ has a row, and every
// path a row names exists.
func TestLayoutNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")

	// The first cell of each row: one or more `path`s.
	named := map[string]bool{}
	cell := regexp.MustCompile("(?m)^\\| (`[^|]*`) \\|")
	path := regexp.MustCompile("`([^`]+)`")
	for _, row := range cell.FindAllStringSubmatch(layout, -1) {
		for _, p := range path.FindAllStringSubmatch(row[1], -1) {
			named[p[1]] = true
			if m, _ := filepath.Glob(filepath.Join("../..", p[1])); len(m) == 0 {
				t.Errorf("README Layout names %s, which does not exist", p[1])
			}
		}
	}
	if len(named) == 0 {
		t.Fatal("README Layout: no rows found")
	}

	for _, root := range layoutRoots {
		entries, err := os.ReadDir(filepath.Join("../..", root))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			pkg := root + "/" + e.Name()
			if !e.IsDir() || !hasGoSource(t, filepath.Join("../..", pkg)) {
				continue
			}
			if !named[pkg] {
				t.Errorf("README Layout has no row for %s: add one, from its package comment", pkg)
			}
		}
	}
}

// hasGoSource reports whether dir holds a non-test .go file.
func hasGoSource(t *testing.T, dir string) bool {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m {
		if !strings.HasSuffix(f, "_test.go") {
			return true
		}
	}
	return false
}
