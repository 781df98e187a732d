package bench

import (
	"context"
	"fmt"

	"github.com/queen-serverless/queen/core/queen"
)

// ---- consume

func (r *runner) consume(ctx context.Context, name string, batch int) error {
	for _, via := range []string{"core", "http"} {
		queue := fmt.Sprintf("bench-%s-%s", name, via)
		backlog := r.cfg.Backlog
		fmt.Fprintf(r.cfg.Out, "  filling a backlog of %d messages…", backlog)
		if err := r.fill(ctx, queue, backlog, r.cfg.Partitions); err != nil {
			return err
		}
		fmt.Fprintf(r.cfg.Out, "\r%60s\r", "")
		ops, rows, secs, lat, err := r.measure(ctx, r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
			n, err := r.popAck(ctx, via, queen.PopRequest{Queue: queue, Batch: batch})
			return n, err == nil && n == 0, err
		})
		if err != nil {
			return err
		}
		r.add(result(name, via, fmt.Sprintf("pop batch %d + ack batch, queue mode", batch), ops, rows, secs, lat))
	}
	return nil
}

// popAck pops one batch and acks it whole; it returns the messages handled.
func (r *runner) popAck(ctx context.Context, via string, req queen.PopRequest) (int, error) {
	if via == "http" {
		return r.http.popAck(ctx, req)
	}
	res, err := r.store.Pop(ctx, req)
	if err != nil || len(res.Messages) == 0 {
		return 0, err
	}
	acks := make([]queen.Ack, len(res.Messages))
	for i, m := range res.Messages {
		acks[i] = queen.Ack{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: queen.AckCompleted,
			ConsumerGroup: req.ConsumerGroup, LeaseID: res.LeaseID}
	}
	_, err = r.store.Ack(ctx, acks)
	return len(res.Messages), err
}

func (r *runner) fanout(ctx context.Context) error {
	const groups = 5
	backlog := r.cfg.Backlog / 4
	queue := "bench-F5"
	fmt.Fprintf(r.cfg.Out, "  filling a backlog of %d messages…", backlog)
	if err := r.fill(ctx, queue, backlog, r.cfg.Partitions); err != nil {
		return err
	}
	fmt.Fprintf(r.cfg.Out, "\r%60s\r", "")
	ops, rows, secs, lat, err := r.measure(ctx, groups*r.cfg.Clients, func(ctx context.Context, c int) (int, bool, error) {
		group := fmt.Sprintf("group-%d", c%groups)
		n, err := r.popAck(ctx, "core", queen.PopRequest{Queue: queue, ConsumerGroup: group, Batch: 100})
		return n, err == nil && n == 0, err
	})
	if err != nil {
		return err
	}
	res := result("F5", "core", fmt.Sprintf("%d groups × %d clients, each group reads all", groups, r.cfg.Clients), ops, rows, secs, lat)
	res.Unit = "deliveries/s"
	r.add(res)
	return nil
}
