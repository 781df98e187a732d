package queenstack

import "strings"

// Route maps one HTTP API route (SPEC §4) to the function that serves it.
type Route struct {
	Method   string
	Path     string
	Function string
}

// Key is the API Gateway route key, e.g. "POST /api/v1/push".
func (r Route) Key() string { return r.Method + " " + r.Path }

// ScopePrefix prefixes the role scopes of the JWT authorizer, as the local
// server reads them (core/auth): queen/read-only, queen/produce,
// queen/consume, queen/admin.
const ScopePrefix = "queen/"

// Scopes are the JWT scopes any one of which lets a caller use the route
// (API Gateway grants a route when the token holds one of its scopes): the
// role the route needs, the roles that include it, and admin.
func (r Route) Scopes() []string {
	var roles []string
	switch {
	case r.Method == "POST" && r.Path == "/api/v1/push":
		roles = []string{"produce"}
	case r.Method == "GET" && strings.HasPrefix(r.Path, "/api/v1/pop/"),
		r.Method == "POST" && strings.HasPrefix(r.Path, "/api/v1/lease/"),
		r.Method == "POST" && (r.Path == "/api/v1/ack" || r.Path == "/api/v1/ack/batch" || r.Path == "/api/v1/transaction"):
		roles = []string{"consume"}
	case r.Method == "GET":
		roles = []string{"read-only", "consume"}
	}
	out := make([]string, 0, len(roles)+1)
	for _, role := range append(roles, "admin") {
		out = append(out, ScopePrefix+role)
	}
	return out
}

// Routes is every route of the HTTP API. The functions receive API Gateway payload
// format 2.0 events; RouteKey names the matched route and RawPath the request path.
var Routes = []Route{
	{"POST", "/api/v1/push", "push"},

	{"GET", "/api/v1/pop/queue/{queue}", "pop"},
	{"GET", "/api/v1/pop/queue/{queue}/partition/{partition}", "pop"},
	{"POST", "/api/v1/lease/{leaseId}/extend", "pop"},

	{"POST", "/api/v1/ack", "ack"},
	{"POST", "/api/v1/ack/batch", "ack"},
	{"POST", "/api/v1/transaction", "ack"},

	{"GET", "/api/v1/dlq", "dlq"},
	{"GET", "/api/v1/messages/{partitionId}/{transactionId}", "dlq"},
	{"DELETE", "/api/v1/messages/{partitionId}/{transactionId}", "dlq"},
	{"POST", "/api/v1/messages/{partitionId}/{transactionId}/retry", "dlq"},

	{"POST", "/api/v1/configure", "admin"},
	{"GET", "/api/v1/resources/queues", "admin"},
	{"GET", "/api/v1/resources/queues/{queue}", "admin"},
	{"DELETE", "/api/v1/resources/queues/{queue}", "admin"},
	{"GET", "/api/v1/consumer-groups", "admin"},
	{"GET", "/api/v1/consumer-groups/{group}", "admin"},
	{"DELETE", "/api/v1/consumer-groups/{group}", "admin"},
	{"DELETE", "/api/v1/consumer-groups/{group}/queues/{queue}", "admin"},
	{"POST", "/api/v1/consumer-groups/{group}/queues/{queue}/seek", "admin"},
	{"GET", "/api/v1/messages", "admin"},
	{"GET", "/api/v1/system/maintenance", "admin"},
	{"POST", "/api/v1/system/maintenance", "admin"},
	{"GET", "/api/v1/system/maintenance/pop", "admin"},
	{"POST", "/api/v1/system/maintenance/pop", "admin"},
	{"GET", "/health", "admin"},
}
