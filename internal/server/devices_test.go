package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/server"
)

// What a recipient sets: devices (registration, sessions, deletion) and
// preferences (opt-outs, quiet hours). Every answer of these tests is also
// checked for tokens by env.checkAnswer.

func (e *env) devices(recipient string) []server.DeviceView {
	e.t.Helper()
	p := answerOf[server.DevicePage](e, "GET", "/v1/recipients/"+recipient+"/devices", nil)
	if p.NextCursor != nil {
		e.t.Errorf("devices of %s: nextCursor %q, want null", recipient, *p.NextCursor)
	}
	return p.Devices
}

func TestRegisterAndListDevices(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		tok := e.token(oncepush.TransportFCM)
		d := e.putDevice("u_1", obj{
			"transport": "fcm", "token": tok, "platform": "android", "session": "sess_1", "locale": "de-CH", "timeZone": "Europe/Zurich",
		})
		if d.ID == 0 || d.Recipient != "u_1" || d.Transport != "fcm" || d.Platform != "android" || d.Session != "sess_1" ||
			d.Locale != "de-CH" || d.TimeZone != "Europe/Zurich" || !d.CreatedAt.Equal(epoch) || !d.RegisteredAt.Equal(epoch) {
			t.Errorf("registration answered %+v", d)
		}
		if want := tok[:6] + "…" + tok[len(tok)-4:]; d.Token != want {
			t.Errorf("token shown as %q, want the mask %q", d.Token, want)
		}

		// Web Push: the subscription object itself, and the same as a string.
		asObject := e.token(oncepush.TransportWebPush)
		w := e.putDevice("u_1", obj{"transport": "webpush", "token": json.RawMessage(asObject), "platform": "web"})
		if !strings.HasPrefix(w.Token, "push.example.net/…") {
			t.Errorf("a subscription is shown as %q, want its host and the endpoint's end", w.Token)
		}
		asString := e.token(oncepush.TransportWebPush)
		e.putDevice("u_1", obj{"transport": "webpush", "token": asString})
		// An APNs token is case-insensitive hex: upper case is the same device.
		apnsTok := e.token(oncepush.TransportAPNs)
		e.secret(strings.ToUpper(apnsTok))
		a1 := e.putDevice("u_1", obj{"transport": "apns", "token": apnsTok})
		e.clock.Advance(time.Minute)
		a2 := e.putDevice("u_1", obj{"transport": "apns", "token": strings.ToUpper(apnsTok)})
		if a1.ID != a2.ID || !a2.RegisteredAt.After(a1.RegisteredAt) || !a2.CreatedAt.Equal(a1.CreatedAt) {
			t.Errorf("renewing an APNs registration: %+v then %+v, want the same id, a later registeredAt", a1, a2)
		}

		ds := e.devices("u_1")
		if len(ds) != 4 {
			t.Fatalf("u_1 has %d devices, want 4", len(ds))
		}
		if ds[0].ID != a1.ID {
			t.Errorf("the most recently registered device is not first: %+v", ds)
		}
		if len(e.devices("u_nobody")) != 0 {
			t.Error("an unknown recipient has devices")
		}

		// Each is delivered to, through its own transport.
		e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello"})
		e.drain()
		if e.fcm.Count() != 1 || e.web.Count() != 2 || e.apns.Count() != 1 {
			t.Errorf("submissions: fcm %d, webpush %d, apns %d; want 1, 2, 1", e.fcm.Count(), e.web.Count(), e.apns.Count())
		}
	})
}

// Tags are set by a registration, shown sorted and distinct, replaced by
// the next registration (none given: none kept), and refused naming the
// tag at fault.
func TestDeviceTagsAreReplacedByEachRegistration(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		tok := e.token(oncepush.TransportFCM)
		d := e.putDevice("u_1", obj{"transport": "fcm", "token": tok, "tags": []string{"plan:pro", "beta", "plan:pro"}})
		if !slices.Equal(d.Tags, []string{"beta", "plan:pro"}) {
			t.Errorf("registered with tags %v, want [beta plan:pro]", d.Tags)
		}
		if ds := e.devices("u_1"); len(ds) != 1 || !slices.Equal(ds[0].Tags, d.Tags) {
			t.Errorf("the list shows %+v, want the tags %v", ds, d.Tags)
		}
		if again := e.putDevice("u_1", obj{"transport": "fcm", "token": tok, "tags": []string{"de"}}); !slices.Equal(again.Tags, []string{"de"}) {
			t.Errorf("re-registered with [de]: tags %v", again.Tags)
		}
		if none := e.putDevice("u_1", obj{"transport": "fcm", "token": tok}); none.Tags == nil || len(none.Tags) != 0 {
			t.Errorf("re-registered without tags: tags %v, want []", none.Tags)
		}
		looked := answerOf[server.DeviceView](e, "POST", "/v1/devices/lookup", obj{"transport": "fcm", "token": tok})
		if looked.Tags == nil || len(looked.Tags) != 0 {
			t.Errorf("lookup shows tags %v, want []", looked.Tags)
		}
		for _, tc := range []badRequest{
			{"a tag with a space", "PUT", "/v1/recipients/u_1/devices", obj{"transport": "fcm", "token": tok, "tags": []string{"beta", "plan pro"}}, nil, 400, "invalid_field", "tags[1]"},
			{"an empty tag", "PUT", "/v1/recipients/u_1/devices", obj{"transport": "fcm", "token": tok, "tags": []string{""}}, nil, 400, "invalid_field", "tags[0]"},
			{"a tag of 65 bytes", "PUT", "/v1/recipients/u_1/devices", obj{"transport": "fcm", "token": tok, "tags": []string{strings.Repeat("t", 65)}}, nil, 400, "invalid_field", "tags[0]"},
			{"33 tags", "PUT", "/v1/recipients/u_1/devices", obj{"transport": "fcm", "token": tok, "tags": manyTags(33)}, nil, 400, "invalid_field", "tags"},
			{"tags as a string", "PUT", "/v1/recipients/u_1/devices", obj{"transport": "fcm", "token": tok, "tags": "beta"}, nil, 400, "invalid_field", "tags"},
			{"a tag as a number", "PUT", "/v1/recipients/u_1/devices", obj{"transport": "fcm", "token": tok, "tags": []any{"beta", 7}}, nil, 400, "invalid_field", "tags[1]"},
		} {
			e.refused(t, tc)
		}
		if ds := e.devices("u_1"); len(ds) != 1 || len(ds[0].Tags) != 0 {
			t.Errorf("after refused registrations: %+v", ds)
		}
	})
}

func manyTags(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("t%d", i)
	}
	return out
}

func TestRecipientKeepsTenDevices(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		var first server.DeviceView
		for i := range 12 {
			d := e.register("u_1", oncepush.TransportRuStore, nil)
			if i == 0 {
				first = d
			}
			e.clock.Advance(time.Second)
		}
		ds := e.devices("u_1")
		if len(ds) != 10 {
			t.Fatalf("u_1 has %d devices, want the 10 most recent", len(ds))
		}
		for _, d := range ds {
			if d.ID == first.ID {
				t.Error("the oldest registration was kept")
			}
		}
	})
}

func TestTokenMovesToItsNewOwner(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		tok := e.token(oncepush.TransportFCM)
		old := e.putDevice("u_a", obj{"transport": "fcm", "token": tok})
		moved := e.putDevice("u_b", obj{"transport": "fcm", "token": tok})
		if moved.ID == old.ID || moved.Recipient != "u_b" {
			t.Errorf("moved registration %+v, want u_b's under a new id (was %d)", moved, old.ID)
		}
		if n := len(e.devices("u_a")); n != 0 {
			t.Errorf("u_a still has %d devices", n)
		}
		if ds := e.devices("u_b"); len(ds) != 1 || ds[0].ID != moved.ID {
			t.Errorf("u_b's devices: %+v", ds)
		}
		// The same string under another transport is another device.
		e.putDevice("u_a", obj{"transport": "rustore", "token": tok})
		if n := len(e.devices("u_b")); n != 1 {
			t.Errorf("registering the token under RuStore took u_b's FCM device: %d left", n)
		}
	})
}

func TestUnregisterDevice(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		fcmTok := e.token(oncepush.TransportFCM)
		webTok := e.token(oncepush.TransportWebPush)
		e.putDevice("u_b", obj{"transport": "fcm", "token": fcmTok})
		e.putDevice("u_b", obj{"transport": "webpush", "token": webTok})

		before := e.rows()
		for _, body := range []obj{
			{"transport": "fcm", "token": e.token(oncepush.TransportFCM)},                  // never registered
			{"transport": "apns", "token": e.token(oncepush.TransportAPNs)},                // never registered
			{"transport": "fcm", "token": fcmTok, "recipient": "u_a"},                      // someone else's
			{"transport": "rustore", "token": fcmTok},                                      // the same string, another transport
			{"transport": "webpush", "token": json.RawMessage(webTok), "recipient": "u_c"}, // someone else's
		} {
			e.do("DELETE", "/v1/devices", e.admin, body).want(t, http.StatusNoContent)
		}
		e.unchanged(t, before, "unregistering absent and foreign tokens")
		if n := len(e.devices("u_b")); n != 2 {
			t.Fatalf("u_b has %d devices, want 2", n)
		}

		e.do("DELETE", "/v1/devices", e.admin, obj{"transport": "fcm", "token": fcmTok, "recipient": "u_b"}).want(t, http.StatusNoContent)
		e.do("DELETE", "/v1/devices", e.admin, obj{"transport": "webpush", "token": json.RawMessage(webTok)}).want(t, http.StatusNoContent)
		if n := len(e.devices("u_b")); n != 0 {
			t.Errorf("u_b has %d devices after unregistering both", n)
		}
		// Unregistering again answers the same.
		e.do("DELETE", "/v1/devices", e.admin, obj{"transport": "fcm", "token": fcmTok}).want(t, http.StatusNoContent)
	})
}

func TestRevokeSession(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, obj{"session": "sess_old"})
		keep := e.register("u_1", oncepush.TransportAPNs, obj{"session": "sess_other"})
		e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Before"})

		e.do("POST", "/v1/sessions/sess_old/revoke", e.admin, nil).want(t, http.StatusNoContent)
		if ds := e.devices("u_1"); len(ds) != 1 || ds[0].ID != keep.ID {
			t.Errorf("after the revocation u_1 has %+v, want only the other session's device", ds)
		}
		// A pending delivery reaches only the device still registered.
		e.drain()
		if e.fcm.Count() != 0 || e.apns.Count() != 1 {
			t.Errorf("submissions: fcm %d, apns %d; want 0, 1", e.fcm.Count(), e.apns.Count())
		}

		// A registration racing in under the revoked session is refused.
		before := e.rows()
		r := e.do("PUT", "/v1/recipients/u_1/devices", e.admin, obj{"transport": "fcm", "token": e.token(oncepush.TransportFCM), "session": "sess_old"})
		r.wantProblem(t, http.StatusConflict, "session_revoked", "")
		e.unchanged(t, before, "registering under a revoked session")
		// Revoking an unknown session, or one twice, succeeds.
		e.do("POST", "/v1/sessions/sess_never/revoke", e.admin, nil).want(t, http.StatusNoContent)
		e.do("POST", "/v1/sessions/sess_old/revoke", e.admin, nil).want(t, http.StatusNoContent)
	})
}

func TestDeleteRecipient(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_gone", oncepush.TransportFCM, nil)
		e.register("u_gone", oncepush.TransportWebPush, nil)
		e.putPreferences("u_gone", obj{"optOut": []string{"news"}})
		sent := e.send(e.admin, obj{"recipients": []string{"u_gone"}, "title": "Delivered"})
		e.drain()
		e.send(e.admin, obj{"recipients": []string{"u_gone"}, "title": "Still pending"})
		if n := len(e.deliveries("/v1/recipients/u_gone/deliveries")); n != 2 {
			t.Fatalf("u_gone has %d deliveries before the deletion, want 2", n)
		}

		e.do("DELETE", "/v1/recipients/u_gone", e.admin, nil).want(t, http.StatusNoContent)
		if n := len(e.devices("u_gone")); n != 0 {
			t.Errorf("%d devices left", n)
		}
		if n := len(e.deliveries("/v1/recipients/u_gone/deliveries")); n != 0 {
			t.Errorf("%d deliveries left in the history", n)
		}
		// A notification whose only recipient it was goes with its deliveries.
		e.do("GET", "/v1/notifications/"+itoa(sent.ID)+"/deliveries", e.admin, nil).wantProblem(t, http.StatusNotFound, "not_found", "")
		if p := e.preferences("u_gone"); len(p.OptOut) != 0 || p.QuietHours != nil {
			t.Errorf("preferences left: %+v", p)
		}
		for _, tb := range []string{"oncepush_device", "oncepush_delivery", "oncepush_device_attempt", "oncepush_preference", "oncepush_message"} {
			if n := e.count(tb); n != 0 {
				t.Errorf("%s still holds %d rows", tb, n)
			}
		}
		// Nothing is left to send.
		before := e.submissions()
		e.drain()
		if n := e.submissions(); n != before {
			t.Errorf("%d submissions after the deletion", n-before)
		}
		// Deleting an unknown recipient answers the same.
		e.do("DELETE", "/v1/recipients/u_never", e.admin, nil).want(t, http.StatusNoContent)
	})
}

func TestRecipientIdsAreEscapedInPaths(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		const id = "team/42 ü"
		escaped := url.PathEscape(id)
		d := e.register(escaped, oncepush.TransportFCM, nil)
		if d.Recipient != id {
			t.Errorf("registered for %q, want %q", d.Recipient, id)
		}
		if ds := e.devices(escaped); len(ds) != 1 || ds[0].Recipient != id {
			t.Errorf("devices of %q: %+v", id, ds)
		}
		a := e.send(e.admin, obj{"recipients": []string{id}, "title": "Hello"})
		e.drain()
		if ds := e.deliveries("/v1/recipients/" + escaped + "/deliveries"); len(ds) != 1 || ds[0].NotificationID != a.ID || ds[0].Status != "sent" {
			t.Errorf("history of %q: %+v", id, ds)
		}
	})
}

func TestPreferencesRoundTrip(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		p := e.preferences("u_1")
		if p.OptOut == nil || len(p.OptOut) != 0 || p.QuietHours != nil {
			t.Errorf("a recipient without preferences: %+v, want no opt-outs and no quiet hours", p)
		}

		put := obj{"optOut": []string{"news", "billing", "news"}, "quietHours": obj{"start": "22:00", "end": "07:00", "timeZone": "Europe/Zurich"}}
		p = e.putPreferences("u_1", put)
		want := server.Preferences{OptOut: []string{"billing", "news"}, QuietHours: &server.QuietHours{Start: "22:00", End: "07:00", TimeZone: "Europe/Zurich"}}
		check := func(what string, got server.Preferences) {
			t.Helper()
			if !slices.Equal(got.OptOut, want.OptOut) || (got.QuietHours == nil) != (want.QuietHours == nil) ||
				(got.QuietHours != nil && *got.QuietHours != *want.QuietHours) {
				t.Errorf("%s: %+v (quiet %+v), want %+v (quiet %+v)", what, got, got.QuietHours, want, want.QuietHours)
			}
		}
		check("PUT answer", p)
		check("GET after PUT", e.preferences("u_1"))

		// PUT replaces everything: quiet hours left out are cleared.
		e.putPreferences("u_1", obj{"optOut": []string{"marketing"}})
		want = server.Preferences{OptOut: []string{"marketing"}}
		check("GET after a PUT without quiet hours", e.preferences("u_1"))
		e.putPreferences("u_1", obj{"optOut": nil, "quietHours": nil})
		want = server.Preferences{OptOut: []string{}}
		check("GET after clearing", e.preferences("u_1"))
	})
}

func TestOptedOutCategoryIsSkipped(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		e.putPreferences("u_1", obj{"optOut": []string{"marketing"}})

		promo := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Sale!", "category": "marketing"})
		bill := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Invoice paid", "category": "billing"})
		e.drain()

		subs := e.fcm.Submissions()
		if len(subs) != 1 || subs[0].Category != "billing" {
			t.Fatalf("the provider got %d submissions (%v), want only the billing one", len(subs), categories(subs))
		}
		ds := e.deliveries(fmt.Sprintf("/v1/notifications/%d/deliveries", promo.ID))
		if len(ds) != 1 || ds[0].Status != "skipped" || len(ds[0].Devices) != 0 || ds[0].LastError != "skipped: opted out of category marketing" {
			t.Errorf("the marketing delivery: %+v, want skipped with no device attempt, saying why", ds)
		}
		if n := e.notification(promo.ID); n.Counts["skipped"] != 1 {
			t.Errorf("marketing counts %v, want 1 skipped", n.Counts)
		}
		if n := e.notification(bill.ID); n.Counts["sent"] != 1 {
			t.Errorf("billing counts %v, want 1 sent", n.Counts)
		}
	})
}

func categories(subs []oncepush.Submission) []string {
	var out []string
	for _, s := range subs {
		out = append(out, s.Category)
	}
	return out
}

func TestQuietHoursDelayToTheirEnd(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_quiet", oncepush.TransportAPNs, nil)
		e.register("u_awake", oncepush.TransportAPNs, nil)
		// The clock stands at 10:00 in Zurich (09:00 UTC): inside 09:30–11:00.
		e.putPreferences("u_quiet", obj{"quietHours": obj{"start": "09:30", "end": "11:00", "timeZone": "Europe/Zurich"}})
		windowEnd := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC) // 11:00 in Zurich

		a := e.send(e.admin, obj{"recipients": []string{"u_quiet", "u_awake"}, "title": "Your table is ready"})
		e.drain()
		if n := e.apns.Count(); n != 1 {
			t.Fatalf("during quiet hours the provider got %d submissions, want 1 (u_awake's)", n)
		}
		quiet := e.deliveries("/v1/recipients/u_quiet/deliveries")
		if len(quiet) != 1 || quiet[0].Status != "pending" || quiet[0].NextAttemptAt == nil || !quiet[0].NextAttemptAt.Equal(windowEnd) {
			t.Fatalf("u_quiet's delivery: %+v, want pending until %s", quiet, windowEnd)
		}

		e.clock.Set(windowEnd.Add(-time.Second))
		e.drain()
		if n := e.apns.Count(); n != 1 {
			t.Fatalf("a second before the window ends the provider got %d submissions, want 1", n)
		}
		e.clock.Set(windowEnd)
		e.drain()
		if n := e.apns.Count(); n != 2 {
			t.Fatalf("after the window the provider got %d submissions, want 2", n)
		}
		if n := e.notification(a.ID); n.Counts["sent"] != 2 {
			t.Errorf("counts %v, want 2 sent", n.Counts)
		}
	})
}

func TestQuietHoursPastTheLifetimeExpire(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		// 10:00 in Zurich, quiet until 11:00; the notification lives 30 minutes.
		e.putPreferences("u_1", obj{"quietHours": obj{"start": "09:30", "end": "11:00", "timeZone": "Europe/Zurich"}})
		a := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Flash sale", "ttlSeconds": 1800})
		e.drain()
		if n := e.notification(a.ID); n.Counts["expired"] != 1 || e.fcm.Count() != 0 {
			t.Errorf("counts %v and %d submissions, want 1 expired and none", n.Counts, e.fcm.Count())
		}
		ds := e.deliveries(fmt.Sprintf("/v1/notifications/%d/deliveries", a.ID))
		if want := "(quiet hours until 11:00 Europe/Zurich)"; len(ds) != 1 || !strings.Contains(ds[0].LastError, want) {
			t.Errorf("the expired delivery: %+v, want its last error to say %s", ds, want)
		}
	})
}
