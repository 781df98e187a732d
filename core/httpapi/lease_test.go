package httpapi_test

import (
	"strings"
	"testing"
)

// TestLeaseExtendOutOfRange: a seconds value out of range, 0 or too many,
// is refused with one message that gives the range and the way to renew
// by the queue's leaseTime (omit seconds), and the lease is kept.
func TestLeaseExtendOutOfRange(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.expect("POST", "/api/v1/push", `{"items":[{"queue":"l","payload":1}]}`, 201)
	var p popped
	s.expect("GET", "/api/v1/pop/queue/l?consumerGroup=g", nil, 200).json(t, &p)
	var msgs []string
	for _, body := range []string{`{"seconds":0}`, `{"seconds":604801}`, `{"seconds":-5}`} {
		r := s.expect("POST", "/api/v1/lease/"+p.LeaseID+"/extend", body, 400)
		msgs = append(msgs, r.errorText(t))
	}
	for i, m := range msgs {
		if m != msgs[0] || !strings.Contains(m, "between 1 and 604800") || !strings.Contains(m, "omit") {
			t.Errorf("message %d: %q; want one message giving the range and saying to omit seconds (first: %q)", i, m, msgs[0])
		}
	}
	s.expect("POST", "/api/v1/lease/"+p.LeaseID+"/extend", `{}`, 200)
}
