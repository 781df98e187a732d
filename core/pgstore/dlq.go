package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// The statements of these operations (sql/*.sql).
var (
	sqlDLQRetry  = query("dlq_retry")
	sqlDLQList   = query("dlq_list")
	sqlDLQGet    = query("dlq_get")
	sqlDLQDelete = query("dlq_delete")
)

// ListDeadLetters implements queen.Store.
func (s *Store) ListDeadLetters(ctx context.Context, f queen.DLQFilter) (queen.DLQPage, error) {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 1 || f.Limit > 1000 {
		return queen.DLQPage{}, queen.Invalid("limit", "must be between 1 and 1000")
	}
	if f.Offset < 0 {
		return queen.DLQPage{}, queen.Invalid("offset", "must not be negative")
	}
	var after *time.Time
	var afterID *int64
	if f.Cursor != "" {
		at, id, err := queen.ParseDLQCursor(f.Cursor)
		if err != nil {
			return queen.DLQPage{}, err
		}
		after, afterID = &at, &id
	}
	var out struct {
		Total    int64              `json:"total"`
		Exact    bool               `json:"exact"` // counted per queue: never capped
		Messages []sealedDeadLetter `json:"messages"`
	}
	err := s.call(ctx, "list dead letters", sqlDLQList, &out, nullable(f.Queue), nullable(f.ConsumerGroup),
		nullable(f.Partition), nullTime(f.From), nullTime(f.To), f.Limit, f.Offset, queen.MaxDLQTotal+1, after, afterID)
	if err != nil {
		return queen.DLQPage{}, err
	}
	msgs, err := s.openDeadLetters(ctx, out.Messages, f.Queue == "")
	page := queen.DLQPage{Total: out.Total, Messages: msgs}
	if len(out.Messages) == f.Limit {
		page.NextCursor = queen.DLQCursor(out.Messages[len(out.Messages)-1].DeadLetter)
	}
	if page.Total > queen.MaxDLQTotal && !out.Exact {
		page.Total, page.TotalCapped = queen.MaxDLQTotal, true
	}
	return page, err
}

// DeadLetters implements queen.Store.
func (s *Store) DeadLetters(ctx context.Context, partitionID, transactionID string) ([]queen.DeadLetter, error) {
	if !queen.IsUUID(partitionID) {
		return nil, queen.Invalid("partitionId", "must be a UUID")
	}
	var out []sealedDeadLetter
	if err := s.call(ctx, "get dead letter", sqlDLQGet, &out, partitionID, transactionID); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, queen.Errorf(queen.ErrNotFound, "no dead letter for %s/%s", partitionID, transactionID)
	}
	return s.openDeadLetters(ctx, out, false)
}

// RetryDeadLetter implements queen.Store.
func (s *Store) RetryDeadLetter(ctx context.Context, partitionID, transactionID, group string) (queen.PushResult, error) {
	if !queen.IsUUID(partitionID) {
		return queen.PushResult{}, queen.Invalid("partitionId", "must be a UUID")
	}
	var out *queen.PushResult
	if err := s.call(ctx, "retry dead letter", sqlDLQRetry, &out, partitionID, transactionID,
		nullable(group), queen.NewUUIDv7(), s.now()); err != nil {
		if errors.Is(err, queen.ErrNotFound) {
			return queen.PushResult{}, queen.Errorf(queen.ErrNotFound, "no dead letter for %s/%s", partitionID, transactionID)
		}
		return queen.PushResult{}, err
	}
	return *out, nil
}

// DeleteDeadLetter implements queen.Store.
func (s *Store) DeleteDeadLetter(ctx context.Context, partitionID, transactionID, group string) (int, error) {
	if !queen.IsUUID(partitionID) {
		return 0, queen.Invalid("partitionId", "must be a UUID")
	}
	var n int64
	if err := s.call(ctx, "delete dead letter", sqlDLQDelete, &n, partitionID, transactionID, nullable(group)); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, queen.Errorf(queen.ErrNotFound, "no dead letter for %s/%s", partitionID, transactionID)
	}
	return int(n), nil
}
