package drivertest

import (
	"errors"
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
)

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
