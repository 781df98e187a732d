package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// The statements of these operations (sql/*.sql).
var (
	sqlConfigure   = query("configure")
	sqlSeek        = query("seek")
	sqlQueues      = query("queues_list")
	sqlQueue       = query("queue_get")
	sqlQueueDelete = query("queue_delete")
	sqlGroups      = query("groups")
	sqlGroupDelete = query("group_delete")
	sqlBrowse      = query("browse")
	sqlStats       = query("stats")
	sqlMaintGet    = query("maintenance_get")
	sqlMaintSet    = query("maintenance_set")
)

// queueRow is a queues row as row_to_json renders it.
type queueRow struct {
	ID                        int64     `json:"id"`
	Name                      string    `json:"name"`
	Namespace                 *string   `json:"namespace"`
	Task                      *string   `json:"task"`
	LeaseTime                 int       `json:"lease_time"`
	RetryLimit                int       `json:"retry_limit"`
	RetryDelayMS              int       `json:"retry_delay_ms"`
	DedupWindow               int       `json:"dedup_window"`
	DelayedProcessing         int       `json:"delayed_processing"`
	WindowBuffer              int       `json:"window_buffer"`
	MaxSize                   int64     `json:"max_size"`
	RetentionSeconds          int       `json:"retention_seconds"`
	CompletedRetentionSeconds int       `json:"completed_retention_seconds"`
	DLQRetentionSeconds       int       `json:"dlq_retention_seconds"`
	EncryptionEnabled         bool      `json:"encryption_enabled"`
	Priority                  int       `json:"priority"`
	TTL                       int       `json:"ttl"`
	MaxWaitTimeSeconds        int       `json:"max_wait_time_seconds"`
	RetentionEnabled          *bool     `json:"retention_enabled"`
	CreatedAt                 time.Time `json:"created_at"`
	UpdatedAt                 time.Time `json:"updated_at"`
}

func (r queueRow) queue(d queen.RetentionDefaults) queen.Queue {
	q := queen.Queue{Name: r.Name, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Options: queen.Options{
		LeaseTime: r.LeaseTime, RetryLimit: r.RetryLimit, RetryDelay: r.RetryDelayMS, DedupWindowSeconds: r.DedupWindow,
		DelayedProcessing: r.DelayedProcessing, WindowBuffer: r.WindowBuffer, MaxSize: r.MaxSize,
		RetentionSeconds: r.RetentionSeconds, CompletedRetentionSeconds: r.CompletedRetentionSeconds,
		DLQRetentionSeconds: r.DLQRetentionSeconds, EncryptionEnabled: r.EncryptionEnabled, Priority: r.Priority, TTL: r.TTL, MaxWaitTimeSeconds: r.MaxWaitTimeSeconds,
	}.WithDerived(r.RetentionEnabled, d)}
	if r.Namespace != nil {
		q.Namespace = *r.Namespace
	}
	if r.Task != nil {
		q.Task = *r.Task
	}
	return q
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Configure implements queen.Store.
func (s *Store) Configure(ctx context.Context, req queen.ConfigureRequest) (queen.Queue, error) {
	if err := queen.ValidateQueueName("queue", req.Queue); err != nil {
		return queen.Queue{}, err
	}
	for f, v := range map[string]string{"namespace": req.Namespace, "task": req.Task} {
		if v != "" {
			if err := queen.ValidateText(f, v); err != nil {
				return queen.Queue{}, err
			}
		}
	}
	if err := req.Options.Validate(); err != nil {
		return queen.Queue{}, err
	}
	norm, _ := req.Options.Normalize()
	if e := norm.EncryptionEnabled; e != nil && *e {
		// Refused up front on a server that could not seal its payloads.
		if _, err := s.keyRing(ctx); err != nil {
			return queen.Queue{}, fmt.Errorf("options.encryptionEnabled: %w", err)
		}
	}
	opts, _ := jsonArg(optionsArgOf(norm))
	var row queueRow
	if err := s.call(ctx, "configure", sqlConfigure, &row, req.Queue, nullable(req.Namespace),
		nullable(req.Task), opts, s.now()); err != nil {
		return queen.Queue{}, err
	}
	s.remember(row.Name, row.EncryptionEnabled)
	return row.queue(s.retentionDefaults()), nil
}

// Seek implements queen.Store.
func (s *Store) Seek(ctx context.Context, group, queue string, t queen.SeekTarget) ([]queen.SeekResult, error) {
	if err := queen.ValidateGroup("consumerGroup", group); err != nil {
		return nil, err
	}
	if err := queen.ValidateQueueName("queue", queue); err != nil {
		return nil, err
	}
	n := 0
	target := seekArg{ToEnd: t.ToEnd, ToBeginning: t.ToBeginning, Timestamp: t.Timestamp}
	for _, set := range []bool{t.ToEnd, t.ToBeginning, t.Timestamp != nil} {
		if set {
			n++
		}
	}
	if t.Offsets != nil {
		n++
		if len(t.Offsets) == 0 {
			return nil, queen.Invalid("offsets", "must name at least one partition")
		}
		for p, o := range t.Offsets {
			if o < 0 {
				return nil, queen.Invalid("offsets."+p, "must not be negative")
			}
		}
		target.Offsets = t.Offsets
	}
	if n != 1 {
		return nil, queen.Invalid("target", "give exactly one of toEnd, toBeginning, timestamp, offsets")
	}
	arg, _ := jsonArg(target)
	var out struct {
		Partitions []queen.SeekResult `json:"partitions"`
	}
	if err := s.call(ctx, "seek", sqlSeek, &out, group, queue, arg, s.now()); err != nil {
		return nil, err
	}
	return out.Partitions, nil
}

func nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return *t
}

// ListQueues implements queen.Store.
func (s *Store) ListQueues(ctx context.Context) ([]queen.QueueSummary, error) {
	var out []queen.QueueSummary
	err := s.call(ctx, "list queues", sqlQueues, &out)
	return out, err
}

// Queue implements queen.Store.
func (s *Store) Queue(ctx context.Context, name string, page queen.PartitionPage) (queen.QueueDetail, error) {
	if err := queen.ValidateQueueName("queue", name); err != nil {
		return queen.QueueDetail{}, err
	}
	var out struct {
		Queue      queueRow              `json:"queue"`
		Depth      int64                 `json:"depth"`
		Partitions []queen.PartitionInfo `json:"partitions"`
		Groups     []queen.GroupOnQueue  `json:"groups"`
	}
	// One partition more than the page holds tells whether there are more.
	size := page.Size()
	if err := s.call(ctx, "get queue", sqlQueue, &out, name, s.now(), page.After, size+1); err != nil {
		if errors.Is(err, queen.ErrNotFound) {
			return queen.QueueDetail{}, queen.Errorf(queen.ErrNotFound, "queue %s not found", name)
		}
		return queen.QueueDetail{}, err
	}
	d := queen.QueueDetail{Queue: out.Queue.queue(s.retentionDefaults()), Depth: out.Depth, Partitions: out.Partitions, Groups: out.Groups}
	if len(d.Partitions) > size {
		d.Partitions = d.Partitions[:size]
		d.NextPartition = d.Partitions[size-1].Name
	}
	return d, nil
}

// DeleteQueue implements queen.Store.
func (s *Store) DeleteQueue(ctx context.Context, name string) error {
	if err := queen.ValidateQueueName("queue", name); err != nil {
		return err
	}
	var n int64
	if err := s.call(ctx, "delete queue", sqlQueueDelete, &n, name); err != nil {
		return err
	}
	if n == 0 {
		return queen.Errorf(queen.ErrNotFound, "queue %s not found", name)
	}
	return nil
}

// ListGroups implements queen.Store.
func (s *Store) ListGroups(ctx context.Context) ([]queen.GroupSummary, error) {
	var out []queen.GroupSummary
	err := s.call(ctx, "list groups", sqlGroups, &out, nil, false, s.now())
	return out, err
}

// Group implements queen.Store.
func (s *Store) Group(ctx context.Context, name string) (queen.GroupSummary, error) {
	if err := queen.ValidateText("group", name); err != nil {
		return queen.GroupSummary{}, err
	}
	var out []queen.GroupSummary
	if err := s.call(ctx, "get group", sqlGroups, &out, name, true, s.now()); err != nil {
		return queen.GroupSummary{}, err
	}
	if len(out) == 0 {
		return queen.GroupSummary{}, queen.Errorf(queen.ErrNotFound, "consumer group %s not found", name)
	}
	return out[0], nil
}

// DeleteGroup implements queen.Store.
func (s *Store) DeleteGroup(ctx context.Context, group, queue string) error {
	if err := queen.ValidateText("group", group); err != nil {
		return err
	}
	if queue != "" {
		if err := queen.ValidateQueueName("queue", queue); err != nil {
			return err
		}
	}
	var n int64
	if err := s.call(ctx, "delete group", sqlGroupDelete, &n, group, nullable(queue)); err != nil {
		return err
	}
	if n == 0 {
		if queue != "" {
			return queen.Errorf(queen.ErrNotFound, "consumer group %s does not read queue %s", group, queue)
		}
		return queen.Errorf(queen.ErrNotFound, "consumer group %s not found", group)
	}
	return nil
}

// Browse implements queen.Store.
func (s *Store) Browse(ctx context.Context, req queen.BrowseRequest) ([]queen.BrowsedMessage, error) {
	if err := queen.ValidateQueueName("queue", req.Queue); err != nil {
		return nil, err
	}
	if req.Partition != "" {
		if err := queen.ValidateText("partition", req.Partition); err != nil {
			return nil, err
		}
	}
	if req.Limit == 0 {
		req.Limit = 100
	}
	if req.Limit < 1 || req.Limit > 1000 {
		return nil, queen.Invalid("limit", "must be between 1 and 1000")
	}
	if req.FromOffset < 0 {
		return nil, queen.Invalid("fromOffset", "must not be negative")
	}
	var rows []struct {
		queen.BrowsedMessage
		KeyID string `json:"keyId"`
	}
	if err := s.call(ctx, "browse", sqlBrowse, &rows, req.Queue, nullable(req.Partition), req.FromOffset, req.Limit, s.now()); err != nil {
		return nil, err
	}
	out := make([]queen.BrowsedMessage, len(rows))
	for i, r := range rows {
		out[i] = r.BrowsedMessage
		if err := s.openInto(ctx, r.KeyID, &out[i].Data, r.Queue, r.Partition); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Maintenance implements queen.Store.
func (s *Store) Maintenance(ctx context.Context) (queen.MaintenanceState, error) {
	var out queen.MaintenanceState
	err := s.call(ctx, "maintenance", sqlMaintGet, &out)
	return out, err
}

// SetMaintenance implements queen.Store.
func (s *Store) SetMaintenance(ctx context.Context, mode queen.MaintenanceMode, enabled bool) (queen.MaintenanceState, error) {
	if mode != queen.MaintainPush && mode != queen.MaintainPop {
		return queen.MaintenanceState{}, queen.Invalid("mode", "must be push or pop")
	}
	var out queen.MaintenanceState
	err := s.call(ctx, "set maintenance", sqlMaintSet, &out, string(mode), enabled, s.now())
	return out, err
}

// Stats implements queen.Store.
func (s *Store) Stats(ctx context.Context) (queen.Stats, error) {
	var out queen.Stats
	err := s.call(ctx, "stats", sqlStats, &out)
	return out, err
}

// Ping implements queen.Store.
func (s *Store) Ping(ctx context.Context) error {
	var n int64
	return s.call(ctx, "ping", "SELECT 1::bigint", &n)
}
