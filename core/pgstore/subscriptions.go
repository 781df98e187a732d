package pgstore

import (
	"context"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// The statements of subscriptions (docs/subscriptions.md) and of ending a
// lease early.
var (
	sqlSubscriptionPut      = query("subscription_put")
	sqlSubscriptions        = query("subscriptions_list")
	sqlSubscriptionDelete   = query("subscription_delete")
	sqlSubscriptionDelivery = query("subscription_delivery")
	sqlLeaseRelease         = query("lease_release")
)

// subscriptionRow is a subscription_targets row as row_to_json renders it.
type subscriptionRow struct {
	QueueName      string     `json:"queue_name"`
	GroupName      string     `json:"group_name"`
	TargetFunction *string    `json:"target_function"`
	TargetURL      *string    `json:"target_url"`
	BatchSize      int        `json:"batch_size"`
	MaxBatchBytes  int        `json:"max_batch_bytes"`
	BatchWindowMs  int        `json:"batch_window_ms"`
	MaxConcurrency int        `json:"max_concurrency"`
	Enabled        bool       `json:"enabled"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Delivered      int64      `json:"delivered"`
	LastDeliveryAt *time.Time `json:"last_delivery_at"`
	LastError      *string    `json:"last_error"`
	LastErrorAt    *time.Time `json:"last_error_at"`
	WakeAt         *time.Time `json:"wake_at"`
}

func (r subscriptionRow) subscription() queen.Subscription {
	s := queen.Subscription{
		Queue: r.QueueName, ConsumerGroup: r.GroupName, BatchSize: r.BatchSize, MaxBatchBytes: r.MaxBatchBytes,
		BatchWindowMs: r.BatchWindowMs, MaxConcurrency: r.MaxConcurrency, Enabled: r.Enabled,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Delivered: r.Delivered, LastDeliveryAt: r.LastDeliveryAt,
		LastError: r.LastError, LastErrorAt: r.LastErrorAt,
	}
	if r.TargetFunction != nil {
		s.Target.Function = *r.TargetFunction
	}
	if r.TargetURL != nil {
		s.Target.URL = *r.TargetURL
	}
	return s
}

// PutSubscription implements queen.Store.
func (s *Store) PutSubscription(ctx context.Context, req queen.SubscriptionRequest) (queen.Subscription, error) {
	sub, err := req.Resolve()
	if err != nil {
		return queen.Subscription{}, err
	}
	var row subscriptionRow
	err = s.call(ctx, "put subscription", sqlSubscriptionPut, &row, sub.Queue, sub.ConsumerGroup,
		nullable(sub.Target.Function), nullable(sub.Target.URL), sub.BatchSize, sub.MaxBatchBytes, sub.BatchWindowMs,
		sub.MaxConcurrency, sub.Enabled, s.now())
	return row.subscription(), err
}

// Subscriptions implements queen.Store.
func (s *Store) Subscriptions(ctx context.Context) ([]queen.Subscription, error) {
	return s.subscriptions(ctx, nil, nil)
}

// Subscription implements queen.Store.
func (s *Store) Subscription(ctx context.Context, queue, group string) (queen.Subscription, error) {
	if err := queen.ValidateSubscriptionKey(queue, group); err != nil {
		return queen.Subscription{}, err
	}
	out, err := s.subscriptions(ctx, &queue, &group)
	if err != nil {
		return queen.Subscription{}, err
	}
	if len(out) == 0 {
		return queen.Subscription{}, queen.Errorf(queen.ErrNotFound, "subscription of group %s on queue %s not found", group, queue)
	}
	return out[0], nil
}

func (s *Store) subscriptions(ctx context.Context, queue, group *string) ([]queen.Subscription, error) {
	var rows []subscriptionRow
	if err := s.call(ctx, "list subscriptions", sqlSubscriptions, &rows, queue, group); err != nil {
		return nil, err
	}
	out := make([]queen.Subscription, len(rows))
	for i, r := range rows {
		out[i] = r.subscription()
	}
	return out, nil
}

// DeleteSubscription implements queen.Store.
func (s *Store) DeleteSubscription(ctx context.Context, queue, group string) error {
	if err := queen.ValidateSubscriptionKey(queue, group); err != nil {
		return err
	}
	var n int64
	if err := s.call(ctx, "delete subscription", sqlSubscriptionDelete, &n, queue, group); err != nil {
		return err
	}
	if n == 0 {
		return queen.Errorf(queen.ErrNotFound, "subscription of group %s on queue %s not found", group, queue)
	}
	return nil
}

// RecordDelivery implements queen.Store. A subscription deleted meanwhile
// has no counters to add to, which is not an error.
func (s *Store) RecordDelivery(ctx context.Context, d queen.Delivery) error {
	var n int64
	return s.call(ctx, "record delivery", sqlSubscriptionDelivery, &n, d.Queue, d.ConsumerGroup, d.Settled, d.Error,
		s.now())
}

// ReleaseLease implements queen.Store.
func (s *Store) ReleaseLease(ctx context.Context, leaseID string) error {
	if !queen.IsUUID(leaseID) {
		return queen.Errorf(queen.ErrNotFound, "lease %s not found", leaseID)
	}
	var n int64
	return s.call(ctx, "release lease", sqlLeaseRelease, &n, leaseID, s.now())
}
