// Package routes is the HTTP API's route table (docs/api.md), the one place a
// route is written down: its method and path, the Lambda function that
// serves it on AWS, its operation name (logs and metrics), and the roles
// that may call it. The HTTP handlers (core/httpapi), the local server's
// authentication (core/auth) and the AWS stack (infra: API Gateway routes
// and JWT scopes) all read it, so they cannot disagree. It imports only the
// standard library, so the infra module can import it too.
package routes

import "slices"

// Role is what a caller may do. A JWT names its roles (locally: roles,
// role or scope claims; on AWS: scopes "queen/<role>").
type Role string

// Roles, from least to most.
const (
	ReadOnly Role = "read-only" // every GET: listings, browse, DLQ list, maintenance state, metrics
	Produce  Role = "produce"   // push, and nothing else (Queen's write-only)
	Consume  Role = "consume"   // pop, lease extend, ack; plus what read-only may do
	Admin    Role = "admin"     // everything
)

// ScopePrefix prefixes a role in a JWT's scope claim ("queen/consume"), on
// AWS and locally alike.
const ScopePrefix = "queen/"

// AllRoles lists the roles in the order scopes are listed.
var AllRoles = []Role{ReadOnly, Produce, Consume, Admin}

// Grants reports whether holding r allows what need allows.
func (r Role) Grants(need Role) bool {
	switch {
	case r == Admin, r == need:
		return true
	case need == ReadOnly:
		return r == Consume // a producer cannot read
	}
	return false
}

// The Lambda functions that serve routes.
const (
	FnPush  = "push"
	FnPop   = "pop"
	FnAck   = "ack"
	FnDLQ   = "dlq"
	FnAdmin = "admin"
)

// Route is one route of the HTTP API.
type Route struct {
	Method string
	// Path is a net/http pattern path; API Gateway reads the same syntax.
	Path string
	// Function serves the route on AWS; "" for routes only the local
	// server has (metrics).
	Function string
	// Op names the operation in logs and metrics.
	Op string
	// Roles are all needed to call the route.
	Roles []Role
	// Public: the local server lets anyone call it (health checks). On AWS
	// the API's authorizer still guards it, with the scopes of Roles.
	Public bool
	// EveryFunction: every function serves it when invoked directly (health);
	// API Gateway routes it to Function.
	EveryFunction bool
}

// Pattern is the net/http pattern, "POST /api/v1/push"; it is also the API
// Gateway route key.
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// Scopes are the JWT scopes any one of which lets a caller use the route
// on AWS: API Gateway grants a route when the token holds one of its
// scopes, so a route needing several roles (a transaction: consume and
// produce) is granted on its first role there.
func (r Route) Scopes() []string {
	var out []string
	for _, role := range AllRoles {
		if role.Grants(r.Roles[0]) {
			out = append(out, ScopePrefix+string(role))
		}
	}
	return out
}

var (
	read    = []Role{ReadOnly}
	produce = []Role{Produce}
	consume = []Role{Consume}
	admin   = []Role{Admin}
)

// Table is every route.
var Table = []Route{
	{Method: "POST", Path: "/api/v1/push", Function: FnPush, Op: "push", Roles: produce},

	{Method: "GET", Path: "/api/v1/pop/queue/{queue}", Function: FnPop, Op: "pop", Roles: consume},
	{Method: "GET", Path: "/api/v1/pop/queue/{queue}/partition/{partition}", Function: FnPop, Op: "pop", Roles: consume},
	{Method: "POST", Path: "/api/v1/lease/{leaseId}/extend", Function: FnPop, Op: "extend", Roles: consume},

	{Method: "POST", Path: "/api/v1/ack", Function: FnAck, Op: "ack", Roles: consume},
	{Method: "POST", Path: "/api/v1/ack/batch", Function: FnAck, Op: "ack_batch", Roles: consume},
	{Method: "POST", Path: "/api/v1/transaction", Function: FnAck, Op: "transaction", Roles: []Role{Consume, Produce}},

	{Method: "GET", Path: "/api/v1/dlq", Function: FnDLQ, Op: "dlq_list", Roles: read},
	{Method: "GET", Path: "/api/v1/messages/{partitionId}/{transactionId}", Function: FnDLQ, Op: "dlq_get", Roles: read},
	{Method: "DELETE", Path: "/api/v1/messages/{partitionId}/{transactionId}", Function: FnDLQ, Op: "dlq_delete", Roles: admin},
	{Method: "POST", Path: "/api/v1/messages/{partitionId}/{transactionId}/retry", Function: FnDLQ, Op: "dlq_retry", Roles: admin},

	{Method: "POST", Path: "/api/v1/configure", Function: FnAdmin, Op: "configure", Roles: admin},
	{Method: "GET", Path: "/api/v1/resources/queues", Function: FnAdmin, Op: "queues", Roles: read},
	{Method: "GET", Path: "/api/v1/resources/overview", Function: FnAdmin, Op: "overview", Roles: read},
	{Method: "GET", Path: "/api/v1/resources/queues/{queue}", Function: FnAdmin, Op: "queue", Roles: read},
	{Method: "DELETE", Path: "/api/v1/resources/queues/{queue}", Function: FnAdmin, Op: "queue_delete", Roles: admin},
	{Method: "GET", Path: "/api/v1/consumer-groups", Function: FnAdmin, Op: "groups", Roles: read},
	{Method: "GET", Path: "/api/v1/consumer-groups/{group}", Function: FnAdmin, Op: "group", Roles: read},
	{Method: "DELETE", Path: "/api/v1/consumer-groups/{group}", Function: FnAdmin, Op: "group_delete", Roles: admin},
	{Method: "DELETE", Path: "/api/v1/consumer-groups/{group}/queues/{queue}", Function: FnAdmin, Op: "group_delete", Roles: admin},
	{Method: "POST", Path: "/api/v1/consumer-groups/{group}/queues/{queue}/seek", Function: FnAdmin, Op: "seek", Roles: admin},
	{Method: "GET", Path: "/api/v1/messages", Function: FnAdmin, Op: "browse", Roles: read},
	{Method: "POST", Path: "/api/v1/subscriptions", Function: FnAdmin, Op: "subscription_put", Roles: admin},
	{Method: "GET", Path: "/api/v1/subscriptions", Function: FnAdmin, Op: "subscriptions", Roles: read},
	{Method: "GET", Path: "/api/v1/subscriptions/{queue}/{consumerGroup}", Function: FnAdmin, Op: "subscription", Roles: read},
	{Method: "DELETE", Path: "/api/v1/subscriptions/{queue}/{consumerGroup}", Function: FnAdmin, Op: "subscription_delete", Roles: admin},
	{Method: "GET", Path: "/api/v1/system/maintenance", Function: FnAdmin, Op: "maintenance", Roles: read},
	{Method: "POST", Path: "/api/v1/system/maintenance", Function: FnAdmin, Op: "maintenance_set", Roles: admin},
	{Method: "GET", Path: "/api/v1/system/maintenance/pop", Function: FnAdmin, Op: "maintenance", Roles: read},
	{Method: "POST", Path: "/api/v1/system/maintenance/pop", Function: FnAdmin, Op: "maintenance_set", Roles: admin},

	{Method: "GET", Path: "/health", Function: FnAdmin, Op: "health", Roles: read, Public: true, EveryFunction: true},
	{Method: "GET", Path: "/metrics/prometheus", Op: "metrics", Roles: read},
}

// ByPattern returns the route whose Pattern is pattern.
func ByPattern(pattern string) (Route, bool) {
	i := slices.IndexFunc(Table, func(r Route) bool { return r.Pattern() == pattern })
	if i < 0 {
		return Route{}, false
	}
	return Table[i], true
}
