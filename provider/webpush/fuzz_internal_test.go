package webpush

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/idna"
)

// fuzzAllowed is the allow-list FuzzEndpoint checks against: the default
// push services, a wildcard, and two public addresses written as IP
// literals, so that the fuzzer can reach the address checks through an
// allowed host.
var fuzzAllowed = append(DefaultAllowedHosts(), "*.push.example.com", "1.1.1.1", "2606:4700:4700::1111")

// allowedAddrs are the only addresses an accepted endpoint may name.
var allowedAddrs = []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("2606:4700:4700::1111")}

// FuzzEndpoint feeds the endpoint check (checkEndpoint) and the dial check
// (control) arbitrary text. They never panic. An accepted endpoint is an
// https URL without user information whose host, as checked and as net/http
// dials it (IDNA-mapped), is on the allow-list; and no notation of its host
// that any reader could take for an address — netip's, inet_aton's decimal,
// octal and hexadecimal forms, IPv4-mapped IPv6 — names an address other
// than the allow-list's own. The dial check passes only a public address.
func FuzzEndpoint(f *testing.F) {
	for _, s := range []string{
		"https://fcm.googleapis.com/fcm/send/abc:APA91b",
		"https://updates.push.services.mozilla.com/wpush/v2/gAAAAA",
		"https://a.b.push.services.mozilla.com/x",
		"https://web.push.apple.com/QO",
		"https://wns2-par02p.notify.windows.com/w/?token=AwYAAAD",
		"https://x.push.example.com/", "https://1.1.1.1/p", "https://[2606:4700:4700::1111]:8443/p",
		"https://[::ffff:1.1.1.1]/p", "https://[::ffff:101:101]/p", "https://16843009/p", "https://0x01010101/p", "https://1.1.257/p",
		"https://127.0.0.1/", "https://[::1]/", "https://[::ffff:127.0.0.1]/", "https://[::ffff:7f00:1]/", "https://0/", "https://0.0.0.0/",
		"https://[::]/", "https://2130706433/", "https://0177.0.0.1/", "https://0x7f.0.0.1/", "https://127.1/", "https://169.254.169.254/",
		"https://[fe80::1%25eth0]/", "https://[64:ff9b::7f00:1]/", "https://[2002:7f00:1::]/", "https://localhost/",
		"http://fcm.googleapis.com/x", "https://user@fcm.googleapis.com/x", "https://fcm.googleapis.com@evil.example/",
		"https://evil.example\\@fcm.googleapis.com/", "https://evil.example#fcm.googleapis.com", "https://evil.example/?h=fcm.googleapis.com",
		"https://fcm.googleapis.com./x", "https://FCM.GoogleAPIs.com/x", "https://fcm.googleapis.com.evil.example/",
		"https://fcm%2egoogleapis%2ecom/x", "https://fcm.googleapis.com%00.evil.example/", "https://ｆｃｍ.googleapis.com/x",
		"https://fcm。googleapis。com/x", "https://xn--fcm-googleapis.com/", "https://fcm.googleapis.com:0/", "https://fcm.googleapis.com:99999/",
		"https://fcm.goog\u200bleapis.com/", "https:fcm.googleapis.com/x", "https:///fcm.googleapis.com", "//fcm.googleapis.com/x",
		"https://a.push.example.com.127.0.0.1.nip.io/", "https://127.0.0.1.push.example.com/", "https://0x7f000001.push.example.com/",
		"https://[::ffff:127.0.0.1].push.example.com/", "https://a\x00.push.example.com/", "https://\xff.push.example.com/",
	} {
		f.Add(s)
	}
	g, err := newGuard(fuzzAllowed, false, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, endpoint string) {
		// The dial check sees whatever address the resolver handed out.
		if err := g.control("tcp", endpoint, nil); err == nil {
			ap, perr := netip.ParseAddrPort(endpoint)
			if perr != nil || !public(ap.Addr()) {
				t.Fatalf("the dial check let %q through", endpoint)
			}
		}
		u, err := g.checkEndpoint(endpoint)
		if err != nil {
			return
		}
		if u.Scheme != "https" || u.User != nil || u.Host == "" {
			t.Fatalf("accepted %q: scheme %q, user %v, host %q", endpoint, u.Scheme, u.User, u.Host)
		}
		host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		if !allowedHost(host) {
			t.Fatalf("accepted %q: host %q is not on the allow-list", endpoint, host)
		}
		// What net/http dials: the request's host, IDNA-mapped.
		req, err := http.NewRequest(http.MethodPost, endpoint, nil)
		if err != nil {
			t.Fatalf("accepted %q, which net/http cannot send to: %v", endpoint, err)
		}
		dialled := req.URL.Hostname()
		if ascii, err := idna.Lookup.ToASCII(dialled); err == nil {
			dialled = ascii
		}
		dialled = strings.TrimSuffix(strings.ToLower(dialled), ".")
		if !allowedHost(dialled) {
			t.Fatalf("accepted %q, which net/http dials as %q, not on the allow-list", endpoint, dialled)
		}
		for _, h := range []string{host, dialled} {
			for _, a := range addressesIn(h) {
				if !slices.Contains(allowedAddrs, a.Unmap().WithZone("")) {
					t.Fatalf("accepted %q, whose host %q can be read as the address %v", endpoint, h, a)
				}
			}
		}
		// An accepted address is one the dial check lets through.
		if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
			if err := g.control("tcp", net.JoinHostPort(a.String(), "443"), nil); err != nil {
				t.Fatalf("accepted %q, whose address the dial check refuses: %v", endpoint, err)
			}
		}
	})
}

// allowedHost is the allow-list's rule, written out: an exact entry, or a
// name below a wildcard's domain.
func allowedHost(host string) bool {
	for _, e := range fuzzAllowed {
		if domain, ok := strings.CutPrefix(e, "*."); ok {
			if strings.HasSuffix(host, "."+domain) && len(host) > len(domain)+1 {
				return true
			}
		} else if a, err := netip.ParseAddr(e); err == nil {
			if b, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && b.Unmap().WithZone("") == a {
				return true
			}
		} else if host == e {
			return true
		}
	}
	return false
}

// addressesIn lists the addresses a host name can be read as, by netip or
// by inet_aton's rules (one to four parts, each decimal, octal with a
// leading 0, or hexadecimal with 0x, the last filling the remaining bytes).
func addressesIn(host string) []netip.Addr {
	var out []netip.Addr
	h := strings.Trim(host, "[]")
	if i := strings.IndexByte(h, '%'); i >= 0 {
		h = h[:i]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		out = append(out, a)
	}
	if a, ok := inetAton(h); ok {
		out = append(out, a)
	}
	return out
}

func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, p = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (24 - 8*i)
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// public says whether a is a public unicast address by net.IP's reckoning,
// not netip's: loopback, private, link-local, multicast and unspecified
// addresses, and the IANA ranges that reach no single public host, are not.
func public(a netip.Addr) bool {
	ip := net.IP(a.Unmap().AsSlice())
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() || !ip.IsGlobalUnicast() {
		return false
	}
	for _, cidr := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "::/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
		"2001::/23", "2001:db8::/32", "2002::/16", "fec0::/10"} {
		if _, n, _ := net.ParseCIDR(cidr); n.Contains(ip) {
			return false
		}
	}
	return true
}
