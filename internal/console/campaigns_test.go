package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/pushtest"
)

// campaignPage is the console's page of campaigns (CAMPAIGN_PAGE in
// console.js).
const campaignPage = 20

// hostileName is a campaign name that would run script, or at least make
// an element, if the console inserted names as HTML.
const hostileName = `<img src=x onerror="document.body.dataset.pwned='yes'">Flash <b>sale</b>`

// campaigns: campaignPage old ones, canceled, then four that matter:
//   - spring, completed and delivered: FCM and APNs accept, RuStore
//     rejects, an FCM token is dead;
//   - draft, with a hostile name, to one FCM device;
//   - winter, scheduled for tomorrow, paced, to one FCM device;
//   - autumn, interrupted: its expansion failed until its tries ran out.
type campaigns struct {
	spring, draft, winter, autumn *oncepush.Campaign
	// springSent is what the fake providers received for spring.
	springSent                           []pushtest.FakeRequest
	draftToken, winterToken, autumnToken string
}

func makeCampaigns(t *testing.T, e *env) *campaigns {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	c := &campaigns{}
	create := func(name string, extra func(*oncepush.CampaignSpec), recipients ...string) *oncepush.Campaign {
		t.Helper()
		spec := oncepush.CampaignSpec{Name: name, Message: oncepush.Message{Type: "promo", Title: name, Body: "Only this week"},
			Audience: oncepush.AudienceRecipients}
		if extra != nil {
			extra(&spec)
		}
		cp, err := e.client.CreateCampaign(ctx, spec)
		if err != nil {
			t.Fatalf("create campaign %q: %v", name, err)
		}
		if len(recipients) > 0 {
			if _, err := e.client.AddCampaignRecipients(ctx, cp.ID, 1, recipients); err != nil {
				t.Fatalf("upload the recipients of %q: %v", name, err)
			}
		}
		return cp
	}
	expand := func(hctx context.Context) (oncepush.CampaignStats, error) {
		return e.client.ExpandCampaigns(hctx)
	}
	for i := range campaignPage {
		old := create(fmt.Sprintf("Old test %d", i+1), nil)
		if _, err := e.client.CancelCampaign(ctx, old.ID); err != nil {
			t.Fatal(err)
		}
	}

	// Spring: four recipients, one device each, delivered, and a fifth
	// with no device, counted as not written.
	apnsToken := oncepush.Token(strings.Repeat("5e7a9c1d", 8))
	rustoreToken := oncepush.Token("rustore-token-spring-3-Qm9vYmFy")
	deadToken := oncepush.Token("fcm-token:spring-4-dead-bGFzdHllYXI")
	e.register("u_s1", oncepush.TransportFCM, "fcm-token:spring-1-c3ByaW5nc2FsZQ")
	e.register("u_s2", oncepush.TransportAPNs, apnsToken)
	e.register("u_s3", oncepush.TransportRuStore, rustoreToken)
	e.register("u_s4", oncepush.TransportFCM, deadToken)
	e.fake.Program(oncepush.TransportRuStore, string(rustoreToken),
		pushtest.RuStoreError(http.StatusBadRequest, "INVALID_ARGUMENT", "Message payload is invalid: image URL not allowed"))
	e.fake.Program(oncepush.TransportFCM, string(deadToken),
		pushtest.FCMError(http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED"))
	c.spring = create("Spring sale", nil, "u_s1", "u_s2", "u_s3", "u_s4", "u_s5")
	before := len(e.fake.Requests())
	if _, err := e.client.StartCampaign(ctx, c.spring.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := expand(ctx); err != nil {
		t.Fatalf("expand spring: %v", err)
	}
	e.drain()
	c.springSent = e.fake.Requests()[before:]

	// The draft, the scheduled one and the one to interrupt.
	c.draftToken, c.winterToken, c.autumnToken = "fcm-token:draft-1-ZHJhZnQ", "fcm-token:winter-1-d2ludGVy", "fcm-token:autumn-1-YXV0dW1u"
	e.register("u_d1", oncepush.TransportFCM, oncepush.Token(c.draftToken))
	e.register("u_w1", oncepush.TransportFCM, oncepush.Token(c.winterToken))
	e.register("u_a1", oncepush.TransportFCM, oncepush.Token(c.autumnToken))
	c.draft = create(hostileName, nil, "u_d1")
	c.winter = create("Winter clearance", func(s *oncepush.CampaignSpec) { s.RatePerMinute = 1200 }, "u_w1")
	if _, err := e.client.ScheduleCampaign(ctx, c.winter.ID, epoch.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	c.autumn = create("Autumn news", nil, "u_a1")
	if _, err := e.client.StartCampaign(ctx, c.autumn.ID); err != nil {
		t.Fatal(err)
	}
	died := enginetest.WithHooks(ctx, &enginetest.Hooks{OnCampaignBatch: func(int64, int) error {
		return errors.New("the batch's process died")
	}})
	for range 20 {
		if st, _ := expand(died); st.Interrupted > 0 {
			return c
		}
	}
	t.Fatal("the autumn campaign was not interrupted after 20 failed tries")
	return nil
}

// campaignIDs are the ids the campaigns list shows, in order.
func campaignIDs(t *testing.T, ctx context.Context) []int64 {
	t.Helper()
	texts := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#view tbody tr[data-campaign-id] a')].map(a => a.textContent)`))
	var ids []int64
	for _, s := range texts {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("a campaign id shown as %q", s)
		}
		ids = append(ids, id)
	}
	return ids
}

// descending lists the ids from hi down to lo.
func descending(hi, lo int64) []int64 {
	var ids []int64
	for id := hi; id >= lo; id-- {
		ids = append(ids, id)
	}
	return ids
}

// openCampaign shows campaign id's page and waits until it is drawn in
// the status given.
func openCampaign(t *testing.T, ctx context.Context, e *env, id int64, status oncepush.CampaignStatus) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/console/#/campaign/%d", e.url, id)))
	waitCampaign(t, ctx, id, status)
}

// waitCampaign waits until the page shows campaign id in the status.
func waitCampaign(t *testing.T, ctx context.Context, id int64, status oncepush.CampaignStatus) {
	t.Helper()
	until[bool](t, ctx, fmt.Sprintf(`document.querySelector("#view h1")?.textContent.startsWith("Campaign %d:") && `+
		`document.getElementById("campaign-status")?.dataset.status === %q`, id, status))
}

// visible waits, at most waitLimit, until the CSS selector matches a
// visible element.
func visible(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	until[bool](t, ctx, fmt.Sprintf(`document.querySelector(%q)?.checkVisibility() === true`, sel))
}

// click clicks the element the CSS selector matches once it is visible.
// deliverAndReadAgain expands the started campaigns and delivers them behind
// the page, then presses "Read again".
func deliverAndReadAgain(t *testing.T, ctx context.Context, e *env) {
	t.Helper()
	if _, err := e.client.ExpandCampaigns(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	e.drain()
	click(t, ctx, "#campaign-refresh")
}

func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	visible(t, ctx, sel)
	do(t, ctx, chromedp.Click(chromedp.CSS(sel)))
}

// shown is the text of the element the CSS selector matches once it is
// visible with some text, waiting at most waitLimit.
func shown(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return until[string](t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); `+
		`return e && e.checkVisibility() ? e.innerText : ""; })()`, sel))
}

// confirmAction clicks an action of the campaign's page and its
// confirmation.
func confirmAction(t *testing.T, ctx context.Context, op string) {
	t.Helper()
	click(t, ctx, "#campaign-"+op)
	click(t, ctx, "#campaign-"+op+"-confirm")
}

// total is a total the campaign's page shows, as a number.
func total(t *testing.T, ctx context.Context, key string) int {
	t.Helper()
	s := shown(t, ctx, fmt.Sprintf(`tr[data-total=%q] .count`, key))
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("total %s shown as %q", key, s)
	}
	return n
}

// campaignNow reads a campaign, with its totals, from the library.
func campaignNow(t *testing.T, e *env, id int64) *oncepush.Campaign {
	t.Helper()
	c, err := e.client.Campaign(context.WithoutCancel(t.Context()), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sentTo says whether the fake providers received a push for the token.
func sentTo(e *env, token string) bool {
	return slices.ContainsFunc(e.fake.Requests(), func(r pushtest.FakeRequest) bool { return r.Token == token })
}

// TestConsoleCampaigns: the list (newest first, paged, filtered by status),
// a campaign's page with its totals equal to what the providers received,
// a hostile name shown as text, and start, cancel and resume from the
// console: refused for a read-only key and for a page read before the
// campaign changed, each refusal in the server's words.
func TestConsoleCampaigns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := makeCampaigns(t, e)
	ctx := tab(t)

	// A read-only key sees the list, newest first, a page at a time.
	signedIn(t, ctx, e, e.key(apikey.ScopeRead))
	click(t, ctx, `nav a[href="#/campaigns"]`)
	visible(t, ctx, fmt.Sprintf(`tr[data-campaign-id="%d"]`, c.autumn.ID))
	if got, want := campaignIDs(t, ctx), descending(c.autumn.ID, c.autumn.ID-campaignPage+1); !slices.Equal(got, want) {
		t.Errorf("the first page lists %v, want %v", got, want)
	}
	click(t, ctx, "#campaigns-older")
	visible(t, ctx, `tr[data-campaign-id="1"]`)
	if got, want := campaignIDs(t, ctx), descending(c.autumn.ID-campaignPage, 1); !slices.Equal(got, want) {
		t.Errorf("the second page lists %v, want %v", got, want)
	}
	if n := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#campaigns-older").length`)); n != 0 {
		t.Error("the last page links to older campaigns")
	}

	// The status filter keeps only the campaigns in it.
	// The draft comes last: its name is looked at next.
	for _, want := range []*oncepush.Campaign{campaignNow(t, e, c.autumn.ID), c.draft} {
		visible(t, ctx, "#campaign-filter-status")
		do(t, ctx, chromedp.SetValue(chromedp.ID("campaign-filter-status"), string(want.Status)))
		click(t, ctx, `#campaign-filter button[type=submit]`)
		until[bool](t, ctx, fmt.Sprintf(`location.hash === "#/campaigns?status=%s" && `+
			`document.querySelectorAll('#view tbody tr[data-campaign-id="%d"]').length === 1`, want.Status, want.ID))
		if got := campaignIDs(t, ctx); !slices.Equal(got, []int64{want.ID}) {
			t.Errorf("filtered by %s: %v, want [%d]", want.Status, got, want.ID)
		}
		if got := shown(t, ctx, fmt.Sprintf(`tr[data-campaign-id="%d"] .status`, want.ID)); got != string(want.Status) {
			t.Errorf("campaign %d's status shown as %q, want %s", want.ID, got, want.Status)
		}
	}

	// The hostile name is text, in the list and on its page.
	noMarkup := func(where string) {
		t.Helper()
		if n := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#view img, #view b").length`)); n != 0 {
			t.Errorf("%s: the campaign's name made %d elements", where, n)
		}
		if pwned := run(t, ctx, chromedp.Evaluate[bool](`"pwned" in document.body.dataset`)); pwned {
			t.Errorf("%s: the campaign's name ran script", where)
		}
	}
	if got := shown(t, ctx, fmt.Sprintf(`tr[data-campaign-id="%d"] .name`, c.draft.ID)); got != hostileName {
		t.Errorf("the draft's name in the list: %q, want %q", got, hostileName)
	}
	noMarkup("the list")
	click(t, ctx, fmt.Sprintf(`a[href="#/campaign/%d"]`, c.draft.ID))
	waitCampaign(t, ctx, c.draft.ID, oncepush.CampaignDraft)
	if got := shown(t, ctx, "#campaign-name"); got != hostileName {
		t.Errorf("the draft's name on its page: %q, want %q", got, hostileName)
	}
	noMarkup("the campaign's page")

	// The read-only key's start is refused, in the server's words; nothing
	// changed.
	confirmAction(t, ctx, "start")
	if got := shown(t, ctx, `#error[data-code="forbidden"]`); !strings.Contains(got, `lacks the "campaigns" scope`) {
		t.Errorf("start with a read-only key: %q", got)
	}
	waitCampaign(t, ctx, c.draft.ID, oncepush.CampaignDraft)
	if s := campaignNow(t, e, c.draft.ID).Status; s != oncepush.CampaignDraft {
		t.Errorf("after a refused start the draft is %s", s)
	}

	// With the admin key: the delivered campaign's page, its totals the
	// ledger's and the fake providers'.
	click(t, ctx, "#signout")
	signedIn(t, ctx, e, e.admin)
	openCampaign(t, ctx, e, c.spring.ID, oncepush.CampaignCompleted)
	want := campaignNow(t, e, c.spring.ID)
	tl := want.Totals
	for key, n := range map[string]int{
		"queued": tl.Queued, "sent": tl.Sent, "failed": tl.Failed, "skipped": tl.Skipped, "expired": tl.Expired,
		"ambiguous": tl.Ambiguous, "noDevices": tl.NoDevices, "canceled": tl.Canceled,
		"accepted": tl.Accepted, "invalidTokens": tl.InvalidTokens, "rejected": tl.Rejected, "ambiguousAttempts": tl.AmbiguousAttempts,
	} {
		if got := total(t, ctx, key); got != n {
			t.Errorf("total %s shown: %d, the ledger has %d", key, got, n)
		}
	}
	var accepted, invalid, rejected int
	for _, r := range c.springSent {
		switch {
		case r.Status == http.StatusOK:
			accepted++
		case r.Transport == oncepush.TransportFCM && r.Status == http.StatusNotFound:
			invalid++
		case r.Transport == oncepush.TransportRuStore && r.Status == http.StatusBadRequest:
			rejected++
		default:
			t.Errorf("a request the test did not program: %s %d", r.Transport, r.Status)
		}
	}
	if accepted != 2 || invalid != 1 || rejected != 1 {
		t.Fatalf("the fake providers answered %d accepted, %d invalid, %d rejected; want 2, 1, 1", accepted, invalid, rejected)
	}
	for key, n := range map[string]int{"accepted": accepted, "invalidTokens": invalid, "rejected": rejected, "sent": accepted, "queued": 0} {
		if got := total(t, ctx, key); got != n {
			t.Errorf("total %s shown: %d, the fake providers say %d", key, got, n)
		}
	}
	// Written plus not written is the audience, as the page shows it.
	for key, n := range map[string]int64{
		"written": 4, "noDevice": 1, "filteredOut": 0, "malformedTokens": 0, "duplicateTokens": 0, "expanded": 5,
	} {
		if got := total(t, ctx, key); int64(got) != n {
			t.Errorf("audience count %s shown: %d, want %d", key, got, n)
		}
	}
	if nw := want.NotWritten; want.Written+nw.Total() != want.Recipients || nw.NoDevice != 1 {
		t.Errorf("the library: %d written, not written %+v, %d recipients", want.Written, nw, want.Recipients)
	}
	for sel, w := range map[string]string{
		"#campaign-written": "4", "#campaign-cursor": "u_s5", "#campaign-tries": "0", "#campaign-last-error": "none",
		"#campaign-malformed": "0", "#campaign-duplicate": "0", "#campaign-audience": "uploaded recipients (5)",
		"#campaign-pacing": "none: as fast as the workers deliver",
	} {
		if got := shown(t, ctx, sel); got != w {
			t.Errorf("%s shows %q, want %q", sel, got, w)
		}
	}
	if got := shown(t, ctx, "#campaign-status"); !strings.Contains(got, "Status: completed — every delivery is written") {
		t.Errorf("the status in words: %q", got)
	}
	if n := run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#campaign-start, #campaign-cancel, #campaign-resume").length`)); n != 0 {
		t.Errorf("a completed campaign with nothing queued offers %d actions; want none", n)
	}
	screenshot(t, ctx, "campaign")
	// Its notification's fan-out is a link away.
	click(t, ctx, "#campaign-notification")
	until[bool](t, ctx, fmt.Sprintf(`location.hash === "#/notification/%d" && document.querySelectorAll("[data-delivery-id]").length === 4`, want.MessageID))
	if got := shown(t, ctx, `tr[data-status="sent"] .count`); got != strconv.Itoa(accepted) {
		t.Errorf("the fan-out's sent count: %q, want %d", got, accepted)
	}

	// Start the draft from the console; the workers' part, then read again:
	// completed, and its one device received it.
	openCampaign(t, ctx, e, c.draft.ID, oncepush.CampaignDraft)
	confirmAction(t, ctx, "start")
	waitCampaign(t, ctx, c.draft.ID, oncepush.CampaignSending)
	if got := shown(t, ctx, "#campaign-result"); !strings.Contains(got, fmt.Sprintf("Started: campaign %d is now sending", c.draft.ID)) {
		t.Errorf("after start: %q", got)
	}
	deliverAndReadAgain(t, ctx, e)
	waitCampaign(t, ctx, c.draft.ID, oncepush.CampaignCompleted)
	if got := total(t, ctx, "sent"); got != 1 || !sentTo(e, c.draftToken) {
		t.Errorf("the started draft: %d sent shown, the fake received it: %v", got, sentTo(e, c.draftToken))
	}

	// A page read before the campaign changed: its start is refused with
	// 409 campaign_state, and the page is read again, now completed (its
	// one delivery written, paced, still queued).
	openCampaign(t, ctx, e, c.winter.ID, oncepush.CampaignScheduled)
	if got := shown(t, ctx, "#campaign-pacing"); got != "1200 deliveries a minute" {
		t.Errorf("the pacing shown: %q", got)
	}
	if got := shown(t, ctx, "#campaign-start-at"); got != "2026-01-06 09:00:00 UTC" {
		t.Errorf("the scheduled start shown: %q", got)
	}
	if _, err := e.client.StartCampaign(context.WithoutCancel(t.Context()), c.winter.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.ExpandCampaigns(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	confirmAction(t, ctx, "start")
	if got := shown(t, ctx, `#error[data-code="campaign_state"]`); !strings.Contains(got,
		fmt.Sprintf("campaign %d is completed: only a draft or a scheduled campaign can be started", c.winter.ID)) {
		t.Errorf("a stale start: %q", got)
	}
	waitCampaign(t, ctx, c.winter.ID, oncepush.CampaignCompleted)
	if got := total(t, ctx, "queued"); got != 1 {
		t.Errorf("queued after the expansion: %d, want 1", got)
	}

	// Cancel it, completed but not all sent: its queued delivery ends
	// canceled and is never sent.
	confirmAction(t, ctx, "cancel")
	waitCampaign(t, ctx, c.winter.ID, oncepush.CampaignCanceled)
	if q, cn := total(t, ctx, "queued"), total(t, ctx, "canceled"); q != 0 || cn != 1 {
		t.Errorf("after cancel: %d queued, %d canceled; want 0 and 1", q, cn)
	}
	if hidden := run(t, ctx, chromedp.Evaluate[bool](`document.getElementById("error").hidden`)); !hidden {
		t.Error("the earlier refusal is still shown after a cancel that worked")
	}
	e.clock.Advance(time.Hour)
	e.drain()
	if s := campaignNow(t, e, c.winter.ID).Status; s != oncepush.CampaignCanceled || sentTo(e, c.winterToken) {
		t.Errorf("after cancel: %s, sent to its device: %v", s, sentTo(e, c.winterToken))
	}

	// Resume the interrupted one: its last error and tries are shown, then
	// it goes on and completes.
	autumn := campaignNow(t, e, c.autumn.ID)
	openCampaign(t, ctx, e, c.autumn.ID, oncepush.CampaignInterrupted)
	if got := shown(t, ctx, "#campaign-last-error"); got != autumn.LastError || !strings.Contains(got, "the batch's process died") {
		t.Errorf("the last error shown: %q, the ledger has %q", got, autumn.LastError)
	}
	if got := shown(t, ctx, "#campaign-tries"); got != strconv.Itoa(autumn.Tries) || autumn.Tries == 0 {
		t.Errorf("the tries shown: %q, the ledger has %d", got, autumn.Tries)
	}
	confirmAction(t, ctx, "resume")
	waitCampaign(t, ctx, c.autumn.ID, oncepush.CampaignSending)
	deliverAndReadAgain(t, ctx, e)
	waitCampaign(t, ctx, c.autumn.ID, oncepush.CampaignCompleted)
	if got := total(t, ctx, "sent"); got != 1 || !sentTo(e, c.autumnToken) {
		t.Errorf("the resumed campaign: %d sent shown, the fake received it: %v", got, sentTo(e, c.autumnToken))
	}

	// At phone width the page and the list fit: only tables scroll, in
	// their own box.
	do(t, ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	if w := run(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Errorf("at 390 px the campaign's page is %d px wide", w)
	}
	click(t, ctx, `nav a[href="#/campaigns"]`)
	visible(t, ctx, fmt.Sprintf(`tr[data-campaign-id="%d"]`, c.autumn.ID))
	if w := run(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Errorf("at 390 px the campaigns list is %d px wide", w)
	}
}
