package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// The statements the store sends with binary parameters and results
// declare their types in Go; a wrong one would send bytes the server reads
// as another type, or decode a reply as the wrong one. Each declaration
// must be what the server itself gives the statement.
func TestTypedStatements(t *testing.T) {
	env := pgstoretest.NewClocked(t)
	ctx := context.Background()
	conn, err := env.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	stmts := pgstore.TypedStatements()
	if len(stmts) == 0 {
		t.Fatal("no typed statements")
	}
	for name, st := range stmts {
		sd, err := conn.Conn().PgConn().Prepare(ctx, "", st.SQL, nil) // the unnamed statement, types inferred
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(sd.ParamOIDs) != len(st.Params) {
			t.Errorf("%s: %d parameters declared, the server has %d", name, len(st.Params), len(sd.ParamOIDs))
		} else {
			for i, oid := range st.Params {
				if oid != 0 && oid != sd.ParamOIDs[i] {
					t.Errorf("%s: parameter $%d declared type %d, the server's is %d", name, i+1, oid, sd.ParamOIDs[i])
				}
			}
		}
		got := make([]uint32, len(sd.Fields))
		for i, f := range sd.Fields {
			got[i] = f.DataTypeOID
		}
		if !slices.Equal(got, st.Results) {
			t.Errorf("%s: result types declared %v, the server's are %v", name, st.Results, got)
		}
	}
}

// queryRowOnly is a DB that is not a pgx pool, connection or transaction.
type queryRowOnly struct{ pool *pgxpool.Pool }

func (q queryRowOnly) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return q.pool.QueryRow(ctx, sql, args...)
}

// A Store over some other DB sends the same statements as text through its
// QueryRow: pushes to one and to several partitions, a pop and an ack work.
func TestStoreOverAnotherDB(t *testing.T) {
	env := pgstoretest.NewClocked(t)
	ctx := context.Background()
	s := pgstore.New(queryRowOnly{env.Pool}, pgstore.Config{Clock: env.Clock.Now})
	item := func(part, txid string, n int) queen.PushItem {
		return queen.PushItem{Queue: "other-db", Partition: part, TransactionID: txid,
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
	}
	res, err := s.Push(ctx, []queen.PushItem{item("a", "t1", 1), item("a", "", 2)})
	if err != nil || len(res) != 2 || res[0].Offset != 0 || res[1].Offset != 1 {
		t.Fatalf("push to one partition: %+v, %v", res, err)
	}
	res, err = s.Push(ctx, []queen.PushItem{item("b", "", 3), item("a", "t1", 4)})
	if err != nil || len(res) != 2 || res[0].Status != queen.StatusQueued || res[1].Status != queen.StatusDuplicate {
		t.Fatalf("push to two partitions: %+v, %v", res, err)
	}
	pop, err := s.Pop(ctx, queen.PopRequest{Queue: "other-db", Partition: "a", Batch: 10})
	if err != nil || len(pop.Messages) != 2 || string(pop.Messages[1].Data) != `{"n":2}` {
		t.Fatalf("pop: %+v, %v", pop, err)
	}
	acks, err := s.Ack(ctx, []queen.Ack{{PartitionID: pop.Messages[1].PartitionID,
		TransactionID: pop.Messages[1].TransactionID, Status: queen.AckCompleted, LeaseID: pop.LeaseID}})
	if err != nil || len(acks) != 1 || !acks[0].Success || acks[0].Offset == nil || *acks[0].Offset != 1 {
		t.Fatalf("ack: %+v, %v", acks, err)
	}
}
