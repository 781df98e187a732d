package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// typedStmt is a statement whose parameter and result types are written
// here, so it goes with binary parameters and results (pgx's own codecs)
// in the one round trip QueryExecModeExec takes: Parse of the unnamed
// statement with the types, Bind, Execute, Sync. Nothing is prepared or
// kept on the connection, so it is as safe behind RDS Proxy and PgBouncer.
// QueryExecModeExec itself sends and reads text, and the arrays of a push,
// a pop and an ack are most of their bytes: Postgres quotes and escapes
// every JSON payload inside an array's text and parses it again, and pgx
// parses such an array rune by rune (about a fifth of the benchmark
// process's CPU in C100 before). TestTypedStatements holds the types
// written here to the ones the server gives the statement.
type typedStmt struct {
	sql string
	// ParamOIDs: per parameter its type (0: the server's, sent as text);
	// Fields: per result column its type
	sd *pgconn.StatementDescription
}

func typed(name string, params []uint32, results ...uint32) *typedStmt {
	sd := &pgconn.StatementDescription{ParamOIDs: params, Fields: make([]pgconn.FieldDescription, len(results))}
	for i, oid := range results {
		sd.Fields[i].DataTypeOID = oid
	}
	return &typedStmt{sql: query(name), sd: sd}
}

const (
	oidBool        = pgtype.BoolOID
	oidInt8        = pgtype.Int8OID
	oidText        = pgtype.TextOID
	oidTimestamptz = pgtype.TimestamptzOID
	oidBoolArr     = pgtype.BoolArrayOID
	oidInt4Arr     = pgtype.Int4ArrayOID
	oidInt8Arr     = pgtype.Int8ArrayOID
	oidTextArr     = pgtype.TextArrayOID
	oidUUIDArr     = pgtype.UUIDArrayOID
	oidTstzArr     = pgtype.TimestamptzArrayOID
)

var (
	stmtPush = typed("push_v3",
		[]uint32{oidTextArr, oidTextArr, oidTextArr, oidTextArr, oidTextArr, oidTextArr, oidTextArr, oidTimestamptz, oidInt8},
		oidTextArr, oidInt8Arr, oidTstzArr, oidBoolArr, oidInt8Arr, oidTextArr)
	stmtPushOne = typed("push_partition",
		[]uint32{oidText, oidText, oidTextArr, oidTextArr, oidTextArr, oidText, oidText, oidTimestamptz, oidInt8},
		oidText, oidTimestamptz, oidInt8, oidInt8, oidBoolArr, oidInt8Arr, oidTextArr)
	stmtPop = typed("pop_v2", []uint32{0, oidTimestamptz}, // the request's JSON: the server's json, as text
		oidText, oidTimestamptz, oidTextArr, oidTextArr, oidInt8Arr, oidTextArr, oidTextArr, oidTextArr, oidTextArr,
		oidTextArr, oidTstzArr, oidInt4Arr)
	stmtAck = typed("ack_v3",
		[]uint32{oidUUIDArr, oidTextArr, oidTextArr, oidTextArr, oidUUIDArr, oidTextArr, oidTimestamptz},
		oidBool, oidInt8Arr, oidTextArr, oidTextArr, oidTextArr, oidBoolArr, oidInt8Arr, oidBoolArr, oidTextArr,
		oidTextArr)
	typedStmts = map[string]*typedStmt{"push_v3": stmtPush, "push_partition": stmtPushOne, "pop_v2": stmtPop,
		"ack_v3": stmtAck}
)

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

// row runs st with args and scans its one row into dst, as
// QueryRow(...).Scan does (pgx.ErrNoRows when there is none).
func (s *Store) row(ctx context.Context, st *typedStmt, args []any, dst ...any) (err error) {
	if len(dst) != len(st.sd.Fields) {
		return fmt.Errorf("pgstore: %d destinations for %d columns", len(dst), len(st.sd.Fields))
	}
	conn, release, err := connOf(ctx, s.db)
	if err != nil {
		return err
	}
	if conn == nil { // another DB: its QueryRow, in text
		return s.db.QueryRow(ctx, st.sql, args...).Scan(dst...)
	}
	defer release()
	var tag pgconn.CommandTag
	if s.tracer != nil {
		ctx = s.tracer.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: st.sql, Args: args})
		defer func() { s.tracer.TraceQueryEnd(ctx, conn, pgx.TraceQueryEndData{CommandTag: tag, Err: err}) }()
	}
	m := conn.TypeMap()
	var eqb pgx.ExtendedQueryBuilder
	if err := eqb.Build(m, st.sd, args); err != nil {
		return err
	}
	rr := conn.PgConn().ExecParams(ctx, st.sql, eqb.ParamValues, st.sd.ParamOIDs, eqb.ParamFormats, eqb.ResultFormats)
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
			if err := m.Scan(st.sd.Fields[i].DataTypeOID, eqb.ResultFormats[i], v, dst[i]); err != nil {
				scanErr = fmt.Errorf("pgstore: column %d: %w", i, err)
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
