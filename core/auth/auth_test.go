package auth_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/queen-serverless/queen/core/auth"
)

// echoSub answers 200 with the verified subject.
var echoSub = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = w.Write([]byte(auth.Subject(r.Context())))
})

func call(t *testing.T, h http.Handler, tok, method, path string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// Tokens from an identity provider's JWKS (EdDSA here): the key is fetched
// from the URL; the issuer and audience are checked; roles may come as
// AWS-style scopes.
func TestJWKS(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1", ALG: jwkset.AlgEdDSA}})
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(map[string]any{"keys": []any{jwk.Marshal()}})
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(set) }))
	defer idp.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := auth.New(ctx, auth.Config{JWKSURL: idp.URL, Issuer: "https://idp.example", Audience: "queen"})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Middleware(echoSub)
	sign := func(claims jwt.MapClaims) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	exp := time.Now().Add(time.Hour).Unix()
	good := sign(jwt.MapClaims{"sub": "svc-a", "iss": "https://idp.example", "aud": "queen", "exp": exp, "scope": "openid queen/consume"})
	if st, body := call(t, h, good, "GET", "/api/v1/pop/queue/q"); st != 200 || body != "svc-a" {
		t.Fatalf("valid token: %d %q", st, body)
	}
	if st, _ := call(t, h, good, "POST", "/api/v1/push"); st != 403 {
		t.Fatalf("consume scope pushing: %d, want 403", st)
	}
	for name, tok := range map[string]string{
		"wrong issuer":   sign(jwt.MapClaims{"sub": "x", "iss": "https://evil", "aud": "queen", "exp": exp, "roles": []string{"admin"}}),
		"wrong audience": sign(jwt.MapClaims{"sub": "x", "iss": "https://idp.example", "aud": "other", "exp": exp, "roles": []string{"admin"}}),
		"no expiry":      sign(jwt.MapClaims{"sub": "x", "iss": "https://idp.example", "aud": "queen", "roles": []string{"admin"}}),
		"garbage":        "not.a.token",
	} {
		if st, _ := call(t, h, tok, "GET", "/api/v1/resources/queues"); st != 401 {
			t.Errorf("%s: %d, want 401", name, st)
		}
	}
}

func TestRequiredRoles(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         []auth.Role
	}{
		{"GET", "/health", nil},
		{"POST", "/api/v1/push", []auth.Role{auth.Produce}},
		{"POST", "/api/v1/transaction", []auth.Role{auth.Consume, auth.Produce}},
		{"GET", "/api/v1/pop/queue/q/partition/p", []auth.Role{auth.Consume}},
		{"POST", "/api/v1/lease/abc/extend", []auth.Role{auth.Consume}},
		{"POST", "/api/v1/ack/batch", []auth.Role{auth.Consume}},
		{"GET", "/api/v1/dlq", []auth.Role{auth.ReadOnly}},
		{"GET", "/api/v1/resources/overview", []auth.Role{auth.ReadOnly}},
		{"GET", "/metrics/prometheus", []auth.Role{auth.ReadOnly}},
		{"POST", "/api/v1/messages/p/t/retry", []auth.Role{auth.Admin}},
		{"DELETE", "/api/v1/resources/queues/q", []auth.Role{auth.Admin}},
		{"POST", "/api/v1/system/maintenance", []auth.Role{auth.Admin}},
	} {
		got := auth.Required(c.method, c.path)
		if len(got) != len(c.want) {
			t.Errorf("%s %s: %v, want %v", c.method, c.path, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s %s: %v, want %v", c.method, c.path, got, c.want)
			}
		}
	}
	if _, err := auth.New(context.Background(), auth.Config{Secret: "short"}); err == nil {
		t.Error("a 5-byte HS256 secret was accepted")
	}
}
