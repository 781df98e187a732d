package queenstack

import "github.com/queen-serverless/queen/core/routes"

// Route is one route of the HTTP API (docs/api.md): the route table the
// handlers serve (core/routes), read here so the stack and the functions
// cannot disagree.
type Route = routes.Route

// ScopePrefix prefixes the role scopes of the JWT authorizer, as the local
// server reads them (core/auth): queen/read-only, queen/produce,
// queen/consume, queen/admin.
const ScopePrefix = routes.ScopePrefix

// Routes is every route API Gateway serves: the route table's routes that
// a function serves (the local server's metrics route is not one). The
// functions receive API Gateway payload format 2.0 events; RouteKey names
// the matched route and RawPath the request path.
var Routes = func() []Route {
	var out []Route
	for _, r := range routes.Table {
		if r.Function != "" {
			out = append(out, r)
		}
	}
	return out
}()
