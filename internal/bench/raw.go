package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/queen-serverless/queen/core/queen"
)

// ---- raw ceilings

func (r *runner) rawSingle(ctx context.Context) error {
	if _, err := r.pool.Exec(ctx, "DROP TABLE IF EXISTS bench_raw; CREATE TABLE bench_raw (partition_id int, payload jsonb, txid text)"); err != nil {
		return err
	}
	ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
		_, err := r.pool.Exec(ctx, "INSERT INTO bench_raw VALUES ($1, $2::jsonb, $3)", rand.IntN(r.cfg.Partitions), Payload, queen.NewUUIDv7())
		return 1, false, err
	})
	if err != nil {
		return err
	}
	res := result("raw-1", "sql", "single-row INSERT into a bare table", ops, rows, secs, lat)
	res.Unit = "rows/s"
	r.add(res)
	return nil
}

func (r *runner) rawMulti(ctx context.Context) error {
	if _, err := r.pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_raw (partition_id int, payload jsonb, txid text); TRUNCATE bench_raw"); err != nil {
		return err
	}
	const n = 100
	ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
		ids := make([]int32, n)
		txids := make([]string, n)
		for i := range ids {
			ids[i], txids[i] = int32(rand.IntN(r.cfg.Partitions)), queen.NewUUIDv7()
		}
		_, err := r.pool.Exec(ctx, "INSERT INTO bench_raw SELECT p, $2::jsonb, t FROM unnest($1::int[], $3::text[]) AS u(p, t)", ids, Payload, txids)
		return n, false, err
	})
	if err != nil {
		return err
	}
	res := result("raw-100", "sql", "multi-row INSERT (100 rows) into a bare table", ops, rows, secs, lat)
	res.Unit = "rows/s"
	r.add(res)
	_, err = r.pool.Exec(ctx, "DROP TABLE bench_raw")
	return err
}

// ---- the log's own floor

// logAppendSQL is the least a push can do in this design
// (docs/semantics.md §3.1.3): lock
// the partitions in one order, take the next offsets and write one segment
// per partition, into the engine's own tables and indexes, in one
// transaction. No dedup, no consumers' rows, no checks, no reply. Its items
// have no transactionIds, as P1's, P100's and P100-1's: their ids are
// derived from a seed (migration 0017), so it stores a seed and no ids,
// as a push does. A routine (PL/pgSQL, so its plans are kept, as the
// engine's are) of the benchmark's database; one message takes two
// statements, a batch one.
const logAppendSQL = `
CREATE OR REPLACE FUNCTION public.bench_log_append(p_queue text, p_parts text[], p_payloads text[], p_seed bigint)
RETURNS void LANGUAGE plpgsql SET jit = off AS $fn$  -- as the engine's routines
DECLARE
    v_num bigint;
    v_off bigint;
BEGIN
    IF cardinality(p_payloads) = 1 THEN
        UPDATE queen.partitions p SET last_offset = p.last_offset + 1, last_pushed_at = now()
        FROM queen.queues x
        WHERE x.name = p_queue AND p.queue_id = x.id AND p.name = p_parts[1]
        RETURNING p.num, p.last_offset INTO v_num, v_off;
        INSERT INTO queen.segments (partition_num, base_offset, created_at, payload, located, id_seed)
        VALUES (v_num, v_off, now(), p_payloads[1], true, p_seed);
        RETURN;
    END IF;
    WITH i AS (
        SELECT u.part, u.payload, u.o
        FROM unnest(p_parts, p_payloads) WITH ORDINALITY AS u(part, payload, o)
    ),
    l AS MATERIALIZED (
        SELECT p.id, p.num, p.name, p.last_offset
        FROM queen.partitions p JOIN queen.queues x ON x.id = p.queue_id
        WHERE x.name = p_queue AND p.name IN (SELECT i.part FROM i)
        ORDER BY p.num
        FOR NO KEY UPDATE OF p
    ),
    upd AS (
        UPDATE queen.partitions p SET last_offset = l.last_offset + c.n, last_pushed_at = now()
        FROM l JOIN (SELECT i.part, count(*) AS n FROM i GROUP BY i.part) c ON c.part = l.name
        WHERE p.id = l.id
    )
    INSERT INTO queen.segments (partition_num, base_offset, created_at, payload, payloads, located, id_seed, id_count)
    SELECT l.num, l.last_offset + 1, now(),
           CASE WHEN count(*) = 1 THEN min(i.payload) END,
           CASE WHEN count(*) > 1 THEN array_agg(i.payload ORDER BY i.o) END,
           true, p_seed, CASE WHEN count(*) > 1 THEN count(*) END
    FROM i JOIN l ON l.name = i.part
    GROUP BY l.num, l.last_offset;
END
$fn$`

// logAppend measures bench_log_append with the items P1, P100 and P100-1
// push: the rate this design allows before the engine does anything of its
// own, the ceiling those workloads are judged against next to raw-1 and
// raw-100.
func (r *runner) logAppend(ctx context.Context, name string, n int, one bool) error {
	if _, err := r.pool.Exec(ctx, logAppendSQL); err != nil {
		return err
	}
	queue := "bench-" + name
	if err := r.createPartitions(ctx, queue); err != nil { // as in the push workloads
		return err
	}
	ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
		parts, payloads := make([]string, n), make([]string, n)
		for i, it := range items(queue, n, r.cfg.Partitions, one) {
			parts[i], payloads[i] = it.Partition, Payload
		}
		_, err := r.pool.Exec(ctx, "SELECT public.bench_log_append($1, $2, $3, $4)", queue, parts, payloads, rand.Int64())
		return n, false, err
	})
	if err != nil {
		return err
	}
	what := fmt.Sprintf("bare log append, %d per push, random partitions", n)
	if one {
		what = fmt.Sprintf("bare log append, %d per push, one partition", n)
	}
	res := result(name, "sql", what, ops, rows, secs, lat)
	res.Target = "the design's ceiling for P" + strings.TrimPrefix(name, "log-")
	r.add(res)
	return nil
}
