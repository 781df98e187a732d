package soak

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queen-serverless/queen/core/queen"
)

// Pass is one reaper pass of the in-process loop.
type Pass struct {
	Start time.Time       `json:"start"`
	MS    float64         `json:"ms"`
	Stats queen.ReapStats `json:"stats"`
	Err   string          `json:"err,omitempty"`
}

// caughtUp reports whether the pass ended with nothing left behind.
func (p Pass) caughtUp() bool {
	return p.Err == "" && !p.Stats.Behind && p.Stats.Backlog == (queen.ReapBacklog{})
}

// reaperLoop runs the store's reaper pass every interval, as `queen serve`
// does, each pass with the interval as its time budget, and keeps every
// pass.
type reaperLoop struct {
	store    queen.Store
	interval time.Duration

	mu     sync.Mutex
	passes []Pass
}

func (l *reaperLoop) run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := reapOnce(ctx, l.store, l.interval)
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		l.passes = append(l.passes, p)
		l.mu.Unlock()
	}
}

// reapOnce runs one reaper pass with budget as its time budget.
func reapOnce(ctx context.Context, store queen.Store, budget time.Duration) Pass {
	start := time.Now()
	st, err := store.Reap(ctx, queen.ReapRequest{Deadline: start.Add(budget)})
	p := Pass{Start: start, MS: float64(time.Since(start).Microseconds()) / 1000, Stats: st}
	if err != nil {
		p.Err = err.Error()
	}
	return p
}

// since returns the passes that started at or after t.
func (l *reaperLoop) since(t time.Time) []Pass {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Pass
	for _, p := range l.passes {
		if !p.Start.Before(t) {
			out = append(out, p)
		}
	}
	return out
}

func (l *reaperLoop) all() []Pass {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Pass(nil), l.passes...)
}

// LongTx is one long-running read transaction: REPEATABLE READ, opened by
// a read of queen.segments and then left open, the classic way to hold
// back VACUUM and block DDL.
type LongTx struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// MaxBacklog is the largest backlog a reaper pass reported while it
	// was open, and until the reaper caught up after it.
	MaxBacklog queen.ReapBacklog `json:"maxBacklog"`
	// CaughtUp is the end of the first pass that started after the
	// transaction ended and left nothing behind (null: none did before the
	// next long transaction or the end of the run).
	CaughtUp *time.Time `json:"caughtUp,omitempty"`
	// CaughtUpAfterS is CaughtUp - End in seconds.
	CaughtUpAfterS float64 `json:"caughtUpAfterSeconds,omitempty"`
	Err            string  `json:"err,omitempty"`
}

// holdLongTx opens the long transaction on a connection of its own, keeps
// it open for d (or until ctx ends) and rolls it back.
func holdLongTx(ctx context.Context, url string, d time.Duration, opened func(time.Time)) LongTx {
	var tx LongTx
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tx.Err = err.Error()
		return tx
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		tx.Err = err.Error()
		return tx
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM queen.segments LIMIT 100) s").Scan(&n); err != nil {
		tx.Err = err.Error()
		return tx
	}
	tx.Start = time.Now()
	opened(tx.Start)
	pause(ctx, d)
	rollbackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := conn.Exec(rollbackCtx, "ROLLBACK"); err != nil {
		tx.Err = err.Error()
	}
	tx.End = time.Now()
	return tx
}
