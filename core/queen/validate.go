package queen

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ValidateQueueName checks a queue name: 1–255 chars of [A-Za-z0-9._:@/-].
func ValidateQueueName(field, name string) error {
	if name == "" {
		return Invalid(field, "is required")
	}
	if len(name) > MaxNameBytes {
		return Invalid(field, "must be at most %d characters", MaxNameBytes)
	}
	for _, r := range name {
		if !(r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("._:@/-", r))) {
			return Invalid(field, "%q has a character outside [A-Za-z0-9._:@/-]", name)
		}
	}
	return ValidateRoutable(field, name)
}

// ValidateRoutable refuses a name that a route taking it in its path could
// not reach: HTTP clients and routers remove empty and dot segments from a
// path, so a queue, partition, consumer group or transactionId that,
// split at "/", has an empty part or a part that is "." or ".." (such as
// "/", "a/", "a//b", "." or "a/../b") is refused where it is first given
// (push, configure, pop), so that none is stored that could not be popped,
// browsed, retried or deleted.
func ValidateRoutable(field, name string) error {
	for part := range strings.SplitSeq(name, "/") {
		if part == "" || part == "." || part == ".." {
			return Invalid(field, "%q cannot be reached in a URL path: no part of it between slashes may be empty, . or ..", name)
		}
	}
	return nil
}

// ValidateText checks a partition name, group name, transaction id or trace
// id: non-empty UTF-8 of at most 255 bytes without control characters.
func ValidateText(field, s string) error {
	if s == "" {
		return Invalid(field, "must not be empty")
	}
	if len(s) > MaxNameBytes {
		return Invalid(field, "must be at most %d bytes", MaxNameBytes)
	}
	if !utf8.ValidString(s) {
		return Invalid(field, "must be valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return Invalid(field, "must not contain control characters")
		}
	}
	return nil
}

// ValidateGroup checks a consumer group's name where it is first stored
// (pop, seek, subscriptions): a route takes it in its path.
func ValidateGroup(field, group string) error { return validatePathText(field, group) }

// validatePathText is ValidateText and ValidateRoutable: a name a route
// takes in its path.
func validatePathText(field, s string) error {
	if err := ValidateText(field, s); err != nil {
		return err
	}
	return ValidateRoutable(field, s)
}

// ValidatePayload checks that a payload is one valid JSON value in UTF-8.
func ValidatePayload(field string, p json.RawMessage) error {
	if len(p) == 0 {
		return nil
	}
	if !utf8.Valid(p) {
		return Invalid(field, "must be valid UTF-8")
	}
	if !json.Valid(p) {
		return Invalid(field, "must be valid JSON")
	}
	return ValidateJSONEscapes(field, string(p))
}

// NormalizePush validates push items and fills in defaults: the Default
// partition, a null payload. An item without a transactionId keeps none:
// the store generates a UUIDv7 for it (the Postgres store under the
// partition's lock, one that names the message's offset;
// docs/semantics.md §3.2.3).
func NormalizePush(items []PushItem) ([]PushItem, error) {
	if len(items) == 0 {
		return nil, Invalid("items", "must contain at least one item")
	}
	if len(items) > MaxPushItems {
		return nil, Invalid("items", "must contain at most %d items", MaxPushItems)
	}
	out := make([]PushItem, len(items))
	for i, it := range items {
		if err := ValidateQueueName("queue", it.Queue); err != nil {
			return nil, itemField("items", i, err)
		}
		if it.Partition == "" {
			it.Partition = DefaultPartition
		} else if err := validatePathText("partition", it.Partition); err != nil {
			return nil, itemField("items", i, err)
		}
		if it.TransactionID != "" {
			if err := validatePathText("transactionId", it.TransactionID); err != nil {
				return nil, itemField("items", i, err)
			}
		}
		if it.TraceID != "" {
			if err := ValidateText("traceId", it.TraceID); err != nil {
				return nil, itemField("items", i, err)
			}
		}
		if err := ValidatePayload("payload", it.Payload); err != nil {
			return nil, itemField("items", i, err)
		}
		if len(it.Payload) == 0 {
			it.Payload = json.RawMessage("null")
		}
		out[i] = it
	}
	return out, nil
}

// itemField names err's field as one of item i of list ("items[3].queue"):
// the name is made only for an error, not for every valid item.
func itemField(list string, i int, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		fe.Field = itemName(list, i, fe.Field)
	}
	return err
}

// itemName is field of item i of list: "items[3].queue".
func itemName(list string, i int, field string) string {
	return fmt.Sprintf("%s[%d].%s", list, i, field)
}

// NormalizePop validates a pop request and fills in defaults.
func NormalizePop(req PopRequest) (PopRequest, error) {
	if err := ValidateQueueName("queue", req.Queue); err != nil {
		return req, err
	}
	if req.Partition != "" {
		if err := ValidateText("partition", req.Partition); err != nil {
			return req, err
		}
	}
	if req.ConsumerGroup == "" {
		req.ConsumerGroup = QueueModeGroup
	} else if err := validatePathText("consumerGroup", req.ConsumerGroup); err != nil {
		return req, err
	}
	if req.Batch == 0 {
		req.Batch = 1
	}
	if req.Batch < 1 || req.Batch > MaxBatch {
		return req, Invalid("batch", "must be between 1 and %d", MaxBatch)
	}
	if req.Partitions == 0 {
		req.Partitions = 1
	}
	if req.Partitions < 1 || req.Partitions > MaxPartitionsPerPop {
		return req, Invalid("partitions", "must be between 1 and %d", MaxPartitionsPerPop)
	}
	switch req.Mode {
	case "":
		req.Mode = SubscribeAll
	case SubscribeAll, SubscribeNew:
	case SubscribeFrom:
		if req.From.IsZero() {
			return req, Invalid("subscriptionFrom", "is required for mode %q", req.Mode)
		}
	default:
		return req, Invalid("subscriptionMode", "must be one of all, new, new-only")
	}
	if req.ConsumerGroup == QueueModeGroup {
		req.Mode, req.From = SubscribeAll, time.Time{}
	}
	if req.Worker != "" {
		if err := ValidateText("worker", req.Worker); err != nil {
			return req, err
		}
	}
	return req, nil
}

// ParseSubscription turns the wire's subscriptionMode and subscriptionFrom
// into a mode and start time: "all" (default), "new" / "new-only" /
// from "now" (the partition head at subscription time), or an RFC 3339
// timestamp.
func ParseSubscription(mode, from string) (SubscriptionMode, time.Time, error) {
	var m SubscriptionMode
	// As in Queen, new (new-only, new_only, newonly) starts at the head;
	// every other value its clients send (all, from_beginning, …) reads
	// from the beginning.
	switch strings.ToLower(mode) {
	case "new", "new-only", "new_only", "newonly":
		m = SubscribeNew
	default:
		if len(mode) > 64 || strings.ContainsFunc(mode, unicode.IsControl) {
			return "", time.Time{}, Invalid("subscriptionMode", "must be new, new-only, or a mode that reads from the beginning (all, from_beginning)")
		}
		m = SubscribeAll
	}
	switch strings.ToLower(from) {
	case "":
		return m, time.Time{}, nil
	case "now":
		return SubscribeNew, time.Time{}, nil
	case "beginning", "all":
		return SubscribeAll, time.Time{}, nil
	}
	ts, err := time.Parse(time.RFC3339Nano, from)
	if err != nil {
		return "", time.Time{}, Invalid("subscriptionFrom", "must be \"now\" or an RFC 3339 timestamp")
	}
	return SubscribeFrom, ts, nil
}

// ParseAckStatus accepts the wire's statuses: completed (alias success),
// failed, retry, dlq.
func ParseAckStatus(field, s string) (AckStatus, error) {
	switch strings.ToLower(s) {
	case "completed", "success":
		return AckCompleted, nil
	case "failed":
		return AckFailed, nil
	case "retry":
		return AckRetry, nil
	case "dlq":
		return AckDLQ, nil
	}
	return "", Invalid(field, "must be one of completed, success, failed, retry, dlq")
}

// NormalizeAcks validates acks and fills in the default group.
func NormalizeAcks(acks []Ack) ([]Ack, error) {
	if len(acks) == 0 {
		return nil, Invalid("acknowledgments", "must contain at least one item")
	}
	if len(acks) > MaxPushItems {
		return nil, Invalid("acknowledgments", "must contain at most %d items", MaxPushItems)
	}
	out := make([]Ack, len(acks))
	for i, a := range acks {
		f := func(err error) error { return itemField("acknowledgments", i, err) }
		if len(acks) == 1 {
			f = func(err error) error { return err }
		}
		if !IsUUID(a.PartitionID) {
			return nil, f(Invalid("partitionId", "must be a UUID"))
		}
		a.PartitionID = strings.ToLower(a.PartitionID)
		if err := ValidateText("transactionId", a.TransactionID); err != nil {
			return nil, f(err)
		}
		st, err := ParseAckStatus("status", string(a.Status))
		if err != nil {
			return nil, f(err)
		}
		a.Status = st
		if a.ConsumerGroup == "" {
			a.ConsumerGroup = QueueModeGroup
		} else if err := ValidateText("consumerGroup", a.ConsumerGroup); err != nil {
			return nil, f(err)
		}
		if a.LeaseID != "" && !IsUUID(a.LeaseID) {
			field := "leaseId"
			if len(acks) > 1 {
				field = itemName("acknowledgments", i, field)
			}
			return nil, Errorf(ErrConflict, "%s: invalid or expired lease", field)
		}
		if strings.ContainsRune(a.Error, 0) {
			return nil, f(Invalid("error", "must not contain NUL (\\u0000)"))
		}
		if !utf8.ValidString(a.Error) {
			return nil, f(Invalid("error", "must be valid UTF-8"))
		}
		out[i] = a
	}
	return out, nil
}

// Validate checks a partial options update: every given value in range.
func (o QueueOptions) Validate() error {
	type rng struct {
		name     string
		v        *int
		min, max int
	}
	const day = 86400
	for _, r := range []rng{
		{"leaseTime", o.LeaseTime, 1, MaxLeaseSeconds},
		{"retryLimit", o.RetryLimit, 0, 1000},
		{"retryDelay", o.RetryDelay, 0, 7 * day * 1000},
		{"ttl", o.TTL, 0, 3650 * day},
		{"maxWaitTimeSeconds", o.MaxWaitTimeSeconds, 0, 3650 * day},
		{"dedupWindowSeconds", o.DedupWindowSeconds, 0, 30 * day},
		{"delayedProcessing", o.DelayedProcessing, 0, 7 * day},
		{"windowBuffer", o.WindowBuffer, 0, 7 * day},
		{"retentionSeconds", o.RetentionSeconds, 0, 3650 * day},
		{"completedRetentionSeconds", o.CompletedRetentionSeconds, 0, 3650 * day},
		{"dlqRetentionSeconds", o.DLQRetentionSeconds, 0, 3650 * day},
		{"priority", o.Priority, -1000000, 1000000},
	} {
		if r.v != nil && (*r.v < r.min || *r.v > r.max) {
			return Invalid("options."+r.name, "must be between %d and %d", r.min, r.max)
		}
	}
	if o.MaxSize != nil && *o.MaxSize < 0 {
		return Invalid("options.maxSize", "must not be negative (0 = unlimited)")
	}
	_, err := o.Normalize()
	return err
}

// Normalize checks Queen's option names against the log, after Validate's
// range checks. ttl and maxWaitTimeSeconds are kept as given and delete
// messages older than that many seconds, consumed or not, as
// retentionSeconds does: 0 means not set (Queen's clients send 0 for every
// option they leave alone), and of those set the smallest applies.
// retentionEnabled false keeps the windows but applies none until it is
// true again. A message that exhausts retryLimit is always dead-lettered,
// so deadLetterQueue and dlqAfterMaxRetries may only be true.
func (o QueueOptions) Normalize() (QueueOptions, error) {
	for _, f := range []struct {
		name string
		v    *bool
	}{{"deadLetterQueue", o.DeadLetterQueue}, {"dlqAfterMaxRetries", o.DLQAfterMaxRetries}} {
		if f.v != nil && !*f.v {
			return o, Invalid("options."+f.name, "cannot be false: a message that exhausts retryLimit is always kept "+
				"in the dead-letter table, never dropped (raise retryLimit to retry longer)")
		}
	}
	o.DeadLetterQueue, o.DLQAfterMaxRetries = nil, nil
	return o, nil
}

// ValidateJSONEscapes refuses JSON text (field names it in the error) with
// a \u escape that is NUL (\u0000: PostgreSQL refuses it in JSON text with
// an error that names no field) or a lone UTF-16 surrogate (a high one not
// followed by a low one, or a low one alone).
func ValidateJSONEscapes(field, text string) error { return checkEscapes(field, text, true) }

// ValidateSurrogates refuses JSON text with a lone UTF-16 surrogate escape
// only: checked on a whole request body before decoding, since Go's decoder
// would silently turn it into U+FFFD and a name would not round-trip. (A
// NUL in a name is refused after decoding, naming the field; in a payload
// by ValidatePayload.)
func ValidateSurrogates(field, text string) error { return checkEscapes(field, text, false) }

func checkEscapes(field, body string, nul bool) error {
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' || i+1 >= len(body) {
			continue
		}
		i++ // the escaped character: \\ and \" are consumed whole
		if body[i] != 'u' || i+4 >= len(body) {
			continue
		}
		r, ok := hex4(body[i+1 : i+5])
		if !ok {
			continue // malformed: the decoder reports it
		}
		at := i - 1
		i += 4
		switch {
		case r == 0 && nul:
			return Invalid(field, "\\u0000 (NUL) at byte %d: JSON strings here cannot hold NUL", at)
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
				if lo, ok := hex4(body[i+3 : i+7]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 6
					continue
				}
			}
			return Invalid(field, "lone UTF-16 surrogate escape at byte %d: not a character", at)
		case r >= 0xDC00 && r <= 0xDFFF:
			return Invalid(field, "lone UTF-16 surrogate escape at byte %d: not a character", at)
		}
	}
	return nil
}

func hex4(s string) (rune, bool) {
	var r rune
	for _, c := range []byte(s) {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
