package queen

import (
	"context"
	"time"
)

// WaitKey names what a long-poll waits for: a deliverable partition of
// Queue for Group ("" is QueueModeGroup).
type WaitKey struct {
	Queue, Group string
}

// Prober is what a Store may also offer long-polls: which of keys a
// wildcard pop could serve now, in one cheap round trip for all of them.
// It may err towards true (the pop then finds nothing and the poll waits
// again), never towards false for a partition a pop would serve.
type Prober interface {
	Deliverable(ctx context.Context, keys []WaitKey) ([]bool, error)
}

// Store is the queue engine: every method is one transaction. The Postgres
// implementation lives in package pgstore. Inputs are validated by the
// Store (see Validate*), so callers may pass what they decoded.
type Store interface {
	// Push appends items; all or nothing. Results are in input order.
	Push(ctx context.Context, items []PushItem) ([]PushResult, error)
	// Pop leases a batch. An unknown queue is an empty pop.
	Pop(ctx context.Context, req PopRequest) (PopResult, error)
	// Ack applies outcomes atomically. When any item is rejected nothing is
	// written: the error says why and the results say which items.
	Ack(ctx context.Context, acks []Ack) ([]AckResult, error)
	// Transaction applies acks and pushes atomically.
	Transaction(ctx context.Context, req TransactionRequest) (TransactionResult, error)
	// ExtendLease extends every partition lease held under leaseID to
	// seconds from now; 0 means each queue's leaseTime.
	ExtendLease(ctx context.Context, leaseID string, seconds int) (time.Time, error)
	// ReleaseLease ends every partition lease held under leaseID as if it
	// had expired now: an attempt counted for each head, delivered alone
	// next time. A lease that already ended is ErrConflict.
	ReleaseLease(ctx context.Context, leaseID string) error
	// Configure creates a queue or updates the options given.
	Configure(ctx context.Context, req ConfigureRequest) (Queue, error)
	// Seek moves a group's cursors on a queue and clears its leases.
	Seek(ctx context.Context, group, queue string, target SeekTarget) ([]SeekResult, error)
	// ListDeadLetters pages through the dead-letter table.
	ListDeadLetters(ctx context.Context, f DLQFilter) (DLQPage, error)
	// DeadLetters returns the dead letters of one message address.
	DeadLetters(ctx context.Context, partitionID, transactionID string) ([]DeadLetter, error)
	// RetryDeadLetter re-pushes a dead letter's snapshot under a fresh
	// transactionId and drops its DLQ rows (only group's when given).
	RetryDeadLetter(ctx context.Context, partitionID, transactionID, group string) (PushResult, error)
	// DeleteDeadLetter drops the DLQ rows of an address (only group's when given).
	DeleteDeadLetter(ctx context.Context, partitionID, transactionID, group string) (int, error)
	// ListQueues lists queues with partition counts and depth.
	ListQueues(ctx context.Context) ([]QueueSummary, error)
	// Queue describes one queue, with a page of its partitions.
	Queue(ctx context.Context, name string, page PartitionPage) (QueueDetail, error)
	// DeleteQueue drops a queue, its log, cursors and subscriptions.
	DeleteQueue(ctx context.Context, name string) error
	// ListGroups lists consumer groups with exact lag.
	ListGroups(ctx context.Context) ([]GroupSummary, error)
	// Group describes one consumer group, with its cursors.
	Group(ctx context.Context, name string) (GroupSummary, error)
	// DeleteGroup forgets a group: on one queue, or everywhere when queue is "".
	DeleteGroup(ctx context.Context, group, queue string) error
	// PutSubscription creates a subscription or replaces its definition
	// (its counters stay).
	PutSubscription(ctx context.Context, req SubscriptionRequest) (Subscription, error)
	// Subscriptions lists every subscription, by queue and group.
	Subscriptions(ctx context.Context) ([]Subscription, error)
	// Subscription returns one subscription; ErrNotFound when none.
	Subscription(ctx context.Context, queue, group string) (Subscription, error)
	// DeleteSubscription removes a subscription; the group's cursors stay.
	DeleteSubscription(ctx context.Context, queue, group string) error
	// RecordDelivery adds a delivery to its subscription's counters.
	RecordDelivery(ctx context.Context, d Delivery) error
	// Browse reads messages of a queue without consuming them, each with
	// its status derived from the cursors.
	Browse(ctx context.Context, req BrowseRequest) ([]BrowsedMessage, error)
	// Maintenance reports which maintenance modes are on.
	Maintenance(ctx context.Context) (MaintenanceState, error)
	// SetMaintenance switches one maintenance mode: pushes paused (push) or
	// pops returning nothing (pop), for every process at once.
	SetMaintenance(ctx context.Context, mode MaintenanceMode, enabled bool) (MaintenanceState, error)
	// Reap runs one maintenance pass: lease expiry, dedup pruning and
	// retention, in short transactions until caught up or req.Deadline.
	Reap(ctx context.Context, req ReapRequest) (ReapStats, error)
	// Stats reads the gauges for metrics.
	Stats(ctx context.Context) (Stats, error)
	// Ping checks the database.
	Ping(ctx context.Context) error
}
