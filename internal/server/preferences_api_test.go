package server_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/server"
)

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
		if len(ds) != 1 || ds[0].Status != "skipped" || len(ds[0].Devices) != 0 {
			t.Errorf("the marketing delivery: %+v, want skipped with no device attempt", ds)
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
	})
}
