// Package auth authenticates the local server's callers with JWTs
// (golang-jwt, keys from an HS256 secret or a JWKS URL through keyfunc) and
// authorizes each route by role. On AWS, API Gateway's authorizer does the
// same job with per-route scopes of the same names; this package is linked
// only into `queen serve`.
//
// Roles, from the token's "roles" (array) or "role" (string) claim, or its
// "scope" claim as "queen/<role>" (the AWS scopes, so one token works on
// both):
//
//	read-only  GET routes: listings, browse, DLQ list, metrics
//	produce    POST /api/v1/push
//	consume    pop, lease extend, ack; plus what read-only may do
//	admin      everything
//
// A transaction (acks and pushes) needs consume and produce.
package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-serverless/queen/core/routes"
)

// Role is what a token may do (the route table's roles).
type Role = routes.Role

// The roles.
const (
	ReadOnly = routes.ReadOnly
	Produce  = routes.Produce
	Consume  = routes.Consume
	Admin    = routes.Admin
)

// ScopePrefix prefixes roles in the scope claim ("queen/consume").
const ScopePrefix = routes.ScopePrefix

// Config says how tokens are verified: exactly one of Secret and JWKSURL.
type Config struct {
	Secret   string // HS256 shared secret
	JWKSURL  string // keys of an identity provider (RS256, ES256, EdDSA …)
	Issuer   string // required iss when set
	Audience string // required aud when set
}

// Enabled reports whether c asks for authentication.
func (c Config) Enabled() bool { return c.Secret != "" || c.JWKSURL != "" }

// Authenticator verifies bearer tokens and checks route roles.
type Authenticator struct {
	keys   jwt.Keyfunc
	parser *jwt.Parser
}

// New returns an Authenticator for c. A JWKS URL is fetched now (so a bad
// URL fails at start) and refreshed in the background until ctx ends.
func New(ctx context.Context, c Config) (*Authenticator, error) {
	opts := []jwt.ParserOption{jwt.WithLeeway(30 * time.Second), jwt.WithExpirationRequired()}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	if c.Audience != "" {
		opts = append(opts, jwt.WithAudience(c.Audience))
	}
	a := &Authenticator{}
	switch {
	case c.Secret != "" && c.JWKSURL != "":
		return nil, errors.New("auth: set a JWT secret or a JWKS URL, not both")
	case c.Secret != "":
		if len(c.Secret) < 32 {
			return nil, errors.New("auth: the HS256 secret must be at least 32 bytes")
		}
		secret := []byte(c.Secret)
		a.keys = func(*jwt.Token) (any, error) { return secret, nil }
		opts = append(opts, jwt.WithValidMethods([]string{"HS256"}))
	case c.JWKSURL != "":
		k, err := keyfunc.NewDefaultCtx(ctx, []string{c.JWKSURL})
		if err != nil {
			return nil, fmt.Errorf("auth: JWKS %s: %w", c.JWKSURL, err)
		}
		a.keys = k.Keyfunc
		opts = append(opts, jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "EdDSA"}))
	default:
		return nil, errors.New("auth: no JWT secret or JWKS URL")
	}
	a.parser = jwt.NewParser(opts...)
	return a, nil
}

// tableMux finds a request's route in the route table.
var tableMux = func() *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range routes.Table {
		mux.Handle(r.Pattern(), http.NotFoundHandler())
	}
	return mux
}()

// Required returns the roles a request's route needs (all of them), from
// the route table; nil means public. A request no route matches (it will
// be a 404 or 405) needs read-only for GET and HEAD, admin otherwise.
func Required(method, path string) []Role {
	_, pattern := tableMux.Handler(&http.Request{Method: method, URL: &url.URL{Path: path}, Host: "local"})
	if r, ok := routes.ByPattern(pattern); ok {
		if r.Public {
			return nil
		}
		return r.Roles
	}
	if method == http.MethodGet || method == http.MethodHead {
		return []Role{ReadOnly}
	}
	return []Role{Admin}
}

type (
	subjectKey struct{}
	rolesKey   struct{}
)

// Granted reports whether the verified caller of the request whose
// context this is holds role; true when authentication is off or the
// route is public (every caller may then do everything).
func Granted(ctx context.Context, role Role) bool {
	have, ok := ctx.Value(rolesKey{}).([]Role)
	return !ok || slices.ContainsFunc(have, func(h Role) bool { return h.Grants(role) })
}

// Subject is the verified caller of the request whose context this is;
// "" when the route is public or authentication is off.
func Subject(ctx context.Context) string {
	s, _ := ctx.Value(subjectKey{}).(string)
	return s
}

// claims are the registered claims plus the role claims.
type claims struct {
	jwt.RegisteredClaims
	Roles []string `json:"roles"`
	Role  string   `json:"role"`
	Scope string   `json:"scope"`
}

func (c claims) roles() []Role {
	var out []Role
	for _, r := range c.Roles {
		out = append(out, Role(r))
	}
	if c.Role != "" {
		out = append(out, Role(c.Role))
	}
	for _, s := range strings.Fields(c.Scope) {
		if r, ok := strings.CutPrefix(s, ScopePrefix); ok {
			out = append(out, Role(r))
		}
	}
	return out
}

// Middleware lets a request through when the route is public or its bearer
// token is valid and carries the roles the route needs: 401 without a valid
// token, 403 without the roles. The verified sub is in the request's
// context (Subject).
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := Required(r.Method, r.URL.Path)
		if need == nil {
			next.ServeHTTP(w, r)
			return
		}
		raw := bearerToken(r.Header.Get("Authorization"))
		if raw == "" {
			deny(w, http.StatusUnauthorized, "authentication required: send Authorization: Bearer <JWT>")
			return
		}
		var c claims
		if _, err := a.parser.ParseWithClaims(raw, &c, a.keys); err != nil {
			deny(w, http.StatusUnauthorized, "invalid token: "+err.Error())
			return
		}
		have := c.roles()
		for _, n := range need {
			if !slices.ContainsFunc(have, func(h Role) bool { return h.Grants(n) }) {
				deny(w, http.StatusForbidden, fmt.Sprintf("insufficient role: %s %s needs %s", r.Method, r.URL.Path, roleList(need)))
				return
			}
		}
		ctx := context.WithValue(context.WithValue(r.Context(), subjectKey{}, c.Subject), rolesKey{}, have)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bearerToken is the token of an Authorization header: what follows the
// scheme "Bearer", matched without regard to case (RFC 7235: "bearer" and
// "BEARER" are the same scheme), or the whole value when it names no
// scheme.
func bearerToken(header string) string {
	raw := strings.TrimSpace(header)
	if scheme, tok, ok := strings.Cut(raw, " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(tok)
	}
	return raw
}

func roleList(rs []Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, " and ")
}

func deny(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="queen"`)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
