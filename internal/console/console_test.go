package console_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/pushtest"
)

// login opens the console and signs in with the key, by keyboard.
func login(t *testing.T, ctx context.Context, e *env, key string) {
	t.Helper()
	do(t, ctx,
		chromedp.Navigate(e.url+"/console/"),
		chromedp.WaitVisible(chromedp.ID("login-key")),
		chromedp.SendKeys(chromedp.ID("login-key"), key+"\n"),
	)
}

// signedIn logs in with a key that works and waits for the first view.
func signedIn(t *testing.T, ctx context.Context, e *env, key string) {
	t.Helper()
	login(t, ctx, e, key)
	waitVisible(t, ctx, chromedp.ID("nav"), "#nav")
	waitVisible(t, ctx, chromedp.CSS(`#view h1`), "#view h1")
}

// wantRefused waits for the problem the console shows, and checks that no
// data is on the page.
func wantRefused(t *testing.T, ctx context.Context, code, says string) {
	t.Helper()
	shown := text(t, ctx, fmt.Sprintf(`#error[data-code=%q]`, code))
	if !strings.Contains(shown, says) {
		t.Errorf("the console says %q; want it to say %q", shown, says)
	}
	if n := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#view *").length`)); n != 0 {
		t.Errorf("with a refused key the view holds %d elements; want none", n)
	}
}

// history: u_8831 got an invoice notification on three devices: FCM
// accepted it, APNs lost the first answer and accepted the resend, RuStore
// refused it. Then a digest reached FCM once. u_2 has a notification still
// due.
type history struct {
	invoice, digest, pending int64
	fcm, apns, rustore       *oncepush.Device
	fcmToken                 oncepush.Token
}

func makeHistory(t *testing.T, e *env) *history {
	t.Helper()
	h := &history{fcmToken: "fcm-token:8831-dQw4w9WgXcQ-APA91bHun4MxP5egoKMwt2KZFBaFUH"}
	apnsToken := oncepush.Token(strings.Repeat("a1b2c3d4", 8))
	rustoreToken := oncepush.Token("rustore-token-8831-KpZ6mXyQ0fTq")
	h.fcm = e.register("u_8831", oncepush.TransportFCM, h.fcmToken)
	h.apns = e.register("u_8831", oncepush.TransportAPNs, apnsToken)
	h.rustore = e.register("u_8831", oncepush.TransportRuStore, rustoreToken)
	e.register("u_2", oncepush.TransportFCM, "fcm-token:0002-Zm9vYmFyYmF6cXV4cXV1eA")
	e.fake.Program(oncepush.TransportAPNs, string(apnsToken), pushtest.FakeAnswer{Drop: true}, pushtest.FakeAnswer{})
	e.fake.Program(oncepush.TransportRuStore, string(rustoreToken),
		pushtest.RuStoreError(http.StatusBadRequest, "INVALID_ARGUMENT", "Message payload is invalid: image URL not allowed"))

	h.invoice = e.send([]string{"u_8831"}, oncepush.Message{
		Type: "invoice.paid", Title: "Invoice paid", Body: "Globex paid inv_2201.", Link: "/invoices/inv_2201",
	}, &oncepush.SendOptions{DedupKey: "invoice.paid:inv_2201"})
	e.drain()
	e.clock.Advance(2 * time.Hour) // past the backoff of the lost answer: the resend
	e.drain()
	h.digest = e.send([]string{"u_8831"}, oncepush.Message{Type: "digest.daily", Title: "Your digest", Body: "Five new posts"}, nil)
	e.drain()
	h.pending = e.send([]string{"u_2"}, oncepush.Message{Type: "report.ready", Title: "Report ready", Body: "Q4 is in."},
		&oncepush.SendOptions{ScheduledAt: e.clock.Now()})
	e.clock.Advance(42 * time.Second)
	return h
}

func TestConsoleRecipientActivity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := makeHistory(t, e)
	ctx := tab(t)

	// A wrong key: the console says so and shows nothing.
	login(t, ctx, e, "opk_wrongwrongwrongwrongwrongwrongwrongwrong")
	wantRefused(t, ctx, "unauthorized", "The API key was refused")
	screenshot(t, ctx, "login-refused")

	signedIn(t, ctx, e, e.admin)
	if stored := run(t, ctx, chromedp.Evaluate[string](`sessionStorage.getItem("oncepush.apiKey")`)); stored != e.admin {
		t.Errorf("sessionStorage holds %q, want the key", stored)
	}
	if u := run(t, ctx, chromedp.Evaluate[string](`location.href`)); strings.Contains(u, "opk_") {
		t.Errorf("the key is in the URL: %s", u)
	}

	// Find the recipient by keyboard.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`nav a[href="#/recipient"]`)),
		chromedp.WaitVisible(chromedp.ID("recipient-input")),
		chromedp.SendKeys(chromedp.ID("recipient-input"), "u_8831\n"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-delivery-id] a[href="#/notification/%d"]`, h.invoice))),
	)
	ledger, err := e.client.RecipientDeliveries(t.Context(), "u_8831", 0, 10)
	if err != nil || len(ledger) != 2 {
		t.Fatalf("the ledger: %d deliveries, %v", len(ledger), err)
	}
	invoice := ledger[1] // newest first
	attempt := func(dev *oncepush.Device) oncepush.DeviceAttempt {
		for _, a := range invoice.Devices {
			if a.DeviceID == dev.ID {
				return a
			}
		}
		t.Fatalf("no attempt of device %d in %+v", dev.ID, invoice.Devices)
		return oncepush.DeviceAttempt{}
	}
	row := fmt.Sprintf(`[data-delivery-id="%d"] tr[data-device-id="%%d"] .%%s`, invoice.ID)

	// The delivery FCM accepted, with the provider's id.
	fcmID := attempt(h.fcm).ProviderID
	if !strings.HasPrefix(fcmID, "projects/") {
		t.Fatalf("FCM's provider id in the ledger: %q", fcmID)
	}
	if got := text(t, ctx, fmt.Sprintf(row, h.fcm.ID, "provider-id")); got != fcmID {
		t.Errorf("FCM's provider id shown: %q, want %q", got, fcmID)
	}
	if got := text(t, ctx, fmt.Sprintf(row, h.fcm.ID, "state")); got != "accepted" {
		t.Errorf("FCM's state shown: %q", got)
	}
	// RuStore's refusal, in its own words.
	if got := text(t, ctx, fmt.Sprintf(row, h.rustore.ID, "attempt-error")); !strings.Contains(got, "Message payload is invalid: image URL not allowed") ||
		got != attempt(h.rustore).Error {
		t.Errorf("RuStore's error shown: %q, the ledger has %q", got, attempt(h.rustore).Error)
	}
	// APNs was asked twice: the console says so at a glance.
	if got := text(t, ctx, fmt.Sprintf(row, h.apns.ID, "submissions")); got != "2" {
		t.Errorf("APNs submissions shown: %q, want 2", got)
	}
	verdict := text(t, ctx, fmt.Sprintf(`[data-delivery-id="%d"] .verdict`, invoice.ID))
	if want := fmt.Sprintf("Maybe twice: device %d (apns) was sent it again after an answer was lost", h.apns.ID); !strings.Contains(verdict, want) {
		t.Errorf("the invoice's verdict: %q, want %q", verdict, want)
	}
	if got := text(t, ctx, fmt.Sprintf(`[data-delivery-id="%d"] .verdict`, ledger[0].ID)); !strings.Contains(got, "Sent once to each device") {
		t.Errorf("the digest's verdict: %q", got)
	}
	if got := run(t, ctx, chromedp.Evaluate[string](`document.getElementById("twice-summary").dataset.verdict`)); got != "twice" {
		t.Errorf("the summary's verdict: %q, want twice", got)
	}
	screenshot(t, ctx, "recipient")

	// At phone width the page still fits: nothing wider than the screen but
	// the tables, which scroll in their own box.
	do(t, ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	if w := run(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Errorf("at 390 px the page is %d px wide", w)
	}
	screenshot(t, ctx, "recipient-phone")
}

func TestConsoleNotificationFanOutAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := makeHistory(t, e)
	ctx := tab(t)

	// A key that may read but not send: cancel is refused, plainly.
	signedIn(t, ctx, e, e.key(apikey.ScopeRead))
	do(t, ctx,
		chromedp.Navigate(fmt.Sprintf("%s/console/#/notification/%d", e.url, h.pending)),
		chromedp.WaitVisible(chromedp.ID("cancel")),
	)
	if got := text(t, ctx, `tr[data-status="pending"] .count`); got != "1" {
		t.Errorf("pending count shown: %q, want 1", got)
	}
	do(t, ctx, chromedp.Click(chromedp.ID("cancel")), chromedp.WaitVisible(chromedp.ID("cancel-confirm")), chromedp.Click(chromedp.ID("cancel-confirm")))
	if got := text(t, ctx, `#error[data-code="forbidden"]`); !strings.Contains(got, `lacks the "send" scope`) {
		t.Errorf("cancel with a read-only key: %q", got)
	}

	// With the admin key it cancels, and the counts say so.
	do(t, ctx, chromedp.Click(chromedp.ID("signout")))
	signedIn(t, ctx, e, e.admin)
	do(t, ctx,
		chromedp.Navigate(fmt.Sprintf("%s/console/#/notification/%d", e.url, h.pending)),
		chromedp.WaitVisible(chromedp.ID("cancel")),
		chromedp.Click(chromedp.ID("cancel")),
		chromedp.Click(chromedp.ID("cancel-confirm")),
	)
	if got := until[string](t, ctx, `document.querySelector('tr[data-status="canceled"] .count')?.textContent === "1" && document.getElementById("cancel-result")?.textContent`); !strings.Contains(got, "Canceled 1 pending delivery") {
		t.Errorf("cancel result: %q", got)
	}
	counts, err := e.client.DeliveryCounts(t.Context(), h.pending)
	if err != nil || counts[oncepush.StatusCanceled] != 1 {
		t.Errorf("the ledger after cancel: %v, %v", counts, err)
	}

	// The invoice's fan-out: every status counted, the device attempts.
	do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/console/#/notification/%d", e.url, h.invoice)),
		chromedp.WaitVisible(chromedp.CSS(`[data-delivery-id] .verdict`)))
	if got := text(t, ctx, `tr[data-status="sent"] .count`); got != "1" {
		t.Errorf("sent count: %q", got)
	}
	if got := text(t, ctx, "#ambiguous-attempts"); got != "1" {
		t.Errorf("ambiguous attempts: %q, want 1", got)
	}

	// The list of notifications, newest first.
	do(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="#/notifications"]`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`a[href="#/notification/%d"]`, h.pending))))
	ids := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#view tbody a')].map(a => a.textContent)`))
	if want := []string{fmt.Sprint(h.pending), fmt.Sprint(h.digest), fmt.Sprint(h.invoice)}; !slices.Equal(ids, want) {
		t.Errorf("notifications listed: %v, want %v", ids, want)
	}
}

func TestConsoleBacklogAndDeviceLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := makeHistory(t, e)
	ctx := tab(t)

	// A key without the read scope is refused at the door.
	login(t, ctx, e, e.key(apikey.ScopeSend))
	wantRefused(t, ctx, "forbidden", `lacks the "read" scope`)

	signedIn(t, ctx, e, e.admin)
	do(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="#/backlog"]`)), chromedp.WaitVisible(chromedp.ID("chart")))
	if got := text(t, ctx, "#due"); got != "1" {
		t.Errorf("due shown: %q, want 1 (u_2's report)", got)
	}
	if got := text(t, ctx, "#oldest"); got != "42 s" {
		t.Errorf("oldest due shown: %q, want 42 s", got)
	}
	// The calls of the last 5 minutes: the digest's one FCM call (the
	// invoice's were two hours ago).
	if got := text(t, ctx, `tr[data-transport="fcm"] .accepted`); got != "1" {
		t.Errorf("FCM accepted in the window: %q, want 1", got)
	}
	if got := text(t, ctx, "#scope-note"); !strings.Contains(got, "by this server process") {
		t.Errorf("the per-process limit is not stated: %q", got)
	}
	if bars := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#chart g[data-transport="fcm"] rect').length`)); bars != 1 {
		t.Errorf("FCM bars in the chart: %d, want 1", bars)
	}
	screenshot(t, ctx, "backlog")

	// Device lookup: the token goes in the body, the answer is masked.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`nav a[href="#/device"]`)),
		chromedp.WaitVisible(chromedp.ID("device-token")),
		chromedp.SendKeys(chromedp.ID("device-token"), string(h.fcmToken)),
		chromedp.Click(chromedp.CSS(`#device-form button[type=submit]`)),
	)
	if got := text(t, ctx, "#device-recipient"); got != "u_8831" {
		t.Errorf("lookup's recipient: %q", got)
	}
	if got := text(t, ctx, "#device-masked"); got != oncepush.MaskToken(string(h.fcmToken)) || strings.Contains(got, "APA91bHun4MxP5ego") {
		t.Errorf("lookup shows the token as %q, want it masked as %q", got, oncepush.MaskToken(string(h.fcmToken)))
	}
	if left := run(t, ctx, chromedp.Value(chromedp.ID("device-token"))); left != "" {
		t.Errorf("the token stays in the form: %q", left)
	}
	screenshot(t, ctx, "device")

	do(t, ctx,
		chromedp.SendKeys(chromedp.ID("device-token"), "fcm-token:not-registered-anywhere"),
		chromedp.Click(chromedp.CSS(`#device-form button[type=submit]`)),
	)
	if got := text(t, ctx, `#error[data-code="not_found"]`); !strings.Contains(got, "no device is registered with this token") {
		t.Errorf("lookup of an unknown token: %q", got)
	}
}
