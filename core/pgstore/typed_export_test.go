package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// TypedColumn is a typed statement's parameter or result column: its
// name and SQL type.
type TypedColumn struct{ Name, Type string }

// TypedStatement is a typed statement as the external tests see it.
type TypedStatement struct {
	Routine, SQL    string
	Params, Columns []TypedColumn
	ParamOIDs       []uint32
}

// TypedStatements lists the typed statements, as declared.
func TypedStatements() []TypedStatement {
	var out []TypedStatement
	for _, sh := range typedShapes() {
		t := TypedStatement{Routine: sh.routine, SQL: sh.sql}
		for _, c := range sh.params {
			t.Params = append(t.Params, TypedColumn{c.name, c.typ})
			t.ParamOIDs = append(t.ParamOIDs, typeOID(c.typ))
		}
		for _, c := range sh.columns {
			t.Columns = append(t.Columns, TypedColumn{c.name, c.typ})
		}
		out = append(out, t)
	}
	return out
}

// MigrateWithExtra is MigrateWith with extra migrations after this
// release's: the migrations a test writes to exercise the runner.
func MigrateWithExtra(ctx context.Context, conn *pgx.Conn, extra []Migration, opt MigrateOptions) (MigrateResult, error) {
	return migrate(ctx, conn, append(Migrations(), extra...), routinesSQL, opt.withDefaults())
}
