// Package loadcheck holds what the two harnesses that drive `queen serve`
// from outside — internal/chaos (docs/semantics.md §5 under faults) and internal/soak
// (hours of steady load) — share: they talk to the server over HTTP as any
// client does and hold what they were told against docs/semantics.md.
//
//   - Client sends one request of the v1 API and returns its Reply; each
//     harness wraps it to record the call its own way (chaos keeps every
//     call for its recovery times, soak keeps latencies by operation).
//   - The wire types (PushItem, Pop, AckResult, …) are the harnesses' own
//     spelling of the v1 wire format (README: Using the API): they import
//     nothing of the engine.
//   - Violations counts the broken promises a check finds, by kind.
//   - ModelAck and CompareAcks hold one partition's pop and ack against the
//     reference model (internal/refmodel, docs/semantics.md §3.5).
package loadcheck
