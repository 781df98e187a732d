// Package queen is the domain of Queen Serverless: the model types, the
// delivery semantics, the validation rules and the Store interface that the
// Postgres store implements. It imports only the standard library.
//
// # The model
//
// Queen joins a Kafka-style log to a RabbitMQ-style work queue, and where
// the two would disagree the log wins.
//
// A queue is split into named partitions. Each pushed message gets a
// monotone integer offset inside its partition, starting at 0, without gaps;
// order is per partition, in commit order, and there is no global order. A
// push locks its partitions' rows (in one fixed order, so concurrent pushes
// never deadlock), checks dedup, allocates offsets, stamps created_at while
// the lock is held and writes one segment row per partition.
//
// A consumer group owns one cursor per partition: the last completed offset,
// "committed" (-1 = none). Groups read the same data independently; nothing
// is copied per group. Consumers that name no group use the queue-mode group
// [QueueModeGroup] and compete for messages.
//
// A pop claims messages from committed+1 forward under a lease: the span
// (committed, batch_end]. At most one leased batch exists per (partition,
// group); a second consumer of the same group gets another partition or
// nothing. An ack is an offset commit: completing offset N completes every
// earlier offset of that partition for that group. There is no per-message
// delivery state anywhere.
//
// Outcomes: completed moves the cursor; retry redelivers from that message
// without consuming an attempt; failed redelivers from it and consumes one
// attempt, and once its attempts exceed the queue's retryLimit the message
// is dead-lettered instead; dlq dead-letters now. When one call mixes
// outcomes the cursor moves to the highest resolved offset, clamped below
// the lowest stop signal, and at equal offset dlq beats failed beats retry.
//
// A consumer that dies is recovered by its lease expiring. An expiry counts
// as one failed attempt of the head message (committed+1), exactly once,
// and the head is then delivered alone, so a message that crashes its
// consumers is isolated and dead-lettered without harming its neighbours.
//
// Dead-lettering copies the message (payload snapshot included) into a real
// dead-letter table that survives retention of the log. A dead letter can be
// listed, deleted, or retried: re-pushed to its partition under a fresh
// transactionId.
//
// Deduplication is exact, per partition and windowed: a transactionId seen
// in the same partition within the queue's dedupWindowSeconds is rejected
// before an offset is allocated and reported as a duplicate.
//
// Delivery is at-least-once with leases and acks; autoAck commits inside the
// pop (at-most-once).
package queen
