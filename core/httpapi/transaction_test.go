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

// Of six identical concurrent transactions (ack under lease L + push,
// requiredLeases [L]) exactly one applies (§3.7.1); the others get 409 and
// push nothing. A replay afterwards is refused too. Five messages, each
// raced for in turn, so a race that is only usually lost still shows.
func TestIdenticalConcurrentTransactionsApplyOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const jobs, copies = 5, 6
	for job := range jobs {
		s.pushN("jobs", "a", 1)
		p, ok := s.popWildcard("jobs", "w", "&batch=1")
		if !ok {
			t.Fatalf("job %d: no job", job)
		}
		m := p.Messages[0]
		body := map[string]any{
			"operations": []map[string]any{
				{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "completed", "consumerGroup": "w"},
				{"type": "push", "items": []map[string]any{{"queue": "results", "partition": "r", "payload": map[string]any{"job": job}}}},
			},
			"requiredLeases": []string{p.LeaseID},
		}
		statuses := make([]int, copies)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i] = s.do("POST", "/api/v1/transaction", body).status
			}()
		}
		close(start)
		wg.Wait()
		applied := 0
		for _, st := range statuses {
			switch st {
			case 200:
				applied++
			case 409:
			default:
				t.Fatalf("job %d: statuses %v, want one 200 and 409s", job, statuses)
			}
		}
		if applied != 1 {
			t.Fatalf("job %d: %d of %d identical transactions applied (statuses %v), want exactly 1", job, applied, copies, statuses)
		}
		if r := s.do("POST", "/api/v1/transaction", body); r.status != 409 {
			t.Fatalf("job %d: replay answered %d %s, want 409", job, r.status, r.body)
		}
	}
	if b := s.browse("queue=results&partition=r&limit=100"); len(b.Messages) != jobs {
		t.Fatalf("results holds %d messages after %d jobs, want %d", len(b.Messages), jobs, jobs)
	}
}
