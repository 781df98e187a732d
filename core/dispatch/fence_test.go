package dispatch_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-serverless/queen/core/dispatch"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

// rebinding answers its first lookup with 127.0.0.1 and every later one
// with the instance metadata address: a DNS answer that changes between
// the check at creation and the connection.
type rebinding struct{ lookups atomic.Int64 }

func (r *rebinding) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	if r.lookups.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
}

// The dispatcher connects through the egress fence: a target whose name
// passed the check at creation and now resolves to the metadata address
// is refused when the dispatcher connects, the batch fails, lastError says
// why, and the server that answered before gets nothing.
func TestDeliveryIsFencedAtConnect(t *testing.T) {
	t.Parallel()
	e := pgstoretest.New(t)
	ctx := context.Background()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	cfg := local(e.Store, nil)
	cfg.Fence.Resolver = &rebinding{}
	url := "http://hooks.example:" + strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port) + "/"
	if err := cfg.Fence.CheckURL(ctx, url); err != nil {
		t.Fatalf("at creation the name answers 127.0.0.1, which queen serve allows: %v", err)
	}
	sub := subscribe(t, e.Store, "orders", "billing", url, nil)
	push(t, e.Store, "orders", 1, 1)
	cctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if _, err := dispatch.New(cfg).Drain(cctx, sub); err != nil {
		t.Fatal(err)
	}
	s, err := e.Store.Subscription(ctx, "orders", "billing")
	if err != nil || s.LastError == nil || !strings.Contains(*s.LastError, "egress fence: 169.254.169.254 is always refused") {
		t.Fatalf("subscription %+v %v, want lastError to say the fence refused the address", s, err)
	}
	if hits.Load() != 0 {
		t.Errorf("the server got %d requests", hits.Load())
	}
}
