package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
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

	// A lookup by token finds its current owner, in any spelling, and one
	// transport's token only.
	if got, err := b.client.DeviceByToken(b.ctx, oncepush.TransportFCM, "tok-aaaa-1111"); err != nil || got.ID != moved.ID || got.Recipient != "bob" {
		t.Fatalf("DeviceByToken of the moved token = %+v, %v; want bob's device %d", got, err, moved.ID)
	}
	if got, err := b.client.DeviceByToken(b.ctx, oncepush.TransportAPNs, oncepush.Token(fmt.Sprintf("%064X", 0xABCDEF))); err != nil || got.ID != lower.ID {
		t.Fatalf("DeviceByToken in upper case = %+v, %v; want device %d", got, err, lower.ID)
	}
	if _, err := b.client.DeviceByToken(b.ctx, oncepush.TransportRuStore, "tok-aaaa-1111"); !errors.Is(err, oncepush.ErrNotFound) {
		t.Fatalf("DeviceByToken under another transport: %v, want ErrNotFound", err)
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
	if len(subs) != 1 || subs[0].DeviceID != tablet.ID {
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

// testDeleteRecipientIsOneOperation: every owner of a recipient's data takes
// part in DeleteRecipient, in one transaction. Each RecipientDeleter runs on
// the deletion's own transaction, so its writes commit with the engine's; and
// when one fails, nothing is deleted — neither the engine's rows nor what the
// deleters before it wrote.
func testDeleteRecipientIsOneOperation[TTx any](t *testing.T, h Harness[TTx]) {
	errDown := errors.New("the other owner's store is down")
	var failing atomic.Bool
	var asked []string
	var b *bundle[TTx]
	b = setup(t, h, func(c *oncepush.Config) {
		c.RecipientDeleters = []oncepush.RecipientDeleter{
			func(ctx context.Context, recipient string) error {
				tx, ok := oncepush.RecipientDeleteTx[TTx](ctx)
				if !ok {
					return errors.New("RecipientDeleteTx: no transaction")
				}
				asked = append(asked, recipient)
				// This owner's rows, written on the deletion's transaction:
				// for the test, the devices of a bystander.
				return b.db.Exec(ctx, tx, "DELETE FROM oncepush_device WHERE recipient = 'bystander'")
			},
			func(ctx context.Context, recipient string) error {
				if failing.Load() {
					return errDown
				}
				return nil
			},
		}
	})
	b.register("r1", oncepush.TransportFCM, oncepush.TransportAPNs)
	b.register("bystander", oncepush.TransportFCM)
	b.send([]string{"r1"}, msg("x"), nil)
	b.drain()
	devices := func(r string) int {
		t.Helper()
		ds, err := b.client.Devices(b.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return len(ds)
	}

	failing.Store(true)
	if err := b.client.DeleteRecipient(b.ctx, "r1"); !errors.Is(err, errDown) {
		t.Fatalf("DeleteRecipient with a failing deleter: %v, want its error", err)
	}
	if n, ds := devices("r1"), b.deliveries("r1"); n != 2 || len(ds) != 1 {
		t.Fatalf("a failed deletion left r1 with %d devices and %d deliveries, want 2 and 1: it must delete nothing", n, len(ds))
	}
	if n := devices("bystander"); n != 1 {
		t.Fatalf("the first deleter's write survived the second's failure (bystander has %d devices, want 1)", n)
	}

	failing.Store(false)
	if err := b.client.DeleteRecipient(b.ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if n, ds := devices("r1"), b.deliveries("r1"); n != 0 || len(ds) != 0 {
		t.Fatalf("r1 has %d devices and %d deliveries after its deletion", n, len(ds))
	}
	if n := devices("bystander"); n != 0 {
		t.Fatalf("the deleter's write on the deletion's transaction did not commit (bystander has %d devices)", n)
	}
	// A recipient the engine holds nothing about is still asked of every owner.
	if err := b.client.DeleteRecipient(b.ctx, "nobody"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"r1", "r1", "nobody"}; !slices.Equal(asked, want) {
		t.Fatalf("deleters were asked about %v, want %v", asked, want)
	}
}

// testSendToDevices attacks direct sends: one delivery per device however
// often and however spelled it is listed, a retry that queues nothing, and
// refusals that write nothing — a bad token, or a token registered to a
// recipient, which must stay with its owner.
func testSendToDevices[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	fcmTok, apnsTok := tokenFor(oncepush.TransportFCM, "direct"), tokenFor(oncepush.TransportAPNs, "direct")
	devices := []oncepush.DeviceAddress{
		{Transport: oncepush.TransportFCM, Token: fcmTok},
		{Transport: oncepush.TransportAPNs, Token: oncepush.Token(strings.ToUpper(string(apnsTok)))},
		{Transport: oncepush.TransportFCM, Token: fcmTok},
		{Transport: oncepush.TransportAPNs, Token: apnsTok}, // the same device, in lower case
	}
	opts := &oncepush.SendOptions{DedupKey: "direct-1"}
	res, err := b.client.SendToDevices(b.ctx, devices, msg("direct"), opts)
	if err != nil || res.Queued != 2 || res.Duplicates != 2 {
		t.Fatalf("SendToDevices = %+v, %v; want 2 queued and the 2 devices listed twice as duplicates", res, err)
	}
	again, err := b.client.SendToDevices(b.ctx, devices[:2], msg("direct"), opts)
	if err != nil || again.Queued != 0 || again.Duplicates != 2 || again.MessageID != 0 {
		t.Fatalf("a retry with the same dedup key = %+v, %v; want nothing queued", again, err)
	}
	b.drain()
	for tr, tok := range map[oncepush.Transport]oncepush.Token{oncepush.TransportFCM: fcmTok, oncepush.TransportAPNs: apnsTok} {
		subs := b.fakes[tr].Submissions()
		if len(subs) != 1 || subs[0].Token != tok {
			t.Fatalf("%s got %d submissions (%+v), want one to the token", tr, len(subs), subs)
		}
		r := b.deviceRecipient(tr, tok)
		if got := b.recipientOf(subs[0]); got != r {
			t.Fatalf("%s: submitted under recipient %q, want the implicit %q", tr, got, r)
		}
		wantStatus(t, b.only(r), oncepush.StatusSent)
	}

	// A recorded request's identity is its implicit recipients.
	hash, err := b.client.RequestHash([]string{b.deviceRecipient(oncepush.TransportFCM, fcmTok)}, msg("recorded"), oncepush.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recorded := &oncepush.SendOptions{DedupKey: "direct-recorded", RequestHash: hash}
	first, err := b.client.SendToDevices(b.ctx, devices[:1], msg("recorded"), recorded)
	if err != nil || first.Queued != 1 {
		t.Fatalf("recorded direct send = %+v, %v", first, err)
	}
	if replay, err := b.client.SendToDevices(b.ctx, devices[:1], msg("recorded"), recorded); err != nil || !replay.Replayed || replay.MessageID != first.MessageID {
		t.Fatalf("replayed direct send = %+v, %v; want the first answer", replay, err)
	}
	b.drain()
	wantSends(t, b.fcm, 2, "the first direct send and the recorded one")
	b.fcm.Reset()
	// The token registered to a recipient since: a retry still answers as
	// the first send did, and leaves the token with its new owner.
	if _, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "carol", Transport: oncepush.TransportFCM, Token: fcmTok}); err != nil {
		t.Fatal(err)
	}
	if replay, err := b.client.SendToDevices(b.ctx, devices[:1], msg("recorded"), recorded); err != nil || !replay.Replayed || replay.MessageID != first.MessageID {
		t.Fatalf("a retry after the token moved to a recipient = %+v, %v; want the first answer", replay, err)
	}
	if devs, err := b.client.Devices(b.ctx, "carol"); err != nil || len(devs) != 1 {
		t.Fatalf("carol's devices after the retry: %+v, %v; want her token kept", devs, err)
	}

	// Refusals write nothing, neither registrations nor deliveries.
	alice := b.register("alice", oncepush.TransportFCM)[0]
	fresh := tokenFor(oncepush.TransportFCM, "fresh")
	for _, tc := range []struct {
		name    string
		devices []oncepush.DeviceAddress
		check   func(error) string // "" when err is the refusal wanted
	}{
		{"an invalid token", []oncepush.DeviceAddress{fcmDevice(fresh), fcmDevice("bad token!")}, validationOf("devices[1].token")},
		{"an unknown transport", []oncepush.DeviceAddress{fcmDevice(fresh), {Transport: "carrier", Token: "pigeon-0001"}}, validationOf("devices[1].transport")},
		{"no devices", nil, validationOf("devices")},
		{"alice's token", []oncepush.DeviceAddress{fcmDevice(fresh), fcmDevice(alice.Token)}, func(err error) string {
			var te *oncepush.TokenRegisteredError
			if !errors.Is(err, oncepush.ErrTokenRegistered) || !errors.As(err, &te) || te.Field != "devices[1].token" {
				return "want a TokenRegisteredError naming devices[1].token"
			}
			return ""
		}},
	} {
		_, err := b.client.SendToDevices(b.ctx, tc.devices, msg("refused"), nil)
		if why := tc.check(err); why != "" {
			t.Errorf("%s: err = %v; %s", tc.name, err, why)
		}
	}
	b.wantNoDirectWrites(fresh)
	if devs, err := b.client.Devices(b.ctx, "alice"); err != nil || len(devs) != 1 || devs[0].ID != alice.ID {
		t.Fatalf("alice's devices after a direct send named her token: %+v, %v; want hers, untouched", devs, err)
	}

	// In the caller's transaction, a refusal leaves the transaction usable
	// and the devices registered before the refused one go with it.
	tx, err := b.db.Begin(b.ctx, b.drv)
	if err != nil {
		t.Fatal(err)
	}
	refused := []oncepush.DeviceAddress{fcmDevice(fresh), fcmDevice(alice.Token)}
	if _, err := b.client.SendToDevicesTx(b.ctx, tx, refused, msg("refused"), nil); !errors.Is(err, oncepush.ErrTokenRegistered) {
		t.Fatalf("SendToDevicesTx with alice's token: %v, want ErrTokenRegistered", err)
	}
	if res, err := b.client.SendTx(b.ctx, tx, []string{"alice"}, msg("after the refusal"), nil); err != nil || res.Queued != 1 {
		t.Fatalf("SendTx after a refused SendToDevicesTx: %+v, %v", res, err)
	}
	if err := b.db.Commit(b.ctx, tx); err != nil {
		t.Fatal(err)
	}
	b.wantNoDirectWrites(fresh)
	b.drain()
	if subs := b.fcm.Submissions(); len(subs) != 1 || b.recipientOf(subs[0]) != "alice" {
		t.Fatalf("after the transaction: %+v, want alice's send only", subs)
	}
}

func fcmDevice(tok oncepush.Token) oncepush.DeviceAddress {
	return oncepush.DeviceAddress{Transport: oncepush.TransportFCM, Token: tok}
}

func validationOf(field string) func(error) string {
	return func(err error) string {
		var ve *oncepush.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			return "want a ValidationError naming " + field
		}
		return ""
	}
}

func (b *bundle[TTx]) deviceRecipient(tr oncepush.Transport, tok oncepush.Token) string {
	b.t.Helper()
	r, err := b.client.DeviceRecipient(tr, tok)
	if err != nil {
		b.t.Fatalf("DeviceRecipient(%s): %v", tr, err)
	}
	return r
}

// wantNoDirectWrites fails the test if a direct send registered the FCM
// token or queued a delivery for it.
func (b *bundle[TTx]) wantNoDirectWrites(tok oncepush.Token) {
	b.t.Helper()
	r := b.deviceRecipient(oncepush.TransportFCM, tok)
	devs, err := b.client.Devices(b.ctx, r)
	if err != nil {
		b.t.Fatal(err)
	}
	if ds := b.deliveries(r); len(devs) != 0 || len(ds) != 0 {
		b.t.Fatalf("a refused direct send left %d devices and %d deliveries", len(devs), len(ds))
	}
}

// testDeviceRecipientUnreachable: a direct send's implicit recipient
// ("device:…") is the engine's, not a caller's. No call that writes under a
// recipient the caller names takes one: a plain send to it (which would
// reach the device by an id that appears in logs and URLs, without its
// secret token), a registration under it (which would attach another token
// to every later direct send to the device), an uploaded campaign
// audience. Each is refused naming the field, and writes nothing.
func testDeviceRecipientUnreachable[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	tok := tokenFor(oncepush.TransportFCM, "direct")
	implicit := b.deviceRecipient(oncepush.TransportFCM, tok)
	direct := []oncepush.DeviceAddress{{Transport: oncepush.TransportFCM, Token: tok}}
	if _, err := b.client.SendToDevices(b.ctx, direct, msg("direct"), nil); err != nil {
		t.Fatal(err)
	}
	refused := func(what, field string, err error) {
		t.Helper()
		var ve *oncepush.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s under the implicit recipient %s: %v, want a ValidationError naming %q", what, implicit, err, field)
		}
	}
	_, err := b.client.Send(b.ctx, []string{"someone", implicit}, msg("plain"), &oncepush.SendOptions{DedupKey: "k"})
	refused("a plain send", "recipients[1]", err)
	other := tokenFor(oncepush.TransportFCM, "other")
	_, err = b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: implicit, Transport: oncepush.TransportFCM, Token: other})
	refused("a registration", "recipient", err)
	c := b.createCampaign(campaignSpec("campaign"))
	_, err = b.client.AddCampaignRecipients(b.ctx, c.ID, 1, []string{"someone", implicit})
	refused("a campaign page", "recipients[1]", err)

	if _, err := b.client.SendToDevices(b.ctx, direct, msg("direct again"), nil); err != nil {
		t.Fatal(err)
	}
	b.drain()
	subs := b.fcm.Submissions()
	if len(subs) != 2 {
		t.Fatalf("FCM got %d submissions, want the 2 direct sends", len(subs))
	}
	for _, s := range subs {
		if s.Token != tok || !strings.HasPrefix(s.Title, "direct") {
			t.Fatalf("a submission of %q to %s, want only the direct sends to their token", s.Title, oncepush.MaskToken(string(s.Token)))
		}
	}
	if ds := b.deliveries(implicit); len(ds) != 2 {
		t.Fatalf("the implicit recipient has %d deliveries, want the 2 direct sends", len(ds))
	}
}
