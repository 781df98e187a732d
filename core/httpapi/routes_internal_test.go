package httpapi

import (
	"net/http"
	"slices"
	"testing"

	"github.com/queen-serverless/queen/core/routes"
)

// The handlers serve exactly the route table's routes; a route added to
// either side alone is found (New panics with these messages).
func TestHandlersServeTheRouteTable(t *testing.T) {
	a := New(nil, Config{})
	if bad := unserved(routes.Table, a.handlers); len(bad) > 0 {
		t.Fatalf("route table and handlers differ: %v", bad)
	}
	extra := append(slices.Clone(routes.Table), routes.Route{Method: "GET", Path: "/api/v1/new", Function: routes.FnAdmin})
	if bad := unserved(extra, a.handlers); !slices.Equal(bad, []string{"no handler for GET /api/v1/new"}) {
		t.Errorf("a route without a handler: %v", bad)
	}
	h := map[string]func(http.ResponseWriter, *http.Request) error{}
	for k, v := range a.handlers {
		h[k] = v
	}
	h["GET /api/v1/orphan"] = a.health
	if bad := unserved(routes.Table, h); !slices.Equal(bad, []string{"no route for the handler of GET /api/v1/orphan"}) {
		t.Errorf("a handler without a route: %v", bad)
	}
}
