package repocheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxSourceLines is the most lines a non-test Go file may have (issue 35): a
// longer file is split by responsibility, so its name says what it holds.
const maxSourceLines = 600

// skippedDirs are paths, relative to the repository root, that hold code
// not written here: the CDK toolchain and CDK's synthesized output.
var skippedDirs = []string{"infra/_tools", "infra/cdk.out"}

// oversized walks the tree at root and returns every non-test .go file with
// more than limit lines, as "path: N lines" relative to root, sorted. It
// skips skippedDirs, node_modules and dot-directories, and descends into
// nested modules (infra/ is one).
func oversized(root string, limit int) (long []string, err error) {
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || slices.Contains(skippedDirs, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := lineCount(b); n > limit {
			long = append(long, fmt.Sprintf("%s: %d lines", rel, n))
		}
		return nil
	})
	slices.Sort(long)
	return long, err
}

// lineCount counts lines as wc -l does, plus an unterminated last line.
func lineCount(b []byte) int {
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// repoRoot is the repository root: two levels above this package, where
// the root module's go.mod is.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/queen-serverless/queen\n")) {
		t.Fatalf("%s is not the repository root (go.mod: %v)", root, err)
	}
	return root
}

// Every non-test Go file of the repository, the infra module's included,
// stays within maxSourceLines.
func TestSourceFilesAreSmall(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	// With limit 0 every non-empty file is listed: the walk must reach both
	// modules, or the check below passes on nothing.
	all, err := oversized(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"core/httpapi/httpapi.go", "infra/queenstack/stack.go"} {
		if !slices.ContainsFunc(all, func(s string) bool { return strings.HasPrefix(s, f+": ") }) {
			t.Fatalf("the walk of %s did not reach %s", root, f)
		}
	}
	long, err := oversized(root, maxSourceLines)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) > 0 {
		t.Errorf("%d non-test Go files exceed %d lines; split each by responsibility into files named for what they hold:\n\t%s",
			len(long), maxSourceLines, strings.Join(long, "\n\t"))
	}
}

// The check finds a long file in a nested module and skips what it should:
// tests, dot-directories, node_modules and the CDK output and toolchain.
func TestOversizedFindsLongFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	long := strings.Repeat("// x\n", 601)
	write := func(rel, text string) {
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("a/short.go", strings.Repeat("// x\n", 600))
	write("a/long.go", long)
	write("a/unterminated.go", long[:len(long)-1])
	write("infra/go.mod", "module example.com/m/infra\n")
	write("infra/stack/long.go", long)
	write("a/long_test.go", long)
	write("a/long.txt", long)
	write(".git/long.go", long)
	write("a/node_modules/long.go", long)
	write("infra/_tools/long.go", long)
	write("infra/cdk.out/long.go", long)
	got, err := oversized(root, maxSourceLines)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/long.go: 601 lines", "a/unterminated.go: 601 lines", "infra/stack/long.go: 601 lines"}
	if !slices.Equal(got, want) {
		t.Errorf("oversized = %q, want %q", got, want)
	}
}
