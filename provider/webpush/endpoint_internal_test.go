package webpush

import (
	"errors"
	"testing"
)

// TestDialControl checks the hook the dialler runs for every address it
// connects to, after DNS resolution.
func TestDialControl(t *testing.T) {
	t.Parallel()
	strict, err := newGuard(DefaultAllowedHosts(), false, false)
	if err != nil {
		t.Fatal(err)
	}
	lenient, err := newGuard(DefaultAllowedHosts(), true, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr          string
		strict, loose bool // allowed by each guard
	}{
		{"142.250.74.106:443", true, true},
		{"[2a00:1450:4001:80b::200a]:443", true, true},
		{"127.0.0.1:443", false, true},
		{"127.8.9.10:443", false, true},
		{"[::1]:443", false, true},
		{"[::ffff:127.0.0.1]:443", false, true},
		{"10.1.2.3:443", false, true},
		{"172.16.0.1:443", false, true},
		{"192.168.1.1:443", false, true},
		{"100.64.0.1:443", false, true},
		{"[fd12::1]:443", false, true},
		{"0.0.0.0:443", false, false},
		{"0.1.2.3:443", false, false},
		{"[::]:443", false, false},
		{"[::ffff:0.0.0.0]:443", false, false},
		{"169.254.169.254:80", false, false},
		{"[::ffff:169.254.169.254]:80", false, false},
		{"[fe80::1%eth0]:443", false, false},
		{"224.0.0.1:443", false, false},
		{"[ff02::1]:443", false, false},
		{"255.255.255.255:443", false, false},
		{"192.0.2.1:443", false, false},
		{"[64:ff9b::a9fe:a9fe]:443", false, false},
		{"[2002:7f00:1::]:443", false, false},
		{"[::127.0.0.1]:443", false, false},
		{"localhost:443", false, false},
	} {
		for _, g := range []struct {
			name  string
			guard *guard
			want  bool
		}{{"strict", strict, tc.strict}, {"lenient", lenient, tc.loose}} {
			err := g.guard.control("tcp", tc.addr, nil)
			if (err == nil) != g.want {
				t.Errorf("%s guard, dial %s: err %v, want allowed=%v", g.name, tc.addr, err, g.want)
			}
			var refused *refusedAddrError
			if err != nil && !errors.As(err, &refused) {
				t.Errorf("%s guard, dial %s: err %T is not a refusal the provider recognises", g.name, tc.addr, err)
			}
		}
	}
}

func TestAllowedHostsEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		entry string
		ok    bool
	}{
		{"fcm.googleapis.com", true},
		{"FCM.googleapis.com.", true},
		{"*.notify.windows.com", true},
		{"127.0.0.1", true},
		{"[::1]", true},
		{"", false},
		{"*", false},
		{"*.com", false},
		{"https://fcm.googleapis.com", false},
		{"fcm.googleapis.com:443", true},
		{"push.example.com:8443", true},
		{"*.push.example.com:8443", true},
		{"1.1.1.1:8443", true},
		{"[2606:4700:4700::1111]:8443", true},
		{"push.example.com:0", false},
		{"push.example.com:65536", false},
		{"push.example.com:https", false},
		{"push.example.com:", false},
		{"push.example.com:-1", false},
		{"2606:4700:4700::1111:8443", true}, // an IPv6 address, not a port: brackets name one
		{"fcm.googleapis.com/fcm", false},
		{"fcm..googleapis.com", false},
		{"*.*.example.com", false},
		{"push service.example.com", false},
	} {
		_, err := newGuard([]string{tc.entry}, false, false)
		if (err == nil) != tc.ok {
			t.Errorf("AllowedHosts entry %q: err %v, want ok=%v", tc.entry, err, tc.ok)
		}
	}
}

// TestDialChecksTheAllowList: the dialler checks the host and port it is
// asked to connect to against the allow-list too, not only the address
// after DNS: an entry without a port allows 443 only.
func TestDialChecksTheAllowList(t *testing.T) {
	t.Parallel()
	g, err := newGuard([]string{"push.example.com", "alt.example.com:8443", "*.wild.example.com:8443", "1.1.1.1"}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"push.example.com:443", true},
		{"PUSH.example.com.:443", true},
		{"push.example.com:8443", false},
		{"alt.example.com:8443", true},
		{"alt.example.com:443", false},
		{"a.wild.example.com:8443", true},
		{"a.wild.example.com:443", false},
		{"1.1.1.1:443", true},
		{"1.1.1.1:8443", false},
		{"other.example.com:443", false},
		{"push.example.com", false},
	} {
		err := g.checkDialTarget(tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("dial %s: err %v, want allowed=%v", tc.addr, err, tc.ok)
		}
		var refused *refusedAddrError
		if err != nil && !errors.As(err, &refused) {
			t.Errorf("dial %s: err %T is not a refusal the provider recognises", tc.addr, err)
		}
	}
}
