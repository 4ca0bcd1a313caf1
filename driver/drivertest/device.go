package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

func testDeleteRecipientMidRun[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "gone")
	b.send([]string{"gone"}, msg("bye"), nil)
	finish := abandon(t, b, b.client, b.fcm, oncepush.Accepted("late"))
	if err := b.client.DeleteRecipient(b.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	finish()
	if ds := b.deliveries("gone"); len(ds) != 0 {
		t.Fatalf("record resurrected a deleted recipient's deliveries: %+v", ds)
	}
	if !b.logs.has("deleted while it was being sent") {
		t.Fatalf("the deletion was not logged plainly:\n%s", b.logs.all())
	}
	if b.logs.has("lease lost") {
		t.Fatal("a deleted recipient was logged as a lost lease")
	}
}

// testReRegisteredTokenSamePair: whether a (notification, device) was
// submitted is decided by the token, so unregistering and registering the
// same token again (logout, login) neither reopens an at-most-once pair nor
// gives a resend a new apns-id.
func testReRegisteredTokenSamePair[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	devs := b.register("once", oncepush.TransportFCM, oncepush.TransportAPNs)
	fcmDev, apnsDev := devs[0], devs[1]
	resendDev := b.register("resend", oncepush.TransportAPNs)[0]
	lost := oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer after the request was written: timeout"}
	b.fcm.AnswerAll(lost)
	var apnsCalls atomic.Int32
	b.apns.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		if s.Token == resendDev.Token && apnsCalls.Add(1) > 1 {
			return oncepush.Accepted("second")
		}
		if s.Token == resendDev.Token {
			return lost
		}
		return oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 ServiceUnavailable"}
	})
	b.send([]string{"once"}, msg("once"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})
	b.send([]string{"resend"}, msg("resend"), nil)
	b.drain()
	first := b.apns.Submissions()
	var firstResend oncepush.Submission
	for _, s := range first {
		if s.Token == resendDev.Token {
			firstResend = s
		}
	}

	// Logout and login: the same tokens, new registrations (new ids).
	for _, d := range []*oncepush.Device{fcmDev, apnsDev, resendDev} {
		if err := b.client.UnregisterDevice(b.ctx, d.Recipient, d.Transport, d.Token); err != nil {
			t.Fatal(err)
		}
		again, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: d.Recipient, Transport: d.Transport, Token: d.Token})
		if err != nil {
			t.Fatal(err)
		}
		if again.ID == d.ID {
			t.Fatalf("re-registration kept id %d; the test needs a new row", d.ID)
		}
	}
	b.fcm.Answer(nil)
	b.drainAfter(2 * time.Hour)
	wantSends(t, b.fcm, 1, "the at-most-once pair after its token registered again")
	var resends []oncepush.Submission
	for _, s := range b.apns.Submissions() {
		if s.Token == resendDev.Token {
			resends = append(resends, s)
		}
	}
	if len(resends) != 2 || resends[1].SubmissionID != firstResend.SubmissionID || !resends[1].Resend {
		t.Fatalf("resend after re-registration: %d submissions, apns-id %q then %q (resend %v); want the same id",
			len(resends), firstResend.SubmissionID, resends[len(resends)-1].SubmissionID, resends[len(resends)-1].Resend)
	}
	wantStatus(t, b.only("resend"), oncepush.StatusSent)
}
