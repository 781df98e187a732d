package lambdafn_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queen-serverless/queen/core/config"
	"github.com/queen-serverless/queen/core/dbconn"
	"github.com/queen-serverless/queen/core/httpapi"
	"github.com/queen-serverless/queen/core/lambdafn"
	"github.com/queen-serverless/queen/core/pgstore"
	"github.com/queen-serverless/queen/internal/pgstoretest"
)

func TestMain(m *testing.M) { pgstoretest.Main(m) }

// A container frozen between requests may find its pooled connection
// dead: the proxy closed it (idle client timeout) while the container was
// frozen, so no FIN ever reached the socket, and the first bytes written to
// it are answered with a reset. The next request must still succeed: the
// pool pings a connection that sat idle before using it, instead of
// writing the statement to a dead socket (which cannot be retried).
func TestRequestAfterProxyDroppedIdleConnection(t *testing.T) {
	e := pgstoretest.NewClocked(t)
	proxy := newDroppingProxy(t, e.URL)
	cfg, err := config.FromEnv(func(k string) string {
		return map[string]string{
			config.EnvDatabaseURL:        proxy.url,
			config.EnvLambdaFunctionName: "queen-push",
		}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := dbconn.NewPool(context.Background(), cfg, dbconn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	api := httpapi.New(pgstore.New(pool, pgstore.Config{Logger: log}), httpapi.Config{Logger: log})
	h := lambdafn.NewHTTPHandler(api.Handler(httpapi.GroupPush), log)
	push := func(tx string) int {
		t.Helper()
		resp, err := h(context.Background(), events.APIGatewayV2HTTPRequest{
			RawPath: "/api/v1/push", Headers: map[string]string{"content-type": "application/json"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: "POST", Path: "/api/v1/push"}},
			Body: `{"items":[{"queue":"idle","payload":1,"transactionId":"` + tx + `"}]}`,
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	if st := push("before"); st != 201 {
		t.Fatalf("first push: %d", st)
	}

	// The pool pings a connection that sat idle for IdleCheckAfter (a
	// minute in production) before using it; zero makes any idle time
	// count, so the test need not wait for the connection to go idle.
	old := pgstore.IdleCheckAfter
	pgstore.IdleCheckAfter = 0
	defer func() { pgstore.IdleCheckAfter = old }()
	if n := proxy.drop(); n != 1 {
		t.Fatalf("dropped %d connections, want the container's one", n)
	}
	if st := push("after"); st != 201 {
		t.Fatalf("push after the proxy dropped the idle connection: %d, want 201", st)
	}
}

// droppingProxy forwards TCP connections to the test database and can
// drop them the way a proxy does to a frozen client: the server side is
// closed, the client side gets no FIN, and its next bytes get a reset.
type droppingProxy struct {
	url   string
	mu    sync.Mutex
	conns []*proxied
}

type proxied struct {
	client, server net.Conn
	dead           atomic.Bool
}

func newDroppingProxy(t *testing.T, dbURL string) *droppingProxy {
	t.Helper()
	pc, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port)))
	if strings.HasPrefix(pc.Host, "/") {
		network, addr = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", pc.Host, pc.Port)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	u := url.URL{Scheme: "postgres", User: url.UserPassword(pc.User, pc.Password), Host: ln.Addr().String(),
		Path: "/" + pc.Database, RawQuery: "sslmode=disable"}
	p := &droppingProxy{url: u.String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial(network, addr)
			if err != nil {
				c.Close()
				continue
			}
			x := &proxied{client: c, server: s}
			p.mu.Lock()
			p.conns = append(p.conns, x)
			p.mu.Unlock()
			go func() { // server → client; a drop ends it without closing the client
				io.Copy(c, s)
				if !x.dead.Load() {
					c.Close()
				}
			}()
			go func() { // client → server; once dropped, the client's next bytes get a reset
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if x.dead.Load() {
						c.(*net.TCPConn).SetLinger(0)
						c.Close()
						return
					}
					if n > 0 {
						s.Write(buf[:n])
					}
					if err != nil {
						s.Close()
						return
					}
				}
			}()
		}
	}()
	return p
}

// drop drops every live connection and says how many.
func (p *droppingProxy) drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, x := range p.conns {
		if !x.dead.Swap(true) {
			x.server.Close()
			n++
		}
	}
	p.conns = nil
	return n
}
