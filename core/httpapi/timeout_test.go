package httpapi_test

import (
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/queen"
)

// docs/semantics.md §3.4.6: a long-poll waits until its timeout, capped by
// the server. An absurd timeout must not overflow into an immediate 204.
func TestLongPollHugeTimeoutWaitsTheCap(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(cfg *httpapi.Config, _ *queen.Store) { cfg.MaxWait = time.Second })
	for _, timeout := range []string{"10000000000000", "99999999999999999999999"} {
		start := time.Now()
		s.expect("GET", "/api/v1/pop/queue/nothing?wait=true&timeout="+timeout, nil, 204)
		if d := time.Since(start); d < 900*time.Millisecond {
			t.Errorf("timeout=%s answered after %v, want the 1 s cap", timeout, d)
		}
	}
	for _, bad := range []string{"-1", "soon"} {
		if r := s.do("GET", "/api/v1/pop/queue/nothing?wait=true&timeout="+bad, nil); r.status != 400 {
			t.Errorf("timeout=%s: status %d, want 400", bad, r.status)
		}
	}
}
