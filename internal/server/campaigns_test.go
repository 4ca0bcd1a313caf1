package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/internal/server"
)

// The campaign routes over HTTP, on SQLite and PostgreSQL: what each
// answers, what its refusals name, and that a refusal writes nothing (the
// campaign tables are among env's tables). The promises of the expansion
// itself (once per recipient whoever crashes, pacing, cancel racing a
// batch) are the engine's, tested by its conformance suite; here the
// server is seen to carry them to the wire.

// createCampaign posts a campaign and expects 201 with its Location.
func (e *env) createCampaign(body any) server.CampaignView {
	e.t.Helper()
	var c server.CampaignView
	r := e.do("POST", "/v1/campaigns", e.admin, body).want(e.t, http.StatusCreated)
	r.decode(e.t, &c)
	if loc := r.header.Get("Location"); loc != "/v1/campaigns/"+itoa(c.ID) {
		e.t.Errorf("Location %q for campaign %d", loc, c.ID)
	}
	return c
}

// campaign reads GET /v1/campaigns/{id}.
func (e *env) campaign(id int64) server.CampaignView {
	e.t.Helper()
	return answerOf[server.CampaignView](e, "GET", "/v1/campaigns/"+itoa(id), nil)
}

// campaignDo posts an action (start, cancel, resume) and expects 200.
func (e *env) campaignDo(id int64, action string) server.CampaignView {
	e.t.Helper()
	return answerOf[server.CampaignView](e, "POST", fmt.Sprintf("/v1/campaigns/%d/%s", id, action), nil)
}

// upload puts a page of recipients and expects 200.
func (e *env) upload(id int64, page int, recipients ...string) server.PageAnswer {
	e.t.Helper()
	return answerOf[server.PageAnswer](e, "PUT", fmt.Sprintf("/v1/campaigns/%d/recipients/%d", id, page), obj{"recipients": recipients})
}

// expandAll writes every due campaign's deliveries, as the started
// server's campaign loop would.
func (e *env) expandAll() oncepush.CampaignStats {
	e.t.Helper()
	st, err := e.expand(context.WithoutCancel(e.t.Context()))
	if err != nil {
		e.t.Fatalf("ExpandCampaigns: %v", err)
	}
	return st
}

// interrupt makes every sending campaign's expansion fail, as batches that
// kill their process would, until its tries run out and it is interrupted.
func (e *env) interrupt() {
	e.t.Helper()
	died := &enginetest.Hooks{OnCampaignBatch: func(int64, int) error { return errors.New("the batch's process died") }}
	ctx := enginetest.WithHooks(context.WithoutCancel(e.t.Context()), died)
	for range 20 {
		if st, _ := e.expand(ctx); st.Interrupted > 0 {
			return
		}
	}
	e.t.Fatal("no campaign was interrupted after 20 failed tries")
}

// sale is a valid campaign body to an uploaded audience, changed by extra.
func sale(extra obj) obj {
	b := obj{"message": obj{"title": "Spring sale"}, "audience": "recipients"}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// TestCampaignFlow: create, upload pages (one again, one conflicting),
// start, expand, deliver, read the totals, cancel; and the statuses that
// refuse each step.
func TestCampaignFlow(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		e.register("u_2", oncepush.TransportAPNs, nil)
		e.register("u_2", oncepush.TransportWebPush, nil)
		e.register("u_3", oncepush.TransportRuStore, nil)
		e.register("u_out", oncepush.TransportFCM, nil) // registered, not in the audience
		// u_4 has no device: in the audience, but given no delivery.

		c := e.createCampaign(obj{
			"name": "Spring sale",
			"message": obj{"type": "promo.spring", "title": "Spring sale", "body": "20% off",
				"data": obj{"order": 9007199254740993}, "link": "/sale", "image": "https://cdn.example.com/s.png"},
			"category": "marketing", "ttlSeconds": 3600, "audience": "recipients",
		})
		if c.ID == 0 || c.Status != "draft" || c.Name != "Spring sale" || c.Message.Title != "Spring sale" || c.Message.Body != "20% off" ||
			c.Message.Type != "promo.spring" || c.Message.Link != "/sale" || c.Message.Image != "https://cdn.example.com/s.png" ||
			c.Category != "marketing" || c.TTLSeconds == nil || *c.TTLSeconds != 3600 || c.Ambiguity != nil || c.Audience != "recipients" ||
			c.NotificationID != nil || c.StartAt != nil || c.StartedAt != nil || c.FinishedAt != nil || c.Totals != nil ||
			len(c.Filter.Tags) != 0 || c.Filter.Tags == nil || c.CreatedAt.IsZero() {
			t.Errorf("created %+v", c)
		}
		if !strings.Contains(string(c.Message.Data), "9007199254740993") {
			t.Errorf("data %s, want the order's digits", c.Message.Data)
		}

		if a := e.upload(c.ID, 1, "u_1", "u_2", "u_1"); a.Added != 2 || a.Replayed {
			t.Errorf("page 1 answered %+v, want 2 added", a)
		}
		// The same page again, in another order: a replay that writes nothing.
		before := e.rows()
		if a := e.upload(c.ID, 1, "u_2", "u_1"); a.Added != 0 || !a.Replayed {
			t.Errorf("page 1 again answered %+v, want a replay", a)
		}
		e.unchanged(t, before, "a page replayed")
		// Other recipients under page 1: refused, nothing written.
		e.refused(t, badRequest{"page 1 with others", "PUT", fmt.Sprintf("/v1/campaigns/%d/recipients/1", c.ID),
			obj{"recipients": []string{"u_1", "u_3"}}, nil, http.StatusConflict, "campaign_page_conflict", ""})
		if a := e.upload(c.ID, 2, "u_3", "u_4", "u_2"); a.Added != 2 || a.Replayed {
			t.Errorf("page 2 answered %+v, want 2 added (u_2 was in page 1)", a)
		}
		if got := e.campaign(c.ID); got.Recipients != 4 || got.Status != "draft" || got.Totals == nil || *got.Totals != (server.CampaignTotals{}) {
			t.Errorf("before the start: %+v (totals %+v), want 4 recipients and zero totals", got, got.Totals)
		}

		e.clock.Advance(time.Minute)
		started := e.campaignDo(c.ID, "start")
		if started.Status != "sending" || started.NotificationID == nil || started.StartedAt == nil || !started.StartedAt.Equal(epoch.Add(time.Minute)) {
			t.Fatalf("started %+v", started)
		}
		// A started campaign is neither started again, edited nor uploaded to.
		for _, tc := range []badRequest{
			{"start again", "POST", fmt.Sprintf("/v1/campaigns/%d/start", c.ID), nil, nil, http.StatusConflict, "campaign_state", ""},
			{"update", "PUT", fmt.Sprintf("/v1/campaigns/%d", c.ID), sale(nil), nil, http.StatusConflict, "campaign_state", ""},
			{"upload", "PUT", fmt.Sprintf("/v1/campaigns/%d/recipients/3", c.ID), obj{"recipients": []string{"u_5"}}, nil, http.StatusConflict, "campaign_state", ""},
			{"schedule", "POST", fmt.Sprintf("/v1/campaigns/%d/schedule", c.ID), obj{"startAt": "2026-02-01T00:00:00Z"}, nil, http.StatusConflict, "campaign_state", ""},
			{"resume", "POST", fmt.Sprintf("/v1/campaigns/%d/resume", c.ID), nil, nil, http.StatusConflict, "campaign_state", ""},
		} {
			var p problemBody
			e.refused(t, tc).decode(t, &p)
			if !strings.Contains(p.Detail, "sending") {
				t.Errorf("%s: detail %q does not name the status", tc.name, p.Detail)
			}
		}

		if st := e.expandAll(); st.Written != 3 || st.Completed != 1 {
			t.Errorf("expansion: %+v, want 3 written (u_4 has no device) and completed", st)
		}
		e.drain()
		got := e.campaign(c.ID)
		want := server.CampaignTotals{Sent: 3, Accepted: e.submissions()}
		if got.Status != "completed" || got.Written != 3 || got.Cursor != "u_4" || got.FinishedAt == nil || got.Tries != 0 ||
			got.Totals == nil || *got.Totals != want || e.submissions() != 4 {
			t.Errorf("after delivery: %+v, totals %+v; want completed, 3 written, totals %+v (4 submissions, made %d)",
				got, got.Totals, want, e.submissions())
		}
		// Written plus not written is the uploaded audience.
		if nw := (server.CampaignNotWritten{NoDevice: 1, Total: 1}); got.NotWritten != nw || got.Expanded != 4 || got.Recipients != 4 {
			t.Errorf("counts: not written %+v, expanded %d, recipients %d; want %+v (u_4), 4 and 4", got.NotWritten, got.Expanded, got.Recipients, nw)
		}
		if e.fcm.Count() != 1 || e.apns.Count() != 1 || e.web.Count() != 1 || e.rus.Count() != 1 {
			t.Errorf("submissions: fcm %d, apns %d, webpush %d, rustore %d; want one each (not u_out)",
				e.fcm.Count(), e.apns.Count(), e.web.Count(), e.rus.Count())
		}
		for _, s := range e.fcm.Submissions() {
			if s.Title != "Spring sale" || s.Data["order"] != "9007199254740993" || s.Link != "/sale" || s.Category != "marketing" {
				t.Errorf("the campaign's push: %+v", s)
			}
		}
		// Its deliveries are those of its notification, as any other's.
		n := e.notification(*got.NotificationID)
		if n.Counts["sent"] != 3 || n.Title != "Spring sale" || !n.ExpiresAt.Equal(epoch.Add(time.Minute+time.Hour)) {
			t.Errorf("the campaign's notification: %+v", n)
		}

		canceled := e.campaignDo(c.ID, "cancel")
		if canceled.Status != "canceled" || canceled.FinishedAt == nil {
			t.Errorf("canceled %+v", canceled)
		}
		if again := e.campaignDo(c.ID, "cancel"); again.Status != "canceled" {
			t.Errorf("canceled again: %+v", again)
		}
		if after := e.campaign(c.ID); after.Totals == nil || after.Totals.Sent != 3 || after.Totals.Canceled != 0 {
			t.Errorf("a cancel after the sends: totals %+v, want the 3 sent kept", after.Totals)
		}
	})
}

// A cancel ends the deliveries written and not yet sent; nothing more of
// the campaign is submitted. The audience here is every device the filter
// selects, tags all of, platforms any of.
func TestCampaignToFilteredDevicesCanceledBeforeDelivery(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		for i, tags := range [][]string{{"beta", "plan:pro"}, {"beta"}, {"plan:pro"}, {"beta", "plan:pro", "de"}, {"beta", "plan:pro"}} {
			platform := "android"
			if i == 4 {
				platform = "web" // not in the filter's platforms
			}
			e.register(fmt.Sprintf("u_%d", i), oncepush.TransportFCM, obj{"tags": tags, "platform": platform})
		}
		c := e.createCampaign(obj{
			"message": obj{"body": "For beta testers on a paid plan"}, "audience": "devices",
			"filter": obj{"tags": []string{"plan:pro", "beta", "beta"}, "platforms": []string{"android", "ios"}},
		})
		if !slices.Equal(c.Filter.Tags, []string{"beta", "plan:pro"}) || !slices.Equal(c.Filter.Platforms, []string{"android", "ios"}) ||
			c.Filter.Transports == nil || c.Filter.Locales == nil {
			t.Errorf("filter %+v, want the tags sorted and distinct, every list present", c.Filter)
		}
		e.campaignDo(c.ID, "start")
		if st := e.expandAll(); st.Written != 2 || st.Completed != 1 {
			t.Errorf("expansion %+v, want u_0 and u_3 written, completed", st)
		}
		got := e.campaign(c.ID)
		if got.Written != 2 || got.Totals.Queued != 2 || got.Cursor != "u_4" {
			t.Errorf("expanded: %+v, totals %+v", got, got.Totals)
		}
		canceled := e.campaignDo(c.ID, "cancel")
		if canceled.Status != "canceled" {
			t.Errorf("canceled %+v", canceled)
		}
		e.drain()
		if n := e.submissions(); n != 0 {
			t.Errorf("%d submissions after the cancel", n)
		}
		if got := e.campaign(c.ID); *got.Totals != (server.CampaignTotals{Canceled: 2}) {
			t.Errorf("totals %+v, want the 2 written canceled", *got.Totals)
		}
		// Uploading to a campaign that sends to devices is refused.
		other := e.createCampaign(obj{"message": obj{"title": "All"}, "audience": "devices"})
		e.refused(t, badRequest{"upload to a device audience", "PUT", fmt.Sprintf("/v1/campaigns/%d/recipients/1", other.ID),
			obj{"recipients": []string{"u_0"}}, nil, http.StatusConflict, "campaign_state", ""})
	})
}

// A scheduled campaign starts when its time comes, not before; one whose
// expansion keeps failing is interrupted, and resumed from its cursor.
func TestCampaignScheduledInterruptedResumed(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		e.register("u_2", oncepush.TransportFCM, nil)
		c := e.createCampaign(sale(nil))
		e.upload(c.ID, 1, "u_1", "u_2")
		at := epoch.Add(time.Hour)
		s := answerOf[server.CampaignView](e, "POST", fmt.Sprintf("/v1/campaigns/%d/schedule", c.ID), obj{"startAt": "2026-01-05T10:00:00+01:00"})
		if s.Status != "scheduled" || s.StartAt == nil || !s.StartAt.Equal(epoch) {
			t.Errorf("scheduled %+v, want startAt %s", s, epoch)
		}
		s = answerOf[server.CampaignView](e, "POST", fmt.Sprintf("/v1/campaigns/%d/schedule", c.ID), obj{"startAt": at.Format(time.RFC3339)})
		if s.Status != "scheduled" || !s.StartAt.Equal(at) {
			t.Errorf("rescheduled %+v, want startAt %s", s, at)
		}
		e.upload(c.ID, 2, "u_3") // a scheduled campaign still takes pages
		if st := e.expandAll(); st.Steps != 0 {
			t.Errorf("before its time: %+v", st)
		}
		e.clock.Advance(time.Hour)
		e.interrupt()
		got := e.campaign(c.ID)
		if got.Status != "interrupted" || got.Tries == 0 || got.LastError == "" || got.Written != 0 || got.StartedAt == nil {
			t.Fatalf("after failed tries: %+v", got)
		}
		resumed := e.campaignDo(c.ID, "resume")
		if resumed.Status != "sending" || resumed.Tries != 0 {
			t.Errorf("resumed %+v", resumed)
		}
		e.expandAll()
		e.drain()
		got = e.campaign(c.ID)
		if got.Status != "completed" || got.Written != 2 || got.Totals.Sent != 2 || e.fcm.Count() != 2 {
			t.Errorf("after the resume: %+v, totals %+v, %d submissions", got, got.Totals, e.fcm.Count())
		}
	})
}

// A draft is edited by replacing its spec; its pages stay.
func TestCampaignUpdateReplacesADraft(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		c := e.createCampaign(sale(obj{"ratePerMinute": 600, "ambiguity": "at-most-once", "name": "first"}))
		e.upload(c.ID, 1, "u_1")
		u := answerOf[server.CampaignView](e, "PUT", "/v1/campaigns/"+itoa(c.ID), obj{
			"message": obj{"body": "Now with a body only"}, "audience": "recipients", "filter": obj{"locales": []string{"DE", "en-GB"}},
		})
		if u.ID != c.ID || u.Name != "" || u.Message.Title != "" || u.Message.Body != "Now with a body only" || u.RatePerMinute != 0 ||
			u.Ambiguity != nil || !slices.Equal(u.Filter.Locales, []string{"de", "en-gb"}) || u.Recipients != 1 {
			t.Errorf("updated %+v, want the new spec alone, the page kept", u)
		}
		if c.RatePerMinute != 600 || c.Ambiguity == nil || *c.Ambiguity != "at-most-once" {
			t.Errorf("created %+v", c)
		}
		l := answerOf[server.CampaignView](e, "PUT", "/v1/campaigns/"+itoa(c.ID), sale(obj{
			"localTime": obj{"date": "2027-03-28", "time": "09:00", "defaultZone": "Europe/Berlin"},
		}))
		if l.LocalTime == nil || l.LocalTime.Date != "2027-03-28" || l.LocalTime.Time != "09:00" || l.LocalTime.DefaultZone != "Europe/Berlin" {
			t.Errorf("updated with a local time: %+v", l.LocalTime)
		}
	})
}

// Campaigns are listed newest first, a page at a time, by status.
func TestListCampaigns(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		var ids []int64
		for i := range 5 {
			ids = append(ids, e.createCampaign(sale(obj{"name": fmt.Sprintf("c%d", i)})).ID)
		}
		e.campaignDo(ids[1], "start")
		var seen []int64
		cursor := ""
		for page := 0; ; page++ {
			path := "/v1/campaigns?limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			p := answerOf[server.CampaignPage](e, "GET", path, nil)
			for _, c := range p.Campaigns {
				seen = append(seen, c.ID)
				if c.Totals != nil {
					t.Errorf("a listed campaign has totals: %+v", c)
				}
			}
			if p.NextCursor == nil {
				if page != 2 {
					t.Errorf("%d pages of 2 for 5 campaigns", page+1)
				}
				break
			}
			if page > 3 {
				t.Fatal("more pages than campaigns")
			}
			cursor = *p.NextCursor
		}
		if want := []int64{ids[4], ids[3], ids[2], ids[1], ids[0]}; !slices.Equal(seen, want) {
			t.Errorf("listed %v, want newest first %v", seen, want)
		}
		sending := answerOf[server.CampaignPage](e, "GET", "/v1/campaigns?status=sending", nil)
		if len(sending.Campaigns) != 1 || sending.Campaigns[0].ID != ids[1] || sending.NextCursor != nil {
			t.Errorf("status=sending: %+v", sending)
		}
		delivery := *e.deliveryPageCursor(t)
		for _, tc := range []badRequest{
			{"limit 0", "GET", "/v1/campaigns?limit=0", nil, nil, 400, "invalid_field", "limit"},
			{"limit 501", "GET", "/v1/campaigns?limit=501", nil, nil, 400, "invalid_field", "limit"},
			{"status", "GET", "/v1/campaigns?status=paused", nil, nil, 400, "invalid_field", "status"},
			{"cursor", "GET", "/v1/campaigns?cursor=nonsense", nil, nil, 400, "invalid_field", "cursor"},
			{"a deliveries cursor", "GET", "/v1/campaigns?cursor=" + delivery, nil, nil, 400, "invalid_field", "cursor"},
		} {
			e.refused(t, tc)
		}
	})
}

// deliveryPageCursor is a cursor of a deliveries list.
func (e *env) deliveryPageCursor(t *testing.T) *string {
	t.Helper()
	e.register("u_cursor", oncepush.TransportFCM, nil)
	e.send(e.admin, obj{"recipients": []string{"u_cursor"}, "title": "One"})
	e.send(e.admin, obj{"recipients": []string{"u_cursor"}, "title": "Two"})
	p := e.deliveryPage("/v1/recipients/u_cursor/deliveries?limit=1")
	if p.NextCursor == nil {
		t.Fatal("no next cursor on a page of 1 of 2 deliveries")
	}
	return p.NextCursor
}

// Changing a campaign needs the campaigns scope; reading one, read. A key
// made without --scope has no campaigns.
func TestCampaignScopes(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		defaults, err := apikey.ParseScopes(nil)
		if err != nil {
			t.Fatal(err)
		}
		plain, reader, runner := e.key(defaults...), e.key(apikey.ScopeRead), e.key(apikey.ScopeCampaigns)
		before := e.rows()
		for _, key := range []string{plain, reader} {
			e.do("POST", "/v1/campaigns", key, sale(nil)).wantProblem(t, http.StatusForbidden, "forbidden", "")
		}
		e.unchanged(t, before, "creates refused by scope")
		var c server.CampaignView
		e.do("POST", "/v1/campaigns", runner, sale(nil)).want(t, http.StatusCreated).decode(t, &c)
		path := "/v1/campaigns/" + itoa(c.ID)
		e.do("GET", path, runner, nil).wantProblem(t, http.StatusForbidden, "forbidden", "")
		e.do("GET", "/v1/campaigns", runner, nil).wantProblem(t, http.StatusForbidden, "forbidden", "")
		e.do("GET", path, reader, nil).want(t, http.StatusOK)
		e.do("GET", path, plain, nil).want(t, http.StatusOK)
		for _, action := range []string{"start", "cancel", "resume"} {
			e.do("POST", path+"/"+action, reader, nil).wantProblem(t, http.StatusForbidden, "forbidden", "")
		}
		if got := e.campaign(c.ID); got.Status != "draft" {
			t.Errorf("after refused actions the campaign is %s", got.Status)
		}
		e.do("POST", path+"/start", runner, nil).want(t, http.StatusOK)
	})
}

// Bad input is refused naming the field as the body spells it, nothing is
// written, and an unknown campaign is 404 on every route that names one.
func TestCampaignBadInputIsRefusedAndWritesNothing(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		c := e.createCampaign(sale(nil))
		msg := func(extra obj) obj {
			m := obj{"title": "Spring sale"}
			for k, v := range extra {
				m[k] = v
			}
			return sale(obj{"message": m})
		}
		const create = "/v1/campaigns"
		update := "/v1/campaigns/" + itoa(c.ID)
		pages := update + "/recipients/"
		tooMany := make([]string, oncepush.MaxCampaignPage+1)
		for i := range tooMany {
			tooMany[i] = fmt.Sprintf("u_%d", i)
		}
		cases := []badRequest{
			{"unknown field", "POST", create, sale(obj{"titel": "x"}), nil, 400, "unknown_field", "titel"},
			{"unknown message field", "POST", create, msg(obj{"Title": "x"}), nil, 400, "unknown_field", "message.Title"},
			{"unknown filter field", "PUT", update, sale(obj{"filter": obj{"tag": []string{"beta"}}}), nil, 400, "unknown_field", "filter.tag"},
			{"no message", "POST", create, obj{"audience": "recipients"}, nil, 400, "missing_field", "message"},
			{"no audience", "POST", create, obj{"message": obj{"title": "x"}}, nil, 400, "missing_field", "audience"},
			{"message null", "POST", create, obj{"message": nil, "audience": "recipients"}, nil, 400, "invalid_field", "message"},
			{"message a string", "POST", create, obj{"message": "Sale", "audience": "recipients"}, nil, 400, "invalid_field", "message"},
			{"rate a string", "POST", create, sale(obj{"ratePerMinute": "fast"}), nil, 400, "invalid_field", "ratePerMinute"},
			{"rate negative", "POST", create, sale(obj{"ratePerMinute": -1}), nil, 400, "invalid_field", "ratePerMinute"},
			{"rate a fraction", "POST", create, sale(obj{"ratePerMinute": 1.5}), nil, 400, "invalid_field", "ratePerMinute"},
			{"rate too high", "POST", create, sale(obj{"ratePerMinute": 1e12}), nil, 400, "invalid_field", "ratePerMinute"},
			{"local time without a date", "POST", create, sale(obj{"localTime": obj{"time": "09:00"}}), nil, 400, "missing_field", "localTime.date"},
			{"local date that is no day", "POST", create, sale(obj{"localTime": obj{"date": "2027-02-30", "time": "09:00"}}), nil, 400, "invalid_field", "localTime.date"},
			{"local time of day", "POST", create, sale(obj{"localTime": obj{"date": "2027-03-28", "time": "9am"}}), nil, 400, "invalid_field", "localTime.time"},
			{"local default zone", "POST", create, sale(obj{"localTime": obj{"date": "2027-03-28", "time": "09:00", "defaultZone": "Mars/Olympus"}}), nil, 400, "invalid_field", "localTime.defaultZone"},
			{"local time and pacing", "POST", create, sale(obj{"ratePerMinute": 60, "localTime": obj{"date": "2027-03-28", "time": "09:00"}}), nil, 400, "invalid_field", "localTime"},
			{"ttl zero", "POST", create, sale(obj{"ttlSeconds": 0}), nil, 400, "invalid_field", "ttlSeconds"},
			{"ttl too long", "POST", create, sale(obj{"ttlSeconds": 2419201}), nil, 400, "invalid_field", "ttlSeconds"},
			{"filter a list", "POST", create, sale(obj{"filter": []string{"beta"}}), nil, 400, "invalid_field", "filter"},
			{"filter tag", "POST", create, sale(obj{"filter": obj{"tags": []string{"beta", "plan pro"}}}), nil, 400, "invalid_field", "filter.tags[1]"},
			{"filter tag a number", "POST", create, sale(obj{"filter": obj{"tags": []any{"beta", 1}}}), nil, 400, "invalid_field", "filter.tags[1]"},
			{"filter transport", "POST", create, sale(obj{"filter": obj{"transports": []string{"fcm", "sms"}}}), nil, 400, "invalid_field", "filter.transports[1]"},
			{"filter locale", "POST", create, sale(obj{"filter": obj{"locales": []string{"de/CH"}}}), nil, 400, "invalid_field", "filter.locales[0]"},
			{"filter platform", "POST", create, sale(obj{"filter": obj{"platforms": []string{""}}}), nil, 400, "invalid_field", "filter.platforms[0]"},
			{"audience", "POST", create, sale(obj{"audience": "everyone"}), nil, 400, "invalid_field", "audience"},
			{"no title or body", "POST", create, sale(obj{"message": obj{"title": " "}}), nil, 400, "invalid_field", "message.title"},
			{"empty link", "POST", create, msg(obj{"link": ""}), nil, 400, "invalid_field", "message.link"},
			{"bad link", "POST", create, msg(obj{"link": "https://evil.example"}), nil, 400, "invalid_field", "message.link"},
			{"bad image", "POST", create, msg(obj{"image": "ftp://x"}), nil, 400, "invalid_field", "message.image"},
			{"reserved data", "POST", create, msg(obj{"data": obj{"oncepush_id": "x"}}), nil, 400, "invalid_field", "message.data"},
			{"NUL in the type", "POST", create, msg(obj{"type": "promo\x00"}), nil, 400, "invalid_field", "message.type"},
			{"name too long", "POST", create, sale(obj{"name": strings.Repeat("n", 201)}), nil, 400, "invalid_field", "name"},
			{"empty ambiguity", "POST", create, sale(obj{"ambiguity": ""}), nil, 400, "invalid_field", "ambiguity"},
			{"NUL in the category, update", "PUT", update, sale(obj{"category": "x\x00"}), nil, 400, "invalid_field", "category"},
			{"update, id", "PUT", "/v1/campaigns/x", sale(nil), nil, 400, "invalid_field", "id"},

			{"no recipients", "PUT", pages + "1", obj{}, nil, 400, "missing_field", "recipients"},
			{"empty page", "PUT", pages + "1", obj{"recipients": []string{}}, nil, 400, "invalid_field", "recipients"},
			{"bad recipient", "PUT", pages + "1", obj{"recipients": []string{"u_1", ""}}, nil, 400, "invalid_field", "recipients[1]"},
			{"a recipient a number", "PUT", pages + "1", obj{"recipients": []any{"u_1", 2}}, nil, 400, "invalid_field", "recipients[1]"},
			{"page too large", "PUT", pages + "1", obj{"recipients": tooMany}, nil, 400, "invalid_field", "recipients"},
			{"page 0", "PUT", pages + "0", obj{"recipients": []string{"u_1"}}, nil, 400, "invalid_field", "page"},
			{"page x", "PUT", pages + "x", obj{"recipients": []string{"u_1"}}, nil, 400, "invalid_field", "page"},
			{"page 2^31", "PUT", pages + "2147483648", obj{"recipients": []string{"u_1"}}, nil, 400, "invalid_field", "page"},

			{"no startAt", "POST", update + "/schedule", obj{}, nil, 400, "missing_field", "startAt"},
			{"startAt not a time", "POST", update + "/schedule", obj{"startAt": "tomorrow"}, nil, 400, "invalid_field", "startAt"},
			{"startAt a number", "POST", update + "/schedule", obj{"startAt": 1767603600}, nil, 400, "invalid_field", "startAt"},

			{"start with a body", "POST", update + "/start", `{"now": true}`, nil, 415, "unsupported_media_type", ""},
			{"cancel with a body", "POST", update + "/cancel", `{}`, nil, 415, "unsupported_media_type", ""},
			{"resume with a body", "POST", update + "/resume", `{}`, nil, 415, "unsupported_media_type", ""},
		}
		for _, rq := range []struct{ method, path string }{
			{"GET", "/v1/campaigns/0"}, {"POST", "/v1/campaigns/x/start"}, {"POST", "/v1/campaigns/-1/cancel"}, {"POST", "/v1/campaigns/1.0/resume"},
		} {
			cases = append(cases, badRequest{"id in " + rq.path, rq.method, rq.path, nil, nil, 400, "invalid_field", "id"})
		}
		const unknown = "/v1/campaigns/999999"
		for _, rq := range []struct {
			method, path string
			body         any
		}{
			{"GET", unknown, nil}, {"PUT", unknown, sale(nil)}, {"PUT", unknown + "/recipients/1", obj{"recipients": []string{"u_1"}}},
			{"POST", unknown + "/schedule", obj{"startAt": "2026-02-01T00:00:00Z"}},
			{"POST", unknown + "/start", nil}, {"POST", unknown + "/cancel", nil}, {"POST", unknown + "/resume", nil},
		} {
			cases = append(cases, badRequest{rq.method + " " + rq.path, rq.method, rq.path, rq.body, nil, 404, "not_found", ""})
		}
		for _, tc := range cases {
			e.refused(t, tc)
		}
		if got := e.campaign(c.ID); got.Status != "draft" || got.Message.Title != "Spring sale" || got.Recipients != 0 {
			t.Errorf("after the refusals: %+v", got)
		}
	})
}

// A category must be one the server declares, when it declares any; a
// campaign whose category the server no longer declares cannot start: 409,
// nothing in the (empty) request being at fault, and nothing written.
func TestCampaignCategoryMustBeDeclared(t *testing.T) {
	each(t, envOptions{config: func(c *oncepush.Config) {
		c.Categories = map[string]oncepush.Category{"marketing": {}}
	}}, func(t *testing.T, e *env) {
		c := e.createCampaign(sale(obj{"category": "marketing"}))
		e.refused(t, badRequest{"undeclared category", "POST", "/v1/campaigns", sale(obj{"category": "news"}), nil, 400, "invalid_field", "category"})
		// As if the server had been restarted without the category.
		undeclare := map[string]string{
			"sqlite":   `UPDATE oncepush_campaign SET content = json_set(content, '$.category', 'news') RETURNING 'ok'`,
			"postgres": `UPDATE oncepush_campaign SET content = jsonb_set(content, '{category}', '"news"') RETURNING 'ok'`,
		}[e.db]
		if e.text(undeclare) != "ok" {
			t.Fatal("the campaign's category was not changed")
		}
		var p problemBody
		e.refused(t, badRequest{"start", "POST", "/v1/campaigns/" + itoa(c.ID) + "/start", nil, nil, 409, "campaign_state", ""}).decode(t, &p)
		if !strings.Contains(p.Detail, "category") {
			t.Errorf("detail %q does not say the category is at fault", p.Detail)
		}
		if got := e.campaign(c.ID); got.Status != "draft" || got.Category != "news" {
			t.Errorf("after the refused start: %+v", got)
		}
	})
}

// Every campaign route that takes a body refuses one over the size limit
// (413) and one without its Content-Type (415), and writes nothing.
func TestCampaignBodiesAreBoundedAndTyped(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		path := "/v1/campaigns/" + itoa(e.createCampaign(sale(nil)).ID)
		big := `{"message": {"title": "` + strings.Repeat("t", 2<<20) + `"}, "audience": "recipients"}`
		before := e.rows()
		for _, rq := range []struct{ method, path, body string }{
			{"POST", "/v1/campaigns", `{"message": {"title": "Sale"}, "audience": "recipients"}`},
			{"PUT", path, `{"message": {"title": "Sale"}, "audience": "recipients"}`},
			{"PUT", path + "/recipients/1", `{"recipients": ["u_1"]}`},
			{"POST", path + "/schedule", `{"startAt": "2026-02-01T00:00:00Z"}`},
		} {
			e.do(rq.method, rq.path, e.admin, big).wantProblem(t, http.StatusRequestEntityTooLarge, "body_too_large", "")
			e.do(rq.method, rq.path, e.admin, rq.body, "Content-Type", "").wantProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
			e.do(rq.method, rq.path, e.admin, rq.body, "Content-Type", "text/plain").wantProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
		}
		e.unchanged(t, before, "oversize and untyped campaign bodies")
	})
}

// TestCampaignNotificationCancelNamesTheCampaign: POST
// /v1/notifications/{id}/cancel on a campaign's notification — with a key
// that may send but not run campaigns, and with an admin key — never
// answers "canceled" while the campaign goes on: it is refused with 409
// campaign_message naming the campaign's cancel route, and writes nothing;
// the campaign's own cancel (scope campaigns) is what stops it, and its
// answer says what it ended.
func TestCampaignNotificationCancelNamesTheCampaign(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		for _, r := range []string{"u_1", "u_2", "u_3"} {
			e.register(r, oncepush.TransportFCM, nil)
		}
		c := e.createCampaign(sale(nil))
		e.upload(c.ID, 1, "u_1", "u_2", "u_3")
		started := e.campaignDo(c.ID, "start")
		e.expandAll()
		path := fmt.Sprintf("/v1/notifications/%d/cancel", *started.NotificationID)
		route := fmt.Sprintf("POST /v1/campaigns/%d/cancel", c.ID)
		for name, key := range map[string]string{"send": e.key(apikey.ScopeSend), "admin": e.admin} {
			before := e.rows()
			p := e.do("POST", path, key, nil).wantProblem(t, http.StatusConflict, "campaign_message", "")
			if !strings.Contains(p.Detail, route) {
				t.Errorf("with the %s key: detail %q; want it to name %s", name, p.Detail, route)
			}
			e.unchanged(t, before, "a refused cancel of a campaign's notification")
		}
		if got := e.campaign(c.ID); got.Status != "completed" || got.Totals.Queued != 3 || got.Cancel != nil {
			t.Fatalf("after the refused cancels: %s, totals %+v, cancel %+v; want completed, 3 queued, no cancel",
				got.Status, *got.Totals, got.Cancel)
		}
		canceled := e.campaignDo(c.ID, "cancel")
		if canceled.Status != "canceled" || canceled.Cancel == nil || *canceled.Cancel != (server.CampaignCancel{Canceled: 3}) {
			t.Fatalf("the campaign's cancel answered %s, cancel %+v; want canceled, 3 canceled, none in flight", canceled.Status, canceled.Cancel)
		}
		e.drain()
		if n := e.submissions(); n != 0 {
			t.Errorf("%d submissions after the campaign's cancel", n)
		}
	})
}
