package chaos

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queen-serverless/queen/internal/loadcheck"
)

// The checker is the oracle of the chaos run: each test gives it a small
// history and final state and asserts what it finds, including that it
// finds nothing in a history that kept every promise.

type fixture struct {
	t   *testing.T
	cfg Config
	h   *history
	st  *finalState
	now time.Time
}

const fxPID = "pid-0"

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, cfg: Config{LeaseTime: 3, RetryLimit: 2}, h: newHistory(),
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.st = &finalState{parts: map[string]*finalPartition{fxPID: {id: fxPID, name: "p00", last: -1, log: map[int64]loadcheck.Message{}}},
		lag: map[string]int64{queueModeGroup: 0}, dlq: map[gaddr]loadcheck.DeadLetter{}}
	return f
}

func (f *fixture) tick() time.Time {
	f.now = f.now.Add(10 * time.Millisecond)
	return f.now
}

// push records n messages answered 201 and logged.
func (f *fixture) push(n int) {
	p := f.st.parts[fxPID]
	for i := 0; i < n; i++ {
		off := p.last + 1
		tx := fmt.Sprintf("tx-%d", off)
		payload := json.RawMessage(fmt.Sprintf(`{"n":%d}`, off))
		it := &pushItem{tx: tx, partition: "p00", payload: payload, known: true, pid: fxPID, off: off}
		f.h.items[tx], f.h.byAddr[addr{fxPID, off}] = it, it
		p.log[off] = loadcheck.Message{TransactionID: tx, PartitionID: fxPID, Partition: "p00", Offset: off, Data: payload}
		p.last = off
	}
}

// pop records a pop of the queue-mode group delivering offsets (the first
// with retryCount rc).
func (f *fixture) pop(rc int, offs ...int64) *pop {
	p := &pop{seq: int64(len(f.h.pops)), group: queueModeGroup, consumer: "c", leaseID: fmt.Sprintf("lease-%d", len(f.h.pops)),
		sent: f.tick(), back: f.tick()}
	pt := &popPart{pop: p, pid: fxPID, name: "p00"}
	for i, off := range offs {
		d := &delivery{off: off, tx: fmt.Sprintf("tx-%d", off), data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, off))}
		if i == 0 {
			d.retryCount = rc
		}
		pt.msgs = append(pt.msgs, d)
	}
	p.parts = []*popPart{pt}
	f.h.pops = append(f.h.pops, p)
	return p
}

// ack acks a pop with the given statuses (one per message) and records the
// results the model gives, answered at the first attempt.
func (f *fixture) ack(p *pop, statuses ...string) *ackCall {
	pt := p.parts[0]
	for i, d := range pt.msgs {
		d.status = statuses[i]
		if d.status == "dlq" || d.status == "failed" {
			d.errText = "boom"
		}
	}
	want, shift, err := loadcheck.ModelAck(partitionAck(f.cfg, pt))
	if err != nil {
		f.t.Fatal(err)
	}
	a := &ackCall{attempts: 1, outcome: ackApplied, first: true, sent: f.tick(), back: f.tick()}
	for i, w := range want {
		r := loadcheck.AckResult{Index: i, TransactionID: pt.msgs[i].tx, PartitionID: fxPID, Success: w.Success, Result: w.Result,
			LeaseReleased: w.LeaseReleased, DLQ: w.DLQ}
		c := w.Committed + shift
		r.Committed = &c
		if w.Offset != nil {
			o := *w.Offset + shift
			r.Offset = &o
		}
		a.results = append(a.results, r)
	}
	p.ack = a
	return a
}

func (f *fixture) deadLetter(off int64) {
	f.st.dlq[gaddr{queueModeGroup, addr{fxPID, off}}] = loadcheck.DeadLetter{PartitionID: fxPID, Offset: off, ConsumerGroup: queueModeGroup}
}

// expect runs the checker and compares the counts by kind.
func (f *fixture) expect(want map[string]int) {
	f.t.Helper()
	f.h.check(f.st, f.cfg, []string{queueModeGroup})
	for _, k := range []string{loadcheck.KindLost, loadcheck.KindGap, loadcheck.KindOrder, loadcheck.KindOther} {
		if got := f.h.v.Count(k); got != want[k] {
			f.t.Errorf("%s: %d, want %d\n%s", k, got, want[k], strings.Join(f.h.v.Describe(), "\n"))
		}
	}
}

// cleanRun is a history that keeps every promise: 5 messages; a batch
// fully completed, one with a retry at its head (redelivered), one failed
// into the DLQ by retryLimit and one dead-lettered outright.
func cleanRun(f *fixture) {
	f.push(5)
	f.ack(f.pop(0, 0, 1), "completed", "completed")
	f.ack(f.pop(0, 2, 3), "retry", "completed")
	f.ack(f.pop(0, 2, 3), "completed", "failed")
	f.ack(f.pop(1, 3), "failed")
	f.ack(f.pop(2, 3), "failed") // attempt 3 > retryLimit 2: dead-lettered
	f.deadLetter(3)
	f.ack(f.pop(0, 4), "dlq")
	f.deadLetter(4)
}

func TestCheckCleanHistory(t *testing.T) {
	f := newFixture(t)
	cleanRun(f)
	f.expect(nil)
}

func TestCheckLostPush(t *testing.T) {
	f := newFixture(t)
	cleanRun(f)
	// A push answered 201 at offset 5, which the log does not hold.
	it := &pushItem{tx: "tx-5", partition: "p00", payload: json.RawMessage(`{"n":5}`), known: true, pid: fxPID, off: 5}
	f.h.items["tx-5"] = it
	f.expect(map[string]int{loadcheck.KindLost: 1})
}

func TestCheckGap(t *testing.T) {
	f := newFixture(t)
	cleanRun(f)
	f.push(2)
	delete(f.st.parts[fxPID].log, 5) // offsets 0-4 and 6: 5 is missing
	f.ack(f.pop(0, 6), "completed")
	// The gap, and the push answered 201 at offset 5 is gone too.
	f.expect(map[string]int{loadcheck.KindGap: 1, loadcheck.KindLost: 1})
}

func TestCheckFirstDeliveriesOutOfOrder(t *testing.T) {
	f := newFixture(t)
	f.push(3)
	f.pop(0, 1, 2).abandoned = true
	f.pop(0, 0).abandoned = true
	f.ack(f.pop(0, 0, 1, 2), "completed", "completed", "completed")
	// Offset 0 was first delivered after offsets 1 and 2.
	f.expect(map[string]int{loadcheck.KindOrder: 1})
}

func TestCheckUndoneAck(t *testing.T) {
	f := newFixture(t)
	f.push(3)
	f.ack(f.pop(0, 0, 1), "completed", "completed") // committed 1
	f.ack(f.pop(0, 1, 2), "completed", "completed") // offset 1 again
	f.expect(map[string]int{loadcheck.KindLost: 1})
}

func TestCheckNeverDelivered(t *testing.T) {
	f := newFixture(t)
	f.push(3)
	f.ack(f.pop(0, 0, 1), "completed", "completed")
	f.expect(map[string]int{loadcheck.KindLost: 1}) // offset 2 never reached the group

	f = newFixture(t)
	f.push(3)
	f.ack(f.pop(0, 0, 1), "completed", "completed")
	f.deadLetter(2) // e.g. dead-lettered by lease expiries of pops whose answer was lost
	f.expect(nil)
}

func TestCheckAckResultNotTheModels(t *testing.T) {
	f := newFixture(t)
	f.push(3)
	a := f.ack(f.pop(0, 0, 1, 2), "completed", "failed", "completed")
	c := int64(2) // the model commits 0 and redelivers 1
	a.results[2].Committed = &c
	f.expect(map[string]int{loadcheck.KindOther: 1})
}

func TestCheckDeadLetterMissing(t *testing.T) {
	f := newFixture(t)
	f.push(1)
	f.ack(f.pop(0, 0), "dlq") // answered dead-lettered, but the DLQ is empty
	f.expect(map[string]int{loadcheck.KindLost: 1})
}

func TestCheckOldAck(t *testing.T) {
	// The answer to an ack of messages at or below the cursor: every item
	// "already committed", with the cursor as it is by then.
	noOp := func(a *ackCall, committed int64) {
		for i := range a.results {
			a.results[i].Result, a.results[i].Offset, a.results[i].LeaseReleased = "already committed", nil, false
			a.results[i].Committed = &committed
		}
	}
	// Resent after an unanswered attempt that was applied (failed: the
	// lease released, offset 1 redelivered), while another consumer went on
	// to offset 3: right.
	f := newFixture(t)
	f.push(4)
	p := f.pop(0, 0, 1)
	f.ack(f.pop(1, 1, 2, 3), "completed", "completed", "completed")
	a := f.ack(p, "completed", "failed")
	a.first, a.attempts, a.sent, a.back = false, 2, f.tick(), f.tick()
	noOp(a, 3)
	f.expect(nil)

	// The same answer to a first attempt within the lease: wrong, nobody
	// else could have moved the cursor.
	f = newFixture(t)
	f.push(2)
	noOp(f.ack(f.pop(0, 0, 1), "completed", "completed"), 1)
	f.expect(map[string]int{loadcheck.KindOther: 1})

	// A first attempt answered once the lease may have expired: right.
	f = newFixture(t)
	f.push(2)
	a = f.ack(f.pop(0, 0, 1), "completed", "completed")
	a.sent, a.back = f.now.Add(4*time.Second), f.now.Add(5*time.Second)
	noOp(a, 1)
	f.expect(nil)

	// A no-op that leaves messages of the batch above the cursor: wrong.
	f = newFixture(t)
	f.push(3)
	p = f.pop(0, 0, 1, 2)
	a = f.ack(p, "completed", "completed", "completed")
	a.first, a.attempts = false, 2
	noOp(a, 1)
	f.expect(map[string]int{loadcheck.KindOther: 1})
}

func TestCheckLeaseTiming(t *testing.T) {
	f := newFixture(t)
	f.push(1)
	p := f.pop(0, 0)
	p.ack = &ackCall{attempts: 1, outcome: ackRejected, first: true, sent: f.tick(), back: f.tick()}
	f.ack(f.pop(0, 0), "completed")
	// Refused 20 ms into a 3 s lease.
	f.expect(map[string]int{loadcheck.KindOther: 1})
}

func TestCheckPushAnswers(t *testing.T) {
	h := newHistory()
	items := []*pushItem{{tx: "a", partition: "p"}, {tx: "b", partition: "p"}}
	h.sendPush(items)
	h.pushed(items, []loadcheck.PushResult{
		{Index: 0, TransactionID: "a", Status: "queued", PartitionID: "x", Offset: 0, Partition: "p"},
		{Index: 1, TransactionID: "b", Status: "duplicate", PartitionID: "x", Offset: 7, Partition: "p"},
	}, 2)
	if h.v.Count(loadcheck.KindOther) != 1 {
		t.Errorf("a retried push answered in part duplicate: %v", h.v.Describe())
	}
	h = newHistory()
	h.sendPush(items[:1])
	h.pushed(items[:1], []loadcheck.PushResult{{Index: 0, TransactionID: "a", Status: "duplicate", PartitionID: "x", Partition: "p"}}, 1)
	if h.v.Count(loadcheck.KindOther) != 1 {
		t.Errorf("a fresh push answered duplicate: %v", h.v.Describe())
	}
}

func TestCheckCursorBack(t *testing.T) {
	f := newFixture(t)
	f.push(4)
	f.ack(f.pop(0, 0, 1), "completed", "completed") // committed 1
	p := f.pop(0, 2, 3)
	p.sent = f.now.Add(-time.Second) // a long poll sent before that answer
	a := f.ack(p, "completed", "completed")
	c := int64(0)
	for i := range a.results {
		a.results[i].Committed = &c
	}
	// The cursor went back, and the results are not the model's.
	f.expect(map[string]int{loadcheck.KindLost: 1, loadcheck.KindOther: 1})
}

func TestCheckCommittedAndDeadLettered(t *testing.T) {
	f := newFixture(t)
	f.push(1)
	f.ack(f.pop(0, 0), "completed")
	f.deadLetter(0)
	f.expect(map[string]int{loadcheck.KindOther: 1})
}
