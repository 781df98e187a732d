package chaos

import (
	"context"
	"fmt"

	"github.com/queen-serverless/queen/internal/loadcheck"
)

// finalState is what the server shows after the drain, read through the
// API as any client reads it.
type finalState struct {
	parts  map[string]*finalPartition // by id
	lag    map[string]int64           // by group
	dlq    map[gaddr]loadcheck.DeadLetter
	dlqDup int // dead letters listed twice for the same group and message
}

type finalPartition struct {
	id, name string
	last     int64
	log      map[int64]loadcheck.Message
}

// read fetches one JSON reply, retrying a few times: the faults are over,
// but a pooled connection may still be a dead one.
func (c *client) read(ctx context.Context, path string, v any) error {
	var r loadcheck.Reply
	for attempt := 1; attempt <= 5; attempt++ {
		r = c.do(ctx, "read", "GET", path, nil)
		if r.Status == 200 {
			return r.Decode(v)
		}
		if r.Status != 0 && r.Status < 500 {
			break
		}
	}
	return fmt.Errorf("GET %s: %s", path, r)
}

// queueState reads the queue's partitions and groups.
func (c *client) queueState(ctx context.Context) (loadcheck.Queue, error) {
	return loadcheck.ReadQueue(ctx, c.read, queueName)
}

// readFinalState reads the partitions, every logged message (browse) and
// every dead letter.
func readFinalState(ctx context.Context, c *client) (*finalState, error) {
	q, err := c.queueState(ctx)
	if err != nil {
		return nil, err
	}
	st := &finalState{parts: map[string]*finalPartition{}, lag: map[string]int64{}, dlq: map[gaddr]loadcheck.DeadLetter{}}
	for _, g := range q.Groups {
		st.lag[g.Group] = g.Lag
	}
	for _, p := range q.Partitions {
		fp := &finalPartition{id: p.ID, name: p.Name, last: p.LastOffset, log: map[int64]loadcheck.Message{}}
		st.parts[p.ID] = fp
		if err := loadcheck.ReadLog(ctx, c.read, queueName, p.Name, 0, p.LastOffset,
			func(m loadcheck.Message) { fp.log[m.Offset] = m }); err != nil {
			return nil, err
		}
	}
	err = loadcheck.ReadDLQ(ctx, c.read, queueName, func(m loadcheck.DeadLetter) {
		k := gaddr{m.ConsumerGroup, addr{m.PartitionID, m.Offset}}
		if _, dup := st.dlq[k]; dup {
			st.dlqDup++
		}
		st.dlq[k] = m
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}
