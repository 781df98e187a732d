package queen

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Defaults and limits of the model.
const (
	// DefaultPartition is the partition of a push item that names none.
	DefaultPartition = "Default"
	// QueueModeGroup is the group of consumers that name none; they compete.
	QueueModeGroup = "__QUEUE_MODE__"
	// DefaultLeaseTime is a queue's leaseTime in seconds unless configured.
	DefaultLeaseTime = 300
	// DefaultRetryLimit is a queue's retryLimit unless configured.
	DefaultRetryLimit = 3
	// DefaultDedupWindowSeconds is a queue's dedup window unless configured (0 disables).
	DefaultDedupWindowSeconds = 3600
	// MaxBatch is the largest batch one pop may ask for.
	MaxBatch = 10000
	// MaxPartitionsPerPop is the largest `partitions` one pop may ask for.
	MaxPartitionsPerPop = 100
	// MaxPushItems is the largest number of items one push may carry.
	MaxPushItems = 10000
	// MaxNameBytes is the longest queue, partition, group or transaction id.
	MaxNameBytes = 255
	// MaxLeaseSeconds is the longest lease: a queue's leaseTime, and a lease
	// extension.
	MaxLeaseSeconds = 7 * 86400
)

// PushItem is one message to append.
type PushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition,omitempty"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId,omitempty"`
	TraceID       string          `json:"traceId,omitempty"`
	// ProducerSub is the authenticated caller that pushes the item (JWT
	// sub, or the IAM principal), set by the API from the verified
	// identity — never from a request body.
	ProducerSub string `json:"producerSub,omitempty"`
}

// Push statuses.
const (
	StatusQueued    = "queued"
	StatusDuplicate = "duplicate"
)

// PushResult says what happened to one push item, in input order.
type PushResult struct {
	Index         int       `json:"index"`
	TransactionID string    `json:"transactionId"`
	Status        string    `json:"status"`
	MessageID     string    `json:"messageId"`
	PartitionID   string    `json:"partitionId"`
	Offset        int64     `json:"offset"`
	Queue         string    `json:"queue"`
	Partition     string    `json:"partition"`
	TraceID       string    `json:"traceId,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
}

// SubscriptionMode says where a new consumer group starts reading.
type SubscriptionMode string

// Subscription modes.
const (
	// SubscribeAll starts at offset 0 (the default).
	SubscribeAll SubscriptionMode = "all"
	// SubscribeNew starts at the partition head at subscription time.
	SubscribeNew SubscriptionMode = "new"
	// SubscribeFrom starts at the first message with created_at >= From.
	SubscribeFrom SubscriptionMode = "from"
)

// PopRequest asks for a leased batch.
type PopRequest struct {
	Queue string
	// Partition, when set, pops only that partition; otherwise any partition.
	Partition string
	// ConsumerGroup defaults to QueueModeGroup.
	ConsumerGroup string
	// Batch is the message budget, 1..MaxBatch.
	Batch int
	// Partitions is how many partitions one pop may lease under one lease id.
	Partitions int
	// AutoAck commits inside the pop: at-most-once, no lease.
	AutoAck bool
	// Mode and From apply when the group subscribes (its first pop of the queue).
	Mode SubscriptionMode
	From time.Time
	// Worker names the consumer, for listings.
	Worker string
	// Target, when set, makes the pop a subscription's delivery: it leases
	// nothing unless the (Queue, ConsumerGroup) subscription is enabled and
	// delivers to Target, checked in the transaction that takes the lease,
	// so a deleted, paused or retargeted subscription is never delivered.
	Target *SubscriptionTarget
}

// Message is one delivered message.
type Message struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Queue         string          `json:"queue"`
	Offset        int64           `json:"offset"`
	Data          json.RawMessage `json:"data"`
	TraceID       *string         `json:"traceId"`
	// ProducerSub is who pushed the message; null when unknown.
	ProducerSub *string   `json:"producerSub"`
	CreatedAt   time.Time `json:"createdAt"`
	RetryCount  int       `json:"retryCount"`
}

// Browse statuses of a message, derived from the cursors (Queen's names).
const (
	BrowsePending    = "pending"     // some subscribed group has not read it
	BrowseProcessing = "processing"  // under a live lease, some group has not read it
	BrowseCompleted  = "completed"   // every subscribed group's cursor is past it
	BrowseDeadLetter = "dead_letter" // dead-lettered by some group
)

// BrowsedMessage is a message of the log with where the groups are on it.
type BrowsedMessage struct {
	Message
	Status      string    `json:"status"`
	QueueStatus string    `json:"queueStatus"`
	BusStatus   BusStatus `json:"busStatus"`
}

// BusStatus counts the subscribed groups whose position is at or past a
// message.
type BusStatus struct {
	ConsumedBy  int `json:"consumedBy"`
	TotalGroups int `json:"totalGroups"`
}

// PopResult is a leased batch; empty Messages means nothing was deliverable.
type PopResult struct {
	LeaseID        string     `json:"leaseId,omitempty"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	ConsumerGroup  string     `json:"consumerGroup"`
	Messages       []Message  `json:"messages"`
}

// AckStatus is the outcome a consumer reports for a message.
type AckStatus string

// Ack outcomes.
const (
	AckCompleted AckStatus = "completed"
	AckFailed    AckStatus = "failed"
	AckRetry     AckStatus = "retry"
	AckDLQ       AckStatus = "dlq"
)

// Ack reports the outcome of one delivered message.
type Ack struct {
	PartitionID   string    `json:"partitionId"`
	TransactionID string    `json:"transactionId"`
	Status        AckStatus `json:"status"`
	// ConsumerGroup defaults to QueueModeGroup.
	ConsumerGroup string `json:"group"`
	// LeaseID, when set, must be the partition's current, live lease.
	LeaseID string `json:"leaseId,omitempty"`
	// Error is stored with a dead letter.
	Error string `json:"error,omitempty"`
}

// AckStatuses lists the ack outcomes: a closed set (see AckResults).
func AckStatuses() []AckStatus { return []AckStatus{AckCompleted, AckFailed, AckRetry, AckDLQ} }

// Ack results.
const (
	ResultCommitted        = "committed"
	ResultAlreadyCommitted = "already committed"
	ResultDeadLettered     = "dead-lettered"
	ResultRedelivered      = "redelivered"
	ResultNotApplied       = "not applied"
)

// AckResults lists the ack results. The routines produce them, and the
// reference model has its own copy: a test holds both to this list, as it
// does AckStatuses and AckCodes.
func AckResults() []string {
	return []string{ResultCommitted, ResultAlreadyCommitted, ResultDeadLettered, ResultRedelivered, ResultNotApplied}
}

// Codes of a refused ack item.
const (
	CodeNotFound = "not_found" // its partition does not exist
	CodeConflict = "conflict"  // its lease is not the live one, or its message was never delivered
	CodeSkipped  = "skipped"   // valid, but another item of the call was refused
)

// AckCodes lists the codes of a refused ack item.
func AckCodes() []string { return []string{CodeNotFound, CodeConflict, CodeSkipped} }

// AckResult says what happened to one ack, in input order.
type AckResult struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	Queue         string `json:"queue,omitempty"`
	Partition     string `json:"partition,omitempty"`
	Offset        *int64 `json:"offset,omitempty"`
	Success       bool   `json:"success"`
	Error         string `json:"error,omitempty"`
	// Code classifies a failure: one of the Code* constants.
	Code string `json:"code,omitempty"`
	// Result is one of the Result* constants when Success.
	Result string `json:"result,omitempty"`
	// DLQ is true when this ack dead-lettered its message.
	DLQ bool `json:"dlq"`
	// Committed is the partition's cursor for the group after the call.
	Committed *int64 `json:"committed,omitempty"`
	// LeaseReleased is true when the call released the partition's lease.
	LeaseReleased bool `json:"leaseReleased"`
}

// TransactionRequest is acks and pushes applied atomically.
type TransactionRequest struct {
	Acks           []Ack
	Pushes         []PushItem
	RequiredLeases []string
}

// TransactionResult holds the results of a committed transaction.
type TransactionResult struct {
	Acks   []AckResult  `json:"acks"`
	Pushes []PushResult `json:"pushes"`
}

// QueueOptions is a partial set of queue options: nil keeps the current value.
type QueueOptions struct {
	LeaseTime  *int `json:"leaseTime,omitempty"`
	RetryLimit *int `json:"retryLimit,omitempty"`
	// RetryDelay (ms): after a failed or retry ack ends a batch, or an
	// expired lease charges an attempt, the partition is not delivered to
	// that group again before this much time has passed.
	RetryDelay                *int   `json:"retryDelay,omitempty"`
	DedupWindowSeconds        *int   `json:"dedupWindowSeconds,omitempty"`
	DelayedProcessing         *int   `json:"delayedProcessing,omitempty"`
	WindowBuffer              *int   `json:"windowBuffer,omitempty"`
	MaxSize                   *int64 `json:"maxSize,omitempty"`
	RetentionSeconds          *int   `json:"retentionSeconds,omitempty"`
	CompletedRetentionSeconds *int   `json:"completedRetentionSeconds,omitempty"`
	// DLQRetentionSeconds: dead letters older than this (by when they
	// were dead-lettered) are removed; 0: the deployment's default.
	DLQRetentionSeconds *int `json:"dlqRetentionSeconds,omitempty"`
	// EncryptionEnabled seals the queue's payloads with AES-256-GCM before
	// they are stored (the server's key ring; see package crypt).
	EncryptionEnabled *bool `json:"encryptionEnabled,omitempty"`
	// Priority is accepted for client compatibility and has no effect: the
	// model has no priorities.
	Priority *int `json:"priority,omitempty"`

	// Queen's names with a meaning mapped onto the log (see Normalize):
	// ttl and maxWaitTimeSeconds delete messages older than that, as
	// retentionSeconds does (0: not set; the smallest set one applies);
	// retentionEnabled false keeps the windows but applies none;
	// deadLetterQueue and dlqAfterMaxRetries can only be true.
	TTL                *int  `json:"ttl,omitempty"`
	MaxWaitTimeSeconds *int  `json:"maxWaitTimeSeconds,omitempty"`
	RetentionEnabled   *bool `json:"retentionEnabled,omitempty"`
	DeadLetterQueue    *bool `json:"deadLetterQueue,omitempty"`
	DLQAfterMaxRetries *bool `json:"dlqAfterMaxRetries,omitempty"`
}

// Options are a queue's options as configured: each as it was given
// (Queen's clients check the echo), with the windows retention applies.
type Options struct {
	LeaseTime                 int   `json:"leaseTime"`
	RetryLimit                int   `json:"retryLimit"`
	RetryDelay                int   `json:"retryDelay"`
	DedupWindowSeconds        int   `json:"dedupWindowSeconds"`
	DelayedProcessing         int   `json:"delayedProcessing"`
	WindowBuffer              int   `json:"windowBuffer"`
	MaxSize                   int64 `json:"maxSize"`
	RetentionSeconds          int   `json:"retentionSeconds"`
	CompletedRetentionSeconds int   `json:"completedRetentionSeconds"`
	DLQRetentionSeconds       int   `json:"dlqRetentionSeconds"`
	EncryptionEnabled         bool  `json:"encryptionEnabled"`
	Priority                  int   `json:"priority"`
	TTL                       int   `json:"ttl"`
	MaxWaitTimeSeconds        int   `json:"maxWaitTimeSeconds"`
	// RetentionEnabled as given; never given: whether a window is set.
	RetentionEnabled   bool `json:"retentionEnabled"`
	DeadLetterQueue    bool `json:"deadLetterQueue"`
	DLQAfterMaxRetries bool `json:"dlqAfterMaxRetries"`
	// EffectiveRetentionSeconds and EffectiveCompletedRetentionSeconds are
	// the windows retention applies (0: none): the smallest of
	// retentionSeconds, ttl and maxWaitTimeSeconds that is set, and
	// completedRetentionSeconds; the deployment's defaults where the queue
	// sets none or retentionEnabled is false.
	EffectiveRetentionSeconds          int `json:"effectiveRetentionSeconds"`
	EffectiveCompletedRetentionSeconds int `json:"effectiveCompletedRetentionSeconds"`
	// EffectiveDLQRetentionSeconds is how long its dead letters are kept
	// (0: for ever): dlqRetentionSeconds, else the deployment's default.
	EffectiveDLQRetentionSeconds int `json:"effectiveDlqRetentionSeconds"`
}

// RetentionDefaults are a deployment's retention windows, in seconds, for
// a queue that sets none of that kind or turned retention off (0: keep for
// ever).
type RetentionDefaults struct {
	Seconds          int
	CompletedSeconds int
	// DLQSeconds is how long dead letters are kept (dlqRetentionSeconds).
	DLQSeconds int
}

// WithDerived fills the options derived from the others: retentionEnabled
// when it was never given (enabled, nil: whether a window is set), the
// effective windows (the queue's own, else the deployment's defaults d),
// and deadLetterQueue and dlqAfterMaxRetries (always true).
func (o Options) WithDerived(enabled *bool, d RetentionDefaults) Options {
	keep := 0
	for _, w := range []int{o.RetentionSeconds, o.TTL, o.MaxWaitTimeSeconds} {
		if w > 0 && (keep == 0 || w < keep) {
			keep = w
		}
	}
	o.EffectiveRetentionSeconds, o.EffectiveCompletedRetentionSeconds = keep, o.CompletedRetentionSeconds
	if enabled != nil {
		o.RetentionEnabled = *enabled
		if !*enabled {
			o.EffectiveRetentionSeconds, o.EffectiveCompletedRetentionSeconds = 0, 0
		}
	} else {
		o.RetentionEnabled = keep > 0 || o.CompletedRetentionSeconds > 0
	}
	if o.EffectiveRetentionSeconds == 0 {
		o.EffectiveRetentionSeconds = d.Seconds
	}
	if o.EffectiveCompletedRetentionSeconds == 0 {
		o.EffectiveCompletedRetentionSeconds = d.CompletedSeconds
	}
	o.EffectiveDLQRetentionSeconds = o.DLQRetentionSeconds
	if o.EffectiveDLQRetentionSeconds == 0 {
		o.EffectiveDLQRetentionSeconds = d.DLQSeconds
	}
	o.DeadLetterQueue, o.DLQAfterMaxRetries = true, true
	return o
}

// ConfigureRequest creates a queue or updates some of its options.
type ConfigureRequest struct {
	Queue     string
	Namespace string
	Task      string
	Options   QueueOptions
}

// Queue is a queue and its effective options.
type Queue struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace,omitempty"`
	Task      string    `json:"task,omitempty"`
	Options   Options   `json:"options"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SeekTarget says where to move a group's cursors. Exactly one field is set.
type SeekTarget struct {
	ToEnd       bool
	ToBeginning bool
	Timestamp   *time.Time
	// Offsets maps partition name to the next offset to deliver.
	Offsets map[string]int64
}

// SeekResult is a partition's cursor after a seek.
type SeekResult struct {
	Partition  string `json:"partition"`
	Committed  int64  `json:"committed"`
	LastOffset int64  `json:"lastOffset"`
}

// DeadLetter is a message copied to the dead-letter table.
type DeadLetter struct {
	ID            int64           `json:"id"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	PartitionID   string          `json:"partitionId"`
	Offset        int64           `json:"offset"`
	MessageID     string          `json:"messageId"`
	TransactionID string          `json:"transactionId"`
	Data          json.RawMessage `json:"data"`
	TraceID       *string         `json:"traceId"`
	ConsumerGroup string          `json:"consumerGroup"`
	Error         *string         `json:"errorMessage"`
	Attempts      int             `json:"retryCount"`
	CreatedAt     time.Time       `json:"createdAt"`
	FailedAt      time.Time       `json:"failedAt"`
	// DataUnavailable, in a listing of every queue, says why Data is null:
	// the payload is sealed under a key this server lacks (a listing of
	// that queue alone answers ErrKeyUnavailable instead).
	DataUnavailable string `json:"dataUnavailable,omitempty"`
}

// DLQFilter selects dead letters. Zero values mean no filter.
type DLQFilter struct {
	Queue         string
	ConsumerGroup string
	Partition     string
	From, To      *time.Time
	Limit, Offset int
	// Cursor, a page's NextCursor, starts the page after that page's
	// last dead letter (an index range, whatever came before; Offset
	// then counts from there).
	Cursor string
}

// DLQPage is one page of dead letters and the total matching the filter.
type DLQPage struct {
	Messages []DeadLetter `json:"messages"`
	// Total counts the dead letters the filter matches, up to MaxDLQTotal;
	// TotalCapped is true when there are more.
	Total       int64 `json:"total"`
	TotalCapped bool  `json:"totalCapped,omitempty"`
	// NextCursor, on a full page, is the Cursor of the next one.
	NextCursor string `json:"nextCursor,omitempty"`
}

// DLQCursor is the cursor after dead letter d in a listing's order
// (newest first): its failedAt and id.
func DLQCursor(d DeadLetter) string {
	return d.FailedAt.UTC().Format(time.RFC3339Nano) + "," + strconv.FormatInt(d.ID, 10)
}

// ParseDLQCursor reads a DLQCursor.
func ParseDLQCursor(c string) (time.Time, int64, error) {
	at, id, ok := strings.Cut(c, ",")
	t, err := time.Parse(time.RFC3339Nano, at)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err != nil || err2 != nil {
		return time.Time{}, 0, Invalid("cursor", "must be a nextCursor of an earlier page")
	}
	return t, n, nil
}

// MaxDLQTotal caps a DLQ listing's total, so that a page of a large DLQ
// costs the page, not a count of every dead letter.
const MaxDLQTotal = 10_000

// BrowseRequest reads the log of a queue without consuming it.
// MaintenanceMode names a maintenance switch.
type MaintenanceMode string

// The maintenance switches.
const (
	MaintainPush MaintenanceMode = "push" // pushes get 503 with Retry-After, nothing written
	MaintainPop  MaintenanceMode = "pop"  // pops return nothing
)

// MaintenanceState says which maintenance modes are on.
type MaintenanceState struct {
	Push bool `json:"push"`
	Pop  bool `json:"pop"`
}

// MaxBrowseLimit is the most messages one browse returns.
const MaxBrowseLimit = 1000

type BrowseRequest struct {
	Queue      string
	Partition  string
	FromOffset int64
	Limit      int
}

// ReapRequest bounds one reaper pass. The pass works kind by kind (lease
// expiry, dedup pruning, retention) in short transactions of at most Batch
// rows each, taking the kinds in turn, until every kind has caught up (a
// batch came back short) or Deadline has passed.
type ReapRequest struct {
	// Batch is the most rows of one kind one transaction touches (0: the
	// store's default).
	Batch int
	// Deadline ends the pass with work left (zero: none; the context still
	// applies). The batch running at the deadline finishes.
	Deadline time.Time
}

// ReapStats counts what one reaper pass did, and what it left behind.
type ReapStats struct {
	LeasesExpired     int `json:"leasesExpired"`
	DeadLettered      int `json:"deadLettered"`
	DedupPruned       int `json:"dedupPruned"` // key rows; a segment's first key leaves with its segment
	SegmentsRetained  int `json:"segmentsRetained"`
	SegmentsCompleted int `json:"segmentsCompleted"`
	// DeadLettersExpired are dead letters removed by dlqRetentionSeconds.
	DeadLettersExpired int `json:"deadLettersExpired"`
	// SummariesFolded are partitions whose changes were folded into the
	// queues' summaries (depth, lag, counts).
	SummariesFolded int `json:"summariesFolded"`
	// Batches is the number of transactions the pass ran.
	Batches int `json:"batches"`
	// Behind is true when the deadline ended the pass before every kind
	// had caught up; Backlog then counts what is left.
	Behind  bool        `json:"behind"`
	Backlog ReapBacklog `json:"backlog"`
}

// ReapBacklog counts the rows a pass left due, per kind (all zero after a
// pass that caught up). Each count stops at MaxBacklogCount.
type ReapBacklog struct {
	Leases    int64 `json:"leases"`    // expired leases not yet expired by the reaper
	Dedup     int64 `json:"dedup"`     // dedup keys past every window
	Retention int64 `json:"retention"` // segments past their queue's retention
}

// MaxBacklogCount caps each ReapBacklog count, so that counting a large
// backlog stays cheap.
const MaxBacklogCount = 1_000_000

// Did reports whether the pass changed anything.
func (s ReapStats) Did() bool {
	return s.LeasesExpired+s.DedupPruned+s.SegmentsRetained+s.SegmentsCompleted+s.DeadLettersExpired > 0
}
