package drivertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
)

// testMaybeSent: a send with no answer after the request was written is
// resent (same identity) under resend, and never again under at-most-once.
func testMaybeSent[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	dev1 := b.register("resend", oncepush.TransportFCM)[0]
	dev2 := b.register("once", oncepush.TransportFCM)[0]
	var mu sync.Mutex
	seen := map[string]int{}
	b.fcm.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		mu.Lock()
		defer mu.Unlock()
		seen[s.SubmissionID]++
		if seen[s.SubmissionID] == 1 {
			return oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer after the request was written: timeout"}
		}
		return oncepush.Accepted("second")
	})
	b.send([]string{"resend"}, msg("r"), nil)
	b.send([]string{"once"}, msg("o"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})
	b.drain()

	d := b.only("resend")
	wantStatus(t, d, oncepush.StatusPending)
	if d.Attempts != 1 || !strings.Contains(d.LastError, "no answer after the request was written") {
		t.Fatalf("resend delivery after a lost answer: attempts %d, error %q", d.Attempts, d.LastError)
	}
	wantStatus(t, b.only("once"), oncepush.StatusAmbiguous)

	b.drainAfter(time.Hour)
	d = b.only("resend")
	wantStatus(t, d, oncepush.StatusSent)
	if a := attempt(t, d, dev1.ID); a.Submissions != 2 || a.Ambiguous != 1 || a.ProviderID != "second" {
		t.Fatalf("resend ledger: %+v", a)
	}
	if a := attempt(t, b.only("once"), dev2.ID); a.Submissions != 1 || a.State != oncepush.AttemptAmbiguous {
		t.Fatalf("at-most-once ledger: %+v", a)
	}
	subs := b.fcm.Submissions()
	if len(subs) != 3 {
		t.Fatalf("%d submissions, want 3 (resend twice, at-most-once once)", len(subs))
	}
}

func testProviderFailures[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.MaxAttempts = 3 })
	dev := b.register("r1", oncepush.TransportFCM)[0]
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 UNAVAILABLE: The service is unavailable."})
	b.send([]string{"r1"}, msg("flaky"), nil)
	b.drain()

	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusPending)
	wantErr := fmt.Sprintf("fcm device %d: 503 UNAVAILABLE: The service is unavailable.", dev.ID)
	if d.Attempts != 1 || d.LastError != wantErr {
		t.Fatalf("after one failure: attempts %d, error %q; want 1 and %q", d.Attempts, d.LastError, wantErr)
	}
	if a := attempt(t, d, dev.ID); a.State != oncepush.AttemptRetry || a.Error != "fcm 503 UNAVAILABLE: The service is unavailable." {
		t.Fatalf("device ledger: %+v", a)
	}
	// Backoff: 15 s ± 20 % from the clock's now.
	now := b.clock.Now()
	if lo, hi := now.Add(12*time.Second), now.Add(18*time.Second); d.NextAttemptAt.Before(lo) || d.NextAttemptAt.After(hi) {
		t.Fatalf("next attempt at %s, want within [%s, %s]", d.NextAttemptAt, lo, hi)
	}
	// While the clock stands, no retry.
	b.drain()
	b.drainAfter(11 * time.Second)
	wantSends(t, b.fcm, 1, "before the backoff passed")
	b.clock.Advance(8 * time.Second)
	// A Retry-After longer than the backoff wins.
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "429 QUOTA_EXCEEDED: slow down", RetryAfter: 10 * time.Minute})
	b.drain()
	wantSends(t, b.fcm, 2, "retried after the backoff")
	d = b.only("r1")
	if min := b.clock.Now().Add(10 * time.Minute); d.Attempts != 2 || d.NextAttemptAt.Before(min) {
		t.Fatalf("after Retry-After 10m: attempts %d, next %s; want 2 and not before %s", d.Attempts, d.NextAttemptAt, min)
	}
	b.drainAfter(5 * time.Minute)
	wantSends(t, b.fcm, 2, "before Retry-After passed")
	b.drainAfter(6 * time.Minute)
	d = b.only("r1")
	wantStatus(t, d, oncepush.StatusFailed)
	if d.Attempts != 3 || !strings.Contains(d.LastError, "429 QUOTA_EXCEEDED: slow down") || d.FinishedAt == nil {
		t.Fatalf("after the last attempt: %+v", d)
	}
	b.drainAfter(24 * time.Hour)
	wantSends(t, b.fcm, 3, "a failed delivery a day later")
}

// testProviderTextIsStorable: a provider answering bytes that are not UTF-8
// (or NULs, or a novel) is still recorded, not turned into a failed record.
func testProviderTextStorable[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	dev := b.register("r1", oncepush.TransportFCM)[0]
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: "400 bad \xff\xfe bytes\x00 " + strings.Repeat("é", 2000)})
	b.send([]string{"r1"}, msg("x"), nil)
	b.drain()
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusFailed)
	a := attempt(t, d, dev.ID)
	if a.State != oncepush.AttemptRejected || !strings.HasPrefix(a.Error, "fcm 400 bad \uFFFD bytes ") || len(a.Error) > 1100 {
		t.Fatalf("ledger: state %s, error %q (%d bytes)", a.State, a.Error[:min(60, len(a.Error))], len(a.Error))
	}
}

func testInvalidToken[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	// The same token string under two transports is two devices.
	fcmDev, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportFCM, Token: "shared-token-123"})
	if err != nil {
		t.Fatal(err)
	}
	rusDev, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportRuStore, Token: "shared-token-123"})
	if err != nil {
		t.Fatal(err)
	}
	if fcmDev.ID == rusDev.ID {
		t.Fatal("one token under two transports shares a device")
	}
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeInvalidToken, Text: "404 UNREGISTERED: Requested entity was not found."})
	b.send([]string{"r1"}, msg("hi"), nil)
	b.drain()

	devs, err := b.client.Devices(b.ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].ID != rusDev.ID {
		t.Fatalf("devices after an invalid FCM token: %+v; want only the RuStore one", devs)
	}
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
	if a := attempt(t, d, fcmDev.ID); a.State != oncepush.AttemptInvalid || a.Error != "fcm 404 UNREGISTERED: Requested entity was not found." {
		t.Fatalf("fcm ledger: %+v", a)
	}
	if want := fmt.Sprintf("fcm device %d: 404 UNREGISTERED: Requested entity was not found.", fcmDev.ID); d.LastError != want {
		t.Fatalf("last error %q, want %q", d.LastError, want)
	}
	if d.Attempts != 0 {
		t.Fatalf("an invalid token counted as an attempt (%d)", d.Attempts)
	}
}

// testInvalidMovedToken: a token moves to another recipient while a send to
// its old owner is in flight; the provider's "invalid" about the old
// registration must not delete the new owner's.
func testInvalidMovedToken[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	old, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "seller", Transport: oncepush.TransportFCM, Token: "phone-token-1"})
	if err != nil {
		t.Fatal(err)
	}
	b.send([]string{"seller"}, msg("to the seller"), nil)
	finish := abandon(t, b, b.client, b.fcm, oncepush.Result{Outcome: oncepush.OutcomeInvalidToken, Text: "404 UNREGISTERED"})
	moved, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "buyer", Transport: oncepush.TransportFCM, Token: "phone-token-1"})
	if err != nil {
		t.Fatal(err)
	}
	if moved.ID == old.ID {
		t.Fatal("a token that moved to another recipient kept its device id")
	}
	finish()
	devs, err := b.client.Devices(b.ctx, "buyer")
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].ID != moved.ID {
		t.Fatalf("the new owner's registration was deleted by an answer about the old one: %+v", devs)
	}
	if devs, _ := b.client.Devices(b.ctx, "seller"); len(devs) != 0 {
		t.Fatalf("the old owner still has the token: %+v", devs)
	}
}

// testAcceptedEndsSent: once one device accepted, every way a delivery can
// end must end it sent — expiry, a skip, a delay past the lifetime, attempts
// exhausted.
func testAcceptedEndsSent[TTx any](t *testing.T, h Harness[TTx]) {
	var skip atomic.Bool
	elig := func(_ context.Context, n oncepush.Notice, recipients []string) (map[string]oncepush.Decision, error) {
		out := map[string]oncepush.Decision{}
		if !skip.Load() {
			return out, nil
		}
		for _, r := range recipients {
			switch r {
			case "skip":
				out[r] = oncepush.DecisionSkip
			case "late":
				out[r] = oncepush.DelayUntil(n.ExpiresAt.Add(time.Hour))
			}
		}
		return out, nil
	}
	b := setup(t, h, func(c *oncepush.Config) { c.Eligibility = perMessage(elig) })
	names := []string{"expire", "skip", "late"}
	for _, r := range names {
		b.register(r, oncepush.TransportFCM, oncepush.TransportAPNs)
	}
	b.apns.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 ServiceUnavailable"})
	b.send([]string{"skip", "late"}, msg("one"), &oncepush.SendOptions{Lifetime: 2 * time.Hour})
	b.send([]string{"expire"}, msg("two"), &oncepush.SendOptions{Lifetime: 10 * time.Minute})
	b.drain()
	for _, r := range names {
		d := b.only(r)
		wantStatus(t, d, oncepush.StatusPending) // FCM accepted, APNs retries
	}

	skip.Store(true)
	b.drainAfter(11 * time.Minute) // "expire" is past its lifetime; the others are due
	for _, r := range names {
		wantStatus(t, b.only(r), oncepush.StatusSent)
	}
	wantSends(t, b.fcm, 3, "one per accepted device")
}

// flakyDriver fails InTx while fail is positive: a database too slow to
// answer in time, as seen on a loaded machine.
type flakyDriver[TTx any] struct {
	driver.Driver[TTx]
	fail atomic.Int32
}

func (f *flakyDriver[TTx]) InTx(ctx context.Context, fn func(context.Context, TTx, driver.Executor) error) error {
	if f.fail.Add(-1) >= 0 {
		return errors.New("injected: the database did not answer in time")
	}
	return f.Driver.InTx(ctx, fn)
}

// failingRecord queues a message to r1 (with an FCM device) and returns a
// client, sending to FCM only, whose database fails its next tries
// transactions from the moment FCM accepts the send: those of the record.
func failingRecord[TTx any](t *testing.T, h Harness[TTx], tries int32) (*bundle[TTx], *oncepush.Client[TTx]) {
	t.Helper()
	b := setup(t, h, nil, "r1")
	flaky := &flakyDriver[TTx]{Driver: b.db.Driver(t, 0)}
	client := b.newClient(flaky, func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	b.send([]string{"r1"}, msg("recorded"), nil)
	b.fcm.Answer(func(context.Context, *oncepush.Submission) oncepush.Result {
		flaky.fail.Store(tries)
		return oncepush.Accepted("ok")
	})
	return b, client
}

// testRecordOutlastsSlowDatabase: a record that fails several times in a row
// (a slow, loaded machine) must keep trying while the lease holds, not give up
// and leave a submitted batch to be resent when the lease ends.
func testRecordOutlastsSlowDatabase[TTx any](t *testing.T, h Harness[TTx]) {
	b, client := failingRecord(t, h, 8) // the record's next eight tries fail
	if _, err := client.Drain(b.ctx); err != nil {
		t.Fatalf("the record gave up: %v", err)
	}
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
	wantSends(t, b.fcm, 1, "the record that outlasted the slow database")
}

// testForeignTextIsRedacted: whatever a provider (or its panic) says is
// recorded without the device's token and without control characters: a push
// service echoing its request, or a provider written elsewhere, must not put a
// token into the ledger the API shows, nor escapes into the terminals that
// read it.
func testForeignTextIsRedacted[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	fcmDev := b.register("r1", oncepush.TransportFCM)[0]
	apnsDev := b.register("r2", oncepush.TransportAPNs)[0]
	b.fcm.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		return oncepush.Result{Outcome: oncepush.OutcomeRejected,
			Text: "400 no such token " + string(s.Token) + " \x1b[31mred\x1b[0m\r\nforged: line \u202eevil"}
	})
	b.apns.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		panic("cannot send to " + string(s.Token) + "\x1b[2J")
	})
	b.send([]string{"r1", "r2"}, msg("echo"), nil)
	b.drain()
	for _, c := range []struct {
		r   string
		dev *oncepush.Device
	}{{"r1", fcmDev}, {"r2", apnsDev}} {
		d := b.only(c.r)
		a := attempt(t, d, c.dev.ID)
		for _, text := range []string{a.Error, d.LastError} {
			if strings.Contains(text, string(c.dev.Token)) {
				t.Fatalf("%s: the device token reached the ledger: %q", c.r, text)
			}
			for _, r := range text {
				if r < 0x20 || (r >= 0x7f && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
					t.Fatalf("%s: control character %U in the ledger: %q", c.r, r, text)
				}
			}
		}
		if !strings.Contains(a.Error, oncepush.MaskToken(string(c.dev.Token))) {
			t.Fatalf("%s: want the token masked in the text, got %q", c.r, a.Error)
		}
	}
}

// testTokenEchoedInAnyCaseIsRedacted: a provider that echoes a device token
// in another case than it was registered in — APNs tokens are hexadecimal,
// stored in lower case, and read by APNs in either — puts it neither into
// the ledger nor into the outcome log.
func testTokenEchoedInAnyCaseIsRedacted[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	token := strings.Repeat("0a1b2c3d4e5f6789", 4) // letters to change case
	dev, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportAPNs, Token: oncepush.Token(token)})
	if err != nil {
		t.Fatal(err)
	}
	b.apns.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		return oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: "400 no such token " + strings.ToUpper(string(s.Token))}
	})
	b.send([]string{"r1"}, msg("echo"), nil)
	b.drain()
	d := b.only("r1")
	a := attempt(t, d, dev.ID)
	for _, text := range []string{a.Error, d.LastError, b.logs.all()} {
		if strings.Contains(strings.ToLower(text), token) {
			t.Fatalf("the device token, upper-cased, reached the ledger or the log: %q", text)
		}
	}
	if !strings.Contains(a.Error, oncepush.MaskToken(string(dev.Token))) {
		t.Fatalf("want the token masked in the text, got %q", a.Error)
	}
	if !b.logs.has("provider rejected the notification", oncepush.MaskToken(string(dev.Token))) {
		t.Fatalf("the rejection was not logged with the token masked:\n%s", b.logs.all())
	}
}
