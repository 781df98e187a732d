package soak

import (
	"fmt"
	"sort"
	"sync"
)

// Kinds of violation.
const (
	kindLost  = "lost"  // something acknowledged is gone: a push, an ack's commit or dead letter
	kindGap   = "gap"   // an offset of a partition's log no push was answered with
	kindOrder = "order" // first deliveries out of offset order
	kindDedup = "dedup" // a repeat inside the window accepted, or one past it refused
	kindOther = "other" // any other broken promise (status codes, model mismatches, …)
)

// violations counts broken promises by kind and keeps the first few
// descriptions of each.
type violations struct {
	mu     sync.Mutex
	counts map[string]int
	shown  map[string][]string
}

const shownPerKind = 15

func (v *violations) add(kind, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.counts == nil {
		v.counts, v.shown = map[string]int{}, map[string][]string{}
	}
	v.counts[kind]++
	if len(v.shown[kind]) < shownPerKind {
		v.shown[kind] = append(v.shown[kind], fmt.Sprintf(format, args...))
	}
}

func (v *violations) count(kind string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.counts[kind]
}

// describe lists the violations kept, by kind.
func (v *violations) describe() []string {
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
