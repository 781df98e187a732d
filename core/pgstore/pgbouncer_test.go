package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgbouncer"
	"github.com/queen-serverless/queen/internal/pgtest"
)

// startPgBouncer runs PgBouncer in transaction mode — the local stand-in for
// RDS Proxy — in front of the database at dbURL, with two server connections
// so client connections must share them. It returns the URL to connect to.
func startPgBouncer(t *testing.T, dbURL string) string {
	t.Helper()
	if _, err := pgbouncer.Find(); err != nil {
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", "queen-pgbouncer-") // not t.TempDir: its parents are closed to the postgres user
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := pgbouncer.New(dir, dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Kill() })
	return b.URL()
}

// The store runs unchanged behind a transaction-pooling proxy: migrations,
// every operation, and concurrent clients multiplexed over two server
// connections.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	direct, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	if _, err := direct.Exec(ctx, "DROP SCHEMA queen CASCADE"); err != nil {
		t.Fatal(err)
	}
	url := startPgBouncer(t, dbURL)
	if _, err := pgstore.MigrateURL(ctx, url); err != nil {
		t.Fatalf("migrate through pgbouncer: %v", err)
	}
	cfg, err := pgstore.PoolConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := pgstore.New(pool, pgstore.Config{})

	// Every kind of operation once.
	if _, err := s.Configure(ctx, queen.ConfigureRequest{Queue: "bq", Options: queen.QueueOptions{RetryLimit: ptr(0)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Push(ctx, []queen.PushItem{{Queue: "bq", Partition: "p", TransactionID: "a", Payload: payload(1)},
		{Queue: "bq", Partition: "p", TransactionID: "b", Payload: payload(2)}}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Pop(ctx, queen.PopRequest{Queue: "bq", ConsumerGroup: "g", Batch: 2})
	if err != nil || len(r.Messages) != 2 {
		t.Fatalf("pop: %v %v", r, err)
	}
	if _, err := s.ExtendLease(ctx, r.LeaseID, 60); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ack(ctx, []queen.Ack{{PartitionID: r.Messages[0].PartitionID, TransactionID: "a", Status: queen.AckDLQ, ConsumerGroup: "g", LeaseID: r.LeaseID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RetryDeadLetter(ctx, r.Messages[0].PartitionID, "a", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transaction(ctx, queen.TransactionRequest{
		Acks:   []queen.Ack{{PartitionID: r.Messages[0].PartitionID, TransactionID: "b", Status: queen.AckCompleted, ConsumerGroup: "g", LeaseID: r.LeaseID}},
		Pushes: []queen.PushItem{{Queue: "out", Payload: payload("x")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seek(ctx, "g", "bq", queen.SeekTarget{ToBeginning: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reap(ctx, queen.ReapRequest{Batch: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Queue(ctx, "bq", queen.PartitionPage{}); err != nil {
		t.Fatal(err)
	}

	// Concurrent producers and consumers sharing two server connections.
	const producers, per = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := s.Push(ctx, []queen.PushItem{{Queue: "load", Partition: fmt.Sprintf("p%d", i%5), Payload: payload(i)}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var consumed sync.Map
	var count int64
	var mu sync.Mutex
	stop := time.Now().Add(30 * time.Second)
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				mu.Lock()
				done := count >= producers*per
				mu.Unlock()
				if done {
					return
				}
				res, err := s.Pop(ctx, queen.PopRequest{Queue: "load", Batch: 7})
				if err != nil {
					errs <- err
					return
				}
				if len(res.Messages) == 0 {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				last := res.Messages[len(res.Messages)-1]
				if _, err := s.Ack(ctx, []queen.Ack{{PartitionID: last.PartitionID, TransactionID: last.TransactionID, Status: queen.AckCompleted, LeaseID: res.LeaseID}}); err != nil {
					errs <- err
					return
				}
				for _, m := range res.Messages {
					if _, dup := consumed.LoadOrStore(m.ID, true); dup {
						errs <- errors.New("message " + m.ID + " delivered twice without a failure")
						return
					}
				}
				mu.Lock()
				count += int64(len(res.Messages))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if count != producers*per {
		t.Fatalf("consumed %d of %d messages through pgbouncer", count, producers*per)
	}
}
