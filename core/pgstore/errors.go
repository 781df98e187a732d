package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queen-serverless/queen/core/queen"
)

// The SQLSTATEs the routines raise (class QN, ours): each is mapped to a
// domain error by interpretError, and a test holds this list to the codes
// sql/routines/ raises.
const (
	sqlstateNotFound     = "QN404" // what the call names does not exist: queen.ErrNotFound (message says what)
	sqlstateConflict     = "QN409" // the call conflicts with the state (an expired lease): queen.ErrConflict
	sqlstateQueueFull    = "QN429" // maxSize reached: queen.ErrQueueFull
	sqlstatePaused       = "QN503" // pushes paused for maintenance: queen.ErrMaintenance
	sqlstateSealRequired = "QNENC" // a plain payload for an encrypted queue (detail: the queue)
	sqlstateKeyMissing   = "QNKEY" // a sealed message under a key the caller lacks (detail: the key)
)

// sqlstates lists the codes above.
var sqlstates = []string{sqlstateNotFound, sqlstateConflict, sqlstateQueueFull, sqlstatePaused, sqlstateSealRequired, sqlstateKeyMissing}

// interpretError translates driver errors into domain errors: the one place
// that knows Postgres error codes.
func interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, queen.ErrNotFound)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == sqlstateNotFound:
			return &queen.KindError{Kind: queen.ErrNotFound, Message: pgErr.Message}
		case pgErr.Code == sqlstateConflict:
			return &queen.KindError{Kind: queen.ErrConflict, Message: pgErr.Message}
		case pgErr.Code == sqlstateQueueFull:
			return &queen.KindError{Kind: queen.ErrQueueFull, Message: pgErr.Message}
		case pgErr.Code == sqlstatePaused:
			return &queen.KindError{Kind: queen.ErrMaintenance, Message: pgErr.Message}
		case pgErr.Code == sqlstateSealRequired:
			return &sealRequired{queue: pgErr.Detail}
		case pgErr.Code == sqlstateKeyMissing:
			return &keyMissing{ref: pgErr.Detail, message: pgErr.Message}
		case pgErr.Code == "22P02", pgErr.Code == "22007", pgErr.Code == "22008",
			pgErr.Code == "22003", pgErr.Code == "22021", pgErr.Code == "22P05",
			pgErr.Code == "22023", pgErr.Code == "22001":
			return &queen.KindError{Kind: queen.ErrInvalid, Message: "invalid input: " + pgErr.Message}
		case strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "57P"),
			pgErr.Code == "53300", pgErr.Code == "3D000", pgErr.Code == "28000", pgErr.Code == "28P01":
			return fmt.Errorf("%s: %w: %s", op, queen.ErrUnavailable, pgErr.Message)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	if pgconn.SafeToRetry(err) || isConnError(err) {
		return fmt.Errorf("%s: %w: %v", op, queen.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isConnError(err error) bool {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "closed pool") ||
		strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF") ||
		strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "failed to connect") || strings.Contains(msg, "no such file or directory")
}
