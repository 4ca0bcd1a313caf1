package drivertest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
)

func testDevices[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	reg := func(d oncepush.Device) *oncepush.Device {
		t.Helper()
		got, err := b.client.RegisterDevice(b.ctx, d)
		if err != nil {
			t.Fatalf("RegisterDevice(%+v): %v", d, err)
		}
		return got
	}
	a := reg(oncepush.Device{Recipient: "alice", Transport: oncepush.TransportFCM, Token: "tok-aaaa-1111", Platform: "android", Locale: "de-CH", TimeZone: "Europe/Zurich"})
	again := reg(oncepush.Device{Recipient: "alice", Transport: oncepush.TransportFCM, Token: "tok-aaaa-1111", Platform: "android"})
	if again.ID != a.ID {
		t.Fatalf("re-registering the same token changed its id (%d → %d)", a.ID, again.ID)
	}
	// APNs tokens are hex; case does not make another device.
	upper := reg(oncepush.Device{Recipient: "alice", Transport: oncepush.TransportAPNs, Token: oncepush.Token(fmt.Sprintf("%064X", 0xABCDEF))})
	lower := reg(oncepush.Device{Recipient: "alice", Transport: oncepush.TransportAPNs, Token: oncepush.Token(fmt.Sprintf("%064x", 0xABCDEF))})
	if upper.ID != lower.ID {
		t.Fatal("an APNs token in upper and lower case made two devices")
	}

	// Moving a token: bob takes alice's phone.
	moved := reg(oncepush.Device{Recipient: "bob", Transport: oncepush.TransportFCM, Token: "tok-aaaa-1111"})
	if moved.ID == a.ID {
		t.Fatal("a moved token kept its device id")
	}
	devs, _ := b.client.Devices(b.ctx, "alice")
	if len(devs) != 1 || devs[0].Transport != oncepush.TransportAPNs {
		t.Fatalf("alice's devices after the move: %+v", devs)
	}

	// Unregistering someone else's token answers the same, and changes nothing.
	if err := b.client.UnregisterDevice(b.ctx, "alice", oncepush.TransportFCM, "tok-aaaa-1111"); err != nil {
		t.Fatalf("unregister someone else's token: %v", err)
	}
	if err := b.client.UnregisterDevice(b.ctx, "alice", oncepush.TransportFCM, "tok-absent-0000"); err != nil {
		t.Fatalf("unregister an absent token: %v", err)
	}
	if devs, _ := b.client.Devices(b.ctx, "bob"); len(devs) != 1 {
		t.Fatalf("unregistering as alice removed bob's device: %+v", devs)
	}
	if err := b.client.UnregisterDevice(b.ctx, "bob", oncepush.TransportFCM, "tok-aaaa-1111"); err != nil {
		t.Fatal(err)
	}
	if devs, _ := b.client.Devices(b.ctx, "bob"); len(devs) != 0 {
		t.Fatalf("bob's own unregister left %+v", devs)
	}

	// Ten most recent.
	var ids []int64
	for i := range 12 {
		b.clock.Advance(time.Second)
		d := reg(oncepush.Device{Recipient: "carol", Transport: oncepush.TransportFCM, Token: oncepush.Token(fmt.Sprintf("carol-tok-%02d", i))})
		ids = append(ids, d.ID)
	}
	b.clock.Advance(time.Second)
	reg(oncepush.Device{Recipient: "carol", Transport: oncepush.TransportFCM, Token: "carol-tok-00"}) // renew the oldest
	devs, _ = b.client.Devices(b.ctx, "carol")
	if len(devs) != 10 {
		t.Fatalf("carol keeps %d devices, want 10", len(devs))
	}
	kept := map[oncepush.Token]bool{}
	for _, d := range devs {
		kept[d.Token] = true
	}
	if !kept["carol-tok-00"] || kept["carol-tok-01"] || kept["carol-tok-02"] || !kept["carol-tok-11"] {
		t.Fatalf("kept the wrong devices: %v", kept)
	}

	// Bad input names the field and writes nothing.
	bad := []struct {
		d     oncepush.Device
		field string
	}{
		{oncepush.Device{Transport: oncepush.TransportFCM, Token: "tok-xxxx-1"}, "recipient"},
		{oncepush.Device{Recipient: "dave", Transport: "hms", Token: "tok-xxxx-1"}, "transport"},
		{oncepush.Device{Recipient: "dave", Transport: oncepush.TransportFCM}, "token"},
		{oncepush.Device{Recipient: "dave", Transport: oncepush.TransportFCM, Token: "has spaces in it"}, "token"},
		{oncepush.Device{Recipient: "dave", Transport: oncepush.TransportAPNs, Token: "not-hex"}, "token"},
		{oncepush.Device{Recipient: "dave", Transport: oncepush.TransportWebPush, Token: `{"endpoint":"http://push.example/x"}`}, "token"},
		{oncepush.Device{Recipient: "dave", Transport: oncepush.TransportFCM, Token: "tok-xxxx-1", TimeZone: "Mars/Olympus"}, "timeZone"},
	}
	for _, tc := range bad {
		_, err := b.client.RegisterDevice(b.ctx, tc.d)
		var ve *oncepush.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("register %+v: %v, want a ValidationError on %q", tc.d, err, tc.field)
		}
	}
	if devs, _ := b.client.Devices(b.ctx, "dave"); len(devs) != 0 {
		t.Fatalf("refused registrations wrote %+v", devs)
	}
}

func testSessions[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	phone, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportFCM, Token: "phone-token", Session: "sess-1"})
	if err != nil {
		t.Fatal(err)
	}
	tablet, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportFCM, Token: "tablet-token", Session: "sess-2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.client.RevokeSession(b.ctx, "sess-1"); err != nil {
		t.Fatal(err)
	}
	b.send([]string{"r1"}, msg("after sign-out"), nil)
	b.drain()
	subs := b.fcm.Submissions()
	if len(subs) != 1 || subs[0].Device.ID != tablet.ID {
		t.Fatalf("after revoking the phone's session, sent to %+v; want the tablet only (phone %d)", subs, phone.ID)
	}
	// A registration racing in under the revoked session is refused.
	_, err = b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportFCM, Token: "phone-token", Session: "sess-1"})
	if !errors.Is(err, oncepush.ErrSessionRevoked) {
		t.Fatalf("register under a revoked session: %v", err)
	}
}

func testDeleteRecipient[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	b.register("r1", oncepush.TransportFCM, oncepush.TransportAPNs)
	b.register("r2", oncepush.TransportFCM)
	b.send([]string{"r1", "r2"}, msg("x"), nil)
	b.drain()
	if err := b.client.DeleteRecipient(b.ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if devs, _ := b.client.Devices(b.ctx, "r1"); len(devs) != 0 {
		t.Fatalf("devices left: %+v", devs)
	}
	if ds := b.deliveries("r1"); len(ds) != 0 {
		t.Fatalf("deliveries left: %+v", ds)
	}
	if ds := b.deliveries("r2"); len(ds) != 1 {
		t.Fatalf("another recipient's delivery went with it: %+v", ds)
	}
}
