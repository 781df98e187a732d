// Package egress is the fence around what a deployment calls out to on a
// user's behalf: the targets of subscriptions (docs/subscriptions.md §6).
//
// A URL target is checked twice. When the subscription is created, its URL
// must be plain (http or https, a host, no credentials) and every address
// its host resolves to must be allowed. When the dispatcher connects, the
// address is checked again where the connection is made — a dialer's
// Control hook sees the address the socket is about to connect to — so a
// DNS answer that changes after the first check (rebinding) cannot reach an
// address the fence refuses. Redirects are never followed.
//
// Some addresses are always refused, whatever the deployment allows:
// unspecified (0.0.0.0, ::), "this network" (0.0.0.0/8), link-local
// (169.254.0.0/16, fe80::/10: the instance metadata service lives there),
// AWS's IPv6 metadata, DNS and time service (fd00:ec2::/32), multicast,
// broadcast, the reserved 240.0.0.0/4, and the Lambda runtime API on
// loopback port 9001. Loopback, the private ranges and public addresses are
// allowed where the deployment's Policy says so.
//
// A function target must be one the deployment declares.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/queen-serverless/queen/core/queen"
)

// Words of a Policy's allow list that name classes of addresses.
const (
	// Loopback allows 127.0.0.0/8 and ::1 (not the Lambda runtime port).
	Loopback = "loopback"
	// Private allows 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, the
	// shared 100.64.0.0/10 and the unique-local fc00::/7 (not fd00:ec2::/32).
	Private = "private"
	// Public allows every other unicast address.
	Public = "public"
	// None allows nothing: URL targets are off.
	None = "none"
)

// Default allow lists: `queen serve` runs on the developer's machine, so
// its targets may be local; on AWS URL targets are off until the stack
// lists what they may reach.
const (
	DefaultLocal  = Public + "," + Loopback
	DefaultLambda = None
)

// Policy is what URL targets may reach: classes of addresses, address
// ranges, and host names (whatever addresses they resolve to, except those
// always refused). The zero Policy allows nothing.
type Policy struct {
	Loopback, Private, Public bool
	Prefixes                  []netip.Prefix
	// Hosts are lower-case names; "*.example.com" matches every name below
	// example.com (not example.com itself).
	Hosts []string
}

// ParsePolicy reads an allow list: entries separated by commas or spaces,
// each a class (loopback, private, public), a CIDR ("10.1.0.0/16"), an
// address, a host name or "*." and a domain; or "none" alone. It reports
// every bad entry at once.
func ParsePolicy(list string) (Policy, error) {
	var p Policy
	var errs []error
	entries := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	for _, e := range entries {
		switch low := strings.ToLower(e); {
		case low == None:
			if len(entries) > 1 {
				errs = append(errs, fmt.Errorf("%q must stand alone", None))
			}
		case low == Loopback:
			p.Loopback = true
		case low == Private:
			p.Private = true
		case low == Public:
			p.Public = true
		case strings.Contains(e, "/"):
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				errs = append(errs, fmt.Errorf("%q is not a CIDR range", e))
				continue
			}
			p.Prefixes = append(p.Prefixes, pfx.Masked())
		default:
			if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				p.Prefixes = append(p.Prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
				continue
			}
			if !validHost(strings.TrimPrefix(low, "*.")) {
				errs = append(errs, fmt.Errorf("%q is not a class, a CIDR range, an address or a host name", e))
				continue
			}
			p.Hosts = append(p.Hosts, low)
		}
	}
	if len(errs) > 0 {
		return Policy{}, errors.Join(errs...)
	}
	return p, nil
}

// String is the policy as an allow list ParsePolicy reads.
func (p Policy) String() string {
	var out []string
	for _, c := range []struct {
		on   bool
		name string
	}{{p.Public, Public}, {p.Private, Private}, {p.Loopback, Loopback}} {
		if c.on {
			out = append(out, c.name)
		}
	}
	for _, pfx := range p.Prefixes {
		out = append(out, pfx.String())
	}
	out = append(out, p.Hosts...)
	if len(out) == 0 {
		return None
	}
	return strings.Join(out, ",")
}

// Off reports whether the policy allows nothing: URL targets are off.
func (p Policy) Off() bool {
	return !p.Loopback && !p.Private && !p.Public && len(p.Prefixes) == 0 && len(p.Hosts) == 0
}

// listsHost reports whether host is one of the policy's host names.
func (p Policy) listsHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, h := range p.Hosts {
		if h == host || strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:]) {
			return true
		}
	}
	return false
}

func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// The ranges the classes name.
var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	reserved    = netip.MustParsePrefix("240.0.0.0/4")
	awsIPv6     = netip.MustParsePrefix("fd00:ec2::/32")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48")
	compatible  = netip.MustParsePrefix("::/96") // IPv4-compatible (deprecated)
	siit        = netip.MustParsePrefix("::ffff:0:0:0/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	shared      = netip.MustParsePrefix("100.64.0.0/10")
)

// embedded is the IPv4 address an IPv6 one carries (NAT64, the local-use
// NAT64 prefix, IPv4-compatible, SIIT, 6to4): it is judged as that
// address, which is where it may lead. Others are themselves.
func embedded(a netip.Addr) netip.Addr {
	b := a.As16()
	switch {
	case !a.Is6():
		return a
	case nat64.Contains(a), nat64Local.Contains(a), siit.Contains(a),
		compatible.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return netip.AddrFrom4([4]byte(b[12:]))
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6]))
	}
	return a
}

// LambdaRuntimePort is the port of the Lambda runtime API on loopback.
const LambdaRuntimePort = 9001

// refusal says why an address is always refused, "" when it is not.
func refusal(a netip.Addr, port uint16) string {
	switch {
	case a.IsUnspecified() || thisNetwork.Contains(a):
		return "unspecified"
	case a.IsLinkLocalUnicast():
		return "link-local, where the instance metadata service is"
	case awsIPv6.Contains(a):
		return "AWS's metadata, DNS and time service"
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	case reserved.Contains(a):
		return "reserved"
	case a.IsLoopback() && port == LambdaRuntimePort:
		return "the Lambda runtime API's port"
	}
	return ""
}

// class names the class an address that is not always refused is in.
func class(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return Loopback
	case a.IsPrivate() || shared.Contains(a):
		return Private
	}
	return Public
}

// Refused is an address the fence refuses.
type Refused struct {
	Addr   netip.AddrPort
	Reason string
}

func (e *Refused) Error() string {
	return fmt.Sprintf("egress fence: %s %s", e.Addr.Addr(), e.Reason)
}

// Check says whether a connection to ap is allowed; listed is true when
// the URL's host is one of the policy's host names.
func (p Policy) Check(ap netip.AddrPort, listed bool) error {
	a := embedded(ap.Addr().Unmap())
	ap = netip.AddrPortFrom(a, ap.Port())
	if why := refusal(a, ap.Port()); why != "" {
		return &Refused{Addr: ap, Reason: "is always refused (" + why + ")"}
	}
	if listed || slices.ContainsFunc(p.Prefixes, func(pfx netip.Prefix) bool { return pfx.Contains(a) }) {
		return nil
	}
	c := class(a)
	if c == Loopback && p.Loopback || c == Private && p.Private || c == Public && p.Public {
		return nil
	}
	if p.Off() {
		return &Refused{Addr: ap, Reason: "is not allowed: URL targets are off in this deployment"}
	}
	return &Refused{Addr: ap, Reason: fmt.Sprintf("is %s, which this deployment does not allow (it allows %s)", c, p)}
}

// Resolver looks up a host's addresses (*net.Resolver does).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Fence checks subscription targets and makes the connections to URL
// targets. Its zero value refuses every target.
type Fence struct {
	// URLs is what URL targets may reach.
	URLs Policy
	// Functions are the functions subscriptions may deliver to (names or
	// ARNs, qualified or not), as the deployment declares them.
	Functions []string
	// Resolver resolves URL targets' hosts. Default net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds a connection's set-up (DNS and TCP). Default 10 s.
	Timeout time.Duration
}

// CheckTarget checks a subscription's target when it is created or
// changed: a queen.FieldError (400) says why it is refused.
func (f *Fence) CheckTarget(ctx context.Context, t queen.SubscriptionTarget) error {
	if t.Function != "" {
		return f.CheckFunction(t.Function)
	}
	return f.CheckURL(ctx, t.URL)
}

// CheckFunction refuses a function the deployment does not declare.
func (f *Fence) CheckFunction(name string) error {
	if len(f.Functions) == 0 {
		return queen.Invalid("target.function", "this deployment declares no function targets "+
			"(on AWS: the stack's subscriptionTargets; queen serve delivers URL targets only)")
	}
	want := functionKey(name)
	if !slices.ContainsFunc(f.Functions, func(d string) bool { return functionKey(d) == want }) {
		return queen.Invalid("target.function", "%q is not among the function targets this deployment declares "+
			"(the stack's subscriptionTargets: %s)", name, strings.Join(f.Functions, ", "))
	}
	return nil
}

// functionKey is a function's name and qualifier, from a name, a partial
// ARN or an ARN: what identifies it within the deployment's account.
func functionKey(s string) string {
	if i := strings.LastIndex(s, ":function:"); i >= 0 {
		return s[i+len(":function:"):]
	}
	return s
}

// CheckURL checks a URL target: http or https, a host, no credentials, and
// every address the host resolves to allowed. Its errors are
// queen.FieldErrors (400).
func (f *Fence) CheckURL(ctx context.Context, raw string) error {
	u, err := ParseURL(raw)
	if err != nil {
		return err
	}
	port, _ := strconv.Atoi(u.Port())
	addrs, listed, err := f.resolve(ctx, u.Hostname())
	if err != nil {
		return queen.Invalid("target.url", "%v", err)
	}
	for _, a := range addrs {
		if err := f.URLs.Check(netip.AddrPortFrom(a, uint16(port)), listed); err != nil {
			if _, literal := netip.ParseAddr(u.Hostname()); literal == nil {
				return queen.Invalid("target.url", "%v", err)
			}
			return queen.Invalid("target.url", "%s resolves to %v", u.Hostname(), err)
		}
	}
	return nil
}

// ParseURL parses a URL target and refuses what no fence allows: another
// scheme, no host, a bad port, credentials (user:password@). The port is
// filled in when the URL names none.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" {
		return nil, queen.Invalid("target.url", "must be an absolute http or https URL")
	}
	if u.User != nil {
		return nil, queen.Invalid("target.url", "must not carry credentials (user:password@): "+
			"authenticate the target another way (a token in a query parameter is shown only to admins)")
	}
	if u.Hostname() == "" {
		return nil, queen.Invalid("target.url", "must name a host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, queen.Invalid("target.url", "port %q is not a port number", p)
		}
	} else if u.Scheme == "https" {
		u.Host = net.JoinHostPort(u.Hostname(), "443")
	} else {
		u.Host = net.JoinHostPort(u.Hostname(), "80")
	}
	return u, nil
}

// resolve returns host's addresses (itself, when it is an address) and
// whether the policy lists it by name.
func (f *Fence) resolve(ctx context.Context, host string) ([]netip.Addr, bool, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, false, nil
	}
	listed := f.URLs.listsHost(host)
	if f.URLs.Off() {
		return nil, false, errors.New("URL targets are off in this deployment (on AWS: list the hosts or " +
			"ranges they may reach in the stack's subscriptionUrlAllow)")
	}
	r := f.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, listed, fmt.Errorf("%s does not resolve: %v", host, err)
	}
	if len(addrs) == 0 {
		return nil, listed, fmt.Errorf("%s does not resolve", host)
	}
	return addrs, listed, nil
}

// DialContext connects to addr (host:port) as the fence allows: it
// resolves the host, and each address is checked by the dialer's Control
// hook, on the address the socket connects to.
func (f *Fence) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portText, err)
	}
	addrs, listed, err := f.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: f.timeout(), Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("egress fence: %q is not an address: %w", address, err)
		}
		return f.URLs.Check(ap, listed)
	}}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (f *Fence) timeout() time.Duration {
	if f.Timeout > 0 {
		return f.Timeout
	}
	return 10 * time.Second
}

// ErrRedirect is a target's answer that redirects: never followed.
var ErrRedirect = errors.New("redirects are not followed")

// HTTPClient is the client that calls URL targets: every connection
// through DialContext, no proxy from the environment (it would connect in
// the fence's place), and no redirect followed (the 3xx is the answer).
// It has no overall timeout: each call is bounded by its context.
func (f *Fence) HTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           f.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   f.timeout(),
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Redacted is rawURL as read-only callers see it: its query replaced by
// REDACTED (a token may be a value, or a key alone); userinfo, which
// targets never carry, and the fragment dropped.
func Redacted(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "REDACTED", false
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}
