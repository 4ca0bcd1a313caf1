package webpush

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// guard decides which endpoints and addresses the provider may talk to. An
// endpoint is chosen by whoever registered the device; without this check a
// registration could point the server at its own network (SSRF).
type guard struct {
	hosts         []allowed // exact host names and IP addresses
	suffixes      []allowed // "*.domain" entries, host ".domain"
	allowLoopback bool
	allowPrivate  bool
}

// allowed is one AllowedHosts entry: a host (lower case, an IP address in
// its canonical form) and the one port it allows.
type allowed struct {
	host, port string
}

// defaultPort is the only port an entry that names none allows: https's
// (D124). Allowing a push service's host is not allowing every service that
// host, or a host under its wildcard, listens on.
const defaultPort = "443"

func newGuard(entries []string, allowLoopback, allowPrivate bool) (*guard, error) {
	g := &guard{allowLoopback: allowLoopback, allowPrivate: allowPrivate}
	for i, h := range entries {
		entry, err := normalizeAllowed(h)
		if err != nil {
			return nil, fmt.Errorf("webpush: AllowedHosts[%d]: %q %w", i, h, err)
		}
		if domain, ok := strings.CutPrefix(entry.host, "*."); ok {
			g.suffixes = append(g.suffixes, allowed{"." + domain, entry.port})
		} else {
			g.hosts = append(g.hosts, entry)
		}
	}
	return g, nil
}

// normalizeAllowed checks an AllowedHosts entry — a host name, "*." and a
// domain, or an IP address, each optionally with ":port" (an IPv6 address
// in brackets then) — and returns its host lower case, an IP address in its
// canonical form, and its port, defaultPort when it names none.
func normalizeAllowed(h string) (allowed, error) {
	h = strings.ToLower(strings.TrimSpace(h))
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return allowed{a.String(), defaultPort}, nil
	}
	port := defaultPort
	if host, p, err := net.SplitHostPort(h); err == nil {
		if port, err = canonicalPort(p); err != nil {
			return allowed{}, err
		}
		if a, err := netip.ParseAddr(host); err == nil {
			return allowed{a.String(), port}, nil
		}
		h = host
	}
	h = strings.TrimSuffix(h, ".")
	name, wildcard := strings.CutPrefix(h, "*.")
	switch {
	case name == "":
		return allowed{}, errors.New("is empty")
	case strings.ContainsAny(name, "/:@?#[]"):
		return allowed{}, errors.New("is not a host name: give the host only (and a port if not 443), without scheme or path")
	case wildcard && !strings.Contains(name, "."):
		return allowed{}, errors.New("is too broad: a wildcard needs a domain of at least two labels")
	}
	if !hostName(name) {
		return allowed{}, errors.New("is not a host name (letters, digits, hyphens and dots; a leading \"*.\" for a wildcard)")
	}
	return allowed{h, port}, nil
}

// canonicalPort checks a port number, 1 to 65535 in decimal, and returns it
// without leading zeros (the dialler reads "0443" as 443).
func canonicalPort(p string) (string, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strings.TrimLeft(p, "0123456789") != "" {
		return "", errors.New("has a port that is not a number from 1 to 65535")
	}
	return strconv.Itoa(n), nil
}

// hostName reports whether every label of host is a non-empty run of
// letters, digits, hyphens and underscores (lower case).
func hostName(host string) bool {
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || !validLabel(label) {
			return false
		}
	}
	return true
}

func validLabel(l string) bool {
	for i := range len(l) {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// hostAllowed reports whether an entry allows host (lower case, an IP
// address canonical) on port (canonical).
func (g *guard) hostAllowed(host, port string) bool {
	if slices.Contains(g.hosts, allowed{host, port}) {
		return true
	}
	for _, s := range g.suffixes {
		if s.port == port && strings.HasSuffix(host, s.host) {
			return true
		}
	}
	return false
}

// checkEndpoint parses an endpoint and refuses it unless it is https, its
// host is allowed and, for an IP address, the address is one the provider may
// dial. Its errors name the host, never the whole URL (which is a secret).
func (g *guard) checkEndpoint(endpoint string) (*url.URL, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, errors.New("the subscription endpoint is not an absolute URL")
	}
	if u.Scheme != "https" {
		return nil, errors.New("the subscription endpoint is not https")
	}
	if u.User != nil {
		return nil, errors.New("the subscription endpoint carries user information")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		if err := g.checkAddr(a); err != nil {
			return nil, fmt.Errorf("the subscription endpoint's host is %v", err)
		}
		host = a.WithZone("").String()
	} else if numericHost(host) {
		// 2130706433, 0177.0.0.1, 127.1, 0x7f.0.0.1: the forms inet_aton
		// accepts. Some resolvers turn them into addresses; no push service
		// uses one.
		return nil, fmt.Errorf("the subscription endpoint's host %q is an IPv4 address in a non-standard form", host)
	} else if !hostName(host) {
		// ".notify.windows.com" ends like an allowed wildcard's domain but
		// names nothing under it; nor does a label of other characters.
		return nil, fmt.Errorf("the subscription endpoint's host %q is not a host name (letters, digits, hyphens; no empty label)", host)
	}
	port := defaultPort
	if p := u.Port(); p != "" {
		if port, err = canonicalPort(p); err != nil {
			return nil, fmt.Errorf("the subscription endpoint's port %q is not a number from 1 to 65535", p)
		}
	}
	if !g.hostAllowed(host, port) {
		if port != defaultPort {
			return nil, fmt.Errorf("the subscription endpoint's host and port %q are not a push service on the allow-list (AllowedHosts; an entry without a port allows 443 only)", net.JoinHostPort(host, port))
		}
		return nil, fmt.Errorf("the subscription endpoint's host %q is not a push service on the allow-list (AllowedHosts)", host)
	}
	return u, nil
}

// checkDialTarget checks the host and port the HTTP transport asks to
// connect to (before DNS) against the allow-list, as checkEndpoint did for
// the request's URL: whatever made the transport dial elsewhere — a
// redirect, a proxy, a code path that skipped checkEndpoint — reaches no
// host and port nobody allowed. control then checks the address DNS gave.
func (g *guard) checkDialTarget(addr string) error {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return &refusedAddrError{reason: fmt.Sprintf("%q is not a host and port", addr)}
	}
	port, err := canonicalPort(p)
	if err != nil {
		return &refusedAddrError{reason: fmt.Sprintf("port %q is not a number from 1 to 65535", p)}
	}
	host := strings.TrimSuffix(strings.ToLower(h), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.WithZone("").String()
	}
	if !g.hostAllowed(host, port) {
		return &refusedAddrError{reason: fmt.Sprintf("%s is not on the allow-list (AllowedHosts)", net.JoinHostPort(host, port))}
	}
	return nil
}

// numericHost reports whether a host name ends in a label that is a number
// (decimal, octal or 0x hexadecimal): no real top-level domain does, but an
// IPv4 address written the way inet_aton reads it does.
func numericHost(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	digits := last
	if rest, ok := strings.CutPrefix(last, "0x"); ok {
		digits = rest
		for i := range len(digits) {
			if !strings.ContainsRune("0123456789abcdef", rune(digits[i])) {
				return false
			}
		}
		return true
	}
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// control is the dialler's Control hook: it sees the address actually being
// connected to, after DNS, so a host name that resolves (or is rebound) to an
// internal address is refused too.
func (g *guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &refusedAddrError{reason: fmt.Sprintf("address %q is not an IP address and port", address)}
	}
	return g.checkAddr(ap.Addr())
}

// refusedAddrError is an address the provider must not connect to.
type refusedAddrError struct {
	addr   netip.Addr
	reason string
}

func (e *refusedAddrError) Error() string {
	if !e.addr.IsValid() {
		return e.reason
	}
	return e.addr.String() + ", " + e.reason
}

// Address ranges that are not public unicast destinations beyond what netip's
// predicates cover (IANA special-purpose registries).
var (
	sharedPrefix   = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT
	reservedRanges = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
		netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated)
		netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: reaches IPv4 through a gateway
		netip.MustParsePrefix("64:ff9b:1::/48"),  // local NAT64
		netip.MustParsePrefix("100::/64"),        // discard
		netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments, Teredo
		netip.MustParsePrefix("2001:db8::/32"),   // documentation
		netip.MustParsePrefix("2002::/16"),       // 6to4: embeds an IPv4 address
		netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
	}
)

// checkAddr refuses an address that is not public unicast, unless loopback or
// private addresses were explicitly allowed. An IPv4-mapped IPv6 address
// (::ffff:127.0.0.1) is judged as the IPv4 address it is.
func (g *guard) checkAddr(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	refuse := func(reason string) error { return &refusedAddrError{addr: a, reason: reason} }
	switch {
	case !a.IsValid():
		return &refusedAddrError{reason: "not an IP address"}
	case a.IsUnspecified():
		return refuse("an unspecified address")
	case a.IsLoopback():
		if g.allowLoopback {
			return nil
		}
		return refuse("a loopback address (AllowLoopback is off)")
	case a.IsPrivate() || sharedPrefix.Contains(a):
		if g.allowPrivate {
			return nil
		}
		return refuse("a private address (AllowPrivate is off)")
	case a.IsLinkLocalUnicast():
		return refuse("a link-local address")
	case a.IsMulticast():
		return refuse("a multicast address")
	}
	for _, p := range reservedRanges {
		if p.Contains(a) {
			return refuse("a reserved address, not a public one")
		}
	}
	return nil
}
