package dispatch

// Metric names of the Embedded Metric Format line each dispatch run
// writes, in the namespace the reaper's metrics use (reaper.Namespace);
// the CDK stack's alarms and dashboard read them.
const (
	// MetricIteratorAge is the age, in milliseconds, of the oldest record a
	// run delivered when it was delivered: how far behind the push the
	// subscription is (Lambda's own IteratorAge for stream sources).
	MetricIteratorAge = "SubscriptionIteratorAge"
	// MetricSettled is the records a run's target settled (completed or
	// failed by its answer).
	MetricSettled = "SubscriptionSettled"
	// MetricDeliveryErrors is the deliveries of a run that failed as a
	// whole (a function error, timeout or throttle).
	MetricDeliveryErrors = "SubscriptionDeliveryErrors"
)
