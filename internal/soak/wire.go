package soak

import (
	"encoding/json"
	"time"
)

// The run's own spelling of the v1 wire format (README: Using the API): its
// clients talk to the server as any client does.

type wirePushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId,omitempty"`
}

type wirePushResult struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transaction_id"`
	Status        string `json:"status"`
	PartitionID   string `json:"partition_id"`
	Offset        int64  `json:"offset"`
	Partition     string `json:"partition"`
}

type wireMessage struct {
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Offset        int64           `json:"offset"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     time.Time       `json:"createdAt"`
	RetryCount    int             `json:"retryCount"`
}

type wirePop struct {
	LeaseID  *string       `json:"leaseId"`
	Messages []wireMessage `json:"messages"`
}

type wireAck struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	Status        string `json:"status"`
	LeaseID       string `json:"leaseId"`
	Error         string `json:"error,omitempty"`
}

type wireAckBatch struct {
	ConsumerGroup   string    `json:"consumerGroup"`
	Acknowledgments []wireAck `json:"acknowledgments"`
}

type wireAckResult struct {
	Success       bool   `json:"success"`
	Result        string `json:"result"`
	Offset        *int64 `json:"offset"`
	LeaseReleased bool   `json:"leaseReleased"`
	DLQ           bool   `json:"dlq"`
	Committed     *int64 `json:"committed"`
}

type wireQueue struct {
	Partitions []struct {
		ID         string `json:"id"`
		Name       string `json:"name"`
		LastOffset int64  `json:"lastOffset"`
	} `json:"partitions"`
	Groups []struct {
		Group string `json:"group"`
		Lag   int64  `json:"lag"`
	} `json:"groups"`
}

type wireBrowse struct {
	Messages []wireMessage `json:"messages"`
}

type wireDeadLetter struct {
	PartitionID   string `json:"partitionId"`
	Offset        int64  `json:"offset"`
	TransactionID string `json:"transactionId"`
	ConsumerGroup string `json:"consumerGroup"`
}

type wireDLQPage struct {
	Messages []wireDeadLetter `json:"messages"`
	Total    int64            `json:"total"`
}
