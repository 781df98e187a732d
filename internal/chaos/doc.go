// Package chaos is the chaos harness behind `make chaos` (`queen chaos`):
// the guarantees of docs/semantics.md §5 under faults.
//
// Run starts a throwaway durable PostgreSQL cluster (internal/pgcluster),
// PgBouncer in transaction mode in front of it (the local stand-in for RDS
// Proxy) and `queen serve` on PgBouncer. Producers and consumers of several
// groups talk to the server over HTTP as clients do — pushes resent with
// the same transactionIds when no answer or a 5xx came, mixed ack outcomes,
// now and then an abandoned lease — while a schedule of faults runs:
//
//   - kill-postmaster: SIGKILL to the postmaster; once it and its children
//     are gone, and after some time down, the server is started again on
//     the same data directory (crash recovery);
//   - restart-pgbouncer: SIGKILL to PgBouncer, some time down, started again
//     on the same port;
//   - stall-database: SIGSTOP to the postmaster and every process it
//     started, SIGCONT later.
//
// After each fault the schedule waits for the first successful request
// sent after the fault ended (the recovery time). When the faults are over
// the producers stop, the groups drain, and the final state — the log of
// every partition, the cursors' lag, the DLQ — is read through the API and
// held against the history of what the clients were told (check.go): no
// acknowledged push lost, no offset gap, first deliveries in order, no
// successful ack undone, every ack result the reference model's
// (internal/refmodel), no 5xx but 503, recovery after every fault. The
// engine's code is never the oracle: the harness imports nothing of it.
//
// The harness needs Linux (it reads /proc, and it becomes a child
// subreaper so that it can reap the postmaster it killed) and pgbouncer
// (ErrNoPgBouncer).
package chaos
