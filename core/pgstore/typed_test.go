package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/core/queen"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// The statements the store sends with binary parameters and results are
// declared in Go (typedStmt): a wrong declaration would send bytes the
// server reads as another type, or decode a reply as the wrong one, or
// leave a column the routine returns unread. Each must be the routine the
// server has: its parameters in order, by name and type; its result
// columns, every one, by name and type (a uuid may be read as text).
func TestTypedStatements(t *testing.T) {
	t.Parallel()
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
	oid := func(typ string) uint32 {
		var o uint32
		if err := conn.QueryRow(ctx, "SELECT $1::regtype::oid", typ).Scan(&o); err != nil {
			t.Fatalf("type %s: %v", typ, err)
		}
		return o
	}
	readAs := map[[2]uint32]bool{ // the routine's type, the declared one
		{oid("uuid"), oid("text")}: true, {oid("uuid[]"), oid("text[]")}: true}
	for _, st := range stmts {
		rows, err := conn.Query(ctx, `
			SELECT a.name, a.mode::text, a.typ
			FROM pg_proc p
			CROSS JOIN LATERAL unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]), p.proargnames,
			                          coalesce(p.proargmodes, array_fill('i'::"char", ARRAY[p.pronargs])))
			                   WITH ORDINALITY AS a(typ, name, mode, ord)
			WHERE p.oid = to_regproc($1)
			ORDER BY a.ord`, st.Routine)
		if err != nil {
			t.Fatal(err)
		}
		type arg struct {
			name string
			typ  uint32
		}
		var in []arg
		out := map[string]uint32{}
		for rows.Next() {
			var a arg
			var mode string
			if err := rows.Scan(&a.name, &mode, &a.typ); err != nil {
				t.Fatal(err)
			}
			switch mode {
			case "i":
				in = append(in, a)
			case "o", "t":
				out[a.name] = a.typ
			default:
				t.Errorf("%s: parameter %s has mode %s", st.Routine, a.name, mode)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(in) == 0 && len(out) == 0 {
			t.Errorf("%s: no such routine (or more than one)", st.Routine)
			continue
		}
		if len(in) != len(st.Params) {
			t.Errorf("%s: %d parameters declared, the routine has %d", st.Routine, len(st.Params), len(in))
		}
		for i, p := range st.Params {
			if i < len(in) && (p.Name != in[i].name || oid(p.Type) != in[i].typ) {
				t.Errorf("%s: parameter %d declared %s %s, the routine's is %s (type %d)",
					st.Routine, i+1, p.Name, p.Type, in[i].name, in[i].typ)
			}
		}
		declared := map[string]bool{}
		for _, c := range st.Columns {
			declared[c.Name] = true
			typ, ok := out[c.Name]
			switch {
			case !ok:
				t.Errorf("%s: column %s declared, the routine returns none", st.Routine, c.Name)
			case typ != oid(c.Type) && !readAs[[2]uint32{typ, oid(c.Type)}]:
				t.Errorf("%s: column %s declared %s, the routine's type is %d", st.Routine, c.Name, c.Type, typ)
			}
		}
		for name := range out {
			if !declared[name] {
				t.Errorf("%s: returns column %s, which its declaration leaves unread", st.Routine, name)
			}
		}
		// The statement as sent: the server takes every declared type.
		sd, err := conn.Conn().PgConn().Prepare(ctx, "", st.SQL, nil)
		if err != nil {
			t.Fatalf("%s: %v\n%s", st.Routine, err, st.SQL)
		}
		for i, o := range st.ParamOIDs {
			if o != 0 && (i >= len(sd.ParamOIDs) || sd.ParamOIDs[i] != o) {
				t.Errorf("%s: parameter $%d sent as type %d, the server reads %v", st.Routine, i+1, o, sd.ParamOIDs)
			}
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
	t.Parallel()
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
