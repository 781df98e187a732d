package chaos

import "encoding/json"

// The harness's own spelling of the v1 wire format (README: Using the API):
// it talks to the server as any client does and imports nothing of the
// engine.

type wirePushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId"`
}

type wirePushResult struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transaction_id"`
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	PartitionID   string `json:"partition_id"`
	Offset        int64  `json:"offset"`
	Partition     string `json:"partition"`
}

type wireMessage struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Offset        int64           `json:"offset"`
	Data          json.RawMessage `json:"data"`
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
	ConsumerGroup   string    `json:"consumerGroup,omitempty"`
	Acknowledgments []wireAck `json:"acknowledgments"`
}

type wireAckResult struct {
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
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	Offset        int64           `json:"offset"`
	TransactionID string          `json:"transactionId"`
	Data          json.RawMessage `json:"data"`
	ConsumerGroup string          `json:"consumerGroup"`
	Attempts      int             `json:"retryCount"`
}

type wireDLQPage struct {
	Messages []wireDeadLetter `json:"messages"`
	Total    int64            `json:"total"`
}
