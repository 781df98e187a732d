package httpapi_test

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestEveryAcceptedNameIsRoutable: a queue, partition, consumer group or
// transactionId that push (or pop, for a group) accepts can be reached by
// every route that takes it in its path; one that could not be is refused
// with a 400 naming the field (docs/semantics.md §3.1.2). The names are the
// edge cases of a path (slashes, dot segments) and seeded random mixes of
// them.
func TestEveryAcceptedNameIsRoutable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	names := []string{"/", "//", ".", "..", "a/b", "a/", "/a", "a//b", "a/./b", "a/../b", "./a", "a/.", "..a", "a..", ".a.", "a:b@c-d_e"}
	for range 40 {
		var b strings.Builder
		for range 1 + rng.IntN(5) {
			b.WriteString([]string{"/", ".", "a", "-", ":"}[rng.IntN(5)])
		}
		names = append(names, b.String())
	}
	routed := func(method, path string) {
		t.Helper()
		r := s.do(method, path, nil)
		if r.status == 404 && strings.Contains(string(r.body), "no route") || r.status == 301 || r.status == 405 {
			t.Errorf("%s %s: %d %s: an accepted name cannot be reached", method, path, r.status, r.body)
		}
	}
	for i, n := range names {
		esc := url.PathEscape(n)
		// as a queue
		r := s.do("POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":%q,"payload":1}]}`, n))
		if r.status == 201 {
			routed("GET", "/api/v1/pop/queue/"+esc)
			routed("GET", "/api/v1/resources/queues/"+esc)
			routed("POST", "/api/v1/consumer-groups/g/queues/"+esc+"/seek")
		} else if r.status != 400 || !strings.Contains(r.errorText(t), "queue") {
			t.Errorf("queue %q: push %d %s, want 201 or a 400 naming the queue", n, r.status, r.body)
		}
		// as a partition and a transactionId
		var res []pushed
		r = s.do("POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"q%d","partition":%q,"transactionId":%q,"payload":1}]}`, i, n, n))
		if r.status == 201 {
			r.json(t, &res)
			routed("GET", "/api/v1/pop/queue/q"+fmt.Sprint(i)+"/partition/"+esc)
			routed("GET", "/api/v1/messages/"+res[0].PartitionID+"/"+esc)
			routed("DELETE", "/api/v1/messages/"+res[0].PartitionID+"/"+esc)
		} else if r.status != 400 || !strings.Contains(r.errorText(t), "items[0].") && !strings.Contains(r.errorText(t), "partition") &&
			!strings.Contains(r.errorText(t), "transactionId") {
			t.Errorf("partition/transactionId %q: push %d %s, want 201 or a 400 naming the field", n, r.status, r.body)
		}
		// as a consumer group
		r = s.do("GET", "/api/v1/pop/queue/q0?consumerGroup="+url.QueryEscape(n), nil)
		if r.status == 200 || r.status == 204 {
			routed("GET", "/api/v1/consumer-groups/"+esc)
			routed("POST", "/api/v1/consumer-groups/"+esc+"/queues/q0/seek")
		} else if r.status != 400 || !strings.Contains(r.errorText(t), "consumerGroup") {
			t.Errorf("group %q: pop %d %s, want 200/204 or a 400 naming consumerGroup", n, r.status, r.body)
		}
	}
}

// TestSeekRefusesUnroutableGroups: a seek can be a group's first use of a
// queue, so it refuses a group name that no route could reach (empty, .
// or .. between slashes) with a 400 naming consumerGroup, and stores
// nothing: the group does not appear in the listings afterwards.
func TestSeekRefusesUnroutableGroups(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.expect("POST", "/api/v1/push", `{"items":[{"queue":"sk","payload":1}]}`, 201)
	for _, g := range []string{"a//b", "..", "a/./b", "a/", "/a", "."} {
		r := s.do("POST", "/api/v1/consumer-groups/"+strings.ReplaceAll(url.PathEscape(g), ".", "%2E")+"/queues/sk/seek", `{"toEnd":true}`)
		if r.status != 400 || !strings.Contains(r.errorText(t), "consumerGroup") {
			t.Errorf("seek of group %q: %d %s, want a 400 naming consumerGroup", g, r.status, r.body)
		}
	}
	r := s.do("GET", "/api/v1/consumer-groups", nil)
	if r.status != 200 || strings.Contains(string(r.body), `"a//b"`) || strings.Contains(string(r.body), `".."`) {
		t.Errorf("groups after the refused seeks: %d %s, want none of them stored", r.status, r.body)
	}
	s.expect("POST", "/api/v1/consumer-groups/"+url.PathEscape("a/b")+"/queues/sk/seek", `{"toEnd":true}`, 200)
}
