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
	"github.com/oncepush/oncepush/pushtest"
)

// fanOut: one notification to six recipients, each showing one outcome:
// u_1's FCM was refused (503) then accepted; u_2's APNs answer was lost, then
// the resend accepted; u_3's RuStore rejected it; u_4 got it on two devices;
// u_5 has no device; u_6's FCM token is dead. An older notification reached
// u_4 only.
type fanOutRun struct {
	id, older int64
	refused   *oncepush.Device // u_1's
	resent    *oncepush.Device // u_2's
}

func fanOut(t *testing.T, e *env) *fanOutRun {
	t.Helper()
	f := &fanOutRun{}
	tok := func(s string) oncepush.Token {
		return oncepush.Token("fcm-token:" + s + "-dQw4w9WgXcQ-APA91bHun4MxP5egoKMwt2KZFBaFUH")
	}
	apns := func(s string) oncepush.Token { return oncepush.Token(strings.Repeat(s, 64/len(s))) }
	f.refused = e.register("u_1", oncepush.TransportFCM, tok("u1"))
	e.fake.Program(oncepush.TransportFCM, string(tok("u1")), pushtest.FCMError(http.StatusServiceUnavailable, "UNAVAILABLE", "The service is unavailable.", ""), pushtest.FakeAnswer{})
	f.resent = e.register("u_2", oncepush.TransportAPNs, apns("b2c3"))
	e.fake.Program(oncepush.TransportAPNs, string(apns("b2c3")), pushtest.FakeAnswer{Drop: true}, pushtest.FakeAnswer{})
	e.register("u_3", oncepush.TransportRuStore, "rustore-token-u3-KpZ6mXyQ0fTq")
	e.fake.Program(oncepush.TransportRuStore, "rustore-token-u3-KpZ6mXyQ0fTq",
		pushtest.RuStoreError(http.StatusBadRequest, "INVALID_ARGUMENT", "Message payload is invalid: image URL not allowed"))
	e.register("u_4", oncepush.TransportFCM, tok("u4"))
	e.register("u_4", oncepush.TransportAPNs, apns("d4e5"))
	e.register("u_6", oncepush.TransportFCM, tok("u6"))
	e.fake.Program(oncepush.TransportFCM, string(tok("u6")), pushtest.FCMError(http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED"))

	f.older = e.send([]string{"u_4"}, oncepush.Message{Type: "digest.daily", Title: "Your digest", Body: "Five new posts"}, nil)
	e.drain()
	e.clock.Advance(time.Minute)
	f.id = e.send([]string{"u_1", "u_2", "u_3", "u_4", "u_5", "u_6"}, oncepush.Message{
		Type: "invoice.paid", Title: "Invoice paid", Body: "Globex paid inv_2201.", Link: "/invoices/inv_2201",
	}, nil)
	e.drain()
	e.clock.Advance(2 * time.Hour) // past every backoff: the retries
	e.drain()
	return f
}

// height is the page's height in CSS pixels.
func height(t *testing.T, ctx context.Context) int {
	t.Helper()
	return run(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollHeight`))
}

// TestConsoleOutcomes attacks what an operator reads at a glance: a retry
// after a refusal is "sent once", a resend after a lost answer "maybe
// twice"; failures are marked failed in the list and on their page; the
// list filters by outcome; the fan-out's page starts with its summaries and
// pages its rows; at phone width the provider id and error stay readable.
func TestConsoleOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := fanOut(t, e)
	ds, err := e.client.MessageDeliveries(t.Context(), f.id, 0, 10)
	if err != nil || len(ds) != 6 {
		t.Fatalf("the fan-out's ledger: %d deliveries, %v", len(ds), err)
	}
	by := map[string]oncepush.Delivery{}
	for _, d := range ds {
		by[d.Recipient] = d
	}
	if by["u_1"].Status != oncepush.StatusSent || by["u_1"].Devices[0].Submissions != 2 || by["u_2"].Devices[0].Ambiguous != 1 ||
		by["u_3"].Status != oncepush.StatusFailed || by["u_5"].Status != oncepush.StatusNoDevices || by["u_6"].Status != oncepush.StatusFailed {
		t.Fatalf("the fan-out did not happen as planned: %+v", ds)
	}
	ctx := tab(t)
	signedIn(t, ctx, e, e.admin)

	// The fan-out's page: summaries first, then the rows.
	do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/console/#/notification/%d", e.url, f.id)),
		chromedp.WaitVisible(chromedp.CSS(`[data-delivery-id] .verdict`)))
	card := func(recipient string) string { return fmt.Sprintf(`[data-delivery-id="%d"]`, by[recipient].ID) }
	if got := text(t, ctx, card("u_1")+" .verdict"); !strings.Contains(got, "Sent once") {
		t.Errorf("refused, then accepted: the verdict reads %q; want it to say sent once", got)
	}
	if got := text(t, ctx, card("u_2")+" .verdict"); !strings.Contains(got, "Maybe twice") {
		t.Errorf("answer lost, then resent: the verdict reads %q; want maybe twice", got)
	}
	for _, r := range []string{"u_3", "u_6"} {
		if got := text(t, ctx, card(r)+" .status"); got != "Failed" {
			t.Errorf("%s's delivery is marked %q; want Failed", r, got)
		}
		if got := text(t, ctx, card(r)+" .verdict"); strings.Contains(got, "Sent once") {
			t.Errorf("%s's failed delivery reads %q", r, got)
		}
	}
	if got := text(t, ctx, card("u_1")+" h3"); !strings.Contains(got, "Invoice paid") {
		t.Errorf("the card's heading %q does not name the notification", got)
	}
	if n := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+card("u_1")+` .last-error').length`)); n != 0 {
		t.Errorf("u_1's sent delivery shows its earlier 503 as its error")
	}
	if got := text(t, ctx, "#outcome-summary"); !strings.Contains(got, "2 failed") || !strings.Contains(got, "1 no devices") {
		t.Errorf("the outcome summary: %q", got)
	}
	order := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#outcome-summary, #twice-summary, [data-delivery-id]")].map(e => e.id || "delivery")`))
	if len(order) < 3 || order[0] != "outcome-summary" || order[1] != "twice-summary" {
		t.Errorf("the page's order: %v; want the summaries before the deliveries", order)
	}
	if got := run(t, ctx, chromedp.Evaluate[string](`document.getElementById("twice-summary").dataset.verdict`)); got != "twice" {
		t.Errorf("the fan-out's summary verdict: %q, want twice (u_2)", got)
	}
	desktop := height(t, ctx)
	screenshot(t, ctx, "notification")

	// The rows by status, a page at a time.
	do(t, ctx, chromedp.SetValue(chromedp.ID("rows-status"), "failed"), chromedp.Click(chromedp.CSS(`#rows-form button[type=submit]`)))
	got := until[[]string](t, ctx, `location.hash.includes("status=failed") && document.querySelector("[data-delivery-id]") && [...document.querySelectorAll("[data-delivery-id]")].map(e => e.dataset.status)`)
	if !slices.Equal(got, []string{"failed", "failed"}) {
		t.Errorf("filtered to failed, the page shows %v", got)
	}

	// The list: each notification's status and counts; failures marked and
	// found by the filter.
	do(t, ctx, chromedp.Navigate(e.url+"/console/#/notifications"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-notification-id="%d"]`, f.id))))
	row := fmt.Sprintf(`tr[data-notification-id="%d"]`, f.id)
	if got := text(t, ctx, row+" .outcomes"); !strings.Contains(got, "2 failed") || !strings.Contains(got, "3 sent") {
		t.Errorf("the fan-out's counts in the list: %q", got)
	}
	if got := run(t, ctx, chromedp.Evaluate[string](`document.querySelector('`+row+`').dataset.attention`)); got != "true" {
		t.Errorf("the fan-out's row is not marked for attention: %q", got)
	}
	if got := run(t, ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('tr[data-notification-id="%d"]').dataset.attention`, f.older))); got != "false" {
		t.Errorf("the digest that reached its devices is marked for attention: %q", got)
	}
	screenshot(t, ctx, "notifications")
	do(t, ctx, chromedp.SetValue(chromedp.ID("filter-status"), "failed"), chromedp.Click(chromedp.CSS(`#filter-form button[type=submit]`)))
	ids := until[[]string](t, ctx, `location.hash.includes("status=failed") && document.querySelector("tr[data-notification-id]") && !document.querySelector('tr[data-notification-id="`+fmt.Sprint(f.older)+`"]') && [...document.querySelectorAll("tr[data-notification-id]")].map(e => e.dataset.notificationId)`)
	if !slices.Equal(ids, []string{fmt.Sprint(f.id)}) {
		t.Errorf("filtered to failed, the list shows %v; want only %d", ids, f.id)
	}

	// A recipient's history: an ordinary retry is no duplicate.
	do(t, ctx, chromedp.Navigate(e.url+"/console/#/recipient/u_1"), chromedp.WaitVisible(chromedp.ID("twice-summary")))
	if got := text(t, ctx, "#twice-summary"); !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(got, "Could a device have it twice?")), "No") {
		t.Errorf("u_1's history (a retry after a 503) reads %q; want No", got)
	}
	do(t, ctx, chromedp.Navigate(e.url+"/console/#/recipient/u_2"), chromedp.WaitVisible(chromedp.ID("twice-summary")))
	if got := text(t, ctx, "#twice-summary"); !strings.Contains(got, "Maybe") || strings.Contains(got, "Sent twice? Sent twice") {
		t.Errorf("u_2's history (a resend after a lost answer) reads %q; want Maybe", got)
	}

	// At phone width the fan-out's page fits the screen, and each device's
	// provider id and error are on screen, in a box wide enough to read.
	do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/console/#/notification/%d", e.url, f.id)),
		chromedp.WaitVisible(chromedp.CSS(`[data-delivery-id] .verdict`)),
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	if w := run(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Errorf("at 390 px the page is %d px wide", w)
	}
	cells := run(t, ctx, chromedp.Evaluate[[]float64](`[...document.querySelectorAll(".provider-id, .attempt-error")].filter(e => e.textContent !== "—").map(e => { const r = e.getBoundingClientRect(); return r.right <= 390 ? r.width : -r.right })`))
	if len(cells) == 0 {
		t.Fatal("no provider id or error on the page")
	}
	for _, w := range cells {
		if w < 0 || w < 200 {
			t.Errorf("at 390 px a provider id or error is %v px wide (negative: it ends off screen at %v); want on screen, at least 200 px", w, -w)
			break
		}
	}
	phone := height(t, ctx)
	screenshot(t, ctx, "notification-phone")
	t.Logf("the 6-recipient fan-out's page: %d px tall on desktop (1200 px wide), %d px on a phone (390 px)", desktop, phone)
}
