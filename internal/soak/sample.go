package soak

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/queen"
)

// Relation is one table or index of schema queen (partitions of its
// partitioned tables included, wherever they live).
type Relation struct {
	Name string `json:"name"`
	// Kind is "table" or "index"; Table is an index's table.
	Kind  string `json:"kind"`
	Table string `json:"table,omitempty"`
	// Bytes is pg_relation_size (the main fork); TotalBytes, for a
	// table, pg_total_relation_size (with its TOAST table, indexes and
	// maps).
	Bytes      int64 `json:"bytes"`
	TotalBytes int64 `json:"totalBytes,omitempty"`
	// DeadTuples and LiveTuples are pg_stat_user_tables' n_dead_tup and
	// n_live_tup of a table.
	DeadTuples int64 `json:"deadTuples,omitempty"`
	LiveTuples int64 `json:"liveTuples,omitempty"`
	// Updates and HotUpdates are a table's updates so far, and those that
	// were HOT (no index touched, the page's own space reused);
	// Vacuums counts its vacuums, manual and automatic.
	Updates    int64 `json:"updates,omitempty"`
	HotUpdates int64 `json:"hotUpdates,omitempty"`
	Vacuums    int64 `json:"vacuums,omitempty"`
	// Stale: the size could not be read (a lock held it up past the
	// sampler's lock_timeout); the last size read is shown.
	Stale bool `json:"stale,omitempty"`
}

// LatencyStat is one operation's latencies over a sample's interval.
type LatencyStat struct {
	N     int64   `json:"n"`
	P50MS float64 `json:"p50Ms"`
	P99MS float64 `json:"p99Ms"`
}

// Sample is what the run records every Config.SampleEvery.
type Sample struct {
	At       time.Time `json:"at"`
	ElapsedS float64   `json:"elapsedSeconds"`
	// TotalBytes is the sum of the tables' TotalBytes: everything schema
	// queen holds on disk.
	TotalBytes int64      `json:"totalBytes"`
	DeadTuples int64      `json:"deadTuples"`
	Relations  []Relation `json:"relations"`
	// Backlog is the largest backlog any reaper pass of the interval
	// reported; Passes, Behind and ReapErrors count its passes, those that
	// left work behind and those that failed.
	Backlog    queen.ReapBacklog `json:"backlog"`
	Passes     int               `json:"passes"`
	Behind     int               `json:"behind"`
	ReapErrors int               `json:"reapErrors"`
	// Latency of push, pop and ack over the interval.
	Latency map[string]LatencyStat `json:"latency"`
	// Lag is the groups' lag (messages not yet consumed) by group.
	Lag map[string]int64 `json:"lag"`
	// PushRate is the messages queued per second over the interval.
	PushRate float64 `json:"pushRate"`
	// Routines are the calls of schema queen's routines and their time
	// over the interval (pg_stat_user_functions), by name; empty when the
	// run could not turn track_functions on.
	Routines map[string]Routine `json:"routines,omitempty"`
	// LongTxOpen: a long transaction was open when the sample was taken.
	LongTxOpen bool   `json:"longTxOpen"`
	Err        string `json:"err,omitempty"`
}

// Routine is one routine's calls over an interval and their time, with
// what it called (MS) and without (SelfMS).
type Routine struct {
	Calls  int64   `json:"calls"`
	MS     float64 `json:"ms"`
	SelfMS float64 `json:"selfMs"`
}

// totalLag is the lag of every group together.
func (s Sample) totalLag() int64 {
	var n int64
	for _, l := range s.Lag {
		n += l
	}
	return n
}

// sizer reads the sizes of schema queen's relations on a connection of its
// own. It waits at most lockTimeout for a relation's lock (a DROP or
// ALTER queued behind the long transaction holds every newcomer up) and
// then keeps the size it read last.
type sizer struct {
	conn     *pgx.Conn
	last     map[string]Relation
	routines map[string]Routine // cumulative, as last read
}

const lockTimeout = "500ms"

func newSizer(ctx context.Context, url string) (*sizer, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SET lock_timeout = '"+lockTimeout+"'; SET statement_timeout = '60s'"); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return &sizer{conn: conn, last: map[string]Relation{}}, nil
}

func (s *sizer) close() { _ = s.conn.Close(context.Background()) }

// relationsSQL lists schema queen's tables and indexes and, recursively,
// their partitions, with their dead and live tuples. It reads only the
// catalog and the statistics views: no relation's lock.
const relationsSQL = `
WITH RECURSIVE rels AS (
    SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'queen' AND c.relkind IN ('r', 'p', 'i', 'I')
    UNION
    SELECT i.inhrelid FROM pg_inherits i JOIN rels r ON i.inhparent = r.oid
)
SELECT c.oid::bigint, c.relname::text, c.relkind::text, coalesce(t.relname::text, ''),
       coalesce(s.n_dead_tup, 0), coalesce(s.n_live_tup, 0), coalesce(s.n_tup_upd, 0),
       coalesce(s.n_tup_hot_upd, 0), coalesce(s.vacuum_count + s.autovacuum_count, 0)
FROM rels JOIN pg_class c ON c.oid = rels.oid
LEFT JOIN pg_index x ON x.indexrelid = c.oid
LEFT JOIN pg_class t ON t.oid = x.indrelid
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.relkind IN ('r', 'i')
ORDER BY c.relname`

// read returns every relation with its size, and the total.
func (s *sizer) read(ctx context.Context) ([]Relation, int64, error) {
	rows, err := s.conn.Query(ctx, relationsSQL)
	if err != nil {
		return nil, 0, err
	}
	type rel struct {
		oid int64
		Relation
	}
	var rels []rel
	for rows.Next() {
		var r rel
		var kind string
		if err := rows.Scan(&r.oid, &r.Name, &kind, &r.Table, &r.DeadTuples, &r.LiveTuples, &r.Updates,
			&r.HotUpdates, &r.Vacuums); err != nil {
			return nil, 0, err
		}
		r.Kind = "table"
		if kind == "i" {
			r.Kind = "index"
		}
		rels = append(rels, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	var out []Relation
	var total int64
	seen := map[string]Relation{}
	for _, r := range rels {
		var size, totalSize *int64
		err := s.conn.QueryRow(ctx, "SELECT pg_relation_size($1::oid), pg_total_relation_size($1::oid)", r.oid).Scan(&size, &totalSize)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, 0, ctx.Err()
		case err != nil: // lock_timeout: keep the last size
			last, ok := s.last[r.Name]
			if !ok {
				continue
			}
			r.Bytes, r.TotalBytes, r.Stale = last.Bytes, last.TotalBytes, true
		case size == nil: // dropped since it was listed
			continue
		default:
			r.Bytes = *size
			if r.Kind == "table" && totalSize != nil {
				r.TotalBytes = *totalSize
			}
		}
		if r.Kind == "index" {
			r.DeadTuples, r.LiveTuples, r.Updates, r.HotUpdates, r.Vacuums = 0, 0, 0, 0, 0
		}
		seen[r.Name] = r.Relation
		out = append(out, r.Relation)
		total += r.TotalBytes
	}
	s.last = seen
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, total, nil
}

// trackRoutines has the database time its routines (track_functions =
// 'all' for every later connection), so that each sample holds what every
// routine of schema queen cost: which statement grew when a latency or the
// reaper's passes did. It needs a superuser, as the run's throwaway
// cluster has; elsewhere the samples go without.
func trackRoutines(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET track_functions = ''all''', current_database()); END $$`)
	return err
}

// readRoutines returns what schema queen's routines did since the last
// call (everything so far, the first time).
func (s *sizer) readRoutines(ctx context.Context) (map[string]Routine, error) {
	rows, err := s.conn.Query(ctx, `SELECT funcname::text, sum(calls)::bigint, sum(total_time), sum(self_time)
		FROM pg_stat_user_functions WHERE schemaname = 'queen' GROUP BY funcname`)
	if err != nil {
		return nil, err
	}
	now := map[string]Routine{}
	for rows.Next() {
		var name string
		var r Routine
		if err := rows.Scan(&name, &r.Calls, &r.MS, &r.SelfMS); err != nil {
			return nil, err
		}
		now[name] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := map[string]Routine{}
	for name, r := range now {
		was := s.routines[name]
		if d := (Routine{Calls: r.Calls - was.Calls, MS: r.MS - was.MS, SelfMS: r.SelfMS - was.SelfMS}); d.Calls > 0 {
			out[name] = d
		}
	}
	s.routines = now
	return out, nil
}

// fmtBytes renders a size in MB with one decimal.
func fmtBytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
