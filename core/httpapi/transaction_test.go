package httpapi_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestTransactionFailedAckAppliesOnce sends a transaction that fails a
// delivered message without a leaseId and hands off to another queue,
// again and again, in sequence and at once: exactly one applies
// (docs/semantics.md §3.7.1); the others are refused with 409 and push
// nothing, and the message is charged one attempt — client retries cannot
// dead-letter it.
func TestTransactionFailedAckAppliesOnce(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"failed", "retry"} {
		for _, concurrent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/concurrent=%v", status, concurrent), func(t *testing.T) {
				t.Parallel()
				s := newServer(t)
				s.configure("src", map[string]any{"retryLimit": 3})
				s.pushN("src", "p", 1)
				p, ok := s.popGroup("src", "p", "g", 1, "")
				if !ok {
					t.Fatal("nothing to pop")
				}
				tx := fmt.Sprintf(`{"operations":[{"type":"ack","transactionId":%q,"partitionId":%q,"status":%q,`+
					`"consumerGroup":"g"},{"type":"push","items":[{"queue":"dst","payload":"handoff"}]}]}`,
					p.Messages[0].TransactionID, p.PartitionID, status)
				const copies = 6
				statuses := make([]int, copies)
				bodies := make([]string, copies)
				send := func(i int) {
					r := s.do("POST", "/api/v1/transaction", tx)
					statuses[i], bodies[i] = r.status, string(r.body)
				}
				if concurrent {
					var wg sync.WaitGroup
					for i := range copies {
						wg.Go(func() { send(i) })
					}
					wg.Wait()
				} else {
					for i := range copies {
						send(i)
					}
				}
				applied := 0
				for i, st := range statuses {
					switch {
					case st == 200:
						applied++
					case st != 409 || !strings.Contains(bodies[i], "lease"):
						t.Errorf("copy %d: %d %s, want 200 once and 409 naming the lease otherwise", i, st, bodies[i])
					}
				}
				if applied != 1 {
					t.Fatalf("%d copies applied, want exactly 1: %v", applied, statuses)
				}
				if b := s.browse("queue=dst"); len(b.Messages) != 1 {
					t.Fatalf("dst holds %d messages, want 1", len(b.Messages))
				}
				again, ok := s.popGroup("src", "p", "g", 1, "")
				if !ok {
					t.Fatal("the failed message is not redelivered")
				}
				want := 0
				if status == "failed" {
					want = 1
				}
				if again.Messages[0].RetryCount != want {
					t.Fatalf("retryCount %d after one %s, want %d", again.Messages[0].RetryCount, status, want)
				}
			})
		}
	}
}

// TestAckAfterSeekNamesTheLease: after a seek ends a lease, an ack under
// it is refused because of the lease (409), not as "not delivered".
func TestAckAfterSeekNamesTheLease(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.pushN("sk", "p", 3)
	p, ok := s.popGroup("sk", "p", "g", 3, "")
	if !ok {
		t.Fatal("nothing to pop")
	}
	s.expect("POST", "/api/v1/consumer-groups/g/queues/sk/seek", `{"toBeginning":true}`, 200)
	r := s.expect("POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[1].TransactionID,
		"partitionId": p.PartitionID, "status": "completed", "consumerGroup": "g", "leaseId": p.LeaseID}, 409)
	if msg := r.errorText(t); !strings.Contains(msg, "invalid or expired lease") {
		t.Fatalf("ack under the lease a seek ended: %q, want it to name the lease", msg)
	}
}
