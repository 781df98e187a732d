// Package refmodel is the executable reference model of Queen's semantics:
// the contract of docs/semantics.md (its model, invariants and the rules of
// §3; a § here and in this package is a section of that document),
// written as plain Go over in-memory state, with no database and no import
// of the engine. It is the oracle the engine's tests compare against, and
// the most precise statement of what the engine must do.
//
// State, as the documents name it:
//
//   - a queue is split into named partitions; each partition is a log of
//     messages with offsets 0, 1, 2, … without gaps, stored as one segment per
//     push per partition (§3.1);
//   - dedup keys per partition, windowed (invariant 4, §2.4 and §3.2);
//   - subscriptions per (queue, group), remembered on the group's first pop
//     (§3.3);
//   - one cursor per (partition, group): committed, the highest offset ever
//     handed out (delivered), the head's failed attempts, the head-alone flag
//     and at most one lease (invariant 2, §2.2 and §3.3–3.5);
//   - the dead-letter table (§3.6).
//
// There is no per-message delivery state here either: what the model knows
// about consumption is the cursor.
//
// Time is a parameter of every operation (the caller's controllable clock).
// Every operation is atomic: it either applies completely or, when it
// returns an error, changes nothing.
//
// Two choices the documents leave to the engine are parameters rather than
// guesses: which partitions a wildcard pop serves (PopRequest.Chosen — the
// model checks that each was deliverable and that nothing deliverable was
// left out), and the ids the engine generates (lease ids, transactionIds of
// items pushed without one, the fresh id of a dead-letter retry).
//
// One more freedom: an expired lease is charged (§3.5.8: one failed
// attempt of the head, exactly once) "whether noticed by the reaper or by the
// next pop", and a wildcard pop may notice it on a partition it then does not
// serve. Touch applies exactly that transition, so a test can follow an
// engine that noticed an expiry before the model did.
package refmodel
