package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// RequestHeader must be on every call the proxy forwards. The console's
// app sends it; a page of another site cannot (a custom header needs a
// CORS preflight the proxy never grants), so it cannot make the proxy act
// with the user's credentials.
const RequestHeader = "X-Queen-Console"

// MaxBodyBytes bounds a forwarded request body (the API's own limit).
const MaxBodyBytes = 6 << 20

// SigV4Service is the service name API Gateway verifies signatures for.
const SigV4Service = "execute-api"

// forwarded are the request headers passed on to the API; the browser's
// others (cookies, fetch metadata, user agent …) stay here.
var forwarded = []string{"Accept", "Content-Type"}

// Authorizer authenticates one forwarded request, whose body is body.
type Authorizer interface {
	Authorize(r *http.Request, body []byte) error
}

// SigV4 signs requests with AWS Signature Version 4 for API Gateway's IAM
// authorizer.
type SigV4 struct {
	// Credentials are the caller's (the default AWS config chain's).
	Credentials aws.CredentialsProvider
	// Region of the API.
	Region string
	// Service; default SigV4Service.
	Service string
	// Now is the signing clock; default time.Now.
	Now func() time.Time
}

// Authorize implements Authorizer.
func (s SigV4) Authorize(r *http.Request, body []byte) error {
	creds, err := s.Credentials.Retrieve(r.Context())
	if err != nil {
		return fmt.Errorf("AWS credentials: %w", err)
	}
	service, now := s.Service, time.Now
	if service == "" {
		service = SigV4Service
	}
	if s.Now != nil {
		now = s.Now
	}
	sum := sha256.Sum256(body)
	return v4.NewSigner().SignHTTP(r.Context(), creds, r, hex.EncodeToString(sum[:]), service, s.Region, now())
}

// Bearer adds "Authorization: Bearer <token>" (API Gateway's JWT
// authorizer, or `queen serve` with JWT authentication).
type Bearer string

// Authorize implements Authorizer.
func (b Bearer) Authorize(r *http.Request, _ []byte) error {
	r.Header.Set("Authorization", "Bearer "+string(b))
	return nil
}

// NoAuth forwards requests as they are (an API without an authorizer).
type NoAuth struct{}

// Authorize implements Authorizer.
func (NoAuth) Authorize(*http.Request, []byte) error { return nil }

var executeAPIHost = regexp.MustCompile(`^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$`)

// RegionOf returns the region in an API Gateway URL's host
// (abc123.execute-api.eu-west-1.amazonaws.com), or "" for other hosts
// (custom domains).
func RegionOf(api *url.URL) string {
	if m := executeAPIHost.FindStringSubmatch(strings.ToLower(api.Hostname())); m != nil {
		return m[1]
	}
	return ""
}

// IsProxied reports whether the proxy forwards requests for path: the
// API's routes, /health and the metrics.
func IsProxied(path string) bool {
	return strings.HasPrefix(path, "/api/") || path == "/health" || strings.HasPrefix(path, "/metrics/")
}

// NewProxy returns a handler forwarding the console's API calls to api
// (its path, if any, is the prefix of every route), authenticated by auth.
// Only calls from the console's own page are forwarded: they carry
// RequestHeader, name this server (a loopback host) and, when the browser
// says where they come from, come from this origin.
func NewProxy(api *url.URL, auth Authorizer, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(api)
			pr.Out.Host = api.Host
			h := http.Header{}
			for _, k := range forwarded {
				if v := pr.In.Header.Get(k); v != "" {
					h.Set(k, v)
				}
			}
			pr.Out.Header = h
		},
		Transport: authTransport{base: http.DefaultTransport, auth: auth},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("console proxy", "method", r.Method, "path", r.URL.Path, "err", err)
			status := http.StatusBadGateway
			var te *tooLargeError
			if errors.As(err, &te) {
				status = http.StatusRequestEntityTooLarge
			}
			writeError(w, status, fmt.Sprintf("console proxy: %s %s: %v", r.Method, api.Redacted(), err))
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := refuse(r); msg != "" {
			writeError(w, http.StatusForbidden, "console proxy: "+msg)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// refuse says why a request may not be forwarded, or "".
func refuse(r *http.Request) string {
	if r.Header.Get(RequestHeader) == "" {
		return "only the console's own page may call the API through this proxy (header " + RequestHeader + " missing)"
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback()) {
		return "requests must name a loopback host (localhost, 127.0.0.1), not " + r.Host
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if u, err := url.Parse(origin); err != nil || u.Host != r.Host {
			return "cross-origin request from " + origin + " refused"
		}
	}
	return ""
}

type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("request body larger than %d bytes", e.limit)
}

// authTransport reads the body (a signature covers it), authorizes the
// request and sends it.
type authTransport struct {
	base http.RoundTripper
	auth Authorizer
}

func (t authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > MaxBodyBytes {
			return nil, &tooLargeError{MaxBodyBytes}
		}
		body = b
	}
	r = r.Clone(r.Context())
	r.ContentLength = int64(len(body))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if len(body) == 0 {
		r.Body, r.GetBody = http.NoBody, nil
	}
	if err := t.auth.Authorize(r, body); err != nil {
		return nil, err
	}
	return t.base.RoundTrip(r)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// CheckCredentials retrieves credentials once, so a missing or expired
// login fails at start with the SDK's explanation, and names their source.
func CheckCredentials(ctx context.Context, p aws.CredentialsProvider) (string, error) {
	if p == nil {
		return "", errors.New("no AWS credentials found")
	}
	c, err := p.Retrieve(ctx)
	if err != nil {
		return "", err
	}
	return c.Source, nil
}
