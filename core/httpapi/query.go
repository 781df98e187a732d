package httpapi

import (
	"math/big"
	"strconv"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// queryInt reads an integer query parameter, def when it is absent.
func queryInt(q map[string][]string, name string, def int) (int, error) {
	v := first(q, name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, queen.Invalid(name, "must be an integer")
	}
	return n, nil
}

// queryTimeout reads a long-poll's timeout in milliseconds, capped by the
// server's maximum wait before it becomes a Duration, so no value overflows:
// a timeout beyond the cap, however large (even beyond int64), waits the cap.
func queryTimeout(q map[string][]string, maxWait time.Duration) (time.Duration, error) {
	v := first(q, "timeout")
	if v == "" {
		return maxWait, nil
	}
	n, ok := new(big.Int).SetString(v, 10)
	if !ok {
		return 0, queen.Invalid("timeout", "must be an integer (milliseconds)")
	}
	if n.Sign() < 0 {
		return 0, queen.Invalid("timeout", "must not be negative")
	}
	if n.Cmp(big.NewInt(maxWait.Milliseconds())) > 0 {
		return maxWait, nil
	}
	return time.Duration(n.Int64()) * time.Millisecond, nil
}

// queryBool reads a boolean query parameter, false when it is absent.
func queryBool(q map[string][]string, name string) (bool, error) {
	v := first(q, name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, queen.Invalid(name, "must be true or false")
	}
	return b, nil
}

// first is a query parameter's first value, "" when it is absent.
func first(q map[string][]string, name string) string {
	if v := q[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// queryTime reads an RFC 3339 query parameter, nil when it is absent.
func queryTime(q map[string][]string, name string) (*time.Time, error) {
	v := first(q, name)
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, queen.Invalid(name, "must be an RFC 3339 timestamp")
	}
	return &t, nil
}
