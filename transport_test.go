package oncepush_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/pushtest"
)

func TestBuiltinTransportsAreOneTable(t *testing.T) {
	t.Parallel()
	want := []oncepush.Transport{oncepush.TransportFCM, oncepush.TransportAPNs, oncepush.TransportWebPush, oncepush.TransportRuStore}
	names := oncepush.Transports()
	if !slices.Equal(names, want) {
		t.Fatalf("Transports() = %v, want %v", names, want)
	}
	// Every call is a new slice: nobody can change the table through one.
	names[0] = "changed"
	specs := oncepush.BuiltinTransports()
	specs[1].Name = "changed"
	if got := oncepush.Transports(); !slices.Equal(got, want) {
		t.Fatalf("after editing returned slices, Transports() = %v", got)
	}
	for i, s := range oncepush.BuiltinTransports() {
		if s.Name != want[i] {
			t.Errorf("BuiltinTransports()[%d] is %q, want %q", i, s.Name, want[i])
		}
		if s.MaxPayload != oncepush.MaxPayloadBytes {
			t.Errorf("%s: MaxPayload %d, want %d", s.Name, s.MaxPayload, oncepush.MaxPayloadBytes)
		}
		keys := map[string]bool{}
		for n := range 3 {
			tok := s.ExampleToken(n)
			canonical, key, err := s.NormalizeToken(string(tok))
			if err != nil {
				t.Errorf("%s: example token %d refused: %v", s.Name, n, err)
			}
			if canonical != string(tok) {
				t.Errorf("%s: example token %d is not canonical: %q becomes %q", s.Name, n, tok, canonical)
			}
			keys[key] = true
		}
		if len(keys) != 3 {
			t.Errorf("%s: three example tokens have %d keys", s.Name, len(keys))
		}
	}
}

// The built-in token rules, as RegisterDevice applies them: what each
// transport refuses, and the canonical form and key of what it takes.
func TestBuiltinTokenRules(t *testing.T) {
	t.Parallel()
	drv := testdb.SQLite(t)
	c, err := oncepush.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub := oncepush.WebPushSubscription{Endpoint: "https://push.example.net/s/1", P256dh: append([]byte{4}, make([]byte, 64)...), Auth: make([]byte, 16)}
	upper := strings.Repeat("AB", 32)
	for _, tc := range []struct {
		tr        oncepush.Transport
		token     string
		field     string // "" = accepted
		canonical string
	}{
		{oncepush.TransportAPNs, upper, "", strings.ToLower(upper)},
		{oncepush.TransportAPNs, strings.Repeat("ab", 31), "token", ""},
		{oncepush.TransportAPNs, strings.Repeat("zz", 32), "token", ""},
		{oncepush.TransportFCM, "fcm:APA91b-x_y.z", "", "fcm:APA91b-x_y.z"},
		{oncepush.TransportFCM, "short", "token", ""},
		{oncepush.TransportFCM, "has a space in it", "token", ""},
		{oncepush.TransportRuStore, "rustore-token-1", "", "rustore-token-1"},
		{oncepush.TransportRuStore, "rustore/token", "token", ""},
		{oncepush.TransportWebPush, string(sub.Token()), "", string(sub.Token())},
		{oncepush.TransportWebPush, `{"endpoint":"http://push.example.net/s/1"}`, "token", ""},
		{"hms", "hms-token-0001", "transport", ""},
		{oncepush.TransportFCM, "", "token", ""},
	} {
		d, err := c.RegisterDevice(t.Context(), oncepush.Device{Recipient: "r1", Transport: tc.tr, Token: oncepush.Token(tc.token)})
		var ve *oncepush.ValidationError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s %q refused: %v", tc.tr, tc.token, err)
		case tc.field == "" && string(d.Token) != tc.canonical:
			t.Errorf("%s %q stored as %q, want %q", tc.tr, tc.token, d.Token, tc.canonical)
		case tc.field != "" && (!errors.As(err, &ve) || ve.Field != tc.field):
			t.Errorf("%s %q: %v, want a validation error naming %s", tc.tr, tc.token, err, tc.field)
		}
	}
	err = c.UnregisterDevice(t.Context(), "", "hms", "hms-token-0001")
	if err == nil || err.Error() != `oncepush: invalid transport: "hms" is not one of fcm, apns, webpush, rustore` {
		t.Errorf("unregistering an unknown transport: %v", err)
	}
}

// testpush is a transport the module does not know: what a fifth provider
// brings with it. Its tokens start with "tp-", it carries 1,024 bytes, and it
// reserves the data keys starting with "tp_".
var testpush = oncepush.TransportSpec{
	Name: "testpush",
	NormalizeToken: func(token string) (string, string, error) {
		if !strings.HasPrefix(token, "tp-") {
			return "", "", errors.New("a testpush token starts with tp-")
		}
		return token, strings.ToLower(token), nil
	},
	MaxPayload:      1024,
	ReservedDataKey: func(k string) bool { return strings.HasPrefix(k, "tp_") },
	ExampleToken:    func(n int) oncepush.Token { return oncepush.Token("tp-" + strings.Repeat("x", n+1)) },
}

// A transport given in Config.Transports is one like the built-in ones: its
// rules check registrations, its limit and reserved keys bound every message,
// its name appears in the errors, and its provider is sent its devices.
func TestTransportOutsideTheBuiltins(t *testing.T) {
	t.Parallel()
	drv := testdb.SQLite(t)
	prov := pushtest.NewProvider("testpush")
	c, err := oncepush.NewClient(drv, &oncepush.Config{
		Transports: append(oncepush.BuiltinTransports(), testpush),
		Providers:  []oncepush.Provider{prov},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, err = c.RegisterDevice(ctx, oncepush.Device{Recipient: "r1", Transport: "testpush", Token: "not-ours"})
	var ve *oncepush.ValidationError
	if !errors.As(err, &ve) || ve.Field != "token" || !strings.Contains(ve.Message, "starts with tp-") {
		t.Fatalf("a token its rules refuse: %v", err)
	}
	d, err := c.RegisterDevice(ctx, oncepush.Device{Recipient: "r1", Transport: "testpush", Token: "tp-Phone-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterDevice(ctx, oncepush.Device{Recipient: "r2", Transport: "testpush", Token: "tp-PHONE-1"}); err != nil {
		t.Fatal(err)
	}
	if devs, err := c.Devices(ctx, "r1"); err != nil || len(devs) != 0 {
		t.Fatalf("the same key under another spelling moved the device: r1 keeps %v, %v", devs, err)
	}
	_, err = c.RegisterDevice(ctx, oncepush.Device{Recipient: "r1", Transport: "hms", Token: "hms-token-0001"})
	if err == nil || !strings.Contains(err.Error(), `"hms" is not one of fcm, apns, webpush, rustore, testpush`) {
		t.Fatalf("an unknown transport: %v", err)
	}
	if _, err := c.Send(ctx, []string{"r2"}, oncepush.Message{Body: strings.Repeat("b", 1025)}, nil); !errors.As(err, &ve) || ve.Field != "body" {
		t.Fatalf("a message over the smallest limit: %v", err)
	}
	if _, err := c.Send(ctx, []string{"r2"}, oncepush.Message{Body: "b", Data: map[string]any{"tp_x": 1}}, nil); !errors.As(err, &ve) || ve.Field != "data" {
		t.Fatalf("a key the transport reserves: %v", err)
	}
	if _, err := c.Send(ctx, []string{"r2"}, oncepush.Message{Body: "b", Data: map[string]any{"from": 1}}, nil); !errors.As(err, &ve) || ve.Field != "data" {
		t.Fatalf("a key FCM reserves, with testpush beside it: %v", err)
	}
	if _, err := c.Send(ctx, []string{"r2"}, oncepush.Message{Body: "hello"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	subs := prov.Submissions()
	if len(subs) != 1 || subs[0].Token != "tp-PHONE-1" || subs[0].DeviceID == d.ID {
		t.Fatalf("the testpush provider got %+v", subs)
	}
}

func TestConfigTransportsAreChecked(t *testing.T) {
	t.Parallel()
	drv := postgres.New(nil) // NewClient does not touch the database
	noRules := testpush
	noRules.NormalizeToken = nil
	noLimit := testpush
	noLimit.MaxPayload = 0
	badName := testpush
	badName.Name = "Test Push"
	for name, cfg := range map[string]*oncepush.Config{
		"empty list":              {Transports: []oncepush.TransportSpec{}},
		"twice":                   {Transports: []oncepush.TransportSpec{testpush, testpush}},
		"no token rules":          {Transports: []oncepush.TransportSpec{noRules}},
		"no payload limit":        {Transports: []oncepush.TransportSpec{noLimit}},
		"bad name":                {Transports: []oncepush.TransportSpec{badName}},
		"provider outside a list": {Transports: []oncepush.TransportSpec{testpush}, Providers: []oncepush.Provider{pushtest.NewProvider(oncepush.TransportFCM)}},
	} {
		if _, err := oncepush.NewClient[pgx.Tx](drv, cfg); err == nil {
			t.Errorf("%s: NewClient accepted it", name)
		}
	}
	specs := []oncepush.TransportSpec{testpush}
	c, err := oncepush.NewClient[pgx.Tx](drv, &oncepush.Config{Transports: specs, Providers: []oncepush.Provider{pushtest.NewProvider("testpush")}})
	if err != nil {
		t.Fatal(err)
	}
	specs[0].Name = "changed"
	if got := c.Config().Transports; len(got) != 1 || got[0].Name != "testpush" {
		t.Fatalf("the client's list follows the caller's slice: %v", got)
	}
	if got := mustClient(t, drv).Config().Transports; len(got) != 4 {
		t.Fatalf("a nil list gave %d transports, want the 4 built in", len(got))
	}
}

func mustClient(t *testing.T, drv *postgres.Driver) *oncepush.Client[pgx.Tx] {
	t.Helper()
	c, err := oncepush.NewClient[pgx.Tx](drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
