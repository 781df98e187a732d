package httpapi_test

import (
	"fmt"
	"net/url"
	"sync"
	"testing"
)

// Concurrent retries of one dead letter re-push one copy; the others get
// 404; the dead letter is gone (docs/semantics.md §3.6.3).
func TestDLQConcurrentRetriesRepushOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const letters, racers = 10, 8
	for letter := range letters {
		part := fmt.Sprintf("r%d", letter)
		s.pushN("q", part, 1)
		p, ok := s.popGroup("q", part, "g", 1, "")
		if !ok {
			t.Fatalf("dead letter %d: pop empty", letter)
		}
		s.ackBatch("g", p.LeaseID, ackOf(p, 0, "dlq"))
		d := s.dlq("queue=q&partition=" + url.QueryEscape(part))
		if d.Total != 1 {
			t.Fatalf("dead letter %d: DLQ %+v, want the one dead letter", letter, d)
		}
		addr := s.URL + "/api/v1/messages/" + d.Messages[0].PartitionID + "/" + url.PathEscape(d.Messages[0].TransactionID) + "/retry"

		start := make(chan struct{})
		statuses := make([]int, racers)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i], errs[i] = postStatus(addr)
			}()
		}
		close(start)
		wg.Wait()
		ok2xx, notFound := 0, 0
		for i := range statuses {
			if errs[i] != nil {
				t.Fatalf("dead letter %d: retry %d: %v", letter, i, errs[i])
			}
			switch {
			case statuses[i] >= 200 && statuses[i] < 300:
				ok2xx++
			case statuses[i] == 404:
				notFound++
			}
		}
		if ok2xx != 1 || notFound != racers-1 {
			t.Errorf("dead letter %d: %d concurrent retries of one address answered %v; want exactly one 2xx and %d × 404",
				letter, racers, statuses, racers-1)
		}
		b := s.browse("queue=q&partition=" + url.QueryEscape(part))
		if len(b.Messages) != 2 {
			t.Errorf("dead letter %d: partition holds %d messages after the retries, want 2 (the original and exactly one re-pushed copy): %+v",
				letter, len(b.Messages), b.Messages)
		}
		if p, ok := s.popGroup("q", part, "g", 100, ""); !ok || len(p.Messages) != 1 {
			t.Errorf("dead letter %d: group pops %v after the retries, want exactly one re-pushed message", letter, offsets(p))
		}
		if d := s.dlq("queue=q&partition=" + url.QueryEscape(part)); d.Total != 0 {
			t.Errorf("dead letter %d: DLQ after retry %+v, want empty", letter, d)
		}
	}
}
