package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// TypedStatement is a typed statement as the external tests see it.
type TypedStatement struct {
	SQL             string
	Params, Results []uint32
}

// TypedStatements lists the statements sent with their types written in
// typed.go, by name.
func TypedStatements() map[string]TypedStatement {
	out := map[string]TypedStatement{}
	for name, st := range typedStmts {
		t := TypedStatement{SQL: st.sql, Params: st.sd.ParamOIDs}
		for _, f := range st.sd.Fields {
			t.Results = append(t.Results, f.DataTypeOID)
		}
		out[name] = t
	}
	return out
}

// MigrateWithExtra is MigrateWith with extra migrations after this
// release's: the migrations a test writes to exercise the runner.
func MigrateWithExtra(ctx context.Context, conn *pgx.Conn, extra []Migration, opt MigrateOptions) (MigrateResult, error) {
	return migrate(ctx, conn, append(Migrations(), extra...), routinesSQL, opt.withDefaults())
}
