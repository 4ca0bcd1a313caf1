package webpush

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
)

// guard decides which endpoints and addresses the provider may talk to. An
// endpoint is chosen by whoever registered the device; without this check a
// registration could point the server at its own network (SSRF).
type guard struct {
	hosts         []string // exact host names and IP addresses, lower case
	suffixes      []string // ".domain" for "*.domain" entries
	allowLoopback bool
	allowPrivate  bool
}

func newGuard(allowed []string, allowLoopback, allowPrivate bool) (*guard, error) {
	g := &guard{allowLoopback: allowLoopback, allowPrivate: allowPrivate}
	for i, h := range allowed {
		entry, err := normalizeAllowed(h)
		if err != nil {
			return nil, fmt.Errorf("webpush: AllowedHosts[%d]: %q %w", i, h, err)
		}
		if domain, ok := strings.CutPrefix(entry, "*."); ok {
			g.suffixes = append(g.suffixes, "."+domain)
		} else {
			g.hosts = append(g.hosts, entry)
		}
	}
	return g, nil
}

// normalizeAllowed checks an AllowedHosts entry and returns it lower case, IP
// addresses in their canonical form.
func normalizeAllowed(h string) (string, error) {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return a.String(), nil
	}
	name, wildcard := strings.CutPrefix(h, "*.")
	switch {
	case name == "":
		return "", errors.New("is empty")
	case strings.ContainsAny(name, "/:@?#"):
		return "", errors.New("is not a host name: give the host only, without scheme, port or path")
	case wildcard && !strings.Contains(name, "."):
		return "", errors.New("is too broad: a wildcard needs a domain of at least two labels")
	}
	if !hostName(name) {
		return "", errors.New("is not a host name (letters, digits, hyphens and dots; a leading \"*.\" for a wildcard)")
	}
	return h, nil
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

func (g *guard) hostAllowed(host string) bool {
	if slices.Contains(g.hosts, host) {
		return true
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(host, s) {
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
	if !g.hostAllowed(host) {
		return nil, fmt.Errorf("the subscription endpoint's host %q is not a push service on the allow-list (AllowedHosts)", host)
	}
	return u, nil
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
