package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
	"github.com/queen-serverless/queen/internal/refmodel"
)

// TestDifferential applies seeded random sequences of operations — several
// producers' pushes, pops of several groups (explicit and wildcard,
// multi-partition, autoAck, every subscription mode), acks with mixed
// outcomes in one call, acks that skip offsets, repeat or come out of
// order, with and without leaseId, stale or bogus leases, lease expiry by
// the test clock, lease extension, seeks during leases, retention and
// dead-letter retry/delete — to the real store on real Postgres and to the
// reference model (internal/refmodel), and compares every observable after
// every step: push results, delivered messages and retryCounts, per-item ack
// results, cursors, leases, attempts, lag, depth, the stored log and the
// DLQ. On a mismatch it prints the seed and a shortened operation list that
// still fails.
//
// QUEEN_MODEL_SEQUENCES (default 70, 12 with -short) and QUEEN_MODEL_SEED (default 1, the
// first sequence's seed) choose the sequences; `make check-model` runs
// thousands from a fresh seed.
func TestDifferential(t *testing.T) {
	t.Parallel()
	defSequences := 70
	if testing.Short() {
		defSequences = 12 // the quick lane: fewer sequences, no path-coverage requirement
	}
	sequences := envInt(t, "QUEEN_MODEL_SEQUENCES", defSequences)
	first := uint64(envInt(t, "QUEEN_MODEL_SEED", 1))
	steps := envInt(t, "QUEEN_MODEL_STEPS", 80)
	t.Logf("differential: %d sequences of %d steps, seeds %d..%d (QUEEN_MODEL_SEED=%d QUEEN_MODEL_SEQUENCES=%d to replay)",
		sequences, steps, first, first+uint64(sequences)-1, first, sequences)

	// Each worker has its own database: the reaper is global to one.
	workers := 2
	var next atomic.Uint64
	var failed atomic.Bool
	var ran, totalSteps atomic.Int64
	var wg sync.WaitGroup
	cov := &dCoverage{n: map[string]int{}}
	start := time.Now()
	for w := 0; w < workers; w++ {
		env := pgstoretest.NewClocked(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= uint64(sequences) {
					return
				}
				seed := first + i
				ops := genSequence(seed, steps)
				if at, msg := runSequence(env, seed, 0, ops, cov); msg != "" {
					if !failed.CompareAndSwap(false, true) {
						return
					}
					short, shortMsg := shrink(env, seed, ops[:at+1], msg)
					t.Errorf("seed %d: mismatch at step %d of %d: %s\n\nshortened to %d operations, which fail with: %s\n%s\nreplay: QUEEN_MODEL_SEED=%d QUEEN_MODEL_SEQUENCES=1 go test ./core/pgstore -run TestDifferential",
						seed, at, len(ops), msg, len(short), shortMsg, formatOps(short), seed)
					return
				}
				totalSteps.Add(int64(len(ops)))
				if n := ran.Add(1); sequences >= 500 && n%250 == 0 {
					t.Logf("differential: %d of %d sequences, %d steps, no mismatch so far (%v)",
						n, sequences, totalSteps.Load(), time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("differential: %d sequences, %d steps, no mismatch, in %v", ran.Load(), totalSteps.Load(), time.Since(start).Round(time.Millisecond))
	cov.report(t, !failed.Load() && sequences >= 50)
}

// dCoverage counts the paths the sequences exercised; a full run must
// exercise every one it claims to check.
type dCoverage struct {
	mu sync.Mutex
	n  map[string]int
}

// dPaths are the paths a default run must have exercised.
var dPaths = []string{
	"push: duplicate", "push: queue full", "pop: wildcard", "pop: several partitions", "pop: autoAck",
	"pop: redelivery with retryCount", "pop: expiry noticed on a partition not served",
	"ack: " + queen.ResultCommitted, "ack: " + queen.ResultAlreadyCommitted, "ack: " + queen.ResultDeadLettered,
	"ack: " + queen.ResultRedelivered, "ack: " + queen.ResultNotApplied,
	"ack rejected: invalid or expired lease", "ack rejected: message not delivered", "ack rejected: partition not found",
	"ack: without leaseId", "pop: while a push is in flight", "transaction: applied", "transaction: repeated",
	"transaction: refused for its lease", "transaction: refused for its acks", "reap: lease expired", "reap: dead-lettered by expiry", "reap: retention",
	"reap: completed retention", "reap: dead letters expired", "seek", "dead letter: retried", "dead letter: deleted", "lease: extended",
	"pop: held back by retryDelay", "push: a generated id sent again", "push: a generated id sent again, a duplicate",
}

func (c *dCoverage) add(path string, n int) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[path] += n
}

func (c *dCoverage) report(t *testing.T, require bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, p := range dPaths {
		parts = append(parts, fmt.Sprintf("%s %d", p, c.n[p]))
		if require && c.n[p] == 0 {
			t.Errorf("the sequences never exercised %q", p)
		}
	}
	t.Logf("differential: exercised %s", strings.Join(parts, ", "))
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// ---------------------------------------------------------------------------
// operations

type dKind int

const (
	dConfigure dKind = iota
	dPush
	dPop
	dAck
	dAdvance
	dReap
	dSeek
	dDLQRetry
	dDLQDelete
	dExtend
	dPushInFlight // push items held in flight during a wildcard pop
	dTxn          // acks and push items in one transaction
	dTxnRepeat    // the last transaction again
	dFold         // one small batch of the summaries' fold (o.batch partitions)
)

// dOp is one step. It is self-contained (offsets, not transactionIds;
// lease roles, not lease ids), so a shortened sequence still replays.
type dOp struct {
	kind dKind
	opts refmodel.OptionsPatch
	// push
	items []dItem
	// pop
	group, part       string // part "" = wildcard
	batch, partitions int
	autoAck           bool
	mode              string
	fromAgo           time.Duration
	// ack; wholeBatch acks every offset of the delivered span in order,
	// with the items' statuses in turn, as a consumer would
	acks       []dAckItem
	wholeBatch bool
	// advance, extend
	d time.Duration
	// seek
	seek dSeekTarget
	// dead letters: which row (mod their number), and whether by group
	pick    int
	byGroup bool
	// transaction: requireLease names the lease role of the first ack's
	// cursor to require ("" none)
	requireLease string
}

type dItem struct {
	part, tx, trace string // tx "" = generated by the engine
	n               int
	// again > 0: the transactionId is one the engine generated earlier in
	// the run (the again-th, wrapping), sent back as the client's own.
	again int
}

// Lease roles of an ack item.
const (
	leaseNone    = "none"
	leaseCurrent = "current" // the cursor's lease now (none if it has none)
	leaseStale   = "stale"   // an earlier lease of that cursor
	leaseBogus   = "bogus"   // a lease id nobody was given
)

type dAckItem struct {
	part, group string
	// The offset, resolved when the step runs: inSpan picks the rel-th
	// offset of the delivered span (committed, delivered] (wrapping),
	// otherwise committed - 1 + rel, which may lie outside it.
	rel         int
	inSpan      bool
	status      string
	lease       string
	err         string
	unknownPart bool
}

type dSeekTarget struct {
	toEnd, toBeginning bool
	ago                *time.Duration
	offsets            map[string]int64
}

func (o dOp) String() string {
	g := func(s string) string {
		if s == "" {
			return "queue-mode"
		}
		return s
	}
	switch o.kind {
	case dConfigure:
		var parts []string
		v := reflect.ValueOf(o.opts)
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); !f.IsNil() {
				parts = append(parts, fmt.Sprintf("%s=%v", v.Type().Field(i).Name, f.Elem().Interface()))
			}
		}
		return "configure " + strings.Join(parts, " ")
	case dPush:
		var parts []string
		for _, it := range o.items {
			tx := it.tx
			if tx == "" {
				tx = "<generated>"
			}
			if it.again > 0 {
				tx = fmt.Sprintf("<generated #%d again>", it.again)
			}
			parts = append(parts, fmt.Sprintf("%s:%s", it.part, tx))
		}
		return "push [" + strings.Join(parts, ", ") + "]"
	case dPop:
		where := "wildcard"
		if o.part != "" {
			where = "partition " + o.part
		}
		s := fmt.Sprintf("pop %s %s batch=%d", g(o.group), where, o.batch)
		if o.part == "" && o.partitions > 1 {
			s += fmt.Sprintf(" partitions=%d", o.partitions)
		}
		if o.autoAck {
			s += " autoAck"
		}
		if o.mode != refmodel.ModeAll {
			s += " mode=" + o.mode
			if o.mode == refmodel.ModeFrom {
				s += fmt.Sprintf(" from=now-%v", o.fromAgo)
			}
		}
		return s
	case dAck:
		var parts []string
		for _, a := range o.acks {
			p := a.part
			if a.unknownPart {
				p = "<unknown partition>"
			}
			where := fmt.Sprintf("committed-1+%d", a.rel)
			if a.inSpan {
				where = fmt.Sprintf("span[%d]", a.rel)
			}
			parts = append(parts, fmt.Sprintf("%s %s@%s %s lease=%s", g(a.group), p, where, a.status, a.lease))
		}
		if o.wholeBatch {
			return "ack whole span of " + parts[0] + " with statuses of [" + strings.Join(parts, "; ") + "]"
		}
		return "ack [" + strings.Join(parts, "; ") + "]"
	case dAdvance:
		return fmt.Sprintf("clock +%v", o.d)
	case dReap:
		return "reap"
	case dFold:
		return fmt.Sprintf("fold %d partitions into the summaries", o.batch)
	case dSeek:
		switch {
		case o.seek.toEnd:
			return fmt.Sprintf("seek %s to end", g(o.group))
		case o.seek.toBeginning:
			return fmt.Sprintf("seek %s to beginning", g(o.group))
		case o.seek.ago != nil:
			return fmt.Sprintf("seek %s to now-%v", g(o.group), *o.seek.ago)
		}
		return fmt.Sprintf("seek %s to offsets %v", g(o.group), o.seek.offsets)
	case dDLQRetry:
		return fmt.Sprintf("retry dead letter #%d byGroup=%v", o.pick, o.byGroup)
	case dDLQDelete:
		return fmt.Sprintf("delete dead letter #%d byGroup=%v", o.pick, o.byGroup)
	case dExtend:
		return fmt.Sprintf("extend lease of %s on %s by %v", g(o.group), o.part, o.d)
	case dPushInFlight:
		return fmt.Sprintf("%s held in flight during %s", dOp{kind: dPush, items: o.items}, dOp{kind: dPop, group: o.group,
			batch: o.batch, partitions: o.partitions, mode: refmodel.ModeAll})
	case dTxn:
		return fmt.Sprintf("transaction {%s; %s; requiredLeases=%s}", dOp{kind: dAck, acks: o.acks, wholeBatch: o.wholeBatch},
			dOp{kind: dPush, items: o.items}, o.requireLease)
	case dTxnRepeat:
		return "the last transaction again"
	}
	return "?"
}

func formatOps(ops []dOp) string {
	var b strings.Builder
	for i, o := range ops {
		fmt.Fprintf(&b, "  %3d  %s\n", i, o)
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// generation

var dPartitionNames = []string{"p0", "p1", "p/2 ü", "p3"}
var dGroups = []string{"", "g1", "g2"}

func genSequence(seed uint64, steps int) []dOp {
	rng := rand.New(rand.NewPCG(seed, 0x51))
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
	chance := func(p float64) bool { return rng.Float64() < p }

	parts := dPartitionNames[:1+rng.IntN(len(dPartitionNames))]
	var groups []string
	for _, i := range rng.Perm(len(dGroups))[:1+rng.IntN(len(dGroups))] {
		groups = append(groups, dGroups[i])
	}
	profile := refmodel.OptionsPatch{
		LeaseTime:   ptr(2 + rng.IntN(9)),
		RetryLimit:  ptr(rng.IntN(4)),
		DedupWindow: ptr(pick(0, 5, 60, 3600)),
	}
	if chance(0.2) {
		profile.DelayedProcessing = ptr(1 + rng.IntN(2))
	}
	if chance(0.25) {
		profile.RetryDelay = ptr(pick(500, 1000, 3000)) // ms
	}
	if chance(0.15) {
		profile.WindowBuffer = ptr(1)
	}
	if chance(0.2) {
		profile.MaxSize = ptr(int64(6 + rng.IntN(10)))
	}
	if chance(0.3) {
		profile.Retention = ptr(10 + rng.IntN(30))
	}
	if chance(0.3) {
		profile.CompletedRetention = ptr(5 + rng.IntN(15))
	}
	if chance(0.2) {
		profile.DLQRetention = ptr(5 + rng.IntN(30))
	}
	ops := []dOp{{kind: dConfigure, opts: profile}}
	n := 0
	for len(ops) < steps {
		var o dOp
		switch r := rng.IntN(114); {
		case r < 24:
			o.kind = dPush
			for k := 1 + rng.IntN(4); k > 0; k-- {
				n++
				it := dItem{part: parts[rng.IntN(len(parts))], n: n}
				switch r := rng.Float64(); {
				case r < 0.6:
					it.tx = fmt.Sprintf("t%d", rng.IntN(12))
				case r < 0.7:
					it.again = 1 + rng.IntN(20)
				}
				if chance(0.2) {
					it.trace = fmt.Sprintf("trace-%d", n)
				}
				o.items = append(o.items, it)
			}
		case r < 48:
			o.kind = dPop
			o.group = groups[rng.IntN(len(groups))]
			if chance(0.4) {
				o.part = parts[rng.IntN(len(parts))]
			}
			o.batch = 1 + rng.IntN(5)
			o.partitions = 1 + rng.IntN(3)
			o.autoAck = chance(0.08)
			o.mode = refmodel.ModeAll
			switch r := rng.IntN(100); {
			case r < 20:
				o.mode = refmodel.ModeNew
			case r < 32:
				o.mode = refmodel.ModeFrom
				o.fromAgo = time.Duration(rng.IntN(20000)) * time.Millisecond
			}
		case r < 74:
			o.kind = dAck
			o.wholeBatch = chance(0.35)
			group := groups[rng.IntN(len(groups))]
			part := parts[rng.IntN(len(parts))]
			role := []string{leaseCurrent, leaseCurrent, leaseCurrent, leaseNone, leaseNone, leaseStale, leaseBogus}[rng.IntN(7)]
			for k := 1 + rng.IntN(4); k > 0; k-- {
				a := dAckItem{part: part, group: group, lease: role, rel: rng.IntN(8), inSpan: chance(0.85),
					status: []string{"completed", "completed", "completed", "failed", "failed", "retry", "dlq"}[rng.IntN(7)]}
				if chance(0.12) {
					a.part = parts[rng.IntN(len(parts))]
				}
				if chance(0.1) {
					a.lease = []string{leaseCurrent, leaseNone, leaseStale}[rng.IntN(3)]
				}
				if a.status == "failed" || a.status == "dlq" {
					a.err = fmt.Sprintf("error %d", rng.IntN(3))
				}
				a.unknownPart = chance(0.01)
				o.acks = append(o.acks, a)
			}
		case r < 88:
			o.kind = dAdvance
			switch r := rng.IntN(100); {
			case r < 70:
				o.d = time.Duration(1+rng.IntN(1500)) * time.Millisecond
			case r < 95:
				o.d = time.Duration(1000+rng.IntN(11000)) * time.Millisecond
			default:
				o.d = time.Duration(30+rng.IntN(40)) * time.Second
			}
		case r < 92:
			o.kind = dReap
		case r < 94:
			o.kind = dSeek
			o.group = groups[rng.IntN(len(groups))]
			switch rng.IntN(4) {
			case 0:
				o.seek.toEnd = true
			case 1:
				o.seek.toBeginning = true
			case 2:
				ago := time.Duration(rng.IntN(30000)) * time.Millisecond
				o.seek.ago = &ago
			default:
				o.seek.offsets = map[string]int64{}
				for _, p := range parts {
					if chance(0.6) {
						o.seek.offsets[p] = int64(rng.IntN(8)) - 1
					}
				}
			}
		case r < 96:
			o.kind = dDLQRetry
			o.pick, o.byGroup = rng.IntN(100), chance(0.5)
		case r < 97:
			o.kind = dDLQDelete
			o.pick, o.byGroup = rng.IntN(100), chance(0.5)
		case r < 99:
			o.kind = dExtend
			o.group = groups[rng.IntN(len(groups))]
			o.part = parts[rng.IntN(len(parts))]
			o.d = time.Duration(rng.IntN(11)) * time.Second // 0: the queue's leaseTime
		case r < 100:
			o.kind = dConfigure
			switch rng.IntN(4) {
			case 0:
				o.opts.RetryLimit = ptr(rng.IntN(4))
			case 1:
				o.opts.LeaseTime = ptr(2 + rng.IntN(9))
			case 2: // the window changes: keys already pruned stay out, periods at 0 record none
				o.opts.DedupWindow = ptr(pick(0, 5, 60, 3600))
			default:
				o.opts.RetryDelay = ptr(pick(0, 500, 2000)) // ms
			}
		case r < 105:
			o.kind = dTxn
			o.wholeBatch = chance(0.5)
			group, part := groups[rng.IntN(len(groups))], parts[rng.IntN(len(parts))]
			for k := 1 + rng.IntN(3); k > 0; k-- {
				o.acks = append(o.acks, dAckItem{part: part, group: group, lease: leaseCurrent, rel: rng.IntN(4), inSpan: true,
					status: []string{"completed", "completed", "completed", "failed", "retry", "dlq"}[rng.IntN(6)], err: "txn"})
			}
			for k := rng.IntN(3); k > 0; k-- {
				n++
				o.items = append(o.items, dItem{part: parts[rng.IntN(len(parts))], n: n})
			}
			o.requireLease = []string{"", leaseCurrent, leaseCurrent, leaseStale}[rng.IntN(4)]
		case r < 107:
			o.kind = dTxnRepeat
		case r < 110:
			o.kind = dPushInFlight
			for k := 1 + rng.IntN(2); k > 0; k-- {
				n++
				o.items = append(o.items, dItem{part: parts[rng.IntN(len(parts))], n: n})
			}
			o.group = groups[rng.IntN(len(groups))]
			o.batch, o.partitions, o.mode = 1+rng.IntN(5), 1+rng.IntN(3), refmodel.ModeAll
		default:
			o.kind = dFold
			o.batch = 1 + rng.IntN(3)
		}
		ops = append(ops, o)
	}
	return ops
}

// shrink removes operations while the sequence still fails (any mismatch),
// for at most a minute.
func shrink(env *pgstoretest.Env, seed uint64, ops []dOp, msg string) ([]dOp, string) {
	deadline := time.Now().Add(time.Minute)
	attempt := 1
	for chunk := len(ops) / 2; chunk >= 1 && time.Now().Before(deadline); chunk /= 2 {
		for i := 1; i+chunk <= len(ops) && time.Now().Before(deadline); { // op 0 (the profile) stays
			try := append(append([]dOp{}, ops[:i]...), ops[i+chunk:]...)
			attempt++
			if at, m := runSequence(env, seed, attempt, try, &dCoverage{n: map[string]int{}}); m != "" {
				ops, msg = try[:at+1], m
				continue
			}
			i += chunk
		}
	}
	return ops, msg
}

// ---------------------------------------------------------------------------
// running

type dRun struct {
	env     *pgstoretest.Env
	store   *pgstore.Store
	cfg     pgstore.Config
	clock   *pgstoretest.Clock
	model   *refmodel.Model
	queue   string
	pids    map[string]string // partition name -> id
	names   map[string]string // id -> name
	leases  map[[2]string][]string
	gen     int
	ids     []string // the transactionIds the engine generated, in order
	cov     *dCoverage
	lastTxn *dTxnRequest
}

func (r *dRun) now() time.Time { return r.clock.Now() }

// runSequence runs ops on a fresh queue; it returns the failing step and a
// description, or "" when every step matched.
func runSequence(env *pgstoretest.Env, seed uint64, attempt int, ops []dOp, cov *dCoverage) (int, string) {
	clock := pgstoretest.NewClock(pgstoretest.Epoch)
	// The deployment's retention defaults, the same in store and model:
	// none in most sequences, windows short enough to act in others.
	cfg, model := pgstore.Config{Clock: clock.Now}, refmodel.New()
	drng := rand.New(rand.NewPCG(seed, uint64(attempt)))
	if drng.IntN(4) == 0 {
		cfg.DefaultRetentionSeconds = 20 + drng.IntN(40)
	}
	if drng.IntN(4) == 0 {
		cfg.DefaultCompletedRetentionSeconds = 5 + drng.IntN(20)
	}
	if drng.IntN(4) == 0 {
		cfg.DefaultDLQRetentionSeconds = 10 + drng.IntN(40)
	}
	model.DefaultRetention, model.DefaultCompletedRetention = cfg.DefaultRetentionSeconds, cfg.DefaultCompletedRetentionSeconds
	model.DefaultDLQRetention = cfg.DefaultDLQRetentionSeconds
	r := &dRun{env: env, clock: clock, cfg: cfg, store: pgstore.New(env.Pool, cfg),
		model: model, queue: fmt.Sprintf("diff-%d-%d", seed, attempt),
		pids: map[string]string{}, names: map[string]string{}, leases: map[[2]string][]string{}, cov: cov}
	defer func() { _ = r.store.DeleteQueue(ctx, r.queue) }()
	// The reaper's record (when it last ran, its dedup cutoff) is global to
	// the database, and every sequence's clock starts at the same time: a
	// sequence starts as on a database never reaped, not after the reaps
	// of the one before, which ran "later" (a window change computes the
	// queue's dedup floor from them).
	if _, err := env.Pool.Exec(ctx, `DELETE FROM queen.reaper`); err != nil {
		return 0, fmt.Sprintf("reset the reaper's record: %v", err)
	}
	// Dead letters outlive their queue: those of the sequences before
	// would be the reaper's too.
	if _, err := env.Pool.Exec(ctx, `DELETE FROM queen.dlq`); err != nil {
		return 0, fmt.Sprintf("clear the dead letters of earlier sequences: %v", err)
	}
	for i, o := range ops {
		if msg := r.step(o); msg != "" {
			return i, msg
		}
		if msg := r.compareState(o); msg != "" {
			return i, msg
		}
		// Keep timestamps distinct: the engine stores microseconds.
		clock.Advance(time.Millisecond)
	}
	return len(ops), ""
}

func toQueenOptions(p refmodel.OptionsPatch) queen.QueueOptions {
	return queen.QueueOptions{LeaseTime: p.LeaseTime, RetryLimit: p.RetryLimit, RetryDelay: p.RetryDelay, DedupWindowSeconds: p.DedupWindow,
		DelayedProcessing: p.DelayedProcessing, WindowBuffer: p.WindowBuffer, MaxSize: p.MaxSize,
		RetentionSeconds: p.Retention, CompletedRetentionSeconds: p.CompletedRetention,
		DLQRetentionSeconds: p.DLQRetention}
}

func (r *dRun) learnPartition(name, id string) string {
	if known, ok := r.pids[name]; ok && known != id {
		return fmt.Sprintf("partition %q has id %s, earlier %s", name, id, known)
	}
	if known, ok := r.names[id]; ok && known != name {
		return fmt.Sprintf("partition id %s is %q, earlier %q", id, name, known)
	}
	r.pids[name], r.names[id] = id, name
	return ""
}

func (r *dRun) step(o dOp) string {
	now := r.now()
	switch o.kind {
	case dConfigure:
		if _, err := r.store.Configure(ctx, queen.ConfigureRequest{Queue: r.queue, Options: toQueenOptions(o.opts)}); err != nil {
			return fmt.Sprintf("configure: %v", err)
		}
		r.model.Configure(r.queue, o.opts)

	case dPush:
		items := r.pushItems(o)
		got, err := r.store.Push(ctx, items)
		return r.checkPush(o, items, got, err, now)

	case dPop:
		return r.checkPop(ctx, o, now)

	case dPushInFlight:
		return r.pushInFlight(o, now)

	case dTxn:
		return r.transaction(o, now)

	case dTxnRepeat:
		if r.lastTxn == nil {
			return ""
		}
		r.cov.add("transaction: repeated", 1)
		return r.applyTxn(*r.lastTxn, now)

	case dAck:
		acks, mitems := r.ackItems(o)
		got, err := r.store.Ack(ctx, acks)
		want, merr := r.model.Ack(mitems, now)
		for i, g := range got {
			switch {
			case g.Success:
				r.cov.add("ack: "+g.Result, 1)
				if acks[i].LeaseID == "" {
					r.cov.add("ack: without leaseId", 1)
				}
			case strings.HasPrefix(g.Error, "message not delivered"):
				r.cov.add("ack rejected: message not delivered", 1)
			case g.Code != "skipped":
				r.cov.add("ack rejected: "+g.Error, 1)
			}
		}
		if (err == nil) != (merr == nil) {
			return fmt.Sprintf("ack: engine err %v results %s; model err %v results %s", err, describeAckResults(got), merr, describeModelAck(want))
		}
		return compareAcks(got, want)

	case dAdvance:
		r.clock.Advance(o.d)

	case dFold:
		// No observable changes: the summaries read the same before and
		// after any part of their fold (compareState).
		if _, err := r.env.Pool.Exec(ctx, `SELECT queen.reap_step(NULL, 'summaries', $1, 0, 0)`, o.batch); err != nil {
			return fmt.Sprintf("fold: %v", err)
		}

	case dReap:
		got, err := r.store.Reap(ctx, queen.ReapRequest{Batch: 100000})
		if err != nil {
			return fmt.Sprintf("reap: %v", err)
		}
		want := r.model.Reap(now)
		r.cov.add("reap: lease expired", got.LeasesExpired)
		r.cov.add("reap: dead-lettered by expiry", got.DeadLettered)
		r.cov.add("reap: retention", got.SegmentsRetained)
		r.cov.add("reap: completed retention", got.SegmentsCompleted)
		r.cov.add("reap: dead letters expired", got.DeadLettersExpired)
		if got.LeasesExpired != want.LeasesExpired || got.DeadLettered != want.DeadLettered ||
			got.SegmentsRetained != want.SegmentsRetained || got.SegmentsCompleted != want.SegmentsCompleted ||
			got.DeadLettersExpired != want.DeadLettersExpired {
			return fmt.Sprintf("reap: engine %+v, model %+v", got, want)
		}

	case dSeek:
		var target queen.SeekTarget
		var mt refmodel.SeekTarget
		switch {
		case o.seek.toEnd:
			target.ToEnd, mt.ToEnd = true, true
		case o.seek.toBeginning:
			target.ToBeginning, mt.ToBeginning = true, true
		case o.seek.ago != nil:
			ts := now.Add(-*o.seek.ago)
			target.Timestamp, mt.Timestamp = &ts, &ts
		default:
			target.Offsets, mt.Offsets = map[string]int64{}, map[string]int64{}
			for p, off := range o.seek.offsets {
				target.Offsets[p], mt.Offsets[p] = max(off, 0), max(off, 0)
			}
			if len(target.Offsets) == 0 {
				target.Offsets["p0"], mt.Offsets["p0"] = 0, 0
			}
		}
		got, err := r.store.Seek(ctx, groupName(o.group), r.queue, target)
		want, merr := r.model.Seek(o.group, r.queue, mt, now)
		if (err == nil) != (merr == nil) || (err != nil && !errors.Is(err, queen.ErrNotFound)) {
			return fmt.Sprintf("seek: engine err %v, model err %v", err, merr)
		}
		gotMap := map[string]int64{}
		for _, s := range got {
			gotMap[s.Partition] = s.Committed
		}
		if err == nil && !reflect.DeepEqual(gotMap, want) {
			return fmt.Sprintf("seek: engine %v, model %v", gotMap, want)
		}
		if err == nil {
			r.cov.add("seek", 1)
		}

	case dDLQRetry, dDLQDelete:
		rows := r.model.DeadLetters()
		if len(rows) == 0 {
			return ""
		}
		d := rows[o.pick%len(rows)]
		group := ""
		if o.byGroup {
			group = d.Group
		}
		pid := r.pids[d.Partition]
		if o.kind == dDLQDelete {
			n, err := r.store.DeleteDeadLetter(ctx, pid, d.TxID, group)
			want := r.model.DeleteDeadLetter(r.queue, d.Partition, d.TxID, group)
			if err != nil || n != want {
				return fmt.Sprintf("delete dead letter: engine %d %v, model %d", n, err, want)
			}
			r.cov.add("dead letter: deleted", n)
			return ""
		}
		got, err := r.store.RetryDeadLetter(ctx, pid, d.TxID, group)
		newTx := got.TransactionID
		if err != nil {
			newTx = "never-used"
		}
		want, merr := r.model.RetryDeadLetter(r.queue, d.Partition, d.TxID, group, newTx, now)
		if (err == nil) != (merr == nil) {
			return fmt.Sprintf("retry dead letter: engine %v, model %v", err, merr)
		}
		if err == nil && (got.Offset != want.Offset || got.Status != queen.StatusQueued) {
			return fmt.Sprintf("retry dead letter: engine offset %d %s, model %d", got.Offset, got.Status, want.Offset)
		}
		if err == nil {
			r.cov.add("dead letter: retried", 1)
		}

	case dExtend:
		c, ok := r.model.Cursor(r.queue, o.part, o.group)
		lease := c.LeaseID
		if !ok || lease == "" {
			if ls := r.leases[[2]string{o.part, groupName(o.group)}]; len(ls) > 0 {
				lease = ls[len(ls)-1]
			} else {
				return ""
			}
		}
		secs := int(o.d / time.Second)
		_, err := r.store.ExtendLease(ctx, lease, secs)
		live := r.model.ExtendLease(lease, secs, now)
		if (err == nil) != live {
			return fmt.Sprintf("extend lease %s: engine err %v, model live=%v", lease, err, live)
		}
		if live {
			r.cov.add("lease: extended", 1)
		}
	}
	return ""
}

// checkPop makes a pop on both sides and compares what they delivered.
func (r *dRun) checkPop(ctx context.Context, o dOp, now time.Time) string {
	req := queen.PopRequest{Queue: r.queue, Partition: o.part, ConsumerGroup: o.group, Batch: o.batch,
		Partitions: o.partitions, AutoAck: o.autoAck, Mode: queen.SubscribeAll}
	if o.part != "" {
		req.Partitions = 1
	}
	from := now.Add(-o.fromAgo)
	switch o.mode {
	case refmodel.ModeNew:
		req.Mode = queen.SubscribeNew
	case refmodel.ModeFrom:
		req.Mode, req.From = queen.SubscribeFrom, from
	}
	got, err := r.store.Pop(ctx, req)
	if err != nil {
		return fmt.Sprintf("pop: %v", err)
	}
	mreq := refmodel.PopRequest{Queue: r.queue, Partition: o.part, Group: o.group, Batch: o.batch,
		Partitions: req.Partitions, AutoAck: o.autoAck, Mode: o.mode, From: from, LeaseID: got.LeaseID}
	for _, m := range got.Messages {
		name, ok := r.names[m.PartitionID]
		if !ok {
			return fmt.Sprintf("pop delivered partition id %s, never pushed to", m.PartitionID)
		}
		if len(mreq.Chosen) == 0 || mreq.Chosen[len(mreq.Chosen)-1] != name {
			mreq.Chosen = append(mreq.Chosen, name)
		}
	}
	if o.part != "" {
		mreq.Chosen = nil
	}
	heldBack := false
	if c, ok := r.model.Cursor(r.queue, o.part, o.group); ok && o.part != "" {
		heldBack = c.RetryAt.After(now) && c.Committed < c.LastOffset && c.LeaseID == ""
	}
	want, merr := r.model.Pop(mreq, now)
	if merr != nil {
		return fmt.Sprintf("pop: engine delivered %s; the model says: %v", describeMsgs(r, got.Messages), merr)
	}
	if len(got.Messages) != len(want.Messages) {
		return fmt.Sprintf("pop: engine delivered %s, model %s", describeMsgs(r, got.Messages), describeModelMsgs(want.Messages))
	}
	for i, m := range got.Messages {
		w := want.Messages[i]
		trace := ""
		if m.TraceID != nil {
			trace = *m.TraceID
		}
		if r.names[m.PartitionID] != w.Partition || m.Offset != w.Offset || m.TransactionID != w.TxID ||
			string(m.Data) != w.Payload || trace != w.TraceID || !m.CreatedAt.Equal(w.CreatedAt) || m.RetryCount != w.RetryCount ||
			m.Partition != w.Partition {
			return fmt.Sprintf("pop message %d: engine %s, model %s", i, describeMsgs(r, got.Messages), describeModelMsgs(want.Messages))
		}
	}
	if o.part == "" && len(got.Messages) > 0 {
		r.cov.add("pop: wildcard", 1)
		if len(mreq.Chosen) > 1 {
			r.cov.add("pop: several partitions", 1)
		}
	}
	if o.autoAck && len(got.Messages) > 0 {
		r.cov.add("pop: autoAck", 1)
	}
	if heldBack && len(got.Messages) == 0 {
		r.cov.add("pop: held back by retryDelay", 1)
	}
	for _, m := range got.Messages {
		if m.RetryCount > 0 {
			r.cov.add("pop: redelivery with retryCount", 1)
		}
	}
	if (got.LeaseID != "") != want.Leased {
		return fmt.Sprintf("pop: engine lease %q, model leased=%v", got.LeaseID, want.Leased)
	}
	if want.Leased {
		if got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(want.LeaseExpires) {
			return fmt.Sprintf("pop: lease expires %v, model %v", got.LeaseExpiresAt, want.LeaseExpires)
		}
		for _, name := range uniqueParts(want.Messages) {
			k := [2]string{name, groupName(o.group)}
			r.leases[k] = append(r.leases[k], got.LeaseID)
		}
	}
	if o.part == "" {
		// A wildcard pop may notice expired leases (or retention) on
		// partitions it does not serve; follow the engine there.
		return r.followTouches(o.group)
	}
	return ""
}

func (r *dRun) pushItems(o dOp) []queen.PushItem {
	items := make([]queen.PushItem, len(o.items))
	for i, it := range o.items {
		tx := it.tx
		if it.again > 0 && len(r.ids) > 0 {
			tx = r.ids[(it.again-1)%len(r.ids)]
		}
		items[i] = queen.PushItem{Queue: r.queue, Partition: it.part, TransactionID: tx, TraceID: it.trace,
			Payload: payload(map[string]any{"n": it.n})}
	}
	return items
}

// modelItems are the push items as the model takes them: the engine's
// generated transactionIds where the client sent none.
func (r *dRun) modelItems(o dOp, items []queen.PushItem, got []queen.PushResult, err error) ([]refmodel.PushItem, string) {
	mitems := make([]refmodel.PushItem, len(o.items))
	var generated []string
	for i, it := range o.items {
		tx := items[i].TransactionID
		mitems[i] = refmodel.PushItem{Queue: r.queue, Partition: it.part, TxID: tx, TraceID: it.trace, Payload: string(items[i].Payload)}
		if tx != "" && it.again > 0 {
			r.cov.add("push: a generated id sent again", 1)
		}
		if tx == "" && err == nil {
			if !uuidV7.MatchString(got[i].TransactionID) {
				return nil, fmt.Sprintf("push item %d: generated transactionId %q is not a UUIDv7", i, got[i].TransactionID)
			}
			mitems[i].TxID = got[i].TransactionID
			generated = append(generated, got[i].TransactionID)
		}
		if tx == "" && err != nil {
			r.gen++
			mitems[i].TxID = fmt.Sprintf("gen-%d", r.gen) // fresh, like a UUIDv7
		}
	}
	r.ids = append(r.ids, generated...)
	return mitems, ""
}

// uuidV7 matches a UUIDv7 in canonical lower-case text (RFC 9562).
var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkPush applies a push the engine made to the model and compares.
func (r *dRun) checkPush(o dOp, items []queen.PushItem, got []queen.PushResult, err error, now time.Time) string {
	mitems, msg := r.modelItems(o, items, got, err)
	if msg != "" {
		return msg
	}
	want, merr := r.model.Push(mitems, now)
	if (err == nil) != (merr == nil) || (err != nil && !errors.Is(err, queen.ErrQueueFull)) {
		return fmt.Sprintf("push: engine err %v, model err %v", err, merr)
	}
	if err != nil {
		r.cov.add("push: queue full", 1)
		return ""
	}
	return r.comparePush(o, got, want)
}

func (r *dRun) comparePush(o dOp, got []queen.PushResult, want []refmodel.PushResult) string {
	if len(got) != len(want) {
		return fmt.Sprintf("push: %d results, model %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Status == queen.StatusDuplicate {
			r.cov.add("push: duplicate", 1)
			if o.items[i].again > 0 {
				r.cov.add("push: a generated id sent again, a duplicate", 1)
			}
		}
		if m := r.learnPartition(o.items[i].part, got[i].PartitionID); m != "" {
			return m
		}
		status := queen.StatusQueued
		if want[i].Duplicate {
			status = queen.StatusDuplicate
		}
		if got[i].Status != status || got[i].Offset != want[i].Offset || got[i].Partition != o.items[i].part ||
			(status == queen.StatusQueued && !got[i].CreatedAt.Equal(want[i].CreatedAt)) {
			return fmt.Sprintf("push item %d: engine %s offset %d createdAt %s, model %s offset %d createdAt %s",
				i, got[i].Status, got[i].Offset, got[i].CreatedAt, status, want[i].Offset, want[i].CreatedAt)
		}
	}
	return ""
}

// pushInFlight holds a push's transaction open while a wildcard pop of an
// already subscribed group runs, then commits it: the pop must serve what
// was deliverable before the push, without waiting for it (semantics.md §3.4.3).
func (r *dRun) pushInFlight(o dOp, now time.Time) string {
	if _, ok := r.model.Cursor(r.queue, o.items[0].part, o.group); !ok {
		// A new subscription waits for pushes in flight by design: run
		// them one after the other.
		items := r.pushItems(o)
		got, err := r.store.Push(ctx, items)
		if msg := r.checkPush(o, items, got, err, now); msg != "" {
			return msg
		}
		return r.checkPop(ctx, o, now)
	}
	tx, err := r.env.Pool.Begin(ctx)
	if err != nil {
		return fmt.Sprintf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	items := r.pushItems(o)
	got, perr := pgstore.New(tx, r.cfg).Push(ctx, items)
	if perr != nil {
		// Rejected (queue full) before the pop ran, on the state before
		// it: in serial order the push came first and wrote nothing.
		if msg := r.checkPush(o, items, got, perr, now); msg != "" {
			return msg
		}
	}
	popCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if msg := r.checkPop(popCtx, o, now); msg != "" {
		if popCtx.Err() != nil {
			return "a wildcard pop waited for a push in flight: " + msg
		}
		return msg
	}
	if perr != nil {
		return ""
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Sprintf("commit the push: %v", err)
	}
	r.cov.add("pop: while a push is in flight", 1)
	// Committed after the pop: in serial order it comes second. Its maxSize
	// check saw the state before the pop, and a pop never adds depth, so
	// the model (checking after the pop) accepts it too.
	return r.checkPush(o, items, got, nil, now)
}

// dTxnRequest is a resolved transaction, kept for replays.
type dTxnRequest struct {
	op     dOp
	acks   []queen.Ack
	macks  []refmodel.AckItem
	items  []queen.PushItem
	leases []string
}

func (r *dRun) transaction(o dOp, now time.Time) string {
	req := dTxnRequest{op: o, items: r.pushItems(o)}
	req.acks, req.macks = r.ackItems(o)
	switch o.requireLease {
	case leaseCurrent, leaseStale, leaseBogus:
		if l := r.leaseFor(dResolvedAck{dAckItem: dAckItem{part: o.acks[0].part, group: o.acks[0].group, lease: o.requireLease}}); l != "" {
			req.leases = []string{l}
		}
	}
	r.lastTxn = &req
	return r.applyTxn(req, now)
}

func (r *dRun) applyTxn(req dTxnRequest, now time.Time) string {
	got, err := r.store.Transaction(ctx, queen.TransactionRequest{Acks: req.acks, Pushes: req.items, RequiredLeases: req.leases})
	mitems, msg := r.modelItems(req.op, req.items, got.Pushes, err)
	if msg != "" {
		return msg
	}
	wantAcks, wantPush, merr := r.model.Transaction(req.macks, mitems, req.leases, now)
	if (err == nil) != (merr == nil) {
		return fmt.Sprintf("transaction: engine err %v acks %s; model err %v acks %s", err, describeAckResults(got.Acks),
			merr, describeModelAck(wantAcks))
	}
	switch {
	case errors.Is(merr, refmodel.ErrLease):
		r.cov.add("transaction: refused for its lease", 1)
		if !errors.Is(err, queen.ErrConflict) {
			return fmt.Sprintf("transaction: engine err %v, model %v", err, merr)
		}
		return ""
	case errors.Is(merr, refmodel.ErrQueueFull):
		if !errors.Is(err, queen.ErrQueueFull) {
			return fmt.Sprintf("transaction: engine err %v, model %v", err, merr)
		}
		return ""
	case merr != nil:
		r.cov.add("transaction: refused for its acks", 1)
		return compareAcks(got.Acks, wantAcks)
	}
	r.cov.add("transaction: applied", 1)
	if len(req.acks) > 0 {
		if msg := compareAcks(got.Acks, wantAcks); msg != "" {
			return msg
		}
	}
	return r.comparePush(req.op, got.Pushes, wantPush)
}

// ackItems resolves an ack step to the engine's and the model's items.
func (r *dRun) ackItems(o dOp) ([]queen.Ack, []refmodel.AckItem) {
	items := r.resolveAcks(o)
	acks := make([]queen.Ack, len(items))
	mitems := make([]refmodel.AckItem, len(items))
	for i, a := range items {
		tx := fmt.Sprintf("absent-%d", a.offset)
		if msg, ok := r.model.Message(r.queue, a.part, a.offset); ok {
			tx = msg.TxID
		}
		lease := r.leaseFor(a)
		pid, part := r.pids[a.part], a.part
		if a.unknownPart || pid == "" {
			pid, part = "00000000-0000-0000-0000-0000000000aa", "<unknown>"
		}
		acks[i] = queen.Ack{PartitionID: pid, TransactionID: tx, Status: queen.AckStatus(a.status),
			ConsumerGroup: a.group, LeaseID: lease, Error: a.err}
		mitems[i] = refmodel.AckItem{Queue: r.queue, Partition: part, TxID: tx, Status: a.status, Group: a.group,
			LeaseID: lease, Error: a.err}
	}
	return acks, mitems
}

func compareAcks(got []queen.AckResult, want []refmodel.AckResult) string {
	if len(got) != len(want) {
		return fmt.Sprintf("ack: %d results, model %d: engine %s; model %s", len(got), len(want), describeAckResults(got), describeModelAck(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		same := g.Success == w.Success && g.Code == w.Code && g.Error == w.Error
		if w.Success {
			same = same && g.Result == w.Result && g.DLQ == w.DLQ && g.LeaseReleased == w.LeaseReleased &&
				g.Committed != nil && *g.Committed == w.Committed && eqOffset(g.Offset, w.Offset)
		}
		if !same {
			return fmt.Sprintf("ack item %d: engine %s; model %s", i, describeAckResults(got), describeModelAck(want))
		}
	}
	return ""
}

func eqOffset(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func groupName(g string) string {
	if g == "" {
		return queen.QueueModeGroup
	}
	return g
}

func uniqueParts(msgs []refmodel.Delivered) []string {
	var out []string
	for _, m := range msgs {
		if len(out) == 0 || out[len(out)-1] != m.Partition {
			out = append(out, m.Partition)
		}
	}
	return out
}

type dResolvedAck struct {
	dAckItem
	offset int64
}

// resolveAcks turns an ack step into items with offsets, from the model's
// cursors now.
func (r *dRun) resolveAcks(o dOp) []dResolvedAck {
	var out []dResolvedAck
	for _, a := range o.acks {
		if _, known := r.pids[a.part]; !known && !a.unknownPart {
			// Not pushed to yet: ack the first partition that was.
			if names := r.model.Partitions(r.queue); len(names) > 0 {
				a.part = names[0]
			}
		}
		c, _ := r.model.Cursor(r.queue, a.part, a.group)
		if o.wholeBatch {
			for i, off := 0, c.Committed+1; off <= c.Delivered; i, off = i+1, off+1 {
				b := a
				b.status, b.err = o.acks[i%len(o.acks)].status, o.acks[i%len(o.acks)].err
				out = append(out, dResolvedAck{b, off})
			}
			if len(out) == 0 {
				out = append(out, dResolvedAck{a, c.Committed + 1})
			}
			return out
		}
		off := c.Committed - 1 + int64(a.rel)
		if span := c.Delivered - c.Committed; a.inSpan && span > 0 {
			off = c.Committed + 1 + int64(a.rel)%span
		}
		out = append(out, dResolvedAck{a, off})
	}
	return out
}

// leaseFor resolves an ack item's lease role to a lease id.
func (r *dRun) leaseFor(a dResolvedAck) string {
	hist := r.leases[[2]string{a.part, groupName(a.group)}]
	switch a.lease {
	case leaseCurrent:
		if c, ok := r.model.Cursor(r.queue, a.part, a.group); ok && c.LeaseID != "" {
			return c.LeaseID
		}
		if len(hist) > 0 {
			return hist[len(hist)-1]
		}
	case leaseStale:
		if len(hist) > 1 {
			return hist[len(hist)-2]
		}
		if len(hist) > 0 {
			return hist[0]
		}
	case leaseBogus:
		return "00000000-0000-0000-0000-0000000000bb"
	}
	return ""
}

// followTouches lets the model catch up with a wildcard pop that noticed
// expired leases or retention on partitions it did not serve: where the
// engine's cursor differs from the model's, the model applies Touch (what
// any pop looking at that partition does) if that makes them agree.
func (r *dRun) followTouches(group string) string {
	engine, err := r.readCursors(groupName(group))
	if err != nil {
		return err.Error()
	}
	for _, name := range r.model.Partitions(r.queue) {
		want, ok := r.model.Cursor(r.queue, name, group)
		got, found := engine[name]
		if !ok || !found || cursorsEqual(got, want) {
			continue
		}
		probe := r.model.Clone()
		probe.Touch(r.queue, name, group, r.now())
		if touched, _ := probe.Cursor(r.queue, name, group); cursorsEqual(got, touched) {
			r.model = probe
			r.cov.add("pop: expiry noticed on a partition not served", 1)
		}
	}
	return ""
}

func (r *dRun) readCursors(group string) (map[string]refmodel.CursorState, error) {
	g, err := r.store.Group(ctx, group)
	if err != nil {
		if errors.Is(err, queen.ErrNotFound) {
			return map[string]refmodel.CursorState{}, nil
		}
		return nil, fmt.Errorf("group %s: %v", group, err)
	}
	out := map[string]refmodel.CursorState{}
	for _, q := range g.Queues {
		if q.Queue != r.queue {
			continue
		}
		for _, c := range q.Cursors {
			st := refmodel.CursorState{Committed: c.Committed, LastOffset: c.LastOffset, Lag: c.Lag,
				Attempts: c.Attempts, LeaseID: c.LeaseID, BatchEnd: -1}
			if c.BatchEnd != nil {
				st.BatchEnd = *c.BatchEnd
			}
			if c.LeaseExpiresAt != nil {
				st.Expires = *c.LeaseExpiresAt
			}
			out[c.Partition] = st
		}
	}
	return out, nil
}

func cursorsEqual(a, b refmodel.CursorState) bool {
	return a.Committed == b.Committed && a.LastOffset == b.LastOffset && a.Lag == b.Lag && a.Attempts == b.Attempts &&
		a.LeaseID == b.LeaseID && a.BatchEnd == b.BatchEnd && a.Expires.Equal(b.Expires)
}

// compareState compares every observable of the queue.
func (r *dRun) compareState(o dOp) string {
	m := r.model
	detail, err := r.store.Queue(ctx, r.queue, queen.PartitionPage{})
	if errors.Is(err, queen.ErrNotFound) {
		if len(m.Partitions(r.queue)) > 0 {
			return "queue missing in the engine"
		}
		detail = queen.QueueDetail{}
	} else if err != nil {
		return fmt.Sprintf("queue detail: %v", err)
	}
	if err == nil {
		if want := m.Depth(r.queue); detail.Depth != want {
			return fmt.Sprintf("depth: engine %d, model %d", detail.Depth, want)
		}
		if len(detail.Partitions) != len(m.Partitions(r.queue)) {
			return fmt.Sprintf("partitions: engine %d, model %v", len(detail.Partitions), m.Partitions(r.queue))
		}
		for _, p := range detail.Partitions {
			if want := m.LastOffset(r.queue, p.Name); p.LastOffset != want {
				return fmt.Sprintf("partition %s lastOffset: engine %d, model %d", p.Name, p.LastOffset, want)
			}
		}
		lags := map[string]int64{}
		for _, g := range detail.Groups {
			lags[g.Group] = g.Lag
		}
		for _, g := range m.Groups(r.queue) {
			if want := m.Lag(g, r.queue); lags[g] != want {
				return fmt.Sprintf("group %s lag: engine %d, model %d", g, lags[g], want)
			}
		}
		if len(detail.Groups) != len(m.Groups(r.queue)) {
			return fmt.Sprintf("groups: engine %d, model %v", len(detail.Groups), m.Groups(r.queue))
		}
	}
	for _, g := range m.Groups(r.queue) {
		engine, err := r.readCursors(g)
		if err != nil {
			return err.Error()
		}
		for _, p := range m.Partitions(r.queue) {
			want, _ := m.Cursor(r.queue, p, g)
			if got, ok := engine[p]; !ok || !cursorsEqual(got, want) {
				return fmt.Sprintf("cursor %s on %s: engine %+v, model %+v", g, p, got, want)
			}
		}
	}
	// The stored log.
	log, err := r.store.Browse(ctx, queen.BrowseRequest{Queue: r.queue, Limit: 1000})
	if err != nil && !errors.Is(err, queen.ErrNotFound) {
		return fmt.Sprintf("browse: %v", err)
	}
	var want []string
	for _, p := range m.Partitions(r.queue) {
		for _, msg := range m.Log(r.queue, p) {
			want = append(want, fmt.Sprintf("%s@%d %s %s %s", p, msg.Offset, msg.TxID, msg.Payload, msg.CreatedAt.Format(time.RFC3339Nano)))
		}
	}
	var got []string
	for _, msg := range log {
		got = append(got, fmt.Sprintf("%s@%d %s %s %s", msg.Partition, msg.Offset, msg.TransactionID, msg.Data, msg.CreatedAt.UTC().Format(time.RFC3339Nano)))
	}
	sort.Strings(want)
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("stored log: engine %v, model %v", got, want)
	}
	// The dead-letter table.
	page, err := r.store.ListDeadLetters(ctx, queen.DLQFilter{Queue: r.queue, Limit: 1000})
	if err != nil {
		return fmt.Sprintf("dlq: %v", err)
	}
	got, want = nil, nil
	for _, d := range page.Messages {
		e := ""
		if d.Error != nil {
			e = *d.Error
		}
		trace := ""
		if d.TraceID != nil {
			trace = *d.TraceID
		}
		got = append(got, fmt.Sprintf("%s@%d %s %s trace=%q group=%s error=%q attempts=%d created=%s failed=%s",
			d.Partition, d.Offset, d.TransactionID, d.Data, trace, d.ConsumerGroup, e, d.Attempts,
			d.CreatedAt.UTC().Format(time.RFC3339Nano), d.FailedAt.UTC().Format(time.RFC3339Nano)))
	}
	for _, d := range m.DeadLetters() {
		want = append(want, fmt.Sprintf("%s@%d %s %s trace=%q group=%s error=%q attempts=%d created=%s failed=%s",
			d.Partition, d.Offset, d.TxID, d.Payload, d.TraceID, d.Group, d.Error, d.Attempts,
			d.CreatedAt.UTC().Format(time.RFC3339Nano), d.FailedAt.UTC().Format(time.RFC3339Nano)))
	}
	sort.Strings(want)
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("dead letters: engine %v, model %v", got, want)
	}
	return ""
}

func describeMsgs(r *dRun, msgs []queen.Message) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, fmt.Sprintf("%s@%d(rc=%d)", r.names[m.PartitionID], m.Offset, m.RetryCount))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describeModelMsgs(msgs []refmodel.Delivered) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, fmt.Sprintf("%s@%d(rc=%d)", m.Partition, m.Offset, m.RetryCount))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describeAckResults(rs []queen.AckResult) string {
	var parts []string
	for _, r := range rs {
		if !r.Success {
			parts = append(parts, fmt.Sprintf("{%s: %s}", r.Code, r.Error))
			continue
		}
		parts = append(parts, fmt.Sprintf("{off=%s %s dlq=%v committed=%s released=%v}", ccI64(r.Offset), r.Result, r.DLQ, ccI64(r.Committed), r.LeaseReleased))
	}
	return strings.Join(parts, " ")
}

func describeModelAck(rs []refmodel.AckResult) string {
	var parts []string
	for _, r := range rs {
		if !r.Success {
			parts = append(parts, fmt.Sprintf("{%s: %s}", r.Code, r.Error))
			continue
		}
		parts = append(parts, fmt.Sprintf("{off=%s %s dlq=%v committed=%d released=%v}", ccI64(r.Offset), r.Result, r.DLQ, r.Committed, r.LeaseReleased))
	}
	return strings.Join(parts, " ")
}
