package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/queen-serverless/queen/core/egress"
	"github.com/queen-serverless/queen/core/queen"
)

func policy(t *testing.T, list string) egress.Policy {
	t.Helper()
	p, err := egress.ParsePolicy(list)
	if err != nil {
		t.Fatalf("ParsePolicy(%q): %v", list, err)
	}
	return p
}

// Every class of address the fence always refuses is refused whatever the
// deployment allows — also behind an allow list that covers every address
// and under a host name the deployment lists — and each address of the
// other classes is allowed exactly where its class is (SPEC §3.8).
func TestAddressClasses(t *testing.T) {
	t.Parallel()
	everything := policy(t, "public,private,loopback,0.0.0.0/0,::/0")
	always := map[string]string{
		"0.0.0.0:80":                  "unspecified",
		"[::]:80":                     "unspecified",
		"0.1.2.3:80":                  "unspecified",
		"169.254.169.254:80":          "link-local",
		"169.254.170.2:80":            "link-local",
		"[fe80::1]:80":                "link-local",
		"[fd00:ec2::254]:80":          "AWS's metadata",
		"[fd00:ec2::23]:53":           "AWS's metadata",
		"224.0.0.1:80":                "multicast",
		"[ff02::1]:80":                "multicast",
		"255.255.255.255:80":          "broadcast",
		"240.0.0.1:80":                "reserved",
		"127.0.0.1:9001":              "Lambda runtime",
		"[::ffff:169.254.169.254]:80": "link-local",
		"[64:ff9b::a9fe:a9fe]:80":     "link-local", // 169.254.169.254 through NAT64
		"[64:ff9b:1::a9fe:a9fe]:80":   "link-local", // the local-use NAT64 prefix
		"[::a9fe:a9fe]:80":            "link-local", // IPv4-compatible
		"[::ffff:0:a9fe:a9fe]:80":     "link-local", // SIIT
		"[2002:a9fe:a9fe::1]:80":      "link-local", // 6to4
	}
	for addr, why := range always {
		ap := netip.MustParseAddrPort(addr)
		for _, listed := range []bool{false, true} {
			err := everything.Check(ap, listed)
			var refused *egress.Refused
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), why) {
				t.Errorf("%s (listed host %v): %v, want refused as %s", addr, listed, err, why)
			}
		}
	}
	classes := map[string]string{
		"127.0.0.1:5432":    egress.Loopback,
		"[::1]:8080":        egress.Loopback,
		"10.1.2.3:443":      egress.Private,
		"172.16.0.1:443":    egress.Private,
		"192.168.1.1:443":   egress.Private,
		"100.64.0.1:443":    egress.Private,
		"[fd12::1]:443":     egress.Private,
		"203.0.113.7:443":   egress.Public,
		"[2001:db8::1]:443": egress.Public,
	}
	for addr, class := range classes {
		ap := netip.MustParseAddrPort(addr)
		for _, allowed := range []string{egress.Loopback, egress.Private, egress.Public} {
			err := policy(t, allowed).Check(ap, false)
			if (err == nil) != (allowed == class) {
				t.Errorf("%s (%s) under %q: %v", addr, class, allowed, err)
			}
		}
		if err := (egress.Policy{}).Check(ap, false); err == nil || !strings.Contains(err.Error(), "off") {
			t.Errorf("%s with URL targets off: %v, want refused as off", addr, err)
		}
	}
	narrow := policy(t, "10.1.0.0/16, 203.0.113.7")
	if err := narrow.Check(netip.MustParseAddrPort("10.1.9.9:80"), false); err != nil {
		t.Errorf("10.1.9.9 under 10.1.0.0/16: %v", err)
	}
	if err := narrow.Check(netip.MustParseAddrPort("10.2.0.1:80"), false); err == nil {
		t.Error("10.2.0.1 under 10.1.0.0/16 was allowed")
	}
	if err := narrow.Check(netip.MustParseAddrPort("203.0.113.7:80"), false); err != nil {
		t.Errorf("a listed address: %v", err)
	}
}

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	p := policy(t, "loopback, 10.0.0.0/8 hooks.example.com,*.corp.example")
	if !p.Loopback || p.Private || p.Public || len(p.Prefixes) != 1 || len(p.Hosts) != 2 {
		t.Errorf("parsed %+v", p)
	}
	if got := p.String(); got != "loopback,10.0.0.0/8,hooks.example.com,*.corp.example" {
		t.Errorf("String() = %q", got)
	}
	if !policy(t, "none").Off() || !policy(t, "").Off() {
		t.Error(`"none" and "" do not turn URL targets off`)
	}
	_, err := egress.ParsePolicy("loopback,10.0.0.0/33,bad!host,none")
	for _, want := range []string{"10.0.0.0/33", "bad!host", "none"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePolicy of bad entries: %v, want it to name %q", err, want)
		}
	}
}

// resolver answers from a table; each lookup of a name takes its next
// answer (the last repeats), so a test can change the answer between the
// check at creation and the connection.
type resolver struct {
	answers map[string][]string
	lookups atomic.Int64
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n := int(r.lookups.Add(1)) - 1
	as, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	a := netip.MustParseAddr(as[min(n, len(as)-1)])
	return []netip.Addr{a}, nil
}

// A subscription's URL is refused at creation, with a 400 that says why,
// whenever the fence would refuse the connection; what it allows passes.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	local := &egress.Fence{URLs: policy(t, egress.DefaultLocal), Resolver: &resolver{answers: map[string][]string{
		"localhost": {"127.0.0.1"}, "metadata.example": {"169.254.169.254"}, "intranet.example": {"10.0.0.5"},
		"hooks.example.com": {"203.0.113.9"}}}}
	cases := map[string]string{ // URL: the refusal's words ("" allowed)
		"http://127.0.0.1:8080/":                    "",
		"http://localhost:8080/hook":                "",
		"https://hooks.example.com/x?token=abc":     "",
		"http://169.254.169.254/latest/meta-data/":  "link-local",
		"http://[fd00:ec2::254]/":                   "metadata",
		"http://metadata.example/":                  "link-local",
		"http://0.0.0.0:22/":                        "unspecified",
		"http://:80/":                               "must name a host",
		"http://intranet.example/":                  "private",
		"http://user:secret@hooks.example.com/":     "credentials",
		"http://user@hooks.example.com/":            "credentials",
		"ftp://hooks.example.com/":                  "http or https",
		"http://nowhere.example/":                   "does not resolve",
		"http://127.0.0.1:9001/2018-06-01/runtime/": "Lambda runtime",
		"http://127.0.0.1:99999/":                   "port",
	}
	for u, want := range cases {
		err := local.CheckURL(context.Background(), u)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want allowed", u, err)
		case want != "" && (err == nil || !errors.Is(err, queen.ErrInvalid) || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want a 400 that says %q", u, err, want)
		}
	}
	aws := &egress.Fence{URLs: policy(t, egress.DefaultLambda)}
	for _, u := range []string{"http://127.0.0.1:5432/", "http://localhost:5432/", "https://203.0.113.9/"} {
		if err := aws.CheckURL(context.Background(), u); err == nil || !strings.Contains(err.Error(), "off") {
			t.Errorf("%s on AWS by default: %v, want refused: URL targets are off", u, err)
		}
	}
	listed := &egress.Fence{URLs: policy(t, "*.corp.example"), Resolver: &resolver{answers: map[string][]string{
		"hooks.corp.example": {"10.0.0.7"}, "evil.corp.example": {"169.254.169.254"}, "other.example": {"10.0.0.7"}}}}
	if err := listed.CheckURL(context.Background(), "https://hooks.corp.example/"); err != nil {
		t.Errorf("a listed host at a private address: %v", err)
	}
	if err := listed.CheckURL(context.Background(), "https://evil.corp.example/"); err == nil {
		t.Error("a listed host resolving to the metadata address was allowed")
	}
	if err := listed.CheckURL(context.Background(), "https://other.example/"); err == nil {
		t.Error("a host not listed was allowed")
	}
}

// Function targets must be among those the deployment declares, in the
// form declared (a name matches its ARN, not another qualifier).
func TestCheckFunction(t *testing.T) {
	t.Parallel()
	f := &egress.Fence{Functions: []string{"orders-handler", "arn:aws:lambda:eu-west-1:123456789012:function:billing:live"}}
	for name, ok := range map[string]bool{
		"orders-handler": true,
		"arn:aws:lambda:eu-west-1:123456789012:function:orders-handler": true,
		"billing:live": true,
		"arn:aws:lambda:eu-west-1:123456789012:function:billing:live": true,
		"billing":         false,
		"billing:test":    false,
		"orders-handlr":   false,
		"orders-handler2": false,
	} {
		err := f.CheckFunction(name)
		if (err == nil) != ok || err != nil && !errors.Is(err, queen.ErrInvalid) {
			t.Errorf("%s: %v, want allowed %v", name, err, ok)
		}
	}
	if err := (&egress.Fence{}).CheckFunction("orders-handler"); err == nil || !strings.Contains(err.Error(), "declares no function") {
		t.Errorf("no declared functions: %v", err)
	}
}

// The connection is checked on the address the socket connects to: a host
// whose DNS answer changes after the check at creation (rebinding to the
// metadata address, or to loopback where only public addresses are
// allowed) is refused when the dispatcher connects, and nothing reaches
// the address.
func TestDialChecksTheResolvedAddress(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	u := "http://rebind.example:" + itoa(port) + "/"

	r := &resolver{answers: map[string][]string{"rebind.example": {"127.0.0.1", "169.254.169.254"}}}
	f := &egress.Fence{URLs: policy(t, egress.DefaultLocal), Resolver: r}
	if err := f.CheckURL(context.Background(), u); err != nil {
		t.Fatalf("the first answer (loopback) is allowed: %v", err)
	}
	_, err := f.HTTPClient().Post(u, "application/json", strings.NewReader("{}"))
	var refused *egress.Refused
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "link-local") {
		t.Errorf("after rebinding to 169.254.169.254: %v, want refused by the fence", err)
	}

	// Only public addresses: a name that now answers loopback is refused at
	// connect time, though the server there is up.
	r2 := &resolver{answers: map[string][]string{"rebind.example": {"203.0.113.9", "127.0.0.1"}}}
	pub := &egress.Fence{URLs: policy(t, egress.Public), Resolver: r2}
	if err := pub.CheckURL(context.Background(), u); err != nil {
		t.Fatalf("the first answer (public) is allowed: %v", err)
	}
	_, err = pub.HTTPClient().Post(u, "application/json", strings.NewReader("{}"))
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("after rebinding to 127.0.0.1: %v, want refused by the fence", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server behind the refused address got %d requests", n)
	}

	// The same client reaches an allowed address.
	resp, err := f.HTTPClient().Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("an allowed loopback target: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Errorf("the allowed target got %d requests, want 1", hits.Load())
	}
}

// The client follows no redirect: the 3xx is the answer, and the address
// it names gets nothing, whatever the fence would say of it.
func TestNoRedirectIsFollowed(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	for _, code := range []int{301, 302, 303, 307, 308} {
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/x", code)
		}))
		f := &egress.Fence{URLs: policy(t, egress.DefaultLocal)}
		resp, err := f.HTTPClient().Post(redirect.URL, "application/json", strings.NewReader(`{"records":[]}`))
		if err != nil {
			t.Fatalf("%d: %v", code, err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("%d: the client answered %d", code, resp.StatusCode)
		}
		redirect.Close()
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's Location got %d requests", n)
	}
}

func TestRedacted(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://h.example/hook?token=abc&x=1": "https://h.example/hook?REDACTED",
		"https://h.example/hook?s3cr3tT0ken":   "https://h.example/hook?REDACTED",
		"https://h.example/hook":               "https://h.example/hook",
		"http://u:p@h.example/?k=v#frag":       "http://h.example/?REDACTED",
	} {
		if got := egress.Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
