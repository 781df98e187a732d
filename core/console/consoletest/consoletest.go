// Package consoletest stands in for API Gateway's IAM authorizer in tests:
// a handler that verifies a request's SigV4 signature by computing it
// again, with the AWS SDK's signer and the credentials the caller is
// expected to hold, before it passes the request on.
package consoletest

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// MaxSkew is how far a signature's time may be from the verifier's clock
// (API Gateway allows 5 minutes).
const MaxSkew = 5 * time.Minute

// SigV4Verifier passes a request to Next only when it carries a valid
// SigV4 signature by Credentials for Service in Region; otherwise it
// answers 403 with API Gateway's {"message": …} shape.
type SigV4Verifier struct {
	Credentials aws.Credentials
	Region      string
	Service     string
	Next        http.Handler

	mu       sync.Mutex
	verified int
	rejected []string
}

// Counts returns how many requests were verified, and why the others were
// rejected.
func (v *SigV4Verifier) Counts() (verified int, rejected []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.verified, append([]string(nil), v.rejected...)
}

// ServeHTTP verifies r and passes it on, or refuses it.
func (v *SigV4Verifier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err := v.Verify(r, body); err != nil {
		v.mu.Lock()
		v.rejected = append(v.rejected, r.Method+" "+r.URL.Path+": "+err.Error())
		v.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "Forbidden: " + err.Error()})
		return
	}
	v.mu.Lock()
	v.verified++
	v.mu.Unlock()
	v.Next.ServeHTTP(w, r)
}

var authHeader = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$`)

// Verify checks r's signature over body: the credential scope, the time,
// the session token, and the signature itself, recomputed over the headers
// the request says it signed.
func (v *SigV4Verifier) Verify(r *http.Request, body []byte) error {
	got := r.Header.Get("Authorization")
	m := authHeader.FindStringSubmatch(got)
	if m == nil {
		return fmt.Errorf("no SigV4 Authorization header (got %q)", got)
	}
	keyID, day, region, service, signed := m[1], m[2], m[3], m[4], strings.Split(m[5], ";")
	switch {
	case keyID != v.Credentials.AccessKeyID:
		return fmt.Errorf("unknown access key %s", keyID)
	case region != v.Region:
		return fmt.Errorf("signed for region %s, want %s", region, v.Region)
	case service != v.Service:
		return fmt.Errorf("signed for service %s, want %s", service, v.Service)
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %v", err)
	}
	if d := time.Since(at); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("signature time %s is too far from now", at)
	}
	if at.Format("20060102") != day {
		return fmt.Errorf("credential scope day %s does not match X-Amz-Date", day)
	}
	if v.Credentials.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != v.Credentials.SessionToken {
		return fmt.Errorf("X-Amz-Security-Token missing or wrong")
	}
	for _, h := range []string{"host", "x-amz-date"} {
		if !contains(signed, h) {
			return fmt.Errorf("%s is not signed", h)
		}
	}

	// The same request, with only the headers it signed, signed again.
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	again, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), nil)
	if err != nil {
		return err
	}
	again.URL.RawPath = r.URL.RawPath
	again.Host = r.Host
	for _, h := range signed {
		switch h {
		case "host":
		case "content-length":
			again.ContentLength = r.ContentLength
		default:
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(r.Context(), v.Credentials, again, hex.EncodeToString(sum[:]), v.Service, v.Region, at); err != nil {
		return err
	}
	if want := again.Header.Get("Authorization"); subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
		return fmt.Errorf("signature mismatch")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
