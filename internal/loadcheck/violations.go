package loadcheck

import (
	"fmt"
	"sort"
	"sync"
)

// Kinds of violation the harnesses share; a harness may count kinds of its
// own (soak: dedup) in the same Violations.
const (
	KindLost  = "lost"  // something acknowledged is gone: a push, an ack's commit or dead letter
	KindGap   = "gap"   // an offset of a partition's log missing, or no push was answered with it
	KindOrder = "order" // first deliveries out of offset order
	KindOther = "other" // any other broken promise (status codes, model mismatches, …)
)

// ShownPerKind is how many descriptions Violations keeps of each kind.
const ShownPerKind = 15

// Violations counts broken promises by kind and keeps the first
// ShownPerKind descriptions of each. The zero value is ready to use and
// safe for concurrent use.
type Violations struct {
	mu     sync.Mutex
	counts map[string]int
	shown  map[string][]string
}

// Add counts one violation of kind, described by format and args.
func (v *Violations) Add(kind, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.counts == nil {
		v.counts, v.shown = map[string]int{}, map[string][]string{}
	}
	v.counts[kind]++
	if len(v.shown[kind]) < ShownPerKind {
		v.shown[kind] = append(v.shown[kind], fmt.Sprintf(format, args...))
	}
}

// Count is the number of violations of kind.
func (v *Violations) Count(kind string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.counts[kind]
}

// Describe lists the violations kept, by kind: a count line per kind, then
// its descriptions indented, then how many more were counted.
func (v *Violations) Describe() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	kinds := make([]string, 0, len(v.counts))
	for k := range v.counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var out []string
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%s: %d", k, v.counts[k]))
		for _, s := range v.shown[k] {
			out = append(out, "  "+s)
		}
		if n := v.counts[k] - len(v.shown[k]); n > 0 {
			out = append(out, fmt.Sprintf("  … and %d more", n))
		}
	}
	return out
}
