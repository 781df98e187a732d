package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queen-serverless/queen/core/queen"
)

// The statements of these operations (sql/*.sql).
var (
	sqlTransact = query("transact")
)

// Ack implements queen.Store.
func (s *Store) Ack(ctx context.Context, acks []queen.Ack) ([]queen.AckResult, error) {
	acks, err := queen.NormalizeAcks(acks)
	if err != nil {
		return nil, err
	}
	// The partitions and leases go as uuid[] (binary: 16 bytes each);
	// no lease or error is NULL (as ackArg leaves them out of the JSON
	// of transact).
	n := len(acks)
	groups, txids, statuses := make([]string, n), make([]string, n), make([]string, n)
	pids, leases, errs := make([]pgtype.UUID, n), make([]pgtype.UUID, n), make([]*string, n)
	for i, a := range acks {
		groups[i], txids[i], statuses[i] = a.ConsumerGroup, a.TransactionID, string(a.Status)
		if err := pids[i].Scan(a.PartitionID); err != nil { // NormalizeAcks checked it
			return nil, fmt.Errorf("ack: partitionId: %w", err)
		}
		if a.LeaseID != "" {
			if err := leases[i].Scan(a.LeaseID); err != nil {
				return nil, fmt.Errorf("ack: leaseId: %w", err)
			}
		}
		if a.Error != "" {
			errs[i] = &acks[i].Error
		}
	}
	var r ackArrays
	err = s.retry(ctx, "ack", func() (err error) {
		r, err = stmtAck.run(ctx, s, ackParams{PIDs: pids, Groups: groups, TxIDs: txids, Statuses: statuses,
			Leases: leases, Errors: errs, Now: s.now()})
		return err
	})
	if err != nil {
		return nil, err
	}
	return r.render(acks)
}

// ackParams and ackArrays are queen.ack_v3's parameters and result (see
// typedStmt): the items as arrays in input order, NULL for no lease or
// error; per item its outcome, in input order, as parallel arrays (only
// Errors and Codes when OK is false).
type ackParams struct {
	PIDs     []pgtype.UUID `pg:"p_pids,uuid[]"`
	Groups   []string      `pg:"p_grps,text[]"`
	TxIDs    []string      `pg:"p_txids,text[]"`
	Statuses []string      `pg:"p_statuses,text[]"`
	Leases   []pgtype.UUID `pg:"p_leases,uuid[]"`
	Errors   []*string     `pg:"p_errs,text[]"`
	Now      *time.Time    `pg:"p_now,timestamptz"`
}

type ackArrays struct {
	OK         bool     `pg:"ok,boolean"`
	Offsets    []*int64 `pg:"offs,bigint[]"`
	Queues     []string `pg:"queues,text[]"`
	Partitions []string `pg:"partitions,text[]"`
	Results    []string `pg:"results,text[]"`
	DLQs       []bool   `pg:"dlqs,boolean[]"`
	Committed  []*int64 `pg:"committed,bigint[]"`
	Released   []bool   `pg:"released,boolean[]"`
	Errors     []string `pg:"errors,text[]"`
	Codes      []string `pg:"codes,text[]"`
}

// render returns the results of acks as the reply gives them, and the
// error of a rejected call.
func (r *ackArrays) render(acks []queen.Ack) ([]queen.AckResult, error) {
	n := len(acks)
	lens := []int{len(r.Offsets), len(r.Queues), len(r.Partitions), len(r.Results), len(r.DLQs), len(r.Committed),
		len(r.Released)}
	if !r.OK {
		lens = []int{len(r.Errors), len(r.Codes)}
	}
	for _, l := range lens {
		if l != n {
			return nil, fmt.Errorf("ack: %d results for %d items", l, n)
		}
	}
	out := make([]queen.AckResult, n)
	for i, a := range acks {
		res := queen.AckResult{Index: i, TransactionID: a.TransactionID, PartitionID: a.PartitionID}
		if !r.OK {
			res.Error, res.Code = r.Errors[i], r.Codes[i]
		} else {
			res.ConsumerGroup, res.Queue, res.Partition, res.Offset = a.ConsumerGroup, r.Queues[i], r.Partitions[i], r.Offsets[i]
			res.Success, res.Result, res.DLQ, res.Committed, res.LeaseReleased = true, r.Results[i], r.DLQs[i], r.Committed[i], r.Released[i]
		}
		out[i] = res
	}
	if !r.OK {
		return out, ackError(out)
	}
	return out, nil
}

// ackError is the error of a rejected ack call: the first rejected item's.
func ackError(results []queen.AckResult) error {
	for _, r := range results {
		if r.Code == queen.CodeSkipped || r.Success {
			continue
		}
		kind := queen.ErrConflict
		if r.Code == queen.CodeNotFound {
			kind = queen.ErrNotFound
		}
		if len(results) == 1 {
			return queen.Errorf(kind, "%s", r.Error)
		}
		return queen.Errorf(kind, "acknowledgments[%d]: %s", r.Index, r.Error)
	}
	return queen.Errorf(queen.ErrConflict, "ack rejected")
}

// Transaction implements queen.Store.
func (s *Store) Transaction(ctx context.Context, req queen.TransactionRequest) (queen.TransactionResult, error) {
	if len(req.Acks) == 0 && len(req.Pushes) == 0 {
		return queen.TransactionResult{}, queen.Invalid("operations", "must contain at least one operation")
	}
	acks, pushes := []queen.Ack{}, []queen.PushItem{}
	var err error
	if len(req.Acks) > 0 {
		if acks, err = queen.NormalizeAcks(req.Acks); err != nil {
			return queen.TransactionResult{}, err
		}
	}
	if len(req.Pushes) > 0 {
		if pushes, err = queen.NormalizePush(req.Pushes); err != nil {
			return queen.TransactionResult{}, err
		}
	}
	leases := []string{}
	for i, l := range req.RequiredLeases {
		if !queen.IsUUID(l) {
			return queen.TransactionResult{}, queen.Errorf(queen.ErrConflict, "requiredLeases[%d]: invalid or expired lease", i)
		}
		leases = append(leases, l)
	}
	ackArg, _ := jsonArg(ackArgs(acks))
	var out ackReply
	err = s.sealedCall(ctx, pushes, func(args []pushArg) error {
		pushArg, _ := jsonArg(args)
		return s.call(ctx, "transaction", sqlTransact, &out, ackArg, pushArg, leases, s.now())
	})
	if err != nil {
		return queen.TransactionResult{}, err
	}
	acks = nil
	results := ackResults(out.Ack)
	if !out.OK {
		if out.Error != "" {
			return queen.TransactionResult{Acks: results}, queen.Errorf(queen.ErrConflict, "%s", out.Error)
		}
		return queen.TransactionResult{Acks: results}, ackError(results)
	}
	if results == nil {
		results = []queen.AckResult{}
	}
	pushed := out.Push
	if pushed == nil {
		pushed = []queen.PushResult{}
	}
	return queen.TransactionResult{Acks: results, Pushes: pushed}, nil
}
