package pgstore

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// routine is one function the routines' script creates.
type routine struct {
	name, file string
	lines      int
	body       string
}

var (
	createFunction = regexp.MustCompile(`(?m)^CREATE (?:OR REPLACE )?FUNCTION queen\.(\w+)\(`)
	callOf         = regexp.MustCompile(`queen\.(\w+)\s*\(`)
)

// routines parses the routines' files: every function, with its body and
// length (from CREATE to the end of its body).
func routines(t *testing.T) []routine {
	t.Helper()
	entries, err := fs.ReadDir(routinesFS, "sql/routines")
	if err != nil {
		t.Fatal(err)
	}
	var out []routine
	for _, e := range entries {
		b, err := routinesFS.ReadFile("sql/routines/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		locs := createFunction.FindAllStringSubmatchIndex(text, -1)
		for i, loc := range locs {
			end := len(text)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			body := text[loc[0]:end]
			// The body ends at its closing quote: $fn$; or $$; on a line.
			if j := regexp.MustCompile(`(?m)^\$(fn)?\$;`).FindStringIndex(body); j != nil {
				body = body[:j[1]]
			}
			out = append(out, routine{name: text[loc[2]:loc[3]], file: e.Name(), body: body,
				lines: strings.Count(body, "\n") + 1})
		}
	}
	return out
}

// goCallers returns the routines the engine's Go code calls: in its
// non-test Go files and its statements (sql/*.sql), and the typed
// statements' routines.
func goCallers(t *testing.T) map[string]bool {
	t.Helper()
	roots := map[string]bool{}
	for _, sh := range typedShapes() {
		roots[strings.TrimPrefix(sh.routine, "queen.")] = true
	}
	files, err := fs.Glob(sqlFS, "sql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, _ := sqlFS.ReadFile(f)
		for _, m := range callOf.FindAllStringSubmatch(string(b), -1) {
			roots[m[1]] = true
		}
	}
	// Go code anywhere in the module may call a routine in its own SQL.
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "cdk.out" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range callOf.FindAllStringSubmatch(string(b), -1) {
			roots[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The schema may call routines (indexes, defaults, triggers).
	for _, mg := range Migrations() {
		for _, m := range callOf.FindAllStringSubmatch(mg.SQL, -1) {
			roots[m[1]] = true
		}
	}
	return roots
}

// Every routine has a caller outside the tests: the engine's Go code, the
// schema, another routine that has one, or — for one release — the
// previous release's code (the routines of its compat file).
func TestEveryRoutineHasACaller(t *testing.T) {
	rs := routines(t)
	byName := map[string][]routine{}
	for _, r := range rs {
		byName[r.name] = append(byName[r.name], r)
	}
	reached := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		if reached[name] {
			return
		}
		reached[name] = true
		for _, r := range byName[name] {
			for _, m := range callOf.FindAllStringSubmatch(r.body, -1) {
				visit(m[1])
			}
		}
	}
	for name := range goCallers(t) {
		visit(name)
	}
	for _, r := range rs {
		if isCompatFile(r.file) {
			visit(r.name)
		}
	}
	var orphans []string
	for _, r := range rs {
		if !reached[r.name] {
			orphans = append(orphans, r.file+": queen."+r.name)
		}
	}
	slices.Sort(orphans)
	orphans = slices.Compact(orphans)
	if len(orphans) > 0 {
		t.Errorf("routines nothing calls outside the tests (delete them, or call them):\n  %s", strings.Join(orphans, "\n  "))
	}
}

// compatFile matches the file of a release's entry points kept for the
// release after it: NN_release_MAJOR.MINOR.sql.
var compatFile = regexp.MustCompile(`^\d\d_release_(\d+)\.(\d+)\.sql$`)

func isCompatFile(name string) bool { return compatFile.MatchString(name) }

// A release's entry points live in a file named for it and answer the
// release after it only: once VERSION is past that one, the file must go.
func TestCompatRetired(t *testing.T) {
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	var major, minor, patch int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("VERSION %q: %v", b, err)
	}
	entries, err := fs.ReadDir(routinesFS, "sql/routines")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		m := compatFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		cmajor, _ := strconv.Atoi(m[1])
		cminor, _ := strconv.Atoi(m[2])
		// The release after cmajor.cminor is cmajor.cminor+1, or
		// cmajor+1.0.
		next := major == cmajor && minor <= cminor+1 || major == cmajor+1 && minor == 0
		if !next {
			t.Errorf("sql/routines/%s serves release %d.%d, and this is %d.%d.%d: delete it (and its calls in TestPreviousReleaseCallsWork)",
				e.Name(), cmajor, cminor, major, minor, patch)
		}
	}
}

// maxRoutineLines bounds a routine's length, from CREATE to the end of its
// body, comments included: a routine longer than a screenful does more
// than one thing.
const maxRoutineLines = 80

func TestRoutinesAreShort(t *testing.T) {
	longest := map[string]routine{} // of a name's overloads
	for _, r := range routines(t) {
		if r.lines > longest[r.name].lines {
			longest[r.name] = r
		}
	}
	for name, r := range longest {
		if r.lines > maxRoutineLines {
			t.Errorf("%s: queen.%s is %d lines, over %d: split it", r.file, name, r.lines, maxRoutineLines)
		}
	}
}
