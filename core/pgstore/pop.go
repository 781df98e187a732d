package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// The statements of these operations (sql/*.sql).
var (
	sqlExtendLease = query("extend_lease")
	sqlDeliverable = query("deliverable")
)

type popArg struct {
	Queue      string     `json:"queue"`
	Partition  string     `json:"partition,omitempty"`
	Group      string     `json:"group"`
	Batch      int        `json:"batch"`
	Partitions int        `json:"partitions"`
	AutoAck    bool       `json:"autoAck"`
	Mode       string     `json:"mode"`
	From       *time.Time `json:"from,omitempty"`
	Worker     string     `json:"worker,omitempty"`
	Keys       []string   `json:"keys,omitempty"` // references of the keys the store holds
	// Target makes the pop a subscription's delivery (queen.PopRequest.Target).
	Target *popTarget `json:"target,omitempty"`
}

type popTarget struct {
	URL      string `json:"url,omitempty"`
	Function string `json:"function,omitempty"`
}

// popParams and popRow are queen.pop_v2's parameters and result (see
// typedStmt): the request's JSON (popArg) and the time; the lease and,
// per message in delivery order, its fields as parallel arrays.
type popParams struct {
	Request string     `pg:"p_req,json"`
	Now     *time.Time `pg:"p_now,timestamptz"`
}

type popRow struct {
	LeaseID        *string     `pg:"lease_id,text"`
	LeaseExpiresAt *time.Time  `pg:"lease_expires_at,timestamptz"`
	PIDs           []string    `pg:"pids,text[]"`
	Partitions     []string    `pg:"pnames,text[]"`
	Offsets        []int64     `pg:"offs,bigint[]"`
	TxIDs          []string    `pg:"txids,text[]"`
	Payloads       []string    `pg:"payloads,text[]"`
	KeyIDs         []*string   `pg:"key_ids,text[]"`
	TraceIDs       []*string   `pg:"trace_ids,text[]"`
	ProducerSubs   []*string   `pg:"producer_subs,text[]"`
	CreatedAts     []time.Time `pg:"created_ats,timestamptz[]"`
	Retries        []int32     `pg:"retries,integer[]"`
}

// messages renders the reply's messages for openMessages: a payload is
// its stored text (compact JSON), a sealed one a JSON string of its base64
// text.
func (r *popRow) messages(queue string) ([]sealedMessage, error) {
	n := len(r.Offsets)
	for _, l := range []int{len(r.PIDs), len(r.Partitions), len(r.TxIDs), len(r.Payloads), len(r.KeyIDs),
		len(r.TraceIDs), len(r.ProducerSubs), len(r.CreatedAts), len(r.Retries)} {
		if l != n {
			return nil, fmt.Errorf("pop: arrays of %d and %d messages in one reply", n, l)
		}
	}
	out := make([]sealedMessage, n)
	for i := range out {
		m := queen.Message{ID: MessageID(r.PIDs[i], r.Offsets[i]), TransactionID: r.TxIDs[i], PartitionID: r.PIDs[i],
			Partition: r.Partitions[i], Queue: queue, Offset: r.Offsets[i], Data: json.RawMessage(r.Payloads[i]),
			TraceID: r.TraceIDs[i], ProducerSub: r.ProducerSubs[i], CreatedAt: r.CreatedAts[i].UTC(),
			RetryCount: int(r.Retries[i])}
		var key string
		if r.KeyIDs[i] != nil {
			key = *r.KeyIDs[i]
			b, err := json.Marshal(r.Payloads[i])
			if err != nil {
				return nil, err
			}
			m.Data = b
		}
		out[i] = sealedMessage{Message: m, KeyID: key}
	}
	return out, nil
}

// Pop implements queen.Store.
func (s *Store) Pop(ctx context.Context, req queen.PopRequest) (queen.PopResult, error) {
	req, err := queen.NormalizePop(req)
	if err != nil {
		return queen.PopResult{}, err
	}
	now := time.Now()
	if s.cfg.Clock != nil {
		now = s.cfg.Clock()
	}
	if req.Mode == queen.SubscribeFrom && req.From.After(now.Add(time.Minute)) {
		return queen.PopResult{}, queen.Invalid("subscriptionFrom", "must not be in the future")
	}
	a := popArg{Queue: req.Queue, Partition: req.Partition, Group: req.ConsumerGroup, Batch: req.Batch,
		Partitions: req.Partitions, AutoAck: req.AutoAck, Mode: "all", Worker: req.Worker}
	if t := req.Target; t != nil {
		a.Target = &popTarget{URL: t.URL, Function: t.Function}
	}
	switch req.Mode {
	case queen.SubscribeNew:
		a.Mode = "new"
	case queen.SubscribeFrom:
		a.Mode = "from"
		a.From = &req.From
	}
	var reply popRow
	for {
		a.Keys = s.keyRefs()
		arg, _ := jsonArg(a)
		err = s.retry(ctx, "pop", func() (err error) {
			reply, err = stmtPop.run(ctx, s, popParams{Request: arg, Now: s.now()})
			return err
		})
		var missing *keyMissing
		if !errors.As(err, &missing) || s.loadedRing() != nil {
			break
		}
		// Sealed messages and no key ring loaded yet: load it, pop again.
		if _, lerr := s.keyRing(ctx); lerr != nil {
			return queen.PopResult{}, fmt.Errorf("%s: %w", missing.message, lerr)
		}
	}
	if err != nil {
		return queen.PopResult{}, err
	}
	sealed, err := reply.messages(req.Queue)
	if err != nil {
		return queen.PopResult{}, err
	}
	msgs, err := s.openMessages(ctx, sealed)
	if err != nil {
		return queen.PopResult{}, err
	}
	res := queen.PopResult{ConsumerGroup: req.ConsumerGroup, Messages: msgs}
	if reply.LeaseID != nil {
		at := reply.LeaseExpiresAt.UTC()
		res.LeaseID, res.LeaseExpiresAt = *reply.LeaseID, &at
	}
	return res, nil
}

// Deliverable implements queen.Prober: one statement for every pair.
func (s *Store) Deliverable(ctx context.Context, keys []queen.WaitKey) ([]bool, error) {
	out := make([]bool, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	queues, groups := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		queues[i], groups[i] = k.Queue, k.Group
		if groups[i] == "" {
			groups[i] = queen.QueueModeGroup
		}
	}
	var idx []int32
	if err := s.db.QueryRow(ctx, sqlDeliverable, queues, groups, s.now()).Scan(&idx); err != nil {
		return nil, interpretError("probe", err)
	}
	for _, i := range idx {
		out[i] = true
	}
	return out, nil
}

// ExtendLease implements queen.Store.
func (s *Store) ExtendLease(ctx context.Context, leaseID string, seconds int) (time.Time, error) {
	if !queen.IsUUID(leaseID) {
		return time.Time{}, queen.Errorf(queen.ErrNotFound, "lease %s not found", leaseID)
	}
	if seconds < 0 || seconds > queen.MaxLeaseSeconds {
		return time.Time{}, queen.Invalid("seconds", "must be between 1 and %d (0: the queue's leaseTime)", queen.MaxLeaseSeconds)
	}
	var out struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := s.call(ctx, "extend lease", sqlExtendLease, &out, leaseID, seconds, s.now()); err != nil {
		return time.Time{}, err
	}
	return out.ExpiresAt, nil
}
