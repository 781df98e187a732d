package loadcheck

import (
	"context"
	"encoding/json"
	"net/url"
	"time"
)

// The harnesses' own spelling of the v1 wire format (README: Using the
// API): they talk to the server as any client does and import nothing of
// the engine. A harness reads the fields it needs and leaves the rest.

// PushItem is one item of a push (POST /api/v1/push).
type PushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId,omitempty"`
}

// PushResult is the answer for one item of a push.
type PushResult struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transaction_id"`
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	PartitionID   string `json:"partition_id"`
	Offset        int64  `json:"offset"`
	Partition     string `json:"partition"`
}

// Message is one message a pop delivered or a browse listed.
type Message struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Offset        int64           `json:"offset"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     time.Time       `json:"createdAt"`
	RetryCount    int             `json:"retryCount"`
}

// Pop is the answer to a pop: the lease and the messages under it.
type Pop struct {
	LeaseID  *string   `json:"leaseId"`
	Messages []Message `json:"messages"`
}

// Ack is one item of a batch ack.
type Ack struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	Status        string `json:"status"`
	LeaseID       string `json:"leaseId"`
	Error         string `json:"error,omitempty"`
}

// AckBatch is a batch ack (POST /api/v1/ack/batch).
type AckBatch struct {
	ConsumerGroup   string `json:"consumerGroup,omitempty"`
	Acknowledgments []Ack  `json:"acknowledgments"`
}

// AckResult is the answer for one item of a batch ack.
type AckResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	Offset        *int64  `json:"offset"`
	Result        string  `json:"result"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Committed     *int64  `json:"committed"`
}

// Queue is a queue's resource (GET /api/v1/resources/queues/{queue}): its
// partitions and the lag of each group reading it.
type Queue struct {
	Partitions    []Partition `json:"partitions"`
	NextPartition string      `json:"nextPartition"`
	Groups        []struct {
		Group string `json:"group"`
		Lag   int64  `json:"lag"`
	} `json:"groups"`
}

// Partition is one partition of a queue's detail.
type Partition struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	LastOffset int64  `json:"lastOffset"`
}

// ReadQueue reads a queue's detail with every partition, a page at a time
// (the detail pages them), through read (a GET that decodes its reply).
func ReadQueue(ctx context.Context, read func(ctx context.Context, path string, v any) error, name string) (Queue, error) {
	var all Queue
	after := ""
	for {
		var q Queue
		path := "/api/v1/resources/queues/" + url.PathEscape(name) + "?partitionsLimit=10000&partitionsAfter=" + url.QueryEscape(after)
		if err := read(ctx, path, &q); err != nil {
			return Queue{}, err
		}
		if after == "" {
			all.Groups = q.Groups
		}
		all.Partitions = append(all.Partitions, q.Partitions...)
		if q.NextPartition == "" {
			return all, nil
		}
		after = q.NextPartition
	}
}

// Browse is one page of a partition's log (GET /api/v1/messages).
type Browse struct {
	Messages []Message `json:"messages"`
}

// DeadLetter is one message of the DLQ, for one group.
type DeadLetter struct {
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Offset        int64           `json:"offset"`
	TransactionID string          `json:"transactionId"`
	Data          json.RawMessage `json:"data"`
	ConsumerGroup string          `json:"consumerGroup"`
	Attempts      int             `json:"retryCount"`
}

// DLQPage is one page of the DLQ (GET /api/v1/dlq).
type DLQPage struct {
	Messages []DeadLetter `json:"messages"`
	Total    int64        `json:"total"`
}
