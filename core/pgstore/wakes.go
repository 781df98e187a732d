package pgstore

import (
	"context"

	"github.com/queen-serverless/queen/core/queen"
)

// The statements of the wake-up handshake (docs/subscriptions.md §8).
var (
	sqlWakeMark  = query("wake_mark")
	sqlWakeClear = query("wake_clear")
	sqlWakeRenew = query("wake_renew")
	sqlWakeDue   = query("wake_due")
)

var _ queen.Wakes = (*Store)(nil)

// wakeRow is a subscription a statement marked woken.
type wakeRow struct {
	Queue string `json:"queue"`
	Group string `json:"group"`
}

func wakeKeys(rows []wakeRow) []queen.WaitKey {
	out := make([]queen.WaitKey, len(rows))
	for i, r := range rows {
		out[i] = queen.WaitKey{Queue: r.Queue, Group: r.Group}
	}
	return out
}

// staleMs is queen.WakeStale in the statements' unit.
var staleMs = queen.WakeStale.Milliseconds()

// MarkWake implements queen.Wakes.
func (s *Store) MarkWake(ctx context.Context, queues []string) ([]queen.WaitKey, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	var rows []wakeRow
	err := s.call(ctx, "mark wake", sqlWakeMark, &rows, queues, make([]*string, len(queues)), s.now(), staleMs)
	return wakeKeys(rows), err
}

// ClaimWake implements queen.Wakes.
func (s *Store) ClaimWake(ctx context.Context, key queen.WaitKey) (bool, error) {
	var rows []wakeRow
	err := s.call(ctx, "claim wake", sqlWakeMark, &rows, []string{key.Queue}, []string{key.Group}, s.now(), staleMs)
	return len(rows) == 1, err
}

// RenewWake implements queen.Wakes.
func (s *Store) RenewWake(ctx context.Context, key queen.WaitKey) (bool, error) {
	var n int64
	err := s.call(ctx, "renew wake", sqlWakeRenew, &n, key.Queue, key.Group, s.now())
	return n == 1, err
}

// ClearWake implements queen.Wakes.
func (s *Store) ClearWake(ctx context.Context, key queen.WaitKey) error {
	var n int64
	return s.call(ctx, "clear wake", sqlWakeClear, &n, key.Queue, key.Group)
}

// DueSubscriptions implements queen.Wakes.
func (s *Store) DueSubscriptions(ctx context.Context) ([]queen.WaitKey, error) {
	var rows []wakeRow
	err := s.call(ctx, "due subscriptions", sqlWakeDue, &rows, s.now(), staleMs)
	return wakeKeys(rows), err
}
