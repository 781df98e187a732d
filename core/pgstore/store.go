// Package pgstore is the Postgres implementation of queen.Store. It owns the
// SQL (embedded .sql files, one per operation), the migrations and the
// translation of driver errors into domain errors.
//
// Every operation is one statement — a call of a PL/pgSQL routine or one
// query — so each is one round trip and one transaction, and none uses
// session state: no SET, no named prepared statements, no session advisory
// locks, no LISTEN. It runs unchanged behind RDS Proxy or PgBouncer in
// transaction mode (use pgx.QueryExecModeExec, see PoolConfig).
package pgstore

import (
	"context"
	"crypto/md5"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queen-serverless/queen/core/queen"
)

//go:embed sql/*.sql
var sqlFS embed.FS

func query(name string) string {
	b, err := sqlFS.ReadFile("sql/" + name + ".sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}

var (
	sqlTransact    = query("transact")
	sqlExtendLease = query("extend_lease")
	sqlConfigure   = query("configure")
	sqlSeek        = query("seek")
	sqlDLQRetry    = query("dlq_retry")
	sqlDLQList     = query("dlq_list")
	sqlDLQGet      = query("dlq_get")
	sqlDLQDelete   = query("dlq_delete")
	sqlReapStep    = query("reap_step")
	sqlReapBacklog = query("reap_backlog")
	sqlQueues      = query("queues_list")
	sqlQueue       = query("queue_get")
	sqlQueueDelete = query("queue_delete")
	sqlGroups      = query("groups")
	sqlGroupDelete = query("group_delete")
	sqlBrowse      = query("browse")
	sqlStats       = query("stats")
	sqlMaintGet    = query("maintenance_get")
	sqlMaintSet    = query("maintenance_set")
	sqlDeliverable = query("deliverable")
)

// DB is what the store needs of a connection pool; *pgxpool.Pool has it.
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Config configures a Store.
type Config struct {
	// Clock, when set, supplies "now" to every operation (tests control time
	// with it). When nil the database clock is used, so every function
	// instance shares one clock.
	Clock func() time.Time
	// Logger receives retries of transient errors. Default: slog.Default().
	Logger *slog.Logger
	// DeadlockRetries is how often a statement aborted by a deadlock or
	// serialization failure is retried. Default DefaultDeadlockRetries.
	DeadlockRetries int
	// Keys supplies the key ring that seals and opens the payloads of
	// encrypted queues, loaded the first time one needs it. Nil: this
	// server has no key, and encrypted queues are refused with
	// queen.ErrKeyUnavailable.
	Keys KeyLoader
	// DefaultRetentionSeconds and DefaultCompletedRetentionSeconds are the
	// deployment's retention windows for a queue that sets none of that
	// kind or turned retention off (0: keep for ever).
	DefaultRetentionSeconds          int
	DefaultCompletedRetentionSeconds int
}

// DefaultDeadlockRetries is Config.DeadlockRetries unless set.
const DefaultDeadlockRetries = 3

// Store is queen.Store on Postgres.
type Store struct {
	db     DB
	cfg    Config
	seal   sealing
	tracer pgx.QueryTracer // db's, for the statements row sends
}

var _ queen.Store = (*Store)(nil)

// New returns a Store over db.
func New(db DB, cfg Config) *Store {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DeadlockRetries == 0 {
		cfg.DeadlockRetries = DefaultDeadlockRetries
	}
	return &Store{db: db, cfg: cfg, seal: sealing{load: cfg.Keys}, tracer: tracerOf(db)}
}

// PoolerSafe sets a connection up to run unchanged behind a
// transaction-pooling proxy (RDS Proxy, PgBouncer): statements in
// QueryExecModeExec (no named prepared statements, one round trip per
// query) and no statement or description caches. It is the one place these
// settings are made; every pool and connection of the product and its
// tests goes through it.
func PoolerSafe(cc *pgx.ConnConfig) {
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	cc.StatementCacheCapacity = 0
	cc.DescriptionCacheCapacity = 0
}

// PoolConfig parses url into a pool configuration that is safe behind a
// transaction-pooling proxy: QueryExecModeExec (no named prepared
// statements, one round trip per query).
func PoolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	PoolerSafe(cfg.ConnConfig)
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > ConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	}
	// A connection is pinged before use only after it sat idle for
	// IdleCheckAfter: a Lambda container frozen between requests may find
	// that the proxy (idle client timeout 30 min) or the server closed it,
	// and a statement written to a closed socket fails after it was sent,
	// so it cannot be retried. A busy connection is used without a ping (no
	// second round trip).
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration >= IdleCheckAfter
	}
	return cfg, nil
}

// ConnectTimeout bounds a new connection (TCP, TLS, login): a stalled
// proxy answers 503 well before a function's deadline instead of timing it
// out.
const ConnectTimeout = 5 * time.Second

// IdleCheckAfter is how long a pooled connection may sit unused before it
// is pinged before its next use. A variable so tests can shorten it.
var IdleCheckAfter = time.Minute

// now returns the operation's time argument: nil means the database clock.
func (s *Store) now() *time.Time {
	if s.cfg.Clock == nil {
		return nil
	}
	t := s.cfg.Clock()
	return &t
}

// call runs one statement returning one value and decodes it into out
// (JSON when out is not a scalar). It retries deadlocks.
func (s *Store) call(ctx context.Context, op, sql string, out any, args ...any) error {
	return s.retry(ctx, op, func() error {
		var raw []byte
		switch o := out.(type) {
		case *int64:
			return s.db.QueryRow(ctx, sql, args...).Scan(o)
		default:
			if err := s.db.QueryRow(ctx, sql, args...).Scan(&raw); err != nil || o == nil {
				return err
			}
			if raw == nil {
				return pgx.ErrNoRows
			}
			if jerr := json.Unmarshal(raw, o); jerr != nil {
				return &decodeError{fmt.Errorf("%s: decode result: %w", op, jerr)}
			}
			if contractCheck != nil {
				if cerr := contractCheck(raw, o); cerr != nil {
					return &decodeError{fmt.Errorf("%s: reply does not match its Go type: %w", op, cerr)}
				}
			}
			return nil
		}
	})
}

// decodeError is a reply that came back but does not decode: returned as
// it is, never retried.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// retry runs one statement (do), sending it again after a deadlock, a
// serialization failure or an error that says it was never sent, and
// translates what is left into domain errors.
func (s *Store) retry(ctx context.Context, op string, do func() error) error {
	for attempt := 0; ; attempt++ {
		err := do()
		if err == nil {
			return nil
		}
		var de *decodeError
		if errors.As(err, &de) {
			return de.err
		}
		if attempt < s.cfg.DeadlockRetries && (isRetryable(err) || pgconn.SafeToRetry(err)) && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "retrying after transient error", "op", op, "attempt", attempt+1, "err", err)
			continue
		}
		return interpretError(op, err)
	}
}

// isRetryable reports errors after which the statement had no effect and
// may simply be sent again: deadlock and serialization failures.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

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

func jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Push implements queen.Store.
func (s *Store) Push(ctx context.Context, items []queen.PushItem) ([]queen.PushResult, error) {
	items, err := queen.NormalizePush(items)
	if err != nil {
		return nil, err
	}
	var out []queen.PushResult
	err = s.sealedCall(ctx, items, func(args []pushArg) error {
		if onePartition(args) {
			out, err = s.pushPartition(ctx, args)
			return err
		}
		out, err = s.pushPartitions(ctx, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// onePartition reports whether every item goes to the same partition
// (then push_partition takes them, as arrays).
func onePartition(args []pushArg) bool {
	for _, a := range args[1:] {
		if a.Queue != args[0].Queue || a.Partition != args[0].Partition {
			return false
		}
	}
	return len(args) > 0
}

// pushPartitions pushes items that span partitions through push_v3: the
// items go as arrays (pushColumns, with each item's queue and partition)
// with the seed of the ids the push generates; per item come back its
// partition's id and number, the push's time there, whether it was
// stored, its offset and its transactionId (NULL when generated from the
// seed: GeneratedID makes it here). The reply is rendered here, once the
// partitions are unlocked.
func (s *Store) pushPartitions(ctx context.Context, args []pushArg) ([]queen.PushResult, error) {
	c, err := pushColumns(args)
	if err != nil {
		return nil, err
	}
	queues, parts := make([]string, len(args)), make([]string, len(args))
	for i, a := range args {
		queues[i], parts[i] = a.Queue, a.Partition
	}
	var (
		pids    []string
		nums    []int64
		created []time.Time
		fresh   []bool
		offsets []int64
		ids     []*string
		seed    = rand.Int64() // the generated ids' digits: they guard nothing
	)
	err = s.retry(ctx, "push", func() error {
		return s.row(ctx, stmtPush, []any{queues, parts, c.payloads, c.txids, c.traces, c.subs, c.keys, s.now(), seed},
			&pids, &nums, &created, &fresh, &offsets, &ids)
	})
	if err != nil {
		return nil, err
	}
	for _, n := range []int{len(pids), len(nums), len(created), len(fresh), len(offsets)} {
		if n != len(args) {
			return nil, fmt.Errorf("push: %d results for %d items", n, len(args))
		}
	}
	if ids != nil && len(ids) != len(args) {
		return nil, fmt.Errorf("push: %d transactionIds for %d items", len(ids), len(args))
	}
	out := make([]queen.PushResult, len(args))
	for i, a := range args {
		out[i] = pushResult(i, a, pids[i], nums[i], created[i], offsets[i], fresh[i], idAt(ids, i), seed)
	}
	return out, nil
}

// idAt is element i of a push routine's transactionIds, nil where the id
// is derived (or the routine returned no array: every one is).
func idAt(ids []*string, i int) *string {
	if ids == nil {
		return nil
	}
	return ids[i]
}

// pushResult renders item i of a push from what the routine returned for
// it: its partition (id and number), the push's time there, its offset,
// whether it was stored, and its stored transactionId, nil for one the
// push derived from seed (GeneratedID makes it).
func pushResult(i int, a pushArg, pid string, num int64, created time.Time, off int64, fresh bool, id *string,
	seed int64) queen.PushResult {
	status := queen.StatusQueued
	if !fresh {
		status = queen.StatusDuplicate
	}
	var txid string
	if id != nil {
		txid = *id
	} else {
		txid = GeneratedID(created, num, off, seed)
	}
	return queen.PushResult{Index: i, TransactionID: txid, Status: status, Offset: off,
		MessageID: MessageID(pid, off), PartitionID: pid, Queue: a.Queue, Partition: a.Partition,
		TraceID: a.TraceID, CreatedAt: created.UTC()}
}

// pushCols are a push's items as push_partition_v2 and push_v3 read them:
// per item the stored text of its payload (compact JSON, or the base64
// text of a sealed one), its transactionId, traceId and producer (NULL
// where none) and the key it is sealed with (NULL for a plain one); traces,
// subs and keys are NULL when every element would be. push_partition_v2
// takes one producer and one key for its partition's items: sub and key.
type pushCols struct {
	payloads                  []string
	txids, traces, subs, keys []*string
	sub, key                  *string
}

func pushColumns(args []pushArg) (pushCols, error) {
	c := pushCols{payloads: make([]string, len(args)), txids: make([]*string, len(args))}
	for i, a := range args {
		if a.TransactionID != "" { // NULL: the push generates one
			c.txids[i] = &args[i].TransactionID
		}
		if a.KeyID != "" { // sealed: a JSON string of the base64 text, stored as the text
			if err := json.Unmarshal(a.Payload, &c.payloads[i]); err != nil {
				return c, fmt.Errorf("push: sealed payload: %w", err)
			}
			c.key = &args[i].KeyID
			if c.keys == nil {
				c.keys = make([]*string, len(args))
			}
			c.keys[i] = &args[i].KeyID
		} else {
			p, err := storedPayload(a.Payload)
			if err != nil {
				return c, err
			}
			c.payloads[i] = p
		}
		if a.TraceID != "" {
			if c.traces == nil {
				c.traces = make([]*string, len(args))
			}
			c.traces[i] = &args[i].TraceID
		}
		if a.ProducerSub != "" {
			c.sub = &args[i].ProducerSub
			if c.subs == nil {
				c.subs = make([]*string, len(args))
			}
			c.subs[i] = &args[i].ProducerSub
		}
	}
	return c, nil
}

// storedPayload is the text a plain payload is stored as: its compact
// JSON as json.Marshal gives it (and as the JSON routines store it): no
// insignificant whitespace, and <, >, &, U+2028 and U+2029 escaped. A
// valid payload (NormalizePush checked it) with none of those bytes, the
// common one, is its own compact form and is taken as it is.
func storedPayload(p json.RawMessage) (string, error) {
	for _, c := range p {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xe2: // 0xe2: the first byte of U+2028 and U+2029 (and others)
			b, err := json.Marshal(p)
			return string(b), err
		}
	}
	return string(p), nil
}

// pushPartition pushes items that all go to one partition through
// push_partition_v2: the fields go as arrays with the seed of the ids the
// push generates, the results come back as the partition, its number, the
// push's time and per item whether it was stored, its offset and its
// transactionId (NULL when generated from the seed: GeneratedID makes it
// here), or, for the common push (every id generated, stored at the next
// offsets), only the first offset. They are rendered here.
func (s *Store) pushPartition(ctx context.Context, args []pushArg) ([]queen.PushResult, error) {
	c, err := pushColumns(args)
	if err != nil {
		return nil, err
	}
	var (
		pid     string
		created time.Time
		num     int64
		first   *int64
		fresh   []bool
		offsets []int64
		ids     []*string
		seed    = rand.Int64() // the generated ids' digits: they guard nothing
	)
	err = s.retry(ctx, "push", func() error {
		return s.row(ctx, stmtPushOne, []any{args[0].Queue, args[0].Partition, c.txids, c.payloads, c.traces, c.sub,
			c.key, s.now(), seed}, &pid, &created, &num, &first, &fresh, &offsets, &ids)
	})
	if err != nil {
		return nil, err
	}
	consecutive := fresh == nil && offsets == nil // all stored, at the next offsets
	if consecutive {
		if first == nil {
			return nil, errors.New("push: neither offsets nor a first offset in the reply")
		}
	} else if len(fresh) != len(args) || len(offsets) != len(args) {
		return nil, fmt.Errorf("push: %d results for %d items", len(fresh), len(args))
	}
	if ids != nil && len(ids) != len(args) {
		return nil, fmt.Errorf("push: %d transactionIds for %d items", len(ids), len(args))
	}
	out := make([]queen.PushResult, len(args))
	for i, a := range args {
		if consecutive {
			out[i] = pushResult(i, a, pid, num, created, *first+int64(i), true, idAt(ids, i), seed)
		} else {
			out[i] = pushResult(i, a, pid, num, created, offsets[i], fresh[i], idAt(ids, i), seed)
		}
	}
	return out, nil
}

// GeneratedID is the transactionId a push generated for the message at
// offset off of partition number num, pushed at at, from the push's seed,
// as queen.gen_id makes it in SQL (a test holds the two together; migration
// 0017): a UUIDv7 of that millisecond, version and marker "7a", the number
// of hex digits of the offset and of the partition number, the variant
// digit (8 + the seed's two low bits), and 15 digits: the seed's next bits
// as filler, then the partition number and the offset. Only for an offset
// that fits that form (queen.self_fits); the push returns any other id.
func GeneratedID(at time.Time, num, off, seed int64) string {
	var buf [16]byte
	t := lpadHex(make([]byte, 0, 12), strconv.AppendInt(buf[:0], max(at.UnixMilli(), 0), 16), 12)
	n, o := strconv.FormatInt(num, 16), strconv.FormatInt(off, 16)
	tail := make([]byte, 0, 15)
	if k := 15 - len(n) - len(o); k > 0 {
		tail = lpadHex(tail, strconv.AppendInt(buf[:0], (seed>>2)&(1<<(4*k)-1), 16), k)
	}
	tail = append(append(tail, n...), o...)
	b := make([]byte, 0, 36)
	b = append(append(append(b, t[:8]...), '-'), t[8:]...)
	b = append(b, '-', '7', 'a', hexDigits[len(o)], hexDigits[len(n)], '-', hexDigits[8+seed&3])
	b = append(append(append(b, tail[:3]...), '-'), tail[3:]...)
	return string(b)
}

const hexDigits = "0123456789abcdef"

// lpadHex appends src to dst as SQL's lpad(src, n, '0') gives it: zeros
// before it up to n characters, or its first n.
func lpadHex(dst, src []byte, n int) []byte {
	if len(src) >= n {
		return append(dst, src[:n]...)
	}
	for range n - len(src) {
		dst = append(dst, '0')
	}
	return append(dst, src...)
}

// MessageID is the id of the message at offset off of partition pid,
// derived from its address as queen.message_id derives it in SQL (a test
// holds the two together): the MD5 of "pid:offset" as a UUID.
func MessageID(pid string, off int64) string {
	var in [64]byte // room for "pid:offset": one allocation, the id's
	sum := md5.Sum(strconv.AppendInt(append(append(in[:0], pid...), ':'), off, 10))
	var id [36]byte
	hex.Encode(id[0:8], sum[0:4])
	hex.Encode(id[9:13], sum[4:6])
	hex.Encode(id[14:18], sum[6:8])
	hex.Encode(id[19:23], sum[8:10])
	hex.Encode(id[24:36], sum[10:16])
	id[8], id[13], id[18], id[23] = '-', '-', '-', '-'
	return string(id[:])
}

type popArg struct {
	Queue      string     `json:"queue"`
	Partition  string     `json:"partition,omitempty"`
	Group      string     `json:"group"`
	Batch      int        `json:"batch"`
	Partitions int        `json:"partitions"`
	AutoAck    bool       `json:"autoAck"`
	Mode       string     `json:"mode"`
	From       *time.Time `json:"from,omitempty"`
	Worker     string     `json:"worker,omitempty"`
	Keys       []string   `json:"keys,omitempty"` // references of the keys the store holds
}

// popReply is what pop_v2 returns: the lease and, per message in delivery
// order, its fields as parallel arrays.
type popReply struct {
	LeaseID                           *string
	LeaseExpiresAt                    *time.Time
	PIDs, Partitions, TxIDs, Payloads []string
	Offsets                           []int64
	KeyIDs, TraceIDs, ProducerSubs    []*string
	CreatedAts                        []time.Time
	Retries                           []int32
}

// messages renders the reply's messages for openMessages: a payload is
// its stored text (compact JSON), a sealed one a JSON string of its base64
// text.
func (r *popReply) messages(queue string) ([]sealedMessage, error) {
	n := len(r.Offsets)
	for _, l := range []int{len(r.PIDs), len(r.Partitions), len(r.TxIDs), len(r.Payloads), len(r.KeyIDs),
		len(r.TraceIDs), len(r.ProducerSubs), len(r.CreatedAts), len(r.Retries)} {
		if l != n {
			return nil, fmt.Errorf("pop: arrays of %d and %d messages in one reply", n, l)
		}
	}
	out := make([]sealedMessage, n)
	for i := range out {
		m := queen.Message{ID: MessageID(r.PIDs[i], r.Offsets[i]), TransactionID: r.TxIDs[i], PartitionID: r.PIDs[i],
			Partition: r.Partitions[i], Queue: queue, Offset: r.Offsets[i], Data: json.RawMessage(r.Payloads[i]),
			TraceID: r.TraceIDs[i], ProducerSub: r.ProducerSubs[i], CreatedAt: r.CreatedAts[i].UTC(),
			RetryCount: int(r.Retries[i])}
		var key string
		if r.KeyIDs[i] != nil {
			key = *r.KeyIDs[i]
			b, err := json.Marshal(r.Payloads[i])
			if err != nil {
				return nil, err
			}
			m.Data = b
		}
		out[i] = sealedMessage{Message: m, KeyID: key}
	}
	return out, nil
}

// Pop implements queen.Store.
func (s *Store) Pop(ctx context.Context, req queen.PopRequest) (queen.PopResult, error) {
	req, err := queen.NormalizePop(req)
	if err != nil {
		return queen.PopResult{}, err
	}
	now := time.Now()
	if s.cfg.Clock != nil {
		now = s.cfg.Clock()
	}
	if req.Mode == queen.SubscribeFrom && req.From.After(now.Add(time.Minute)) {
		return queen.PopResult{}, queen.Invalid("subscriptionFrom", "must not be in the future")
	}
	a := popArg{Queue: req.Queue, Partition: req.Partition, Group: req.ConsumerGroup, Batch: req.Batch,
		Partitions: req.Partitions, AutoAck: req.AutoAck, Mode: "all", Worker: req.Worker}
	switch req.Mode {
	case queen.SubscribeNew:
		a.Mode = "new"
	case queen.SubscribeFrom:
		a.Mode = "from"
		a.From = &req.From
	}
	var reply popReply
	for {
		a.Keys = s.keyRefs()
		arg, _ := jsonArg(a)
		err = s.retry(ctx, "pop", func() error {
			reply = popReply{}
			return s.row(ctx, stmtPop, []any{arg, s.now()}, &reply.LeaseID, &reply.LeaseExpiresAt, &reply.PIDs,
				&reply.Partitions, &reply.Offsets, &reply.TxIDs, &reply.Payloads, &reply.KeyIDs, &reply.TraceIDs,
				&reply.ProducerSubs, &reply.CreatedAts, &reply.Retries)
		})
		var missing *keyMissing
		if !errors.As(err, &missing) || s.loadedRing() != nil {
			break
		}
		// Sealed messages and no key ring loaded yet: load it, pop again.
		if _, lerr := s.keyRing(ctx); lerr != nil {
			return queen.PopResult{}, fmt.Errorf("%s: %w", missing.message, lerr)
		}
	}
	if err != nil {
		return queen.PopResult{}, err
	}
	sealed, err := reply.messages(req.Queue)
	if err != nil {
		return queen.PopResult{}, err
	}
	msgs, err := s.openMessages(ctx, sealed)
	if err != nil {
		return queen.PopResult{}, err
	}
	res := queen.PopResult{ConsumerGroup: req.ConsumerGroup, Messages: msgs}
	if reply.LeaseID != nil {
		at := reply.LeaseExpiresAt.UTC()
		res.LeaseID, res.LeaseExpiresAt = *reply.LeaseID, &at
	}
	return res, nil
}

// Ack implements queen.Store.
func (s *Store) Ack(ctx context.Context, acks []queen.Ack) ([]queen.AckResult, error) {
	acks, err := queen.NormalizeAcks(acks)
	if err != nil {
		return nil, err
	}
	// ack_v3 reads the items as arrays in input order, NULL for no lease
	// or error (as ackArg leaves them out of the JSON of transact).
	// The partitions and leases go as uuid[] (binary: 16 bytes each).
	n := len(acks)
	groups, txids, statuses := make([]string, n), make([]string, n), make([]string, n)
	pids, leases, errs := make([]pgtype.UUID, n), make([]pgtype.UUID, n), make([]*string, n)
	for i, a := range acks {
		groups[i], txids[i], statuses[i] = a.ConsumerGroup, a.TransactionID, string(a.Status)
		if err := pids[i].Scan(a.PartitionID); err != nil { // NormalizeAcks checked it
			return nil, fmt.Errorf("ack: partitionId: %w", err)
		}
		if a.LeaseID != "" {
			if err := leases[i].Scan(a.LeaseID); err != nil {
				return nil, fmt.Errorf("ack: leaseId: %w", err)
			}
		}
		if a.Error != "" {
			errs[i] = &acks[i].Error
		}
	}
	var r ackV2Reply
	err = s.retry(ctx, "ack", func() error {
		r = ackV2Reply{}
		return s.row(ctx, stmtAck, []any{pids, groups, txids, statuses, leases, errs, s.now()}, &r.OK, &r.Offsets,
			&r.Queues, &r.Partitions, &r.Results, &r.DLQs, &r.Committed, &r.Released, &r.Errors, &r.Codes)
	})
	if err != nil {
		return nil, err
	}
	return r.render(acks)
}

// ackV2Reply is what ack_v3 (and ack_v2) returns: per item, in input order, its outcome
// as parallel arrays (only Errors and Codes when OK is false).
type ackV2Reply struct {
	OK                                  bool
	Offsets, Committed                  []*int64
	Queues, Partitions, Results, Errors []string
	Codes                               []string
	DLQs, Released                      []bool
}

// render returns the results of acks as the reply gives them, and the
// error of a rejected call.
func (r *ackV2Reply) render(acks []queen.Ack) ([]queen.AckResult, error) {
	n := len(acks)
	lens := []int{len(r.Offsets), len(r.Queues), len(r.Partitions), len(r.Results), len(r.DLQs), len(r.Committed),
		len(r.Released)}
	if !r.OK {
		lens = []int{len(r.Errors), len(r.Codes)}
	}
	for _, l := range lens {
		if l != n {
			return nil, fmt.Errorf("ack: %d results for %d items", l, n)
		}
	}
	out := make([]queen.AckResult, n)
	for i, a := range acks {
		res := queen.AckResult{Index: i, TransactionID: a.TransactionID, PartitionID: a.PartitionID}
		if !r.OK {
			res.Error, res.Code = r.Errors[i], r.Codes[i]
		} else {
			res.ConsumerGroup, res.Queue, res.Partition, res.Offset = a.ConsumerGroup, r.Queues[i], r.Partitions[i], r.Offsets[i]
			res.Success, res.Result, res.DLQ, res.Committed, res.LeaseReleased = true, r.Results[i], r.DLQs[i], r.Committed[i], r.Released[i]
		}
		out[i] = res
	}
	if !r.OK {
		return out, ackError(out)
	}
	return out, nil
}

// ackError is the error of a rejected ack call: the first rejected item's.
func ackError(results []queen.AckResult) error {
	for _, r := range results {
		if r.Code == "skipped" || r.Success {
			continue
		}
		kind := queen.ErrConflict
		if r.Code == "not_found" {
			kind = queen.ErrNotFound
		}
		if len(results) == 1 {
			return queen.Errorf(kind, "%s", r.Error)
		}
		return queen.Errorf(kind, "acknowledgments[%d]: %s", r.Index, r.Error)
	}
	return queen.Errorf(queen.ErrConflict, "ack rejected")
}

// Transaction implements queen.Store.
func (s *Store) Transaction(ctx context.Context, req queen.TransactionRequest) (queen.TransactionResult, error) {
	if len(req.Acks) == 0 && len(req.Pushes) == 0 {
		return queen.TransactionResult{}, queen.Invalid("operations", "must contain at least one operation")
	}
	acks, pushes := []queen.Ack{}, []queen.PushItem{}
	var err error
	if len(req.Acks) > 0 {
		if acks, err = queen.NormalizeAcks(req.Acks); err != nil {
			return queen.TransactionResult{}, err
		}
	}
	if len(req.Pushes) > 0 {
		if pushes, err = queen.NormalizePush(req.Pushes); err != nil {
			return queen.TransactionResult{}, err
		}
	}
	leases := []string{}
	for i, l := range req.RequiredLeases {
		if !queen.IsUUID(l) {
			return queen.TransactionResult{}, queen.Errorf(queen.ErrConflict, "requiredLeases[%d]: invalid or expired lease", i)
		}
		leases = append(leases, l)
	}
	ackArg, _ := jsonArg(ackArgs(acks))
	var out ackReply
	err = s.sealedCall(ctx, pushes, func(args []pushArg) error {
		pushArg, _ := jsonArg(args)
		return s.call(ctx, "transaction", sqlTransact, &out, ackArg, pushArg, leases, s.now())
	})
	if err != nil {
		return queen.TransactionResult{}, err
	}
	acks = nil
	results := ackResults(out.Ack)
	if !out.OK {
		if out.Error != "" {
			return queen.TransactionResult{Acks: results}, queen.Errorf(queen.ErrConflict, "%s", out.Error)
		}
		return queen.TransactionResult{Acks: results}, ackError(results)
	}
	if results == nil {
		results = []queen.AckResult{}
	}
	pushed := out.Push
	if pushed == nil {
		pushed = []queen.PushResult{}
	}
	return queen.TransactionResult{Acks: results, Pushes: pushed}, nil
}

// Deliverable implements queen.Prober: one statement for every pair.
func (s *Store) Deliverable(ctx context.Context, keys []queen.WaitKey) ([]bool, error) {
	out := make([]bool, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	queues, groups := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		queues[i], groups[i] = k.Queue, k.Group
		if groups[i] == "" {
			groups[i] = queen.QueueModeGroup
		}
	}
	var idx []int32
	if err := s.db.QueryRow(ctx, sqlDeliverable, queues, groups, s.now()).Scan(&idx); err != nil {
		return nil, interpretError("probe", err)
	}
	for _, i := range idx {
		out[i] = true
	}
	return out, nil
}

// ExtendLease implements queen.Store.
func (s *Store) ExtendLease(ctx context.Context, leaseID string, seconds int) (time.Time, error) {
	if !queen.IsUUID(leaseID) {
		return time.Time{}, queen.Errorf(queen.ErrNotFound, "lease %s not found", leaseID)
	}
	if seconds < 0 || seconds > queen.MaxLeaseSeconds {
		return time.Time{}, queen.Invalid("seconds", "must be between 1 and %d (0: the queue's leaseTime)", queen.MaxLeaseSeconds)
	}
	var out struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := s.call(ctx, "extend lease", sqlExtendLease, &out, leaseID, seconds, s.now()); err != nil {
		return time.Time{}, err
	}
	return out.ExpiresAt, nil
}

// queueRow is a queues row as row_to_json renders it.
type queueRow struct {
	ID                        int64     `json:"id"`
	Name                      string    `json:"name"`
	Namespace                 *string   `json:"namespace"`
	Task                      *string   `json:"task"`
	LeaseTime                 int       `json:"lease_time"`
	RetryLimit                int       `json:"retry_limit"`
	RetryDelayMS              int       `json:"retry_delay_ms"`
	DedupWindow               int       `json:"dedup_window"`
	DelayedProcessing         int       `json:"delayed_processing"`
	WindowBuffer              int       `json:"window_buffer"`
	MaxSize                   int64     `json:"max_size"`
	RetentionSeconds          int       `json:"retention_seconds"`
	CompletedRetentionSeconds int       `json:"completed_retention_seconds"`
	EncryptionEnabled         bool      `json:"encryption_enabled"`
	Priority                  int       `json:"priority"`
	TTL                       int       `json:"ttl"`
	MaxWaitTimeSeconds        int       `json:"max_wait_time_seconds"`
	RetentionEnabled          *bool     `json:"retention_enabled"`
	CreatedAt                 time.Time `json:"created_at"`
	UpdatedAt                 time.Time `json:"updated_at"`
}

func (r queueRow) queue(d queen.RetentionDefaults) queen.Queue {
	q := queen.Queue{Name: r.Name, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Options: queen.Options{
		LeaseTime: r.LeaseTime, RetryLimit: r.RetryLimit, RetryDelay: r.RetryDelayMS, DedupWindowSeconds: r.DedupWindow,
		DelayedProcessing: r.DelayedProcessing, WindowBuffer: r.WindowBuffer, MaxSize: r.MaxSize,
		RetentionSeconds: r.RetentionSeconds, CompletedRetentionSeconds: r.CompletedRetentionSeconds,
		EncryptionEnabled: r.EncryptionEnabled, Priority: r.Priority, TTL: r.TTL, MaxWaitTimeSeconds: r.MaxWaitTimeSeconds,
	}.WithDerived(r.RetentionEnabled, d)}
	if r.Namespace != nil {
		q.Namespace = *r.Namespace
	}
	if r.Task != nil {
		q.Task = *r.Task
	}
	return q
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Configure implements queen.Store.
func (s *Store) Configure(ctx context.Context, req queen.ConfigureRequest) (queen.Queue, error) {
	if err := queen.ValidateQueueName("queue", req.Queue); err != nil {
		return queen.Queue{}, err
	}
	for f, v := range map[string]string{"namespace": req.Namespace, "task": req.Task} {
		if v != "" {
			if err := queen.ValidateText(f, v); err != nil {
				return queen.Queue{}, err
			}
		}
	}
	if err := req.Options.Validate(); err != nil {
		return queen.Queue{}, err
	}
	norm, _ := req.Options.Normalize()
	if e := norm.EncryptionEnabled; e != nil && *e {
		// Refused up front on a server that could not seal its payloads.
		if _, err := s.keyRing(ctx); err != nil {
			return queen.Queue{}, fmt.Errorf("options.encryptionEnabled: %w", err)
		}
	}
	opts, _ := jsonArg(optionsArgOf(norm))
	var row queueRow
	if err := s.call(ctx, "configure", sqlConfigure, &row, req.Queue, nullable(req.Namespace),
		nullable(req.Task), opts, s.now()); err != nil {
		return queen.Queue{}, err
	}
	s.remember(row.Name, row.EncryptionEnabled)
	return row.queue(s.retentionDefaults()), nil
}

// Seek implements queen.Store.
func (s *Store) Seek(ctx context.Context, group, queue string, t queen.SeekTarget) ([]queen.SeekResult, error) {
	if err := queen.ValidateText("group", group); err != nil {
		return nil, err
	}
	if err := queen.ValidateQueueName("queue", queue); err != nil {
		return nil, err
	}
	n := 0
	target := seekArg{ToEnd: t.ToEnd, ToBeginning: t.ToBeginning, Timestamp: t.Timestamp}
	for _, set := range []bool{t.ToEnd, t.ToBeginning, t.Timestamp != nil} {
		if set {
			n++
		}
	}
	if t.Offsets != nil {
		n++
		if len(t.Offsets) == 0 {
			return nil, queen.Invalid("offsets", "must name at least one partition")
		}
		for p, o := range t.Offsets {
			if o < 0 {
				return nil, queen.Invalid("offsets."+p, "must not be negative")
			}
		}
		target.Offsets = t.Offsets
	}
	if n != 1 {
		return nil, queen.Invalid("target", "give exactly one of toEnd, toBeginning, timestamp, offsets")
	}
	arg, _ := jsonArg(target)
	var out struct {
		Partitions []queen.SeekResult `json:"partitions"`
	}
	if err := s.call(ctx, "seek", sqlSeek, &out, group, queue, arg, s.now()); err != nil {
		return nil, err
	}
	return out.Partitions, nil
}

func nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return *t
}

// ListDeadLetters implements queen.Store.
func (s *Store) ListDeadLetters(ctx context.Context, f queen.DLQFilter) (queen.DLQPage, error) {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 1 || f.Limit > 1000 {
		return queen.DLQPage{}, queen.Invalid("limit", "must be between 1 and 1000")
	}
	if f.Offset < 0 {
		return queen.DLQPage{}, queen.Invalid("offset", "must not be negative")
	}
	var out struct {
		Total    int64              `json:"total"`
		Messages []sealedDeadLetter `json:"messages"`
	}
	err := s.call(ctx, "list dead letters", sqlDLQList, &out, nullable(f.Queue), nullable(f.ConsumerGroup),
		nullable(f.Partition), nullTime(f.From), nullTime(f.To), f.Limit, f.Offset)
	if err != nil {
		return queen.DLQPage{}, err
	}
	msgs, err := s.openDeadLetters(ctx, out.Messages, f.Queue == "")
	return queen.DLQPage{Total: out.Total, Messages: msgs}, err
}

// DeadLetters implements queen.Store.
func (s *Store) DeadLetters(ctx context.Context, partitionID, transactionID string) ([]queen.DeadLetter, error) {
	if !queen.IsUUID(partitionID) {
		return nil, queen.Invalid("partitionId", "must be a UUID")
	}
	var out []sealedDeadLetter
	if err := s.call(ctx, "get dead letter", sqlDLQGet, &out, partitionID, transactionID); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, queen.Errorf(queen.ErrNotFound, "no dead letter for %s/%s", partitionID, transactionID)
	}
	return s.openDeadLetters(ctx, out, false)
}

// RetryDeadLetter implements queen.Store.
func (s *Store) RetryDeadLetter(ctx context.Context, partitionID, transactionID, group string) (queen.PushResult, error) {
	if !queen.IsUUID(partitionID) {
		return queen.PushResult{}, queen.Invalid("partitionId", "must be a UUID")
	}
	var out *queen.PushResult
	if err := s.call(ctx, "retry dead letter", sqlDLQRetry, &out, partitionID, transactionID,
		nullable(group), queen.NewUUIDv7(), s.now()); err != nil {
		if errors.Is(err, queen.ErrNotFound) {
			return queen.PushResult{}, queen.Errorf(queen.ErrNotFound, "no dead letter for %s/%s", partitionID, transactionID)
		}
		return queen.PushResult{}, err
	}
	return *out, nil
}

// DeleteDeadLetter implements queen.Store.
func (s *Store) DeleteDeadLetter(ctx context.Context, partitionID, transactionID, group string) (int, error) {
	if !queen.IsUUID(partitionID) {
		return 0, queen.Invalid("partitionId", "must be a UUID")
	}
	var n int64
	if err := s.call(ctx, "delete dead letter", sqlDLQDelete, &n, partitionID, transactionID, nullable(group)); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, queen.Errorf(queen.ErrNotFound, "no dead letter for %s/%s", partitionID, transactionID)
	}
	return int(n), nil
}

// ListQueues implements queen.Store.
func (s *Store) ListQueues(ctx context.Context) ([]queen.QueueSummary, error) {
	var out []queen.QueueSummary
	err := s.call(ctx, "list queues", sqlQueues, &out)
	return out, err
}

// Queue implements queen.Store.
func (s *Store) Queue(ctx context.Context, name string) (queen.QueueDetail, error) {
	if err := queen.ValidateQueueName("queue", name); err != nil {
		return queen.QueueDetail{}, err
	}
	var out struct {
		Queue      queueRow              `json:"queue"`
		Depth      int64                 `json:"depth"`
		Partitions []queen.PartitionInfo `json:"partitions"`
		Groups     []queen.GroupOnQueue  `json:"groups"`
	}
	if err := s.call(ctx, "get queue", sqlQueue, &out, name, s.now()); err != nil {
		if errors.Is(err, queen.ErrNotFound) {
			return queen.QueueDetail{}, queen.Errorf(queen.ErrNotFound, "queue %s not found", name)
		}
		return queen.QueueDetail{}, err
	}
	return queen.QueueDetail{Queue: out.Queue.queue(s.retentionDefaults()), Depth: out.Depth, Partitions: out.Partitions, Groups: out.Groups}, nil
}

// DeleteQueue implements queen.Store.
func (s *Store) DeleteQueue(ctx context.Context, name string) error {
	if err := queen.ValidateQueueName("queue", name); err != nil {
		return err
	}
	var n int64
	if err := s.call(ctx, "delete queue", sqlQueueDelete, &n, name); err != nil {
		return err
	}
	if n == 0 {
		return queen.Errorf(queen.ErrNotFound, "queue %s not found", name)
	}
	return nil
}

// ListGroups implements queen.Store.
func (s *Store) ListGroups(ctx context.Context) ([]queen.GroupSummary, error) {
	var out []queen.GroupSummary
	err := s.call(ctx, "list groups", sqlGroups, &out, nil, false, s.now())
	return out, err
}

// Group implements queen.Store.
func (s *Store) Group(ctx context.Context, name string) (queen.GroupSummary, error) {
	if err := queen.ValidateText("group", name); err != nil {
		return queen.GroupSummary{}, err
	}
	var out []queen.GroupSummary
	if err := s.call(ctx, "get group", sqlGroups, &out, name, true, s.now()); err != nil {
		return queen.GroupSummary{}, err
	}
	if len(out) == 0 {
		return queen.GroupSummary{}, queen.Errorf(queen.ErrNotFound, "consumer group %s not found", name)
	}
	return out[0], nil
}

// DeleteGroup implements queen.Store.
func (s *Store) DeleteGroup(ctx context.Context, group, queue string) error {
	if err := queen.ValidateText("group", group); err != nil {
		return err
	}
	if queue != "" {
		if err := queen.ValidateQueueName("queue", queue); err != nil {
			return err
		}
	}
	var n int64
	if err := s.call(ctx, "delete group", sqlGroupDelete, &n, group, nullable(queue)); err != nil {
		return err
	}
	if n == 0 {
		if queue != "" {
			return queen.Errorf(queen.ErrNotFound, "consumer group %s does not read queue %s", group, queue)
		}
		return queen.Errorf(queen.ErrNotFound, "consumer group %s not found", group)
	}
	return nil
}

// Browse implements queen.Store.
func (s *Store) Browse(ctx context.Context, req queen.BrowseRequest) ([]queen.BrowsedMessage, error) {
	if err := queen.ValidateQueueName("queue", req.Queue); err != nil {
		return nil, err
	}
	if req.Partition != "" {
		if err := queen.ValidateText("partition", req.Partition); err != nil {
			return nil, err
		}
	}
	if req.Limit == 0 {
		req.Limit = 100
	}
	if req.Limit < 1 || req.Limit > 1000 {
		return nil, queen.Invalid("limit", "must be between 1 and 1000")
	}
	if req.FromOffset < 0 {
		return nil, queen.Invalid("fromOffset", "must not be negative")
	}
	var rows []struct {
		queen.BrowsedMessage
		KeyID string `json:"keyId"`
	}
	if err := s.call(ctx, "browse", sqlBrowse, &rows, req.Queue, nullable(req.Partition), req.FromOffset, req.Limit, s.now()); err != nil {
		return nil, err
	}
	out := make([]queen.BrowsedMessage, len(rows))
	for i, r := range rows {
		out[i] = r.BrowsedMessage
		if err := s.openInto(ctx, r.KeyID, &out[i].Data, r.Queue, r.Partition); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DefaultReapBatch is the most rows of one kind one reaper transaction
// touches unless ReapRequest.Batch says otherwise: small enough that a
// batch holds its locks for milliseconds, large enough that the
// statement's fixed cost is spread thin.
const DefaultReapBatch = 2000

// reapKinds are the kinds of maintenance a reaper pass does, in the order
// it takes them (see queen.reap_step).
var reapKinds = [...]string{"leases", "dedup", "retention", "completed"}

func (s *Store) retentionDefaults() queen.RetentionDefaults {
	return queen.RetentionDefaults{Seconds: s.cfg.DefaultRetentionSeconds, CompletedSeconds: s.cfg.DefaultCompletedRetentionSeconds}
}

// Reap implements queen.Store: rounds of one batch of every kind that has
// not caught up, each batch its own transaction, until all have caught up
// (a batch came back short) or the deadline has passed.
func (s *Store) Reap(ctx context.Context, req queen.ReapRequest) (queen.ReapStats, error) {
	batch := req.Batch
	if batch <= 0 {
		batch = DefaultReapBatch
	}
	var st queen.ReapStats
	pending := reapKinds[:]
	for len(pending) > 0 {
		// Every pass does at least one round, so that even a pass whose
		// time is short moves forward.
		if st.Batches > 0 && !req.Deadline.IsZero() && !time.Now().Before(req.Deadline) {
			st.Behind = true
			break
		}
		var next []string
		for _, kind := range pending {
			// Rows is what the batch took, which can be more than it did
			// (N): a short batch has caught up.
			var r struct {
				N    int `json:"n"`
				Dead int `json:"dead"`
				Rows int `json:"rows"`
			}
			err := s.call(ctx, "reap "+kind, sqlReapStep, &r, s.now(), kind, batch,
				s.cfg.DefaultRetentionSeconds, s.cfg.DefaultCompletedRetentionSeconds)
			if err != nil {
				return st, err
			}
			st.Batches++
			switch kind {
			case "leases":
				st.LeasesExpired += r.N
				st.DeadLettered += r.Dead
			case "dedup":
				st.DedupPruned += r.N
			case "retention":
				st.SegmentsRetained += r.N
			case "completed":
				st.SegmentsCompleted += r.N
			}
			if r.Rows >= batch {
				next = append(next, kind)
			}
		}
		pending = next
	}
	if st.Behind {
		err := s.call(ctx, "reap backlog", sqlReapBacklog, &st.Backlog, s.now(),
			s.cfg.DefaultRetentionSeconds, s.cfg.DefaultCompletedRetentionSeconds, queen.MaxBacklogCount)
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// Maintenance implements queen.Store.
func (s *Store) Maintenance(ctx context.Context) (queen.MaintenanceState, error) {
	var out queen.MaintenanceState
	err := s.call(ctx, "maintenance", sqlMaintGet, &out)
	return out, err
}

// SetMaintenance implements queen.Store.
func (s *Store) SetMaintenance(ctx context.Context, mode queen.MaintenanceMode, enabled bool) (queen.MaintenanceState, error) {
	if mode != queen.MaintainPush && mode != queen.MaintainPop {
		return queen.MaintenanceState{}, queen.Invalid("mode", "must be push or pop")
	}
	var out queen.MaintenanceState
	err := s.call(ctx, "set maintenance", sqlMaintSet, &out, string(mode), enabled, s.now())
	return out, err
}

// Stats implements queen.Store.
func (s *Store) Stats(ctx context.Context) (queen.Stats, error) {
	var out queen.Stats
	err := s.call(ctx, "stats", sqlStats, &out)
	return out, err
}

// Ping implements queen.Store.
func (s *Store) Ping(ctx context.Context) error {
	var n int64
	return s.call(ctx, "ping", "SELECT 1::bigint", &n)
}
