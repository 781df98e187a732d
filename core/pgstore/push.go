package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// Push implements queen.Store.
func (s *Store) Push(ctx context.Context, items []queen.PushItem) ([]queen.PushResult, error) {
	items, err := queen.NormalizePush(items)
	if err != nil {
		return nil, err
	}
	var out []queen.PushResult
	err = s.sealedCall(ctx, items, func(args []pushArg) error {
		if onePartition(args) {
			out, err = s.pushPartition(ctx, args)
			return err
		}
		out, err = s.pushPartitions(ctx, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// onePartition reports whether every item goes to the same partition
// (then push_partition takes them, as arrays).
func onePartition(args []pushArg) bool {
	for _, a := range args[1:] {
		if a.Queue != args[0].Queue || a.Partition != args[0].Partition {
			return false
		}
	}
	return len(args) > 0
}

// pushParams and pushRow are queen.push_v3's parameters and result (see
// typedStmt): per item its queue, partition and pushCols; per item its
// partition's id and number, the push's time there, whether it was
// stored, its offset and its stored transactionId.
type pushParams struct {
	Queues     []string   `pg:"p_qn,text[]"`
	Partitions []string   `pg:"p_pn,text[]"`
	Payloads   []string   `pg:"p_payloads,text[]"`
	TxIDs      []*string  `pg:"p_txids,text[]"`
	Traces     []*string  `pg:"p_traces,text[]"`
	Subs       []*string  `pg:"p_producer_subs,text[]"`
	Keys       []*string  `pg:"p_key_ids,text[]"`
	Now        *time.Time `pg:"p_now,timestamptz"`
	Seed       int64      `pg:"p_seed,bigint"`
}

type pushRow struct {
	PIDs       []string    `pg:"partition_ids,text[]"`
	Nums       []int64     `pg:"part_nums,bigint[]"`
	CreatedAts []time.Time `pg:"created_ats,timestamptz[]"`
	Fresh      []bool      `pg:"fresh,boolean[]"`
	Offsets    []int64     `pg:"offsets,bigint[]"`
	TxIDs      []*string   `pg:"txids,text[]"`
}

// pushOneParams and pushOneRow are queen.push_partition_v2's parameters
// and result (see typedStmt): the partition and pushCols; the partition's
// id, the push's time there, its number, and per item whether it was
// stored, its offset and its stored transactionId, or only the first
// offset (see pushPartition).
type pushOneParams struct {
	Queue     string     `pg:"p_queue,text"`
	Partition string     `pg:"p_partition,text"`
	TxIDs     []*string  `pg:"p_txids,text[]"`
	Payloads  []string   `pg:"p_payloads,text[]"`
	Traces    []*string  `pg:"p_trace_ids,text[]"`
	Sub       *string    `pg:"p_producer_sub,text"`
	Key       *string    `pg:"p_key_id,text"`
	Now       *time.Time `pg:"p_now,timestamptz"`
	Seed      int64      `pg:"p_seed,bigint"`
}

type pushOneRow struct {
	PID       string    `pg:"partition_id,text"`
	CreatedAt time.Time `pg:"created_at,timestamptz"`
	Num       int64     `pg:"part_num,bigint"`
	First     *int64    `pg:"first_offset,bigint"`
	Fresh     []bool    `pg:"fresh,boolean[]"`
	Offsets   []int64   `pg:"offsets,bigint[]"`
	TxIDs     []*string `pg:"txids,text[]"`
}

// pushPartitions pushes items that span partitions through push_v3: the
// items go as arrays (pushColumns, with each item's queue and partition)
// with the seed of the ids the push generates; per item come back its
// partition's id and number, the push's time there, whether it was
// stored, its offset and its transactionId (NULL when generated from the
// seed: GeneratedID makes it here). The reply is rendered here, once the
// partitions are unlocked.
func (s *Store) pushPartitions(ctx context.Context, args []pushArg) ([]queen.PushResult, error) {
	c, err := pushColumns(args)
	if err != nil {
		return nil, err
	}
	queues, parts := make([]string, len(args)), make([]string, len(args))
	for i, a := range args {
		queues[i], parts[i] = a.Queue, a.Partition
	}
	seed := rand.Int64() // the generated ids' digits: they guard nothing
	var r pushRow
	err = s.retry(ctx, "push", func() (err error) {
		r, err = stmtPush.run(ctx, s, pushParams{Queues: queues, Partitions: parts, Payloads: c.payloads,
			TxIDs: c.txids, Traces: c.traces, Subs: c.subs, Keys: c.keys, Now: s.now(), Seed: seed})
		return err
	})
	if err != nil {
		return nil, err
	}
	pids, nums, created, fresh, offsets, ids := r.PIDs, r.Nums, r.CreatedAts, r.Fresh, r.Offsets, r.TxIDs
	for _, n := range []int{len(pids), len(nums), len(created), len(fresh), len(offsets)} {
		if n != len(args) {
			return nil, fmt.Errorf("push: %d results for %d items", n, len(args))
		}
	}
	if ids != nil && len(ids) != len(args) {
		return nil, fmt.Errorf("push: %d transactionIds for %d items", len(ids), len(args))
	}
	out := make([]queen.PushResult, len(args))
	for i, a := range args {
		out[i] = pushResult(i, a, pids[i], nums[i], created[i], offsets[i], fresh[i], idAt(ids, i), seed)
	}
	return out, nil
}

// idAt is element i of a push routine's transactionIds, nil where the id
// is derived (or the routine returned no array: every one is).
func idAt(ids []*string, i int) *string {
	if ids == nil {
		return nil
	}
	return ids[i]
}

// pushResult renders item i of a push from what the routine returned for
// it: its partition (id and number), the push's time there, its offset,
// whether it was stored, and its stored transactionId, nil for one the
// push derived from seed (GeneratedID makes it).
func pushResult(i int, a pushArg, pid string, num int64, created time.Time, off int64, fresh bool, id *string,
	seed int64) queen.PushResult {
	status := queen.StatusQueued
	if !fresh {
		status = queen.StatusDuplicate
	}
	var txid string
	if id != nil {
		txid = *id
	} else {
		txid = GeneratedID(created, num, off, seed)
	}
	return queen.PushResult{Index: i, TransactionID: txid, Status: status, Offset: off,
		MessageID: MessageID(pid, off), PartitionID: pid, Queue: a.Queue, Partition: a.Partition,
		TraceID: a.TraceID, CreatedAt: created.UTC()}
}

// pushCols are a push's items as push_partition_v2 and push_v3 read them:
// per item the stored text of its payload (compact JSON, or the base64
// text of a sealed one), its transactionId, traceId and producer (NULL
// where none) and the key it is sealed with (NULL for a plain one); traces,
// subs and keys are NULL when every element would be. push_partition_v2
// takes one producer and one key for its partition's items: sub and key.
type pushCols struct {
	payloads                  []string
	txids, traces, subs, keys []*string
	sub, key                  *string
}

func pushColumns(args []pushArg) (pushCols, error) {
	c := pushCols{payloads: make([]string, len(args)), txids: make([]*string, len(args))}
	for i, a := range args {
		if a.TransactionID != "" { // NULL: the push generates one
			c.txids[i] = &args[i].TransactionID
		}
		if a.KeyID != "" { // sealed: a JSON string of the base64 text, stored as the text
			if err := json.Unmarshal(a.Payload, &c.payloads[i]); err != nil {
				return c, fmt.Errorf("push: sealed payload: %w", err)
			}
			c.key = &args[i].KeyID
			if c.keys == nil {
				c.keys = make([]*string, len(args))
			}
			c.keys[i] = &args[i].KeyID
		} else {
			p, err := storedPayload(a.Payload)
			if err != nil {
				return c, err
			}
			c.payloads[i] = p
		}
		if a.TraceID != "" {
			if c.traces == nil {
				c.traces = make([]*string, len(args))
			}
			c.traces[i] = &args[i].TraceID
		}
		if a.ProducerSub != "" {
			c.sub = &args[i].ProducerSub
			if c.subs == nil {
				c.subs = make([]*string, len(args))
			}
			c.subs[i] = &args[i].ProducerSub
		}
	}
	return c, nil
}

// storedPayload is the text a plain payload is stored as: its compact
// JSON as json.Marshal gives it (and as the JSON routines store it): no
// insignificant whitespace, and <, >, &, U+2028 and U+2029 escaped. A
// valid payload (NormalizePush checked it) with none of those bytes, the
// common one, is its own compact form and is taken as it is.
func storedPayload(p json.RawMessage) (string, error) {
	for _, c := range p {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xe2: // 0xe2: the first byte of U+2028 and U+2029 (and others)
			b, err := json.Marshal(p)
			return string(b), err
		}
	}
	return string(p), nil
}

// pushPartition pushes items that all go to one partition through
// push_partition_v2: the fields go as arrays with the seed of the ids the
// push generates, the results come back as the partition, its number, the
// push's time and per item whether it was stored, its offset and its
// transactionId (NULL when generated from the seed: GeneratedID makes it
// here), or, for the common push (every id generated, stored at the next
// offsets), only the first offset. They are rendered here.
func (s *Store) pushPartition(ctx context.Context, args []pushArg) ([]queen.PushResult, error) {
	c, err := pushColumns(args)
	if err != nil {
		return nil, err
	}
	seed := rand.Int64() // the generated ids' digits: they guard nothing
	var r pushOneRow
	err = s.retry(ctx, "push", func() (err error) {
		r, err = stmtPushOne.run(ctx, s, pushOneParams{Queue: args[0].Queue, Partition: args[0].Partition,
			TxIDs: c.txids, Payloads: c.payloads, Traces: c.traces, Sub: c.sub, Key: c.key, Now: s.now(), Seed: seed})
		return err
	})
	if err != nil {
		return nil, err
	}
	pid, created, num, first, fresh, offsets, ids := r.PID, r.CreatedAt, r.Num, r.First, r.Fresh, r.Offsets, r.TxIDs
	consecutive := fresh == nil && offsets == nil // all stored, at the next offsets
	if consecutive {
		if first == nil {
			return nil, errors.New("push: neither offsets nor a first offset in the reply")
		}
	} else if len(fresh) != len(args) || len(offsets) != len(args) {
		return nil, fmt.Errorf("push: %d results for %d items", len(fresh), len(args))
	}
	if ids != nil && len(ids) != len(args) {
		return nil, fmt.Errorf("push: %d transactionIds for %d items", len(ids), len(args))
	}
	out := make([]queen.PushResult, len(args))
	for i, a := range args {
		if consecutive {
			out[i] = pushResult(i, a, pid, num, created, *first+int64(i), true, idAt(ids, i), seed)
		} else {
			out[i] = pushResult(i, a, pid, num, created, offsets[i], fresh[i], idAt(ids, i), seed)
		}
	}
	return out, nil
}
