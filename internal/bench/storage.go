package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/queen-serverless/queen/core/queen"
)

// storage measures D: on-disk bytes per message beyond payload and
// transactionId while the dedup keys are live (the default window), at 10
// messages per push to one partition and at 10 per push to random
// partitions. What a queue costs is the growth of the log (segments: heap,
// TOAST and indexes) and of the dedup keys (heap and indexes) while it is
// pushed to (see storedBytes); the queues are pushed to one after the
// other. The items carry no transactionId, as in every other workload; the
// same two with ids the client made (UUIDv7s) follow, for the record: the
// engine keeps a dedup key for those, where a generated id needs none.
func (r *runner) storage(ctx context.Context) error {
	for _, c := range []struct{ spread, ids bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		queue, what, target := "bench-D", "10 per push to one partition", "≤ 120 B"
		if c.spread {
			queue, what, target = "bench-D-random", "10 per push to random partitions", "≤ 150 B"
		}
		if c.ids {
			queue, what, target = queue+"-ids", what+", client ids", "report"
		}
		before, err := r.storedBytes(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.cfg.Out, "  pushing %d messages, %s…", r.cfg.StorageMessages, what)
		if err := r.storageFill(ctx, queue, c.spread, c.ids); err != nil {
			return err
		}
		fmt.Fprintf(r.cfg.Out, "\r%70s\r", "")
		after, err := r.storedBytes(ctx)
		if err != nil {
			return err
		}
		var payload, msgs int64
		// (a derived id, migration 0017, stores nothing: u.t is NULL)
		err = r.pool.QueryRow(ctx, `SELECT coalesce(sum(octet_length(u.p) + coalesce(octet_length(u.t), 0)), 0), count(*)
			FROM queen.segments s JOIN queen.partitions p ON p.num = s.partition_num JOIN queen.queues x ON x.id = p.queue_id,
			     unnest(queen.seg_all(s.payload, s.payloads), queen.seg_all(s.txid, s.txids)) AS u(p, t)
			WHERE x.name = $1`, queue).Scan(&payload, &msgs)
		if err != nil {
			return err
		}
		per := float64(after-before-payload) / float64(msgs)
		r.add(Result{Name: "D", Via: "sql", What: fmt.Sprintf("bytes/msg beyond payload+txid, %s, dedup keys live (%d msgs)", what, msgs),
			Value: per, Unit: "B/msg", Rows: msgs, Target: target})
	}
	return nil
}

// storedBytes is the size of the log and of the dedup keys: the main fork
// of each table, its TOAST table and their indexes. It vacuums them first:
// when several backends extend a table at once, Postgres adds empty pages in
// bulk for the inserts to come, and VACUUM gives back those still empty at
// the end. Free-space and visibility maps are a fixed cost per table, not
// per message, and are left out.
func (r *runner) storedBytes(ctx context.Context) (int64, error) {
	if _, err := r.pool.Exec(ctx, "VACUUM queen.segments, queen.dedup"); err != nil {
		return 0, err
	}
	var n int64
	err := r.pool.QueryRow(ctx, `SELECT sum(pg_relation_size(c.oid))::bigint FROM pg_class c
		WHERE c.oid IN (SELECT t.oid FROM pg_class t WHERE t.oid IN ('queen.segments'::regclass, 'queen.dedup'::regclass)
		                UNION SELECT t.reltoastrelid FROM pg_class t
		                      WHERE t.oid IN ('queen.segments'::regclass, 'queen.dedup'::regclass) AND t.reltoastrelid <> 0)
		   OR c.oid IN (SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
		                WHERE t.oid IN ('queen.segments'::regclass, 'queen.dedup'::regclass)
		                   OR t.oid IN (SELECT reltoastrelid FROM pg_class
		                                WHERE oid IN ('queen.segments'::regclass, 'queen.dedup'::regclass)))`).Scan(&n)
	return n, err
}

// storageFill pushes StorageMessages messages to queue, 10 per push: each
// push to one random partition (one segment), or each item to a random one;
// with ids, each item carries a transactionId of its own.
func (r *runner) storageFill(ctx context.Context, queue string, spread, ids bool) error {
	total := int64(r.cfg.StorageMessages)
	var n atomic.Int64
	return r.eachClient(func() error {
		for n.Add(10) <= total {
			batch := items(queue, 10, r.cfg.Partitions, false)
			p := fmt.Sprintf("p-%d", rand.IntN(r.cfg.Partitions))
			for i := range batch {
				if !spread {
					batch[i].Partition = p
				}
				if ids {
					batch[i].TransactionID = queen.NewUUIDv7()
				}
			}
			if _, err := r.store.Push(ctx, batch); err != nil {
				return err
			}
		}
		return nil
	})
}
