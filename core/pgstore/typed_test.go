package pgstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// The statements the store sends with binary parameters and results
// declare their types in Go; a wrong one would send bytes the server reads
// as another type, or decode a reply as the wrong one. Each declaration
// must be what the server itself gives the statement.
func TestTypedStatements(t *testing.T) {
	env := pgstoretest.New(t)
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
