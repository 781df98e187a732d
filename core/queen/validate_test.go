package queen

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNormalizePushDefaults(t *testing.T) {
	items, err := NormalizePush([]PushItem{{Queue: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	it := items[0]
	// The store generates the transactionId (under the partition's lock).
	if it.Partition != DefaultPartition || string(it.Payload) != "null" || it.TransactionID != "" {
		t.Fatalf("defaults: %+v", it)
	}
	v7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := NewUUIDv7(), NewUUIDv7()
	if !v7.MatchString(a) {
		t.Fatalf("NewUUIDv7 %q is not a UUIDv7", a)
	}
	if a == b || !IsUUID(a) {
		t.Fatalf("uuids %s %s", a, b)
	}
}

func TestParseSubscription(t *testing.T) {
	ts := "2026-03-04T05:06:07Z"
	want, _ := time.Parse(time.RFC3339, ts)
	cases := []struct {
		mode, from string
		m          SubscriptionMode
		t          time.Time
		bad        bool
	}{
		{"", "", SubscribeAll, time.Time{}, false},
		{"all", "", SubscribeAll, time.Time{}, false},
		{"new", "", SubscribeNew, time.Time{}, false},
		{"new-only", "", SubscribeNew, time.Time{}, false},
		{"", "now", SubscribeNew, time.Time{}, false},
		{"", ts, SubscribeFrom, want, false},
		{"", "yesterday", "", time.Time{}, true},
		// Queen: new, new-only, new_only, newonly start at the head; every
		// other mode reads from the beginning.
		{"new_only", "", SubscribeNew, time.Time{}, false},
		{"NewOnly", "", SubscribeNew, time.Time{}, false},
		{"from_beginning", "", SubscribeAll, time.Time{}, false},
		{"latest", "", SubscribeAll, time.Time{}, false},
		{"a\x00b", "", "", time.Time{}, true},
	}
	for _, c := range cases {
		m, at, err := ParseSubscription(c.mode, c.from)
		if c.bad {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%q/%q: err %v, want ErrInvalid", c.mode, c.from, err)
			}
			continue
		}
		if err != nil || m != c.m || !at.Equal(c.t) {
			t.Errorf("%q/%q = %v %v %v", c.mode, c.from, m, at, err)
		}
	}
}

func TestParseAckStatus(t *testing.T) {
	for in, want := range map[string]AckStatus{"completed": AckCompleted, "success": AckCompleted, "SUCCESS": AckCompleted,
		"failed": AckFailed, "retry": AckRetry, "dlq": AckDLQ} {
		if got, err := ParseAckStatus("status", in); err != nil || got != want {
			t.Errorf("%s = %v %v", in, got, err)
		}
	}
	var fe *FieldError
	if _, err := ParseAckStatus("status", "done"); !errors.As(err, &fe) || fe.Field != "status" {
		t.Errorf("bad status: %v", err)
	}
}

func TestQueueNames(t *testing.T) {
	for _, ok := range []string{"a", "orders.v1", "team/orders:eu@2-x_y"} {
		if err := ValidateQueueName("queue", ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "ü", "a;b", "a'b"} {
		if err := ValidateQueueName("queue", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestValidateJSONEscapes(t *testing.T) {
	for in, bad := range map[string]bool{
		`"a\u0041b"`: false, `"\ud83d\ude00"`: false, `"\\ud800"`: false, `"\\\ud800"`: true,
		`"\u0000"`: true, `"\ud800"`: true, `"\ud800x"`: true, `"\udc00"`: true, `"\ud800\u0041"`: true,
		`{"k\ud800":1}`: true, `"\uZZZZ"`: false,
	} {
		err := ValidateJSONEscapes("items[0].payload", in)
		if (err != nil) != bad {
			t.Errorf("%s: %v, want refused=%v", in, err, bad)
		}
		if err != nil && !strings.Contains(err.Error(), "items[0].payload") {
			t.Errorf("%s: %v does not name the field", in, err)
		}
	}
}

// A rejected item of a batch is named by its place; a lone ack by its
// field alone. A bad leaseId is a conflict (an expired lease), not 400.
func TestNormalizeAcksNamesTheItem(t *testing.T) {
	const pid = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	ok := Ack{PartitionID: pid, TransactionID: "t", Status: "completed"}
	cases := []struct {
		acks []Ack
		kind error
		want string
	}{
		{[]Ack{{PartitionID: "nope", TransactionID: "t", Status: "completed"}}, ErrInvalid, "partitionId: must be a UUID"},
		{[]Ack{ok, {PartitionID: pid, TransactionID: "", Status: "completed"}}, ErrInvalid, "acknowledgments[1].transactionId: must not be empty"},
		{[]Ack{ok, ok, {PartitionID: pid, TransactionID: "t", Status: "done"}}, ErrInvalid, "acknowledgments[2].status: must be one of"},
		{[]Ack{{PartitionID: pid, TransactionID: "t", Status: "completed", LeaseID: "x"}}, ErrConflict, "leaseId: invalid or expired lease"},
		{[]Ack{ok, {PartitionID: pid, TransactionID: "t", Status: "completed", LeaseID: "x"}}, ErrConflict, "acknowledgments[1].leaseId: invalid or expired lease"},
	}
	for _, c := range cases {
		_, err := NormalizeAcks(c.acks)
		if !errors.Is(err, c.kind) || err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %v starting %q", c.acks, err, c.kind, c.want)
		}
	}
}
