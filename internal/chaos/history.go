package chaos

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/queen-serverless/queen/internal/loadcheck"
)

// queueName is the queue every run uses.
const queueName = "chaos"

// queueModeGroup is the group of consumers that name none
// (docs/semantics.md §3.3.2).
const queueModeGroup = "__QUEUE_MODE__"

// addr is a message's address: partition id and offset.
type addr struct {
	pid string
	off int64
}

// gaddr is a message's address for one group.
type gaddr struct {
	group string
	addr
}

// pushItem is one message a producer pushed.
type pushItem struct {
	tx, partition string
	payload       json.RawMessage
	// known: a 201 gave its address. A push that never got a 201 may or
	// may not have been written.
	known bool
	pid   string
	off   int64
}

// delivery is one message in a pop, with the outcome the consumer chose.
type delivery struct {
	off        int64
	tx         string
	data       json.RawMessage
	retryCount int
	status     string
	errText    string
}

// popPart is one partition's messages in a pop.
type popPart struct {
	pop       *pop
	pid, name string
	msgs      []*delivery
}

// pop is one pop that delivered messages, in the order consumers recorded
// them.
type pop struct {
	seq        int64
	group      string // as the engine names it (queue mode: queueModeGroup)
	consumer   string
	leaseID    string
	sent, back time.Time
	parts      []*popPart
	abandoned  bool // the consumer never acked: the lease must expire
	ack        *ackCall
}

// ackOutcome is what became of an ack call.
type ackOutcome int

const (
	ackUnknown  ackOutcome = iota // no definitive answer: applied or not
	ackApplied                    // 200 with per-item results
	ackRejected                   // 409: nothing applied
)

// ackCall is the batch ack of one pop, possibly sent several times.
type ackCall struct {
	attempts int
	outcome  ackOutcome
	// first: the definitive answer came for the first attempt, so nothing
	// of this call was applied before it.
	first      bool
	sent, back time.Time // of the definitive attempt
	results    []loadcheck.AckResult
}

// history is what the clients saw: every push, pop and ack and its answer.
type history struct {
	mu     sync.Mutex
	items  map[string]*pushItem // by transactionId: every item ever sent
	byAddr map[addr]*pushItem   // the items a 201 placed
	pops   []*pop
	v      loadcheck.Violations
	stats  stats
}

type stats struct {
	pushCalls, pushRetries, queued, retriedDuplicates, unknownItems int
	pops, deliveries, partitionPops                                 int
	sent                                                            map[string]int // outcomes chosen
	abandoned, ackRetries, ackUnknown, ackRejected                  int
	results                                                         map[string]int
}

func newHistory() *history {
	return &history{items: map[string]*pushItem{}, byAddr: map[addr]*pushItem{},
		stats: stats{sent: map[string]int{}, results: map[string]int{}}}
}

// sendPush registers the items of a push about to be sent.
func (h *history) sendPush(items []*pushItem) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range items {
		h.items[it.tx] = it
	}
}

// pushed records a 201 for items, answered at the given attempt. Every
// fresh item must come back "queued" at its first attempt; after attempts
// whose outcome is unknown all must be queued (none of them was written)
// or all duplicates (one of them was): a push is all or nothing.
func (h *history) pushed(items []*pushItem, res []loadcheck.PushResult, attempt int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.pushCalls++
	if len(res) != len(items) {
		h.v.Add(loadcheck.KindOther, "a push of %d items got %d results", len(items), len(res))
		return
	}
	dups := 0
	for i, it := range items {
		r := res[i]
		if r.Index != i || r.TransactionID != it.tx || r.Partition != it.partition {
			h.v.Add(loadcheck.KindOther, "push result %d %+v does not describe item %s/%s", i, r, it.partition, it.tx)
			continue
		}
		switch r.Status {
		case "queued":
			h.stats.queued++
		case "duplicate":
			dups++
			h.stats.retriedDuplicates++
		default:
			h.v.Add(loadcheck.KindOther, "push of %s/%s: status %q", it.partition, it.tx, r.Status)
			continue
		}
		a := addr{r.PartitionID, r.Offset}
		if other, ok := h.byAddr[a]; ok && other != it {
			h.v.Add(loadcheck.KindOther, "offset %d of %s given to two pushes: %s and %s", r.Offset, it.partition, other.tx, it.tx)
		}
		it.known, it.pid, it.off = true, r.PartitionID, r.Offset
		h.byAddr[a] = it
	}
	switch {
	case dups > 0 && attempt == 1:
		h.v.Add(loadcheck.KindOther, "a first push of fresh transactionIds came back with %d duplicates", dups)
	case dups > 0 && dups < len(items):
		h.v.Add(loadcheck.KindOther, "a retried push came back %d duplicates of %d items: the earlier attempt was applied in part", dups, len(items))
	}
}

// gaveUp records items whose push never got an answer.
func (h *history) gaveUp(items []*pushItem) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.unknownItems += len(items)
}

// recordPop records a pop that delivered messages and returns it.
func (h *history) recordPop(group, consumer string, r loadcheck.Reply, res loadcheck.Pop, batch, partitions int) *pop {
	p := &pop{group: group, consumer: consumer, sent: r.Sent, back: r.Back}
	if res.LeaseID == nil || *res.LeaseID == "" {
		h.v.Add(loadcheck.KindOther, "%s: pop delivered %d messages without a lease", consumer, len(res.Messages))
	} else {
		p.leaseID = *res.LeaseID
	}
	if len(res.Messages) > batch {
		h.v.Add(loadcheck.KindOther, "%s: pop with batch %d delivered %d messages", consumer, batch, len(res.Messages))
	}
	seen := map[string]bool{}
	var cur *popPart
	for _, m := range res.Messages {
		if cur == nil || cur.pid != m.PartitionID {
			if seen[m.PartitionID] {
				h.v.Add(loadcheck.KindOrder, "%s: pop delivered partition %s in two runs", consumer, m.Partition)
			}
			seen[m.PartitionID] = true
			cur = &popPart{pop: p, pid: m.PartitionID, name: m.Partition}
			p.parts = append(p.parts, cur)
		} else if last := cur.msgs[len(cur.msgs)-1].off; m.Offset != last+1 {
			h.v.Add(loadcheck.KindOrder, "%s: pop delivered offsets %d then %d of %s", consumer, last, m.Offset, m.Partition)
		}
		cur.msgs = append(cur.msgs, &delivery{off: m.Offset, tx: m.TransactionID, data: m.Data, retryCount: m.RetryCount})
	}
	if len(p.parts) > partitions {
		h.v.Add(loadcheck.KindOther, "%s: pop with partitions=%d delivered %d partitions", consumer, partitions, len(p.parts))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p.seq = int64(len(h.pops))
	h.pops = append(h.pops, p)
	h.stats.pops++
	h.stats.partitionPops += len(p.parts)
	h.stats.deliveries += len(res.Messages)
	return p
}

// recordAck records the end of a pop: its ack, or that it was abandoned.
func (h *history) recordAck(p *pop, a *ackCall) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a == nil {
		p.abandoned = true
		h.stats.abandoned++
		return
	}
	p.ack = a
	for _, pt := range p.parts {
		for _, d := range pt.msgs {
			h.stats.sent[d.status]++
		}
	}
	h.stats.ackRetries += a.attempts - 1
	switch a.outcome {
	case ackUnknown:
		h.stats.ackUnknown++
	case ackRejected:
		h.stats.ackRejected++
	case ackApplied:
		for _, r := range a.results {
			h.stats.results[r.Result]++
		}
	}
}

// String summarizes the statistics.
func (s stats) String() string {
	var out []string
	out = append(out, fmt.Sprintf("pushes: %d calls answered 201, %d retried after no answer or a 5xx; %d messages queued, "+
		"%d came back duplicates of an attempt that had been written; %d items never answered",
		s.pushCalls, s.pushRetries, s.queued, s.retriedDuplicates, s.unknownItems))
	out = append(out, fmt.Sprintf("pops: %d delivered %d messages from %d partition leases; %d leases abandoned",
		s.pops, s.deliveries, s.partitionPops, s.abandoned))
	out = append(out, fmt.Sprintf("acks: outcomes sent %s; %d resent after no answer or a 5xx, %d refused (409), %d never answered; results %s",
		countsString(s.sent), s.ackRetries, s.ackRejected, s.ackUnknown, countsString(s.results)))
	return strings.Join(out, "\n")
}

func countsString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
