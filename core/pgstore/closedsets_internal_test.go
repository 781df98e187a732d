package pgstore

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/refmodel"
)

// closedSetRegions returns, per closed set named in the routines, the
// string literals of its regions: the lines from `-- closed set: NAME` to
// `-- end closed set`, or one line ending in `-- closed set: NAME`.
func closedSetRegions(t *testing.T, sql string) map[string][]string {
	t.Helper()
	literal := regexp.MustCompile(`'((?:[^']|'')*)'`)
	out := map[string][]string{}
	open := ""
	for i, line := range strings.Split(sql, "\n") {
		code, comment, _ := strings.Cut(line, "--")
		comment = strings.TrimSpace(comment)
		name, marked := strings.CutPrefix(comment, "closed set: ")
		switch {
		case comment == "end closed set":
			if open == "" {
				t.Fatalf("routines line %d: an end with no closed set open", i+1)
			}
			open = ""
		case marked && strings.TrimSpace(code) == "": // a region opens
			open = name
		case marked: // a line of its own
			for _, m := range literal.FindAllStringSubmatch(code, -1) {
				out[name] = append(out[name], m[1])
			}
		case open != "":
			for _, m := range literal.FindAllStringSubmatch(code, -1) {
				out[open] = append(out[open], m[1])
			}
		}
	}
	if open != "" {
		t.Fatalf("closed set %s never ends", open)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// The closed sets of strings a client sees — ack outcomes, ack results,
// the codes of a refused item — are defined once for the engine's Go side
// (core/queen). The routines that produce them, and the reference model
// that judges them, must have exactly the same sets.
func TestClosedSetsAgree(t *testing.T) {
	regions := closedSetRegions(t, routinesSQL)
	var statuses []string
	for _, s := range queen.AckStatuses() {
		statuses = append(statuses, string(s))
	}
	for _, c := range []struct {
		name        string
		engine      []string
		model       []string
		sqlProduces bool // the routines write every value in marked regions
	}{
		{"ack results", queen.AckResults(), []string{refmodel.ResultCommitted, refmodel.ResultAlreadyCommitted,
			refmodel.ResultDeadLettered, refmodel.ResultRedelivered, refmodel.ResultNotApplied}, true},
		{"ack codes", queen.AckCodes(), []string{refmodel.CodeNotFound, refmodel.CodeConflict, refmodel.CodeSkipped}, true},
		{"ack statuses", statuses, []string{refmodel.Completed, refmodel.Failed, refmodel.Retry, refmodel.DLQ}, false},
	} {
		if !slices.Equal(sorted(c.engine), sorted(c.model)) {
			t.Errorf("%s: the engine has %q, the reference model %q", c.name, sorted(c.engine), sorted(c.model))
		}
		if c.sqlProduces {
			if got := sorted(regions[c.name]); !slices.Equal(got, sorted(c.engine)) {
				t.Errorf("%s: the routines produce %q, the engine defines %q", c.name, got, sorted(c.engine))
			}
			continue
		}
		for _, v := range c.engine {
			if !strings.Contains(routinesSQL, "'"+v+"'") {
				t.Errorf("%s: the routines never test for %q", c.name, v)
			}
		}
	}
	for name := range regions {
		if name != "ack results" && name != "ack codes" {
			t.Errorf("the routines mark a closed set %q this test does not know", name)
		}
	}
}
