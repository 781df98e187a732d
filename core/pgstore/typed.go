package pgstore

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A typed statement calls one routine with binary parameters and reads its
// one row of binary results (pgx's own codecs), in the one round trip
// QueryExecModeExec takes: Parse of the unnamed statement with the types,
// Bind, Execute, Sync. Nothing is prepared or kept on the connection, so
// it is as safe behind RDS Proxy and PgBouncer. QueryExecModeExec itself
// sends and reads text, and the arrays of a push, a pop and an ack are most
// of their bytes: Postgres would quote and escape every JSON payload inside
// an array's text and parse it again, and pgx parse such an array rune by
// rune.
//
// Its shape is declared once, as two Go structs: P, the routine's
// parameters, each field tagged `pg:"name,type"` with the parameter's name
// and SQL type; R, the routine's result columns, tagged the same way with
// the column's name and the SQL type it is read as. The statement's text,
// the types it is sent and read with, the order of its arguments and of
// its scan targets all come from the two structs:
//
//	SELECT r.col::type, … FROM queen.fn(p_name => $1::type, …) r
//
// TestTypedStatements holds each declaration to the routine the server
// has: every parameter and column by name, with its type.
type typedStmt[P, R any] struct {
	routine string
	sql     string
	sd      *pgconn.StatementDescription
}

// typedColumn is one field of a declaration: its name and SQL type.
type typedColumn struct{ name, typ string }

// typedColumns reads a declaration's fields.
func typedColumns(t reflect.Type) []typedColumn {
	out := make([]typedColumn, t.NumField())
	for i := range out {
		tag := t.Field(i).Tag.Get("pg")
		name, typ, ok := strings.Cut(tag, ",")
		if !ok || name == "" || typ == "" {
			panic(fmt.Sprintf("pgstore: %s.%s: tag pg:%q, want pg:\"name,type\"", t.Name(), t.Field(i).Name, tag))
		}
		out[i] = typedColumn{name, typ}
	}
	return out
}

// typeOIDs are the SQL types a declaration may name. json goes as text
// (OID 0: the server takes the type from the statement).
var typeOIDs = map[string]uint32{
	"json": 0, "text": pgtype.TextOID, "bigint": pgtype.Int8OID, "timestamptz": pgtype.TimestamptzOID,
	"boolean": pgtype.BoolOID, "text[]": pgtype.TextArrayOID, "bigint[]": pgtype.Int8ArrayOID,
	"integer[]": pgtype.Int4ArrayOID, "boolean[]": pgtype.BoolArrayOID, "uuid[]": pgtype.UUIDArrayOID,
	"timestamptz[]": pgtype.TimestamptzArrayOID,
}

func typeOID(typ string) uint32 {
	oid, ok := typeOIDs[typ]
	if !ok {
		panic("pgstore: no OID for SQL type " + typ)
	}
	return oid
}

// typed declares the statement calling routine (schema-qualified) with the
// parameters P and the result columns R.
func typed[P, R any](routine string) *typedStmt[P, R] {
	st := &typedStmt[P, R]{routine: routine, sd: &pgconn.StatementDescription{}}
	var args, cols []string
	for i, c := range typedColumns(reflect.TypeFor[P]()) {
		st.sd.ParamOIDs = append(st.sd.ParamOIDs, typeOID(c.typ))
		args = append(args, fmt.Sprintf("%s => $%d::%s", c.name, i+1, c.typ))
	}
	for _, c := range typedColumns(reflect.TypeFor[R]()) {
		st.sd.Fields = append(st.sd.Fields, pgconn.FieldDescription{Name: c.name, DataTypeOID: typeOID(c.typ)})
		cols = append(cols, "r."+c.name+"::"+c.typ)
	}
	st.sql = "SELECT " + strings.Join(cols, ", ") + " FROM " + routine + "(" + strings.Join(args, ", ") + ") r"
	return st
}

// run calls the routine with p and returns its row.
func (st *typedStmt[P, R]) run(ctx context.Context, s *Store, p P) (R, error) {
	var r R
	pv, rv := reflect.ValueOf(p), reflect.ValueOf(&r).Elem()
	args := make([]any, pv.NumField())
	for i := range args {
		args[i] = pv.Field(i).Interface()
	}
	dst := make([]any, rv.NumField())
	for i := range dst {
		dst[i] = rv.Field(i).Addr().Interface()
	}
	err := s.row(ctx, st.sql, st.sd, args, dst)
	return r, err
}

// The typed statements, by the routine they call: their parameters and
// result columns are declared with the operations (push.go, pop.go, ack.go).
var (
	stmtPush    = typed[pushParams, pushRow]("queen.push_v3")
	stmtPushOne = typed[pushOneParams, pushOneRow]("queen.push_partition_v2")
	stmtPop     = typed[popParams, popRow]("queen.pop_v2")
	stmtAck     = typed[ackParams, ackArrays]("queen.ack_v3")
)

// typedShape is a typed statement as TestTypedStatements reads it.
type typedShape struct {
	routine, sql    string
	params, columns []typedColumn
}

func (st *typedStmt[P, R]) shape() typedShape {
	return typedShape{routine: st.routine, sql: st.sql, params: typedColumns(reflect.TypeFor[P]()),
		columns: typedColumns(reflect.TypeFor[R]())}
}

// typedShapes lists every typed statement.
func typedShapes() []typedShape {
	return []typedShape{stmtPush.shape(), stmtPushOne.shape(), stmtPop.shape(), stmtAck.shape()}
}

// pgxOf is what db is in pgx's terms: a pool, or a connection (a pgx.Conn,
// or the one under a pgx.Tx or a *pgxpool.Conn); neither for another DB.
func pgxOf(db DB) (*pgxpool.Pool, *pgx.Conn) {
	switch d := db.(type) {
	case *pgxpool.Pool:
		return d, nil
	case *pgx.Conn:
		return nil, d
	case interface{ Conn() *pgx.Conn }:
		return nil, d.Conn()
	}
	return nil, nil
}

// connOf is the connection under db (a pool's is acquired: release it),
// nil for a DB that gives none.
func connOf(ctx context.Context, db DB) (conn *pgx.Conn, release func(), err error) {
	pool, conn := pgxOf(db)
	if pool == nil {
		return conn, func() {}, nil
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c.Conn(), c.Release, nil
}

// tracerOf is the pgx QueryTracer db's connections are configured with,
// if any: row reports its statements to it, as pgx reports its own.
func tracerOf(db DB) pgx.QueryTracer {
	switch pool, conn := pgxOf(db); {
	case pool != nil:
		return pool.Config().ConnConfig.Tracer
	case conn != nil:
		return conn.Config().Tracer
	}
	return nil
}

// row runs sql, described by sd, with args and scans its one row into dst,
// as QueryRow(...).Scan does (pgx.ErrNoRows when there is none).
func (s *Store) row(ctx context.Context, sql string, sd *pgconn.StatementDescription, args, dst []any) (err error) {
	if len(dst) != len(sd.Fields) {
		return fmt.Errorf("pgstore: %d destinations for %d columns", len(dst), len(sd.Fields))
	}
	conn, release, err := connOf(ctx, s.db)
	if err != nil {
		return err
	}
	if conn == nil { // another DB: its QueryRow, in text
		return s.db.QueryRow(ctx, sql, args...).Scan(dst...)
	}
	defer release()
	var tag pgconn.CommandTag
	if s.tracer != nil {
		ctx = s.tracer.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: sql, Args: args})
		defer func() { s.tracer.TraceQueryEnd(ctx, conn, pgx.TraceQueryEndData{CommandTag: tag, Err: err}) }()
	}
	m := conn.TypeMap()
	var eqb pgx.ExtendedQueryBuilder
	if err := eqb.Build(m, sd, args); err != nil {
		return err
	}
	rr := conn.PgConn().ExecParams(ctx, sql, eqb.ParamValues, sd.ParamOIDs, eqb.ParamFormats, eqb.ResultFormats)
	var rows int
	var scanErr error
	for rr.NextRow() {
		rows++
		if rows > 1 || scanErr != nil {
			continue
		}
		vals := rr.Values()
		if len(vals) != len(dst) {
			scanErr = fmt.Errorf("pgstore: %d columns in the reply, %d expected", len(vals), len(dst))
			continue
		}
		for i, v := range vals {
			if err := m.Scan(sd.Fields[i].DataTypeOID, eqb.ResultFormats[i], v, dst[i]); err != nil {
				scanErr = fmt.Errorf("pgstore: column %d (%s): %w", i, sd.Fields[i].Name, err)
				break
			}
		}
	}
	if tag, err = rr.Close(); err != nil {
		return err
	}
	if scanErr != nil {
		return &decodeError{scanErr}
	}
	if rows == 0 {
		return pgx.ErrNoRows
	}
	return nil
}
