package webpush_test

import (
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/webpush"
)

// subscriptionToken is a well-formed subscription for endpoint.
func subscriptionToken(t *testing.T, endpoint string) provider.Token {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sub := &provider.WebPushSubscription{Endpoint: endpoint, P256dh: k.PublicKey().Bytes(), Auth: make([]byte, 16)}
	return sub.Token()
}

func newProvider(t *testing.T, cfg webpush.Config) *webpush.Provider {
	t.Helper()
	_, priv := vapidKeys(t)
	cfg.VAPIDPrivateKey, cfg.VAPIDSubject = priv, "mailto:ops@example.com"
	p, err := webpush.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkRefusal asserts ValidateToken's verdict and, for a refusal, that it is
// a validation error about the token that does not repeat the endpoint.
func checkRefusal(t *testing.T, p *webpush.Provider, endpoint string, wantOK bool) {
	t.Helper()
	err := p.ValidateToken(subscriptionToken(t, endpoint))
	if (err == nil) != wantOK {
		t.Errorf("%s: err %v, want allowed=%v", endpoint, err, wantOK)
		return
	}
	if err == nil {
		return
	}
	var ve *provider.ValidationError
	if !errors.As(err, &ve) || ve.Field != "token" {
		t.Errorf("%s: err %#v is not a ValidationError about the token", endpoint, err)
	}
	if i := strings.LastIndexByte(endpoint, '/'); i >= 0 && len(endpoint)-i > 4 && strings.Contains(err.Error(), endpoint[i+1:]) {
		t.Errorf("%s: the error repeats the endpoint's secret part: %v", endpoint, err)
	}
}

// endpointCase is an endpoint and whether ValidateToken accepts it.
type endpointCase struct {
	endpoint string
	ok       bool
}

// checkEndpoints checks each case on a provider with the default allow-list
// and returns the provider.
func checkEndpoints(t *testing.T, cases []endpointCase) *webpush.Provider {
	t.Helper()
	p := newProvider(t, webpush.Config{})
	for _, tc := range cases {
		checkRefusal(t, p, tc.endpoint, tc.ok)
	}
	return p
}

func TestValidateTokenDefaultAllowList(t *testing.T) {
	t.Parallel()
	p := checkEndpoints(t, []endpointCase{
		{"https://fcm.googleapis.com/fcm/send/dGhpcyBpcyBh:APA91bEzzz", true},
		{"https://FCM.googleapis.com/fcm/send/dGhpcyBpcyBh", true},
		{"https://updates.push.services.mozilla.com/wpush/v2/gAAAAABnxyz", true},
		{"https://push.services.mozilla.com.evil.example/wpush/v2/gAAAAABnxyz", false},
		{"https://web.push.apple.com/QGqTf3mBrt8", true},
		{"https://wns2-par02p.notify.windows.com/w/?token=BQYAAADsecret", true},
		{"https://notify.windows.com/w/?token=BQYAAADsecret", false},
		{"https://evilnotify.windows.com/w/?token=BQYAAADsecret", false},
		{"https://fcm.googleapis.com.evil.example/fcm/send/dGhpcyBpcyBh", false},
		{"https://push.example.com/sub/abcdefgh", false},
		{"https://127.0.0.1/sub/abcdefgh", false},
		{"https://8.8.8.8/sub/abcdefgh", false},
	})
	// The subscription's own shape is checked too.
	if err := p.ValidateToken(provider.Token(`{"endpoint":"http://fcm.googleapis.com/fcm/send/x","keys":{"p256dh":"BAAA","auth":"AAAA"}}`)); err == nil {
		t.Error("an http endpoint was accepted")
	}
	offCurve := &provider.WebPushSubscription{Endpoint: "https://fcm.googleapis.com/fcm/send/x",
		P256dh: append([]byte{4}, make([]byte, 64)...), Auth: make([]byte, 16)}
	if err := p.ValidateToken(offCurve.Token()); err == nil {
		t.Error("a p256dh that is not on the curve was accepted")
	}
}

// TestValidateTokenChecksThePort: an allow-list entry may name a port; an
// entry without one allows only https's default port, 443, so that allowing
// a push service's host does not open every service that host runs.
func TestValidateTokenChecksThePort(t *testing.T) {
	t.Parallel()
	p := newProvider(t, webpush.Config{AllowedHosts: []string{"push.example.com", "alt.example.com:8443", "*.wild.example.com:8443", "1.1.1.1:8443"}})
	for _, tc := range []endpointCase{
		{"https://push.example.com/sub/abcdefgh", true},
		{"https://push.example.com:443/sub/abcdefgh", true},
		{"https://push.example.com:8443/sub/abcdefgh", false},
		{"https://push.example.com:22/sub/abcdefgh", false},
		{"https://alt.example.com:8443/sub/abcdefgh", true},
		{"https://alt.example.com/sub/abcdefgh", false},
		{"https://alt.example.com:9443/sub/abcdefgh", false},
		{"https://a.wild.example.com:8443/sub/abcdefgh", true},
		{"https://a.wild.example.com/sub/abcdefgh", false},
		{"https://1.1.1.1:8443/sub/abcdefgh", true},
		{"https://1.1.1.1/sub/abcdefgh", false},
	} {
		checkRefusal(t, p, tc.endpoint, tc.ok)
	}
	checkEndpoints(t, []endpointCase{
		{"https://fcm.googleapis.com:443/fcm/send/abcdefgh", true},
		{"https://fcm.googleapis.com:8443/fcm/send/abcdefgh", false},
		{"https://wns2-par02p.notify.windows.com:444/w/?token=BQYAAADsecret", false},
	})
}

// The address forms below are refused even when an operator put them on the
// allow-list: an allow-list entry is not a licence to reach internal addresses.
var internalHosts = []string{
	"127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", // loopback, also IPv4-mapped
	"10.0.0.1", "192.168.1.10", "172.16.5.4", "100.64.0.1", "[fd00::1]", // private
	"0.0.0.0", "[::]", "[::ffff:0.0.0.0]", // unspecified
	"169.254.169.254", "[fe80::1]", "[::ffff:169.254.169.254]", // link-local (cloud metadata)
	"224.0.0.1", "[ff02::1]", "255.255.255.255", // multicast, broadcast
	"192.0.2.7", "[2001:db8::1]", "[64:ff9b::7f00:1]", // reserved, NAT64
	"2130706433", "0177.0.0.1", "0x7f000001", "0x7f.0.0.1", "127.1", "017700000001", // inet_aton forms of 127.0.0.1
}

func TestValidateTokenRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	p := newProvider(t, webpush.Config{AllowedHosts: internalHosts})
	for _, h := range internalHosts {
		checkRefusal(t, p, "https://"+h+"/push/abcdefgh", false)
		checkRefusal(t, p, "https://"+h+":8443/push/abcdefgh", false)
	}
	checkRefusal(t, p, "http://fcm.googleapis.com/fcm/send/abcdefgh", false)
}

func TestValidateTokenExplicitOptIns(t *testing.T) {
	t.Parallel()
	loopback := newProvider(t, webpush.Config{AllowedHosts: internalHosts, AllowLoopback: true})
	private := newProvider(t, webpush.Config{AllowedHosts: internalHosts, AllowPrivate: true})
	for _, tc := range []struct {
		host              string
		loopback, private bool
	}{
		{"127.0.0.1", true, false},
		{"[::1]", true, false},
		{"[::ffff:127.0.0.1]", true, false},
		{"10.0.0.1", false, true},
		{"100.64.0.1", false, true},
		{"[fd00::1]", false, true},
		// Never, whatever the opt-ins.
		{"0.0.0.0", false, false},
		{"[::]", false, false},
		{"169.254.169.254", false, false},
		{"2130706433", false, false},
		{"0177.0.0.1", false, false},
	} {
		checkRefusal(t, loopback, "https://"+tc.host+"/push/abcdefgh", tc.loopback)
		checkRefusal(t, private, "https://"+tc.host+"/push/abcdefgh", tc.private)
	}
	// Loopback allowed is not every host allowed.
	checkRefusal(t, loopback, "https://127.0.0.2/push/abcdefgh", false)
}

// TestValidateTokenURLTricks: the spellings of a URL that parsers disagree
// on, or that hide one host behind another, are refused unless the host
// Go's parser (and so the dialler) sees is on the allow-list.
func TestValidateTokenURLTricks(t *testing.T) {
	t.Parallel()
	checkEndpoints(t, []endpointCase{
		{"https://fcm.googleapis.com@127.0.0.1/fcm/send/abcdefgh", false},        // user info
		{"https://fcm.googleapis.com:443@evil.example/fcm/send/abcdefgh", false}, // user info with a "port"
		{`https://evil.example\@fcm.googleapis.com/fcm/send/abcdefgh`, false},    // a backslash browsers read as "/"
		{"https://127.0.0.1#@fcm.googleapis.com/fcm/send/abcdefgh", false},       // the allowed host in the fragment
		{"https://127.0.0.1?@fcm.googleapis.com/fcm/send/abcdefgh", false},       // … in the query
		{"https://%31%32%37.0.0.1/fcm/send/abcdefgh", false},                     // percent-encoded digits
		{"https://fcm.googleapis.com%2f.evil.example/fcm/send/abcdefgh", false},  // an encoded slash in the host
		{"https://fcm.googlеapis.com/fcm/send/abcdefgh", false},                  // a Cyrillic "е"
		{"https://xn--fcm-googleapis-com.evil.example/fcm/send/abcdefgh", false}, // punycode
		{"https://[::ffff:7f00:1]/fcm/send/abcdefgh", false},                     // 127.0.0.1, mapped, in hex
		{"https://[0:0:0:0:0:ffff:127.0.0.1]/fcm/send/abcdefgh", false},          // … written out
		{"https://[::1%25eth0]/fcm/send/abcdefgh", false},                        // a zone
		{"https://0/fcm/send/abcdefgh", false},                                   // inet_aton's 0.0.0.0
		{"https:fcm.googleapis.com/fcm/send/abcdefgh", false},                    // opaque, no host
		{"https:///fcm.googleapis.com/fcm/send/abcdefgh", false},                 // empty host
		{" https://fcm.googleapis.com/fcm/send/abcdefgh", false},                 // leading space
		{"https://fcm.googleapis.com\t/fcm/send/abcdefgh", false},                // a control character
		{"https://.notify.windows.com/w/abcdefgh", false},                        // a wildcard's domain after an empty label
		{"https://a..push.apple.com/abcdefgh", false},                            // an empty label under a wildcard
		{"https://a!b.push.apple.com/abcdefgh", false},                           // a label no DNS name holds
		{"https://xn--tda.push.apple.com/abcdefgh", true},                        // punycode under a wildcard
		{"https://fcm.googleapis.com./fcm/send/abcdefgh", true},                  // the root's dot: the same host
		{"HTTPS://FCM.GOOGLEAPIS.COM/fcm/send/abcdefgh", true},                   // case
	})
}
