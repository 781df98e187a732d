package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
	"github.com/queen-serverless/queen/internal/refmodel"
)

// TestConcurrencyChecker runs many producers, consumers and groups against
// one queue on the real database clock, with random outcomes (completed,
// failed, retry, dlq), abandoned leases and zombie consumers that ack after
// their lease expired, with a reaper running alongside, then proves the
// guarantees of sections 3 and 8 from the database and the client-side
// history:
//
//   - the log: offsets contiguous per partition from 0 to last_offset, every
//     acknowledged push at the offset it was given, nothing else in the log,
//     duplicates rejected with the original offset;
//   - delivery: every delivered message is the logged one, each redelivery
//     starts at the cursor, first deliveries come in offset order, a partition
//     is never leased twice at once, retryCount counts failed acks and
//     expiries exactly once, every ack result is what the model predicts;
//   - the end state: every group committed every partition to last_offset and
//     the DLQ holds exactly the messages that were dead-lettered, once each,
//     with the expected attempt counts.
func TestConcurrencyChecker(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	// The product's store on the database clock, with a logger that
	// records the transient errors (deadlocks) it retries.
	retries := &ccRetryLog{}
	e.Store = pgstore.New(e.Pool, pgstore.Config{Logger: slog.New(retries)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()

	if _, err := e.Store.Configure(ctx, queen.ConfigureRequest{Queue: ccQueue, Options: queen.QueueOptions{
		LeaseTime: ccIntPtr(ccLeaseTime), RetryLimit: ccIntPtr(ccRetryLimit),
	}}); err != nil {
		t.Fatalf("configure: %v", err)
	}

	// The seed drives the producers' and consumers' choices (goroutine
	// scheduling still varies run to run). QUEEN_CHECK_SEED replays one.
	seed := uint64(envInt(t, "QUEEN_CHECK_SEED", 1))
	perProducer := ccPerProducer
	if testing.Short() {
		perProducer = 100 // the quick lane: 800 messages
	}
	t.Logf("seed %d (QUEEN_CHECK_SEED=%d to replay), %d messages", seed, seed, ccProducers*perProducer)
	h := newCCHistory(t)

	// Reaper: expires abandoned leases (counting the attempt) alongside the
	// pops that notice expiries themselves.
	var reaped struct{ expired, dead, runs atomic.Int64 }
	reaperStop := make(chan struct{})
	var reaperWG sync.WaitGroup
	reaperWG.Add(1)
	go func() {
		defer reaperWG.Done()
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-reaperStop:
				return
			case <-tick.C:
			}
			st, err := e.Store.Reap(ctx, queen.ReapRequest{Batch: 50})
			if err != nil {
				if ctx.Err() == nil {
					h.fail("reap: %v", err)
				}
				continue
			}
			reaped.runs.Add(1)
			reaped.expired.Add(int64(st.LeasesExpired))
			reaped.dead.Add(int64(st.DeadLettered))
		}
	}()

	// Consumers: ccConsumersPerGroup per group, wildcard pops, batch acks.
	var stop atomic.Bool
	var consumersWG sync.WaitGroup
	for gi, g := range ccGroups {
		for j := 0; j < ccConsumersPerGroup; j++ {
			consumersWG.Add(1)
			go func() {
				defer consumersWG.Done()
				h.consume(ctx, e, g, j, rand.New(rand.NewPCG(seed, uint64(1000+gi*100+j))), &stop)
			}()
		}
	}
	stopAll := sync.OnceFunc(func() {
		stop.Store(true)
		consumersWG.Wait()
		close(reaperStop)
		reaperWG.Wait()
	})
	defer stopAll()

	// Producers. They stop between batches at the produce deadline, never
	// in the middle of a push, so every push's outcome is known.
	var pstop atomic.Bool
	var producersWG sync.WaitGroup
	for i := 0; i < ccProducers; i++ {
		producersWG.Add(1)
		go func() {
			defer producersWG.Done()
			h.produce(ctx, e, i, perProducer, rand.New(rand.NewPCG(seed, uint64(i))), &pstop)
		}()
	}
	producersDone := make(chan struct{})
	go func() { producersWG.Wait(); close(producersDone) }()
	select {
	case <-producersDone:
	case <-time.After(ccProduceDeadline):
		pstop.Store(true)
		<-producersDone
		t.Errorf("producers did not finish within %v (push latency: %s)", ccProduceDeadline, h.latencies())
	}
	pushedIn := time.Since(start)
	queued := h.queuedCount()
	if queued != ccProducers*perProducer {
		t.Errorf("producers got %d messages queued, want %d; checking those", queued, ccProducers*perProducer)
	}
	logRetries := sync.OnceFunc(func() {
		if n, detail := retries.summary(); n > 0 {
			t.Logf("the store retried %d statements after transient errors: %s", n, detail)
		}
	})
	defer logRetries()

	// Drain: until every group has committed every partition (lag 0).
	deadline := start.Add(ccDrainDeadline)
	for {
		done, status, err := ccDrained(ctx, e, int64(queued))
		if err != nil {
			t.Fatalf("drain check: %v", err)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			stopAll()
			t.Fatalf("not drained %v after start (producers finished after %v): %s\n%s",
				ccDrainDeadline, pushedIn.Round(time.Millisecond), status, ccStuckCursors(ctx, e))
		}
		time.Sleep(100 * time.Millisecond)
	}
	drainedIn := time.Since(start)
	stopAll()
	logRetries()
	if t.Failed() {
		t.Fatalf("violations during the run (see above)")
	}

	// The checker.
	db := ccReadDB(t, ctx, e)
	h.checkLog(db)
	expectedDLQ := h.checkDeliveries(db)
	h.checkDLQ(db, expectedDLQ)
	h.checkCursors(db)

	st := h.stats
	if reaped.expired.Load() > int64(st.abandonedLeases) {
		t.Errorf("the reaper expired %d leases but only %d were ever abandoned: an expiry was counted twice",
			reaped.expired.Load(), st.abandonedLeases)
	}
	if reaped.dead.Load() > int64(st.expiryDLQ) {
		t.Errorf("the reaper dead-lettered %d expired heads but only %d expiries exhausted retryLimit",
			reaped.dead.Load(), st.expiryDLQ)
	}
	if page, err := e.Store.ListDeadLetters(ctx, queen.DLQFilter{Queue: ccQueue, Limit: 1}); err != nil {
		t.Errorf("list dead letters: %v", err)
	} else if page.Total != int64(len(db.dlq)) {
		t.Errorf("ListDeadLetters total = %d, the dlq table holds %d rows", page.Total, len(db.dlq))
	}

	t.Logf("pushed %d messages (+%d in-request and %d re-pushed duplicates) in %v; drained after %v",
		queued, st.inBatchDups, st.rePushDups, pushedIn.Round(time.Millisecond), drainedIn.Round(time.Millisecond))
	t.Logf("pops %d (%d multi-partition, %d zombies, %d late acks rejected), deliveries %d (%d redeliveries); "+
		"outcomes: completed %d, failed %d, retry %d, dlq %d, not applied %d; abandoned partition leases %d",
		st.pops, st.multiPartitionPops, st.zombies, st.lateRejects, st.deliveries, st.redeliveries,
		st.results[queen.ResultCommitted], st.failedSent, st.retrySent, st.dlqSent,
		st.results[queen.ResultNotApplied], st.abandonedLeases)
	t.Logf("latency: %s", h.latencies())
	t.Logf("dead letters %d: explicit %d, failed acks past retryLimit %d, expiries past retryLimit %d; "+
		"reaper: %d runs, %d leases expired, %d dead-lettered",
		len(db.dlq), st.explicitDLQ, st.failedDLQ, st.expiryDLQ, reaped.runs.Load(), reaped.expired.Load(), reaped.dead.Load())

	// The run must have exercised every path it claims to check.
	for _, c := range []struct {
		what string
		n    int
	}{
		{"in-request duplicates", st.inBatchDups}, {"re-pushed duplicates", st.rePushDups},
		{"multi-partition pops", st.multiPartitionPops}, {"abandoned leases", st.abandonedLeases},
		{"retry outcomes", st.retrySent}, {"explicit dead letters", st.explicitDLQ},
		{"failed acks past retryLimit", st.failedDLQ}, {"expiries past retryLimit", st.expiryDLQ},
		{"redeliveries", st.redeliveries}, {"rejected late acks", st.lateRejects},
	} {
		if c.n == 0 {
			t.Errorf("the run exercised no %s", c.what)
		}
	}
}

const (
	ccQueue             = "cc-orders"
	ccPartitions        = 60
	ccProducers         = 8
	ccPerProducer       = 375 // 3000 messages
	ccConsumersPerGroup = 3   // 9 consumers
	ccLeaseTime         = 2   // seconds, real time
	ccRetryLimit        = 2
	ccProduceDeadline   = 30 * time.Second
	ccDrainDeadline     = 55 * time.Second
	// ccClockSlack absorbs rounding between the database clock and the
	// client's (same host).
	ccClockSlack = 20 * time.Millisecond
)

// ccGroups are the consumer groups; "" is queue mode.
var ccGroups = []string{"", "cc-billing", "cc-audit"}

func ccGroupName(g string) string {
	if g == "" {
		return queen.QueueModeGroup
	}
	return g
}

func ccIntPtr(v int) *int { return &v }

// ccBody is every payload: it carries the message's identity.
type ccBody struct {
	Tx        string `json:"tx"`
	Partition string `json:"partition"`
	Producer  int    `json:"producer"`
	Seq       int    `json:"seq"`
	Dup       bool   `json:"dup,omitempty"`
}

type ccAddr struct {
	pid string
	off int64
}

type ccGP struct {
	group, pid string
}

type ccGAddr struct {
	group, pid string
	off        int64
}

// ccPushed is one push item that came back "queued".
type ccPushed struct {
	tx, partition, pid, msgID string
	off                       int64
	body                      []byte
}

// ccPop is one non-empty pop, in the order consumers recorded them.
type ccPop struct {
	seq      int64
	group    string
	leaseID  string
	expires  time.Time // lease expiry, database clock
	returned time.Time // when Pop returned, client clock (same host)
	ackSent  time.Time
	// abandoned: never acked, or the ack was rejected because the lease had
	// expired; the lease expires and counts one attempt of each head.
	abandoned bool
	ackErr    bool
	parts     []*ccPart
}

// ccPart is one partition's messages in a pop.
type ccPart struct {
	pop  *ccPop
	pid  string
	msgs []*ccDelivery
}

type ccDelivery struct {
	msg    queen.Message
	status queen.AckStatus
	err    string
	res    *queen.AckResult
}

type ccStats struct {
	inBatchDups, rePushDups               int
	pops, multiPartitionPops, lateRejects int
	deliveries, redeliveries              int
	failedSent, retrySent, dlqSent        int
	abandonedLeases, zombies              int
	explicitDLQ, failedDLQ, expiryDLQ     int
	results                               map[string]int
	latency                               map[string]*ccLatency
}

// ccLatency sums the latency of one kind of call.
type ccLatency struct {
	n          int
	total, max time.Duration
}

func (h *ccHistory) observe(op string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.stats.latency[op]
	if l == nil {
		l = &ccLatency{}
		h.stats.latency[op] = l
	}
	l.n++
	l.total += d
	l.max = max(l.max, d)
}

func (h *ccHistory) latencies() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, op := range []string{"push", "pop", "ack"} {
		if l := h.stats.latency[op]; l != nil && l.n > 0 {
			out = append(out, fmt.Sprintf("%s %d calls, mean %v, max %v", op, l.n,
				(l.total/time.Duration(l.n)).Round(time.Microsecond), l.max.Round(time.Microsecond)))
		}
	}
	return strings.Join(out, "; ")
}

type ccHistory struct {
	t      *testing.T
	nfail  atomic.Int64
	mu     sync.Mutex
	seq    int64
	pushed map[ccAddr]*ccPushed // by address, from push results
	byTx   map[string]*ccPushed // by partition name + tx
	pids   map[string]string    // partition name -> id
	pops   []*ccPop
	byGP   map[ccGP][]*ccPart // record order
	stats  ccStats
}

func newCCHistory(t *testing.T) *ccHistory {
	return &ccHistory{t: t, pushed: map[ccAddr]*ccPushed{}, byTx: map[string]*ccPushed{},
		pids: map[string]string{}, byGP: map[ccGP][]*ccPart{},
		stats: ccStats{results: map[string]int{}, latency: map[string]*ccLatency{}}}
}

// fail reports a violation (safe from any goroutine), capping the output.
func (h *ccHistory) fail(format string, args ...any) {
	h.t.Helper()
	n := h.nfail.Add(1)
	switch {
	case n <= 40:
		h.t.Errorf(format, args...)
	case n == 41:
		h.t.Errorf("... more violations suppressed")
	default:
		h.t.Fail()
	}
}

func (h *ccHistory) queuedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pushed)
}

func ccMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ccSameJSON compares two JSON texts ignoring insignificant whitespace.
func ccSameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// ---------------------------------------------------------------------------
// producers

type ccItemKind int

const (
	ccNew        ccItemKind = iota
	ccInBatchDup            // same key and partition as an earlier item of the same request
	ccRePush                // same key and partition as an earlier acknowledged push
)

type ccExpect struct {
	kind ccItemKind
	ref  int       // ccInBatchDup: index of the first item
	old  *ccPushed // ccRePush
	body []byte
	part string
	txid string
}

func (h *ccHistory) produce(ctx context.Context, e *pgstoretest.Env, prod, perProducer int, rng *rand.Rand, stop *atomic.Bool) {
	var mine []*ccPushed
	lastOff := map[string]int64{} // per partition: the highest offset this producer got
	seq := 0
	for seq < perProducer && ctx.Err() == nil && !stop.Load() {
		size := 1 + rng.IntN(20)
		size = min(size, perProducer-seq)
		var exp []ccExpect
		for k := 0; k < size; k++ {
			part := fmt.Sprintf("part-%02d", rng.IntN(ccPartitions))
			tx := fmt.Sprintf("tx-%d-%04d", prod, seq)
			body := ccMarshal(ccBody{Tx: tx, Partition: part, Producer: prod, Seq: seq})
			seq++
			exp = append(exp, ccExpect{kind: ccNew, body: body, part: part, txid: tx})
			if rng.IntN(30) == 0 {
				// The same key again in the same request: the first wins.
				exp = append(exp, ccExpect{kind: ccInBatchDup, ref: len(exp) - 1, part: part, txid: tx,
					body: ccMarshal(ccBody{Tx: tx, Partition: part, Producer: prod, Seq: seq - 1, Dup: true})})
			}
		}
		if len(mine) > 0 && rng.IntN(4) == 0 {
			// Re-push earlier acknowledged messages: duplicates, nothing written.
			for k := 1 + rng.IntN(3); k > 0; k-- {
				old := mine[rng.IntN(len(mine))]
				x := ccExpect{kind: ccRePush, old: old, part: old.partition, txid: old.tx,
					body: ccMarshal(ccBody{Tx: old.tx, Partition: old.partition, Producer: prod, Dup: true})}
				at := rng.IntN(len(exp) + 1)
				exp = append(exp[:at], append([]ccExpect{x}, exp[at:]...)...)
			}
		}
		items := make([]queen.PushItem, len(exp))
		for k := range exp {
			items[k] = queen.PushItem{Queue: ccQueue, Partition: exp[k].part, Payload: exp[k].body,
				TransactionID: exp[k].txid}
		}
		// Fix up in-request duplicate references after the re-push inserts.
		firstIdx := map[string]int{}
		for k := range exp {
			key := exp[k].part + "\x00" + exp[k].txid
			if exp[k].kind == ccNew {
				firstIdx[key] = k
			} else if exp[k].kind == ccInBatchDup {
				exp[k].ref = firstIdx[key]
			}
		}

		var res []queen.PushResult
		var err error
		for attempt := 1; ; attempt++ {
			t0 := time.Now()
			res, err = e.Store.Push(ctx, items)
			h.observe("push", time.Since(t0))
			if err == nil || ctx.Err() != nil {
				break
			}
			// A failed push wrote nothing (all or nothing): a client
			// may retry it. Retry the same items, as a client would.
			h.fail("producer %d: push of %d items (attempt %d): %v", prod, len(items), attempt, err)
			if attempt == 3 {
				return
			}
		}
		if err != nil {
			return
		}
		if len(res) != len(items) {
			h.fail("producer %d: push of %d items returned %d results", prod, len(items), len(res))
			return
		}
		got := h.recordPush(prod, exp, res, lastOff)
		mine = append(mine, got...)
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
	}
}

func (h *ccHistory) recordPush(prod int, exp []ccExpect, res []queen.PushResult, lastOff map[string]int64) []*ccPushed {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*ccPushed
	prevOff := map[string]int64{} // per partition within this call
	for k, x := range exp {
		r := res[k]
		if r.Index != k || r.TransactionID != x.txid || r.Partition != x.part || r.Queue != ccQueue {
			h.fail("producer %d: push result %d = %+v does not describe item %d (%s/%s)", prod, k, r, k, x.part, x.txid)
			continue
		}
		if pid, ok := h.pids[x.part]; ok && pid != r.PartitionID {
			h.fail("partition %s has two ids: %s and %s", x.part, pid, r.PartitionID)
		}
		h.pids[x.part] = r.PartitionID
		switch x.kind {
		case ccNew:
			if r.Status != queen.StatusQueued {
				h.fail("producer %d: new message %s/%s came back %q (offset %d)", prod, x.part, x.txid, r.Status, r.Offset)
				continue
			}
			a := ccAddr{r.PartitionID, r.Offset}
			if other, ok := h.pushed[a]; ok {
				h.fail("offset %d of %s given to two acknowledged pushes: %s and %s", r.Offset, x.part, other.tx, x.txid)
			}
			if p, ok := prevOff[x.part]; ok && r.Offset != p+1 {
				h.fail("producer %d: one push got offsets %d then %d on %s: not consecutive", prod, p, r.Offset, x.part)
			}
			prevOff[x.part] = r.Offset
			if l, ok := lastOff[x.part]; ok && r.Offset <= l {
				h.fail("producer %d: a later push got offset %d on %s after %d: offsets not in commit order",
					prod, r.Offset, x.part, l)
			}
			lastOff[x.part] = max(lastOff[x.part], r.Offset)
			p := &ccPushed{tx: x.txid, partition: x.part, pid: r.PartitionID, msgID: r.MessageID, off: r.Offset, body: x.body}
			h.pushed[a] = p
			h.byTx[x.part+"\x00"+x.txid] = p
			out = append(out, p)
		case ccInBatchDup:
			h.stats.inBatchDups++
			first := res[x.ref]
			if r.Status != queen.StatusDuplicate || r.Offset != first.Offset || r.PartitionID != first.PartitionID ||
				r.MessageID != first.MessageID {
				h.fail("producer %d: repeated key %s/%s in one request: got %s offset %d id %s, want duplicate of offset %d id %s",
					prod, x.part, x.txid, r.Status, r.Offset, r.MessageID, first.Offset, first.MessageID)
			}
		case ccRePush:
			h.stats.rePushDups++
			if r.Status != queen.StatusDuplicate || r.Offset != x.old.off || r.PartitionID != x.old.pid ||
				r.MessageID != x.old.msgID {
				h.fail("producer %d: re-push of %s/%s: got %s offset %d id %s, want duplicate of offset %d id %s",
					prod, x.part, x.txid, r.Status, r.Offset, r.MessageID, x.old.off, x.old.msgID)
			}
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// consumers

func (h *ccHistory) consume(ctx context.Context, e *pgstoretest.Env, group string, idx int, rng *rand.Rand, stop *atomic.Bool) {
	gname := ccGroupName(group)
	worker := fmt.Sprintf("w-%s-%d", strings.TrimPrefix(gname, "__"), idx)
	for !stop.Load() && ctx.Err() == nil {
		batch := 1 + rng.IntN(10)
		parts := 1
		if rng.IntN(3) == 0 {
			parts = 2 + rng.IntN(3)
		}
		t0 := time.Now()
		res, err := e.Store.Pop(ctx, queen.PopRequest{Queue: ccQueue, ConsumerGroup: group, Batch: batch,
			Partitions: parts, Worker: worker})
		returned := time.Now()
		h.observe("pop", returned.Sub(t0))
		if err != nil {
			if ctx.Err() == nil {
				h.fail("%s: pop: %v", worker, err)
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		if len(res.Messages) == 0 {
			time.Sleep(time.Duration(5+rng.IntN(25)) * time.Millisecond)
			continue
		}
		p := h.newPop(worker, gname, res, returned, batch, parts)
		if p == nil {
			continue
		}

		// Outcomes. Heads that failed before are suspected poison messages:
		// fail or abandon them more often, so retryLimit is reached both
		// by failed acks and by lease expiries.
		suspect := false
		for _, pt := range p.parts {
			if pt.msgs[0].msg.RetryCount > 0 {
				suspect = true
			}
		}
		abandon := rng.IntN(100) < 3 || (suspect && rng.IntN(100) < 15)
		for _, pt := range p.parts {
			for _, d := range pt.msgs {
				r := rng.IntN(100)
				switch {
				case d.msg.RetryCount > 0 && r < 40:
					d.status = queen.AckFailed
				case d.msg.RetryCount > 0 && r < 45:
					d.status = queen.AckRetry
				case r < 3:
					d.status = queen.AckDLQ
				case r < 10:
					d.status = queen.AckFailed
				case r < 14:
					d.status = queen.AckRetry
				default:
					d.status = queen.AckCompleted
				}
				if d.status == queen.AckFailed || d.status == queen.AckDLQ {
					d.err = fmt.Sprintf("cc %s %s by %s", d.status, d.msg.TransactionID, worker)
				}
			}
		}
		if abandon {
			h.mu.Lock()
			p.abandoned = true
			h.mu.Unlock()
			continue
		}
		if rng.IntN(200) == 0 {
			// A zombie: it stalls until just past its lease, then acks.
			// The ack must be rejected (or be a no-op if the expiry
			// dead-lettered the batch), never applied.
			h.mu.Lock()
			h.stats.zombies++
			h.mu.Unlock()
			time.Sleep(time.Until(p.expires) + 30*time.Millisecond)
		}

		var acks []queen.Ack
		for _, pt := range p.parts {
			for _, d := range pt.msgs {
				acks = append(acks, queen.Ack{PartitionID: d.msg.PartitionID, TransactionID: d.msg.TransactionID,
					Status: d.status, ConsumerGroup: group, LeaseID: res.LeaseID, Error: d.err})
			}
		}
		sent := time.Now()
		h.mu.Lock()
		p.ackSent = sent
		h.mu.Unlock()
		results, err := e.Store.Ack(ctx, acks)
		acked := time.Now()
		h.observe("ack", acked.Sub(sent))
		if err != nil {
			h.mu.Lock()
			if errors.Is(err, queen.ErrConflict) && ccAllLeaseRejections(results) {
				// Too slow: the lease had expired. It counts as abandoned.
				p.abandoned = true
				h.stats.lateRejects++
				if acked.Before(p.expires) {
					h.fail("%s: ack rejected as invalid or expired lease (%v) although lease %s was valid until %s and the call ended at %s",
						worker, err, p.leaseID, p.expires.Format(time.RFC3339Nano), acked.Format(time.RFC3339Nano))
				}
			} else {
				p.ackErr = true
				if ctx.Err() == nil {
					h.fail("%s: ack of %d items: %v (results %+v)", worker, len(acks), err, results)
				}
			}
			h.mu.Unlock()
			continue
		}
		if len(results) != len(acks) {
			h.fail("%s: ack of %d items returned %d results", worker, len(acks), len(results))
			h.mu.Lock()
			p.ackErr = true
			h.mu.Unlock()
			continue
		}
		if ccAllAlreadyCommitted(results) {
			// Only possible when the lease expired and the expiry
			// dead-lettered the whole batch (a lone head) before the ack:
			// the ack is a no-op reported as such.
			h.mu.Lock()
			p.abandoned = true
			h.stats.lateRejects++
			if acked.Before(p.expires) {
				h.fail("%s: ack under live lease %s (valid until %s, call ended %s) reported every item already committed: %+v",
					worker, p.leaseID, p.expires.Format(time.RFC3339Nano), acked.Format(time.RFC3339Nano), results)
			}
			h.mu.Unlock()
			continue
		}
		if sent.After(p.expires.Add(ccClockSlack)) {
			h.fail("%s: ack sent at %s applied although lease %s expired at %s: %+v",
				worker, sent.Format(time.RFC3339Nano), p.leaseID, p.expires.Format(time.RFC3339Nano), results)
		}
		h.mu.Lock()
		i := 0
		for _, pt := range p.parts {
			for _, d := range pt.msgs {
				r := results[i]
				d.res = &r
				h.stats.results[r.Result]++
				i++
			}
		}
		h.mu.Unlock()
	}
}

func ccAllAlreadyCommitted(results []queen.AckResult) bool {
	for _, r := range results {
		if !r.Success || r.Result != queen.ResultAlreadyCommitted {
			return false
		}
	}
	return len(results) > 0
}

func ccAllLeaseRejections(results []queen.AckResult) bool {
	if len(results) == 0 {
		return false
	}
	seen := false
	for _, r := range results {
		switch {
		case r.Code == "skipped":
		case !r.Success && strings.Contains(r.Error, "invalid or expired lease"):
			seen = true
		default:
			return false
		}
	}
	return seen
}

// newPop validates a pop's shape and records it (in record order).
func (h *ccHistory) newPop(worker, gname string, res queen.PopResult, returned time.Time, batch, parts int) *ccPop {
	if res.LeaseID == "" || res.LeaseExpiresAt == nil {
		h.fail("%s: pop returned %d messages without a lease (%+v)", worker, len(res.Messages), res)
		return nil
	}
	if res.ConsumerGroup != gname {
		h.fail("%s: pop answered for group %q", worker, res.ConsumerGroup)
	}
	if len(res.Messages) > batch {
		h.fail("%s: pop with batch %d returned %d messages", worker, batch, len(res.Messages))
	}
	p := &ccPop{group: gname, leaseID: res.LeaseID, expires: *res.LeaseExpiresAt, returned: returned}
	seen := map[string]bool{}
	var cur *ccPart
	for _, m := range res.Messages {
		if cur == nil || cur.pid != m.PartitionID {
			if seen[m.PartitionID] {
				h.fail("%s: pop returned partition %s in two runs", worker, m.Partition)
			}
			seen[m.PartitionID] = true
			cur = &ccPart{pop: p, pid: m.PartitionID}
			p.parts = append(p.parts, cur)
		} else if last := cur.msgs[len(cur.msgs)-1].msg.Offset; m.Offset != last+1 {
			h.fail("%s: pop returned offsets %d then %d of %s: not contiguous", worker, last, m.Offset, m.Partition)
		}
		if m.Queue != ccQueue {
			h.fail("%s: message of queue %q", worker, m.Queue)
		}
		cur.msgs = append(cur.msgs, &ccDelivery{msg: m})
	}
	if len(p.parts) > parts {
		h.fail("%s: pop with partitions=%d returned %d partitions", worker, parts, len(p.parts))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	p.seq = h.seq
	h.pops = append(h.pops, p)
	h.stats.pops++
	if len(p.parts) > 1 {
		h.stats.multiPartitionPops++
	}
	for _, pt := range p.parts {
		k := ccGP{gname, pt.pid}
		h.byGP[k] = append(h.byGP[k], pt)
	}
	return p
}

// ---------------------------------------------------------------------------
// drain

func ccDrained(ctx context.Context, e *pgstoretest.Env, queued int64) (bool, string, error) {
	q, err := e.Store.Queue(ctx, ccQueue, queen.PartitionPage{})
	if err != nil {
		return false, "", err
	}
	var total int64
	for _, p := range q.Partitions {
		total += p.LastOffset + 1
	}
	lag := map[string]int64{}
	for _, g := range q.Groups {
		lag[g.Group] = g.Lag
	}
	// Done when every group has committed everything in the log; whether
	// the log holds exactly what was acknowledged is the checker's job.
	done := true
	var parts []string
	for _, g := range ccGroups {
		l, ok := lag[ccGroupName(g)]
		if !ok {
			done = false
			parts = append(parts, ccGroupName(g)+": not subscribed")
			continue
		}
		if l != 0 {
			done = false
		}
		parts = append(parts, fmt.Sprintf("%s: lag %d", ccGroupName(g), l))
	}
	return done, fmt.Sprintf("log holds %d of %d messages; %s", total, queued, strings.Join(parts, ", ")), nil
}

func ccStuckCursors(ctx context.Context, e *pgstoretest.Env) string {
	var b strings.Builder
	for _, g := range ccGroups {
		gs, err := e.Store.Group(ctx, ccGroupName(g))
		if err != nil {
			fmt.Fprintf(&b, "group %s: %v\n", ccGroupName(g), err)
			continue
		}
		for _, q := range gs.Queues {
			for _, c := range q.Cursors {
				if c.Lag == 0 {
					continue
				}
				exp := ""
				if c.LeaseExpiresAt != nil {
					exp = c.LeaseExpiresAt.Format(time.RFC3339Nano)
				}
				fmt.Fprintf(&b, "  %s %s: committed %d last %d attempts %d lease %q until %s\n",
					ccGroupName(g), c.Partition, c.Committed, c.LastOffset, c.Attempts, c.LeaseID, exp)
			}
		}
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// the database, read directly

type ccLogEntry struct {
	tx      string
	payload string
}

type ccConsumerRow struct {
	committed, delivered int64
	attempts             int
	headOnly             bool
	batchEnd             *int64
	leaseID              *string
}

type ccDLQRow struct {
	group, pid, partition, queue, tx, payload, msgID string
	off                                              int64
	attempts                                         int
	err                                              *string
}

type ccDB struct {
	last      map[string]int64  // pid -> last_offset
	names     map[string]string // pid -> name
	log       map[ccAddr]ccLogEntry
	consumers map[ccGP]ccConsumerRow
	dlq       []ccDLQRow
}

func ccReadDB(t *testing.T, ctx context.Context, e *pgstoretest.Env) *ccDB {
	t.Helper()
	db := &ccDB{last: map[string]int64{}, names: map[string]string{}, log: map[ccAddr]ccLogEntry{},
		consumers: map[ccGP]ccConsumerRow{}}
	rows, err := e.Pool.Query(ctx, `SELECT p.id::text, p.name, p.last_offset FROM queen.partitions p
		JOIN queen.queues x ON x.id = p.queue_id WHERE x.name = $1`, ccQueue)
	if err != nil {
		t.Fatalf("read partitions: %v", err)
	}
	for rows.Next() {
		var pid, name string
		var last int64
		if err := rows.Scan(&pid, &name, &last); err != nil {
			t.Fatalf("scan partitions: %v", err)
		}
		db.last[pid], db.names[pid] = last, name
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read partitions: %v", err)
	}

	// Segments: contiguous from 0 to last_offset, arrays of one length,
	// created_at monotone per partition.
	rows, err = e.Pool.Query(ctx, `SELECT p.id::text, s.base_offset, s.created_at, `+pgstoretest.SegmentTxIDs+`,
		queen.seg_all(s.payload, s.payloads), coalesce(cardinality(s.trace_ids), -1)
		FROM queen.segments s JOIN queen.partitions p ON p.num = s.partition_num JOIN queen.queues x ON x.id = p.queue_id
		WHERE x.name = $1 ORDER BY p.id, s.base_offset`, ccQueue)
	if err != nil {
		t.Fatalf("read segments: %v", err)
	}
	next := map[string]int64{}
	lastTS := map[string]time.Time{}
	for rows.Next() {
		var pid string
		var base int64
		var ts time.Time
		var txids, payloads []string
		var ntrace int
		if err := rows.Scan(&pid, &base, &ts, &txids, &payloads, &ntrace); err != nil {
			t.Fatalf("scan segments: %v", err)
		}
		if base != next[pid] {
			t.Errorf("partition %s: segment at base offset %d, expected %d: offsets have a gap or overlap",
				db.names[pid], base, next[pid])
		}
		if len(txids) == 0 || len(txids) != len(payloads) || (ntrace >= 0 && ntrace != len(txids)) {
			t.Errorf("partition %s: segment %d has %d txids, %d payloads, %d trace ids",
				db.names[pid], base, len(txids), len(payloads), ntrace)
		}
		if prev, ok := lastTS[pid]; ok && ts.Before(prev) {
			t.Errorf("partition %s: segment %d created_at %s before the previous segment's %s",
				db.names[pid], base, ts, prev)
		}
		lastTS[pid] = ts
		for i, tx := range txids {
			a := ccAddr{pid, base + int64(i)}
			if _, dup := db.log[a]; dup {
				t.Errorf("partition %s: offset %d stored twice", db.names[pid], a.off)
			}
			pl := ""
			if i < len(payloads) {
				pl = payloads[i]
			}
			db.log[a] = ccLogEntry{tx: tx, payload: pl}
		}
		next[pid] = max(next[pid], base+int64(len(txids)))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read segments: %v", err)
	}
	for pid, last := range db.last {
		if next[pid] != last+1 {
			t.Errorf("partition %s: segments end at offset %d but last_offset is %d", db.names[pid], next[pid]-1, last)
		}
	}
	for pid := range next {
		if _, ok := db.last[pid]; !ok {
			t.Errorf("segments of unknown partition %s", pid)
		}
	}

	rows, err = e.Pool.Query(ctx, `SELECT c.partition_id::text, c.group_name, c.committed, c.delivered, c.attempts,
		c.head_only, c.batch_end, c.lease_id::text
		FROM queen.consumers c JOIN queen.queues x ON x.id = c.queue_id WHERE x.name = $1`, ccQueue)
	if err != nil {
		t.Fatalf("read consumers: %v", err)
	}
	for rows.Next() {
		var pid, g string
		var c ccConsumerRow
		if err := rows.Scan(&pid, &g, &c.committed, &c.delivered, &c.attempts, &c.headOnly, &c.batchEnd, &c.leaseID); err != nil {
			t.Fatalf("scan consumers: %v", err)
		}
		db.consumers[ccGP{g, pid}] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read consumers: %v", err)
	}

	rows, err = e.Pool.Query(ctx, `SELECT consumer_group, partition_id::text, partition_name, queue_name, transaction_id,
		payload, message_id::text, msg_offset, attempts, error FROM queen.dlq ORDER BY id`)
	if err != nil {
		t.Fatalf("read dlq: %v", err)
	}
	for rows.Next() {
		var d ccDLQRow
		if err := rows.Scan(&d.group, &d.pid, &d.partition, &d.queue, &d.tx, &d.payload, &d.msgID, &d.off,
			&d.attempts, &d.err); err != nil {
			t.Fatalf("scan dlq: %v", err)
		}
		db.dlq = append(db.dlq, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read dlq: %v", err)
	}
	return db
}

// ---------------------------------------------------------------------------
// the checks

// checkLog: every acknowledged push is in the log exactly once at its offset
// with its payload, and the log holds nothing else.
func (h *ccHistory) checkLog(db *ccDB) {
	t := h.t
	for a, p := range h.pushed {
		le, ok := db.log[a]
		if !ok {
			t.Errorf("lost: %s/%s was queued at offset %d but the log has no such offset", p.partition, p.tx, p.off)
			continue
		}
		if le.tx != p.tx {
			t.Errorf("partition %s offset %d holds %s, but the push of %s was given that offset", p.partition, p.off, le.tx, p.tx)
		}
		if !ccSameJSON([]byte(le.payload), p.body) {
			t.Errorf("partition %s offset %d holds payload %s, pushed %s", p.partition, p.off, le.payload, p.body)
		}
		if db.names[a.pid] != p.partition {
			t.Errorf("partition id %s is named %q in the database, %q in the push result", a.pid, db.names[a.pid], p.partition)
		}
	}
	for a, le := range db.log {
		if _, ok := h.pushed[a]; !ok {
			t.Errorf("partition %s offset %d holds %s, which no acknowledged push was given", db.names[a.pid], a.off, le.tx)
		}
	}
	if len(db.log) != len(h.pushed) {
		t.Errorf("the log holds %d messages, %d pushes were acknowledged as queued", len(db.log), len(h.pushed))
	}
	if len(db.last) != len(h.pids) {
		t.Errorf("the queue has %d partitions, producers pushed to %d", len(db.last), len(h.pids))
	}
}

type ccExpectedDLQ struct {
	attempts int
	err      string
	how      string
}

// checkDeliveries replays each (group, partition) history, in record order
// (the cursor lock serializes it), through the reference model
// (internal/refmodel): every pop must deliver what the model delivers from
// its cursor (offsets and retryCounts: redeliveries start at the cursor, the
// head comes alone after an expiry), every ack result must be the model's,
// an abandoned lease expires in the model too, and the history must end
// where the database's cursor is. Besides the model it checks what only a
// concurrent run shows: leases never overlap and first deliveries come in
// offset order. It returns the dead letters the model expects.
func (h *ccHistory) checkDeliveries(db *ccDB) map[ccGAddr]ccExpectedDLQ {
	t := h.t
	expected := map[ccGAddr]ccExpectedDLQ{}
	nfail := 0
	fail := func(format string, args ...any) {
		t.Helper()
		nfail++
		if nfail <= 40 {
			t.Errorf(format, args...)
		}
	}
	keys := make([]ccGP, 0, len(h.byGP))
	for k := range h.byGP {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return keys[i].group < keys[j].group
		}
		return keys[i].pid < keys[j].pid
	})
	for _, p := range h.pops {
		if p.ackErr {
			fail("a pop of group %s was acked with an unexpected error: its outcome is unknown", p.group)
		}
	}
	for _, g := range ccGroups {
		for pid := range db.last {
			if _, ok := h.byGP[ccGP{ccGroupName(g), pid}]; !ok && db.last[pid] >= 0 {
				fail("group %s: partition %s was never delivered", ccGroupName(g), db.names[pid])
			}
		}
	}

	for _, k := range keys {
		name := db.names[k.pid]
		where := fmt.Sprintf("group %s partition %s", k.group, name)

		// The model holds the partition's log as the database does.
		m := refmodel.New()
		m.Configure(ccQueue, refmodel.OptionsPatch{LeaseTime: ccIntPtr(ccLeaseTime), RetryLimit: ccIntPtr(ccRetryLimit),
			DedupWindow: ccIntPtr(0)})
		var log []refmodel.PushItem
		for off := int64(0); off <= db.last[k.pid]; off++ {
			e := db.log[ccAddr{k.pid, off}]
			log = append(log, refmodel.PushItem{Queue: ccQueue, Partition: name, TxID: e.tx, Payload: e.payload})
		}
		now := pgstoretest.Epoch
		if _, err := m.Push(log, now); err != nil {
			fail("%s: model push: %v", where, err)
			continue
		}

		maxDelivered := int64(-1)
		var firsts []int64
		var prev *ccPart
		for _, pt := range h.byGP[k] {
			p := pt.pop
			a := pt.msgs[0].msg.Offset
			b := pt.msgs[len(pt.msgs)-1].msg.Offset
			h.stats.deliveries += len(pt.msgs)
			if prev != nil {
				pp := prev.pop
				if pp.abandoned && p.returned.Add(ccClockSlack).Before(pp.expires) {
					fail("%s: pop #%d leased it at %s while pop #%d's lease ran until %s: two leases at once",
						where, p.seq, p.returned.Format(time.RFC3339Nano), pp.seq, pp.expires.Format(time.RFC3339Nano))
				}
				if !pp.abandoned && p.returned.Before(pp.ackSent) {
					fail("%s: pop #%d leased it before pop #%d's batch was acked: two leases at once", where, p.seq, pp.seq)
				}
			}
			prev = pt

			// The pop, as the model makes it.
			now = now.Add(time.Millisecond)
			want, err := m.Pop(refmodel.PopRequest{Queue: ccQueue, Partition: name, Group: k.group,
				Batch: len(pt.msgs), LeaseID: p.leaseID}, now)
			if err != nil {
				fail("%s: model pop: %v", where, err)
				break
			}
			same := len(want.Messages) == len(pt.msgs)
			for i := 0; same && i < len(pt.msgs); i++ {
				got, w := pt.msgs[i].msg, want.Messages[i]
				same = got.Offset == w.Offset && got.RetryCount == w.RetryCount && got.TransactionID == w.TxID
			}
			if !same {
				var gotS []string
				for _, d := range pt.msgs {
					gotS = append(gotS, fmt.Sprintf("%d(rc=%d)", d.msg.Offset, d.msg.RetryCount))
				}
				fail("%s: pop #%d delivered %v; the model delivers %s", where, p.seq, gotS, describeModelMsgs(want.Messages))
				break
			}
			for _, d := range pt.msgs {
				off := d.msg.Offset
				if off > maxDelivered {
					if off != maxDelivered+1 {
						fail("%s: offset %d first delivered before offset %d", where, off, maxDelivered+1)
					}
					maxDelivered = off
					firsts = append(firsts, off)
				} else {
					h.stats.redeliveries++
				}
				h.checkMessage(fail, where, db, d.msg)
			}

			if p.abandoned {
				// Nobody acks: the lease expires, in the model too (the
				// next pop, or the final reap, notices).
				h.stats.abandonedLeases++
				now = now.Add(ccLeaseTime*time.Second + time.Second)
				continue
			}
			if p.ackErr {
				break
			}

			// The batch ack, as the model answers it.
			items := make([]refmodel.AckItem, len(pt.msgs))
			for i, d := range pt.msgs {
				switch d.status {
				case queen.AckDLQ:
					h.stats.dlqSent++
				case queen.AckFailed:
					h.stats.failedSent++
				case queen.AckRetry:
					h.stats.retrySent++
				}
				items[i] = refmodel.AckItem{Queue: ccQueue, Partition: name, TxID: d.msg.TransactionID,
					Status: string(d.status), Group: k.group, LeaseID: p.leaseID, Error: d.err}
			}
			now = now.Add(time.Millisecond)
			wants, err := m.Ack(items, now)
			if err != nil {
				fail("%s: pop #%d: the model rejects the ack of span (%d..%d]: %v %s", where, p.seq, a-1, b, err, describeModelAck(wants))
				break
			}
			for i, d := range pt.msgs {
				r, w := d.res, wants[i]
				if r == nil {
					fail("%s: pop #%d offset %d: no ack result recorded", where, p.seq, d.msg.Offset)
					continue
				}
				if !r.Success || r.Result != w.Result || r.DLQ != w.DLQ || r.Committed == nil || *r.Committed != w.Committed ||
					r.LeaseReleased != w.LeaseReleased || !eqOffset(r.Offset, w.Offset) ||
					r.PartitionID != k.pid || r.ConsumerGroup != k.group {
					fail("%s: pop #%d ack of offset %d (%s, retryCount %d): got %s; the model says %s",
						where, p.seq, d.msg.Offset, d.status, d.msg.RetryCount, describeAckResults([]queen.AckResult{*r}),
						describeModelAck([]refmodel.AckResult{w}))
				}
			}
		}
		// Expiries nobody noticed before the drain were the reaper's.
		m.Reap(now.Add(time.Hour))

		last := db.last[k.pid]
		c, _ := m.Cursor(ccQueue, name, k.group)
		if c.Committed != last {
			fail("%s: the history ends with the model's cursor at %d, last_offset is %d", where, c.Committed, last)
		}
		if maxDelivered != last {
			fail("%s: offsets up to %d were delivered, last_offset is %d", where, maxDelivered, last)
		}
		for i := 1; i < len(firsts); i++ {
			if firsts[i] <= firsts[i-1] {
				fail("%s: first deliveries out of order: %d after %d", where, firsts[i], firsts[i-1])
			}
		}
		if row, ok := db.consumers[k]; ok && row.committed != c.Committed {
			fail("%s: the database cursor is %d, the model's %d", where, row.committed, c.Committed)
		}
		for _, d := range m.DeadLetters() {
			how := "dlq ack"
			switch {
			case strings.HasPrefix(d.Error, "lease expired"):
				how = "lease expiry"
				h.stats.expiryDLQ++
			case strings.HasPrefix(d.Error, "cc failed"):
				how = "failed ack past retryLimit"
				h.stats.failedDLQ++
			default:
				h.stats.explicitDLQ++
			}
			expected[ccGAddr{k.group, k.pid, d.Offset}] = ccExpectedDLQ{attempts: d.Attempts, err: d.Error, how: how}
		}
	}
	if nfail > 40 {
		t.Errorf("... %d more delivery violations", nfail-40)
	}
	return expected
}

// checkMessage: a delivered message is the logged one, as pushed.
func (h *ccHistory) checkMessage(fail func(string, ...any), where string, db *ccDB, m queen.Message) {
	a := ccAddr{m.PartitionID, m.Offset}
	p, ok := h.pushed[a]
	if !ok {
		fail("%s: delivered offset %d (%s), which no acknowledged push was given", where, m.Offset, m.TransactionID)
		return
	}
	if m.TransactionID != p.tx || m.ID != p.msgID || m.Partition != p.partition {
		fail("%s: offset %d delivered as %s/%s id %s, pushed as %s/%s id %s",
			where, m.Offset, m.Partition, m.TransactionID, m.ID, p.partition, p.tx, p.msgID)
	}
	var body ccBody
	if err := json.Unmarshal(m.Data, &body); err != nil || body.Tx != p.tx || body.Partition != p.partition || body.Dup ||
		!ccSameJSON(m.Data, p.body) {
		fail("%s: offset %d delivered payload %s, pushed %s", where, m.Offset, m.Data, p.body)
	}
}

// checkDLQ: the DLQ holds exactly the dead letters the model expects, once
// each, with the logged message and the expected attempt count.
func (h *ccHistory) checkDLQ(db *ccDB, expected map[ccGAddr]ccExpectedDLQ) {
	t := h.t
	seen := map[ccGAddr]bool{}
	for _, d := range db.dlq {
		k := ccGAddr{d.group, d.pid, d.off}
		where := fmt.Sprintf("dead letter of group %s %s offset %d (%s)", d.group, d.partition, d.off, d.tx)
		if d.queue != ccQueue {
			t.Errorf("%s: unexpected queue %q", where, d.queue)
			continue
		}
		if seen[k] {
			t.Errorf("%s: in the DLQ twice for the same group", where)
			continue
		}
		seen[k] = true
		x, ok := expected[k]
		if !ok {
			t.Errorf("%s: never given a dlq ack, an exhausting failed ack or an exhausting expiry", where)
			continue
		}
		p, ok := h.pushed[ccAddr{d.pid, d.off}]
		if !ok {
			t.Errorf("%s: no acknowledged push has that address", where)
			continue
		}
		if d.tx != p.tx || d.msgID != p.msgID || d.partition != p.partition || !ccSameJSON([]byte(d.payload), p.body) {
			t.Errorf("%s: snapshot %s/%s id %s payload %s, pushed %s/%s id %s payload %s",
				where, d.partition, d.tx, d.msgID, d.payload, p.partition, p.tx, p.msgID, p.body)
		}
		if d.attempts != x.attempts {
			t.Errorf("%s (%s): attempts %d, want %d", where, x.how, d.attempts, x.attempts)
		}
		if x.err != "" && (d.err == nil || *d.err != x.err) {
			t.Errorf("%s (%s): error %s, want %q", where, x.how, ccStr(d.err), x.err)
		}
		if x.err == "" && (d.err == nil || *d.err == "") {
			t.Errorf("%s (%s): no error text", where, x.how)
		}
	}
	for k, x := range expected {
		if !seen[k] {
			t.Errorf("group %s partition %s offset %d was dead-lettered (%s) but is not in the DLQ",
				k.group, db.names[k.pid], k.off, x.how)
		}
	}
}

// checkCursors: every group committed every partition to last_offset and
// holds no lease or attempt count.
func (h *ccHistory) checkCursors(db *ccDB) {
	t := h.t
	groups := map[string]bool{}
	for _, g := range ccGroups {
		groups[ccGroupName(g)] = true
		for pid, last := range db.last {
			c, ok := db.consumers[ccGP{ccGroupName(g), pid}]
			where := fmt.Sprintf("group %s partition %s", ccGroupName(g), db.names[pid])
			if !ok {
				t.Errorf("%s: no cursor", where)
				continue
			}
			if c.committed != last || c.delivered != last {
				t.Errorf("%s: committed %d delivered %d, last_offset %d", where, c.committed, c.delivered, last)
			}
			if c.leaseID != nil || c.batchEnd != nil || c.attempts != 0 || c.headOnly {
				t.Errorf("%s: after the drain: lease %s batch_end %s attempts %d head_only %v",
					where, ccStr(c.leaseID), ccI64(c.batchEnd), c.attempts, c.headOnly)
			}
		}
	}
	for k := range db.consumers {
		if !groups[k.group] {
			t.Errorf("cursor of unexpected group %q", k.group)
		}
	}
}

func ccI64(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func ccStr(p *string) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", *p)
}

// ccRetryLog is a slog.Handler that records the transient errors the store
// retries (deadlocks, serialization failures), with Postgres' detail.
type ccRetryLog struct {
	mu      sync.Mutex
	n       int
	byOp    map[string]int
	details []string
}

func (l *ccRetryLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *ccRetryLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *ccRetryLog) WithGroup(string) slog.Handler            { return l }

func (l *ccRetryLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byOp == nil {
		l.byOp = map[string]int{}
	}
	op, msg := "", r.Message
	r.Attrs(func(a slog.Attr) bool {
		switch v := a.Value.Any().(type) {
		case error:
			msg = v.Error()
			var pe *pgconn.PgError
			if errors.As(v, &pe) {
				where := pe.Where
				if i := strings.Index(where, "\n"); i > 0 {
					where = where[:i]
				}
				msg = fmt.Sprintf("%s (%s) %s", pe.Message, pe.Code, strings.ReplaceAll(pe.Detail, "\n", " "))
				if where != "" {
					msg += " [" + where + "]"
				}
			}
		case string:
			if a.Key == "op" {
				op = v
			}
		}
		return true
	})
	l.n++
	l.byOp[op]++
	if len(l.details) < 3 {
		l.details = append(l.details, op+": "+msg)
	}
	return nil
}

func (l *ccRetryLog) summary() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, fmt.Sprintf("by operation %v; e.g. %s", l.byOp, strings.Join(l.details, "; "))
}
