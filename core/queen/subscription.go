package queen

import (
	"context"
	"net/url"
	"time"
)

// Subscription delivers a (queue, consumer group) to a target by itself:
// ordered batches of one partition, acked by the target's answer
// (docs/subscriptions.md).
type Subscription struct {
	Queue          string             `json:"queue"`
	ConsumerGroup  string             `json:"consumerGroup"`
	Target         SubscriptionTarget `json:"target"`
	BatchSize      int                `json:"batchSize"`
	MaxBatchBytes  int                `json:"maxBatchBytes"`
	BatchWindowMs  int                `json:"batchWindowMs"`
	MaxConcurrency int                `json:"maxConcurrency"`
	Enabled        bool               `json:"enabled"`
	CreatedAt      time.Time          `json:"createdAt"`
	UpdatedAt      time.Time          `json:"updatedAt"`
	// Delivered counts the messages the target completed or failed.
	Delivered      int64      `json:"delivered"`
	LastDeliveryAt *time.Time `json:"lastDeliveryAt"`
	// LastError is why the last delivery that failed as a whole failed;
	// LastErrorAt says when (compare LastDeliveryAt).
	LastError   *string    `json:"lastError"`
	LastErrorAt *time.Time `json:"lastErrorAt"`
}

// SubscriptionTarget is where a subscription delivers: exactly one of a
// Lambda function (name, ARN or alias ARN) and an HTTP endpoint.
type SubscriptionTarget struct {
	Function string `json:"function,omitempty"`
	URL      string `json:"url,omitempty"`
}

// The options of a subscription: defaults and limits (docs/subscriptions.md §5).
const (
	DefaultSubscriptionBatch       = 10
	MaxSubscriptionBatch           = 10_000
	MaxSubscriptionBatchBytes      = 6 << 20 // Lambda's synchronous payload limit
	MinSubscriptionBatchBytes      = 1 << 10
	MaxSubscriptionBatchWindowMs   = 300_000
	DefaultSubscriptionConcurrency = 10
	MaxSubscriptionConcurrency     = 1_000
	// MaxFunctionNameBytes bounds a target function's name or ARN (Lambda's
	// FunctionName parameter takes at most 170 characters).
	MaxFunctionNameBytes = 170
)

// SubscriptionRequest creates a subscription or replaces one's definition:
// a nil option takes its default.
type SubscriptionRequest struct {
	Queue          string             `json:"queue"`
	ConsumerGroup  string             `json:"consumerGroup"`
	Target         SubscriptionTarget `json:"target"`
	BatchSize      *int               `json:"batchSize"`
	MaxBatchBytes  *int               `json:"maxBatchBytes"`
	BatchWindowMs  *int               `json:"batchWindowMs"`
	MaxConcurrency *int               `json:"maxConcurrency"`
	Enabled        *bool              `json:"enabled"`
}

// Resolve validates the request and returns its definition with the
// defaults applied; the times and counters are left to the store.
func (r SubscriptionRequest) Resolve() (Subscription, error) {
	if err := ValidateSubscriptionKey(r.Queue, r.ConsumerGroup); err != nil {
		return Subscription{}, err
	}
	if err := r.Target.Validate(); err != nil {
		return Subscription{}, err
	}
	s := Subscription{Queue: r.Queue, ConsumerGroup: r.ConsumerGroup, Target: r.Target, Enabled: true,
		BatchSize: DefaultSubscriptionBatch, MaxBatchBytes: MaxSubscriptionBatchBytes,
		MaxConcurrency: DefaultSubscriptionConcurrency}
	for _, o := range []struct {
		field    string
		in       *int
		out      *int
		min, max int
	}{
		{"batchSize", r.BatchSize, &s.BatchSize, 1, MaxSubscriptionBatch},
		{"maxBatchBytes", r.MaxBatchBytes, &s.MaxBatchBytes, MinSubscriptionBatchBytes, MaxSubscriptionBatchBytes},
		{"batchWindowMs", r.BatchWindowMs, &s.BatchWindowMs, 0, MaxSubscriptionBatchWindowMs},
		{"maxConcurrency", r.MaxConcurrency, &s.MaxConcurrency, 1, MaxSubscriptionConcurrency},
	} {
		if o.in == nil {
			continue
		}
		if *o.in < o.min || *o.in > o.max {
			return Subscription{}, Invalid(o.field, "must be between %d and %d", o.min, o.max)
		}
		*o.out = *o.in
	}
	if r.Enabled != nil {
		s.Enabled = *r.Enabled
	}
	return s, nil
}

// ValidateSubscriptionKey checks the queue and consumer group that name a
// subscription (both appear in its URL path).
func ValidateSubscriptionKey(queue, group string) error {
	if err := ValidateQueueName("queue", queue); err != nil {
		return err
	}
	return ValidateGroup("consumerGroup", group)
}

// Validate checks that the target names exactly one function or one
// absolute http(s) URL.
func (t SubscriptionTarget) Validate() error {
	switch {
	case t.Function == "" && t.URL == "":
		return Invalid("target", `needs "function" or "url"`)
	case t.Function != "" && t.URL != "":
		return Invalid("target", `takes one of "function" and "url", not both`)
	case t.Function != "":
		if len(t.Function) > MaxFunctionNameBytes {
			return Invalid("target.function", "must be at most %d characters", MaxFunctionNameBytes)
		}
		return ValidateText("target.function", t.Function)
	}
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Invalid("target.url", "must be an absolute http or https URL")
	}
	return nil
}

// TargetChecker checks a subscription's target when it is created or
// changed, against what the deployment may call (egress.Fence); its
// errors are FieldErrors.
type TargetChecker interface {
	CheckTarget(ctx context.Context, t SubscriptionTarget) error
}

// Delivery is what one delivery to a subscription's target did, for its
// counters: how many messages it settled (completed or failed), and why it
// failed as a whole ("" when the target answered).
type Delivery struct {
	Queue         string
	ConsumerGroup string
	Settled       int
	Error         string
}

// The wake-up handshake of dispatcher runs (docs/subscriptions.md §8): a
// run renews its subscription's wake every WakeRenew while it delivers,
// and a wake not renewed for WakeStale counts as lost (its run died), so
// the next push or reaper pass starts another.
const (
	WakeRenew = 15 * time.Second
	WakeStale = time.Minute
)

// Wakes is what a Store offers dispatcher runs started on demand (the
// dispatch function on AWS): at most one run per subscription holds its
// wake, and a push committed after a run's last look finds the wake clear
// and starts the next run. Each method is one statement.
type Wakes interface {
	// MarkWake marks woken the enabled subscriptions of queues that hold no
	// live wake, and returns them: the caller starts a run for each.
	MarkWake(ctx context.Context, queues []string) ([]WaitKey, error)
	// ClaimWake marks one subscription woken unless a live wake is there
	// (or it is gone or paused); true: the caller's run now holds it.
	ClaimWake(ctx context.Context, key WaitKey) (bool, error)
	// RenewWake renews a live run's wake; false: it is no longer held.
	RenewWake(ctx context.Context, key WaitKey) (bool, error)
	// ClearWake ends a run's wake: it has caught up. The run then looks at
	// the backlog once more.
	ClearWake(ctx context.Context, key WaitKey) error
	// DueSubscriptions marks woken and returns the enabled subscriptions
	// without a live wake that a pop could serve now: the reaper's safety
	// net for lost wakes and for messages whose delay or retryDelay ran out.
	DueSubscriptions(ctx context.Context) ([]WaitKey, error)
}
