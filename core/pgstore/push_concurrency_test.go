package pgstore_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// Pushes without transactionIds (ids generated under the partitions'
// locks) race each other on three partitions, one message, a batch to one
// partition or a batch spread over them at a time (the two ways pushes
// lock and write: push_partition_v2, and _push_append, which locks the
// partitions in the statement that writes), while two consumers keep catching up, so the groups' ready rows are
// removed and must come back with the next push. What a user relies on:
// each partition's offsets are 0, 1, 2, … with no gap and no repeat, a
// push's messages are consecutive in input order, createdAt never goes
// back along a partition, every id is a distinct UUIDv7, and each message
// is delivered once, as pushed (none waits unseen behind a missing ready
// row). QUEEN_CHECK_SEED replays the producers' choices.
func TestGeneratedPushesUnderContention(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	seed := uint64(envInt(t, "QUEEN_CHECK_SEED", 1))
	t.Logf("seed %d (QUEEN_CHECK_SEED=%d to replay)", seed, seed)
	const queue, producers, pushes = "gen", 4, 50
	parts := []string{"a", "b", "c"}
	type sent struct {
		queen.PushResult
		data json.RawMessage
		push int // which push of its producer (producer*pushes + s)
	}
	first, err := e.Store.Push(ctx, []queen.PushItem{{Queue: queue, Partition: "a", Payload: payload("first")}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu        sync.Mutex
		pushed    = []sent{{first[0], payload("first"), -1}}
		delivered = map[string][]queen.Message{} // by partition/offset
		total     atomic.Int64                   // messages pushed
		got       atomic.Int64                   // messages delivered
		producing atomic.Int32
		errs      = make(chan error, producers+2)
	)
	total.Store(1)
	var wg sync.WaitGroup
	producing.Store(producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer producing.Add(-1)
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			for s := range pushes {
				n, spread := 1, false
				switch rng.IntN(3) {
				case 1:
					n = 2 + rng.IntN(19)
				case 2:
					n, spread = 2+rng.IntN(19), true
				}
				part := parts[rng.IntN(len(parts))]
				items := make([]queen.PushItem, n)
				for i := range items {
					if spread {
						part = parts[rng.IntN(len(parts))]
					}
					items[i] = queen.PushItem{Queue: queue, Partition: part, Payload: payload(fmt.Sprintf("%d/%d/%d", p, s, i))}
				}
				res, err := e.Store.Push(ctx, items)
				if err != nil {
					errs <- fmt.Errorf("producer %d push %d: %w", p, s, err)
					return
				}
				mu.Lock()
				for i, r := range res {
					pushed = append(pushed, sent{r, items[i].Payload, p*pushes + s})
				}
				mu.Unlock()
				total.Add(int64(n))
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // let the consumers catch up
			}
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for producing.Load() > 0 || got.Load() < total.Load() {
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("consumer %d: %d of %d messages delivered after a minute", c, got.Load(), total.Load())
					return
				}
				res, err := e.Store.Pop(ctx, queen.PopRequest{Queue: queue, Batch: 7})
				if err != nil {
					errs <- fmt.Errorf("consumer %d: pop: %w", c, err)
					return
				}
				if len(res.Messages) == 0 {
					time.Sleep(time.Millisecond) // poll until the condition above holds
					continue
				}
				acks := make([]queen.Ack, len(res.Messages))
				mu.Lock()
				for i, m := range res.Messages {
					key := fmt.Sprintf("%s/%d", m.Partition, m.Offset)
					delivered[key] = append(delivered[key], m)
					acks[i] = queen.Ack{PartitionID: m.PartitionID, TransactionID: m.TransactionID,
						Status: queen.AckCompleted, LeaseID: res.LeaseID}
				}
				mu.Unlock()
				got.Add(int64(len(res.Messages)))
				if _, err := e.Store.Ack(ctx, acks); err != nil {
					errs <- fmt.Errorf("consumer %d: ack: %w", c, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	byPart := map[string][]sent{}
	ids := map[string]bool{}
	for _, s := range pushed {
		byPart[s.Partition] = append(byPart[s.Partition], s)
		if !uuidV7.MatchString(s.TransactionID) || ids[s.TransactionID] {
			t.Errorf("generated id %q: not a UUIDv7, or given twice", s.TransactionID)
		}
		ids[s.TransactionID] = true
	}
	for part, ss := range byPart {
		sort.Slice(ss, func(i, j int) bool { return ss[i].Offset < ss[j].Offset })
		for i, s := range ss {
			if s.Status != queen.StatusQueued || s.Offset != int64(i) {
				t.Fatalf("partition %s: the %dth message stored is %+v, want status queued at offset %d", part, i, s.PushResult, i)
			}
			if i > 0 && s.CreatedAt.Before(ss[i-1].CreatedAt) {
				t.Errorf("partition %s: createdAt goes back from offset %d (%s) to %d (%s)", part,
					ss[i-1].Offset, ss[i-1].CreatedAt, s.Offset, s.CreatedAt)
			}
			d := delivered[fmt.Sprintf("%s/%d", part, s.Offset)]
			if len(d) != 1 || d[0].TransactionID != s.TransactionID || string(d[0].Data) != string(s.data) {
				t.Errorf("partition %s offset %d (%s, %s): delivered %d times: %+v", part, s.Offset, s.TransactionID, s.data, len(d), d)
			}
		}
	}
	// Within one push, per partition: consecutive offsets in input order,
	// one time.
	prev := map[string]sent{} // the push's last item in each partition
	for i, b := range pushed {
		if i > 0 && b.push != pushed[i-1].push {
			clear(prev)
		}
		if a, ok := prev[b.Partition]; ok && (b.Offset != a.Offset+1 || !b.CreatedAt.Equal(a.CreatedAt)) {
			t.Errorf("items %d and %d of one push to %s: %+v then %+v, want the next offset at the same time",
				a.Index, b.Index, b.Partition, a.PushResult, b.PushResult)
		}
		prev[b.Partition] = b
	}
	if got.Load() != total.Load() {
		t.Errorf("%d messages delivered, %d pushed", got.Load(), total.Load())
	}
}

// A group that caught up has no ready row for its partitions; a push of
// generated ids that spans partitions writes their ready rows again, so the
// group's next pop (any partition) finds what it pushed.
func TestSpreadPushWakesACaughtUpGroup(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	pushGenerated(t, e, "wake", "a", 1)
	res := pop(t, e, queen.PopRequest{Queue: "wake", ConsumerGroup: "g", Batch: 10})
	if len(res.Messages) != 1 {
		t.Fatalf("first pop: %d messages, want 1", len(res.Messages))
	}
	if _, err := e.Store.Ack(ctx, []queen.Ack{{PartitionID: res.Messages[0].PartitionID, TransactionID: res.Messages[0].TransactionID,
		Status: queen.AckCompleted, ConsumerGroup: "g", LeaseID: res.LeaseID}}); err != nil {
		t.Fatal(err)
	}
	if res := pop(t, e, queen.PopRequest{Queue: "wake", ConsumerGroup: "g", Batch: 10}); len(res.Messages) != 0 {
		t.Fatalf("caught up, the group popped %+v", res.Messages)
	}
	pushed, err := e.Store.Push(ctx, []queen.PushItem{
		{Queue: "wake", Partition: "a", Payload: payload(1)}, {Queue: "wake", Partition: "b", Payload: payload(2)},
		{Queue: "wake", Partition: "a", Payload: payload(3)}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 2 { // one partition per pop
		for _, m := range pop(t, e, queen.PopRequest{Queue: "wake", ConsumerGroup: "g", Batch: 10}).Messages {
			got[m.TransactionID] = true
		}
	}
	for _, r := range pushed {
		if !got[r.TransactionID] {
			t.Errorf("%s (%s, offset %d) was not delivered; got %v", r.TransactionID, r.Partition, r.Offset, got)
		}
	}
}

// Pushes that span partitions lock them in one order whichever way they
// take (generated ids: the writing statement's UPDATE; a client's ids: a
// locking statement first), so concurrent ones never deadlock. The Store
// here does not retry: a deadlock would fail a push. QUEEN_CHECK_SEED
// replays the producers' choices.
func TestSpreadPushesNeverDeadlock(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	store := pgstore.New(e.Pool, pgstore.Config{DeadlockRetries: -1})
	seed := uint64(envInt(t, "QUEEN_CHECK_SEED", 1))
	t.Logf("seed %d (QUEEN_CHECK_SEED=%d to replay)", seed, seed)
	const producers, pushes, parts = 6, 40, 8
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			for s := range pushes {
				items := make([]queen.PushItem, 10)
				for i := range items {
					items[i] = queen.PushItem{Queue: "dl", Partition: fmt.Sprintf("p%d", rng.IntN(parts)), Payload: payload(i)}
					if s%2 == 1 {
						items[i].TransactionID = fmt.Sprintf("%d-%d-%d", p, s, i)
					}
				}
				if _, err := store.Push(ctx, items); err != nil {
					errs <- fmt.Errorf("producer %d push %d: %w", p, s, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A push that spans partitions stores each item's producer (the Store's
// callers may set one per item; the HTTP API sets the caller's on all).
func TestSpreadPushKeepsEachItemsProducer(t *testing.T) {
	t.Parallel()
	e := pgstoretest.NewClocked(t)
	if _, err := e.Store.Push(ctx, []queen.PushItem{
		{Queue: "subs", Partition: "a", Payload: payload(1), ProducerSub: "alice"},
		{Queue: "subs", Partition: "b", Payload: payload(2), ProducerSub: "bob"},
		{Queue: "subs", Partition: "c", Payload: payload(3)}}); err != nil {
		t.Fatal(err)
	}
	for part, want := range map[string]string{"a": "alice", "b": "bob", "c": ""} {
		got := pop(t, e, queen.PopRequest{Queue: "subs", Partition: part, ConsumerGroup: "g"})
		if len(got.Messages) != 1 {
			t.Fatalf("partition %s: popped %+v, want one message", part, got.Messages)
		}
		if sub := got.Messages[0].ProducerSub; (sub == nil) != (want == "") || (sub != nil && *sub != want) {
			t.Errorf("partition %s: producer %v, want %q", part, sub, want)
		}
	}
}

// A push across partitions and a push to one partition that create the
// same partition of a capped queue (maxSize) at once never deadlock: both
// create first, then lock the queue's row, then the partitions' (semantics.md
// §3.1.3). Run through a Store that does not retry deadlocks.
func TestCappedPushesCreatingPartitionsNeverDeadlock(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	store := pgstore.New(e.Pool, pgstore.Config{DeadlockRetries: -1})
	if _, err := store.Configure(ctx, queen.ConfigureRequest{Queue: "cap",
		Options: queen.QueueOptions{MaxSize: new(int64(1_000_000))}}); err != nil {
		t.Fatal(err)
	}
	const producers, steps = 6, 60
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			for r := range steps {
				items := []queen.PushItem{{Queue: "cap", Partition: fmt.Sprintf("r%d", r), Payload: payload(r)}}
				if p%2 == 0 { // across partitions: this step's and another new one
					items = append(items, queen.PushItem{Queue: "cap", Partition: fmt.Sprintf("r%d-%d", r, p), Payload: payload(r)})
				}
				if _, err := store.Push(ctx, items); err != nil {
					errs <- fmt.Errorf("producer %d step %d: %w", p, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
