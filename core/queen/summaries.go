package queen

import "time"

// What the admin API and the metrics report about queues and groups:
// listings, details and gauges, all read from the queues' summaries
// (docs/internals.md, "Summaries").

// QueueSummary is one line of the queue listing.
type QueueSummary struct {
	Name       string    `json:"name"`
	Namespace  string    `json:"namespace,omitempty"`
	Task       string    `json:"task,omitempty"`
	Partitions int       `json:"partitions"`
	Messages   int64     `json:"messages"`
	Depth      int64     `json:"depth"`
	CreatedAt  time.Time `json:"createdAt"`
}

// PartitionInfo describes one partition of a queue.
type PartitionInfo struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	LastOffset   int64      `json:"lastOffset"`
	LastPushedAt *time.Time `json:"lastPushedAt,omitempty"`
	CreatedAt    time.Time  `json:"createdAt"`
}

// Cursor is one group's position on one partition.
type Cursor struct {
	Queue          string     `json:"queue"`
	Partition      string     `json:"partition"`
	PartitionID    string     `json:"partitionId"`
	Committed      int64      `json:"committed"`
	LastOffset     int64      `json:"lastOffset"`
	Lag            int64      `json:"lag"`
	Attempts       int        `json:"attempts"`
	LeaseID        string     `json:"leaseId,omitempty"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	BatchEnd       *int64     `json:"batchEnd,omitempty"`
	Worker         string     `json:"worker,omitempty"`
}

// GroupOnQueue is a consumer group's state on one queue.
type GroupOnQueue struct {
	Group        string     `json:"group"`
	Queue        string     `json:"queue"`
	Mode         string     `json:"subscriptionMode"`
	From         *time.Time `json:"subscriptionFrom,omitempty"`
	Partitions   int        `json:"partitions"`
	Lag          int64      `json:"lag"`
	ActiveLeases int        `json:"activeLeases"`
	Cursors      []Cursor   `json:"cursors,omitempty"`
}

// QueueDetail is a queue with its partitions and groups.
type QueueDetail struct {
	Queue
	Depth      int64           `json:"depth"`
	Partitions []PartitionInfo `json:"partitions"`
	// NextPartition, when set, is the After of the next page of
	// partitions: there are more.
	NextPartition string         `json:"nextPartition,omitempty"`
	Groups        []GroupOnQueue `json:"groups"`
}

// PartitionPage selects a page of a queue's partitions in name order.
type PartitionPage struct {
	After string // the partitions named after this one; "" from the first
	Limit int    // at most this many: 0 is DefaultPartitionPage, more than MaxPartitionPage is MaxPartitionPage
}

// The size of a page of a queue's partitions in its detail.
const (
	DefaultPartitionPage = 1000
	MaxPartitionPage     = 10000
)

// Size is how many partitions the page holds at most.
func (p PartitionPage) Size() int {
	switch {
	case p.Limit <= 0:
		return DefaultPartitionPage
	case p.Limit > MaxPartitionPage:
		return MaxPartitionPage
	}
	return p.Limit
}

// GroupSummary is one consumer group across the queues it reads.
type GroupSummary struct {
	Group  string         `json:"group"`
	Lag    int64          `json:"lag"`
	Queues []GroupOnQueue `json:"queues"`
}

// Stats are the gauges the reaper and /metrics report.
type Stats struct {
	Queues     int64            `json:"queues"`
	Partitions int64            `json:"partitions"`
	Depth      map[string]int64 `json:"depth"`
	DLQ        map[string]int64 `json:"dlq"`
	// Lag maps group + LagKeySeparator + queue to its exact lag in messages.
	Lag map[string]int64 `json:"lag"`
}

// LagKeySeparator separates group and queue in Stats.Lag keys; group names
// cannot contain it (no control characters).
const LagKeySeparator = "\x1f"
