package server_test

import (
	"context"
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

func TestNotificationWithCountsAndLedger(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		okDev := e.register("u_ok", oncepush.TransportFCM, nil)
		ambDev := e.register("u_amb", oncepush.TransportAPNs, nil)
		rejDev := e.register("u_rej", oncepush.TransportRuStore, nil)
		e.register("u_out", oncepush.TransportFCM, nil)
		e.putPreferences("u_out", obj{"optOut": []string{"news"}})
		e.apns.Answer(func(context.Context, *oncepush.Submission) oncepush.Result {
			return oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer after the request was written"}
		})
		e.rus.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: "400 bad message"})

		a := e.send(e.admin, obj{
			"recipients": []string{"u_ok", "u_amb", "u_rej", "u_out", "u_none"},
			"type":       "digest.daily", "title": "Your digest", "body": "Five new posts",
			"data": obj{"posts": 5, "tag": "daily"}, "link": "/digest", "image": "https://cdn.example.com/d.png",
			"category": "news", "ambiguity": "at-most-once", "ttlSeconds": 3600, "dedupeKey": "digest-2026-01-05",
		})
		if a.Queued != 5 || a.Duplicates != 0 || a.ID == 0 {
			t.Fatalf("send answered %+v", a)
		}
		n := e.notification(a.ID)
		if n.Counts["pending"] != 5 || n.AmbiguousAttempts != 0 {
			t.Errorf("before delivery: counts %v, ambiguous %d; want 5 pending", n.Counts, n.AmbiguousAttempts)
		}
		e.drain()

		n = e.notification(a.ID)
		want := map[string]int{"pending": 0, "sent": 1, "failed": 1, "ambiguous": 1, "skipped": 1, "no_devices": 1, "expired": 0, "canceled": 0}
		for st, c := range want {
			if n.Counts[st] != c {
				t.Errorf("counts %v, want %v", n.Counts, want)
				break
			}
		}
		if n.AmbiguousAttempts != 1 {
			t.Errorf("ambiguousAttempts %d, want 1", n.AmbiguousAttempts)
		}
		var data map[string]any
		_ = json.Unmarshal(n.Data, &data) // as stored; a missing or broken one fails below
		if n.ID != a.ID || n.Type != "digest.daily" || n.Title != "Your digest" || n.Body != "Five new posts" ||
			n.Link != "/digest" || n.Image != "https://cdn.example.com/d.png" || n.Category != "news" || n.Ambiguity != "at-most-once" ||
			fmt.Sprint(data["posts"]) != "5" || data["tag"] != "daily" {
			t.Errorf("content: %+v (data %s)", n, n.Data)
		}
		if !n.ScheduledAt.Equal(epoch) || !n.ExpiresAt.Equal(epoch.Add(time.Hour)) || !n.CreatedAt.Equal(epoch) {
			t.Errorf("times: scheduled %s, expires %s, created %s; want %s, +1h, %s", n.ScheduledAt, n.ExpiresAt, n.CreatedAt, epoch, epoch)
		}

		byRecipient := map[string]server.DeliveryView{}
		for _, d := range e.deliveries(fmt.Sprintf("/v1/notifications/%d/deliveries", a.ID)) {
			byRecipient[d.Recipient] = d
			if d.NotificationID != a.ID || d.DedupeKey != "digest-2026-01-05" || len(d.OncepushID) != 32 ||
				d.NextAttemptAt != nil || d.FinishedAt == nil {
				t.Errorf("delivery of %s: %+v", d.Recipient, d)
			}
		}
		wantAttempt := func(recipient string, dev server.DeviceView, state string, check func(server.AttemptView) bool) {
			t.Helper()
			d := byRecipient[recipient]
			if len(d.Devices) != 1 || d.Devices[0].DeviceID != dev.ID || d.Devices[0].State != state || d.Devices[0].Transport != dev.Transport ||
				d.Devices[0].Submissions != 1 || d.Devices[0].FirstSentAt == nil || !check(d.Devices[0]) {
				t.Errorf("%s's ledger: %+v, want one %s attempt of device %d", recipient, d.Devices, state, dev.ID)
			}
		}
		wantAttempt("u_ok", okDev, "accepted", func(a server.AttemptView) bool { return strings.HasPrefix(a.ProviderID, "fake-") && a.Error == "" })
		wantAttempt("u_amb", ambDev, "ambiguous", func(a server.AttemptView) bool { return a.Ambiguous == 1 && a.ProviderID == "" })
		wantAttempt("u_rej", rejDev, "rejected", func(a server.AttemptView) bool { return strings.Contains(a.Error, "400 bad message") })
		if d := byRecipient["u_rej"]; d.Status != "failed" || !strings.Contains(d.LastError, "400 bad message") {
			t.Errorf("u_rej: status %s, last error %q", d.Status, d.LastError)
		}
		for recipient, status := range map[string]string{"u_ok": "sent", "u_amb": "ambiguous", "u_out": "skipped", "u_none": "no_devices"} {
			if d := byRecipient[recipient]; d.Status != status {
				t.Errorf("%s: status %s, want %s", recipient, d.Status, status)
			}
		}
	})
}

func TestRetryIsVisiblePending(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		e.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 UNAVAILABLE: try later", RetryAfter: time.Minute})
		a := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello"})
		e.drain()
		ds := e.deliveries(fmt.Sprintf("/v1/notifications/%d/deliveries", a.ID))
		if len(ds) != 1 {
			t.Fatalf("%d deliveries", len(ds))
		}
		d := ds[0]
		if d.Status != "pending" || d.Attempts != 1 || d.NextAttemptAt == nil || d.NextAttemptAt.Before(epoch.Add(time.Minute)) ||
			d.FinishedAt != nil || !strings.Contains(d.LastError, "503 UNAVAILABLE") || len(d.Devices) != 1 || d.Devices[0].State != "retry" {
			t.Errorf("a delivery waiting for its retry: %+v", d)
		}
	})
}

func TestDeliveriesPagination(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		recipients := []string{"u_1", "u_2", "u_3", "u_4", "u_5"}
		a := e.send(e.admin, obj{"recipients": recipients, "title": "Hello"})
		// Another notification's deliveries must not leak into the pages.
		e.send(e.admin, obj{"recipients": recipients, "title": "Other"})

		base := fmt.Sprintf("/v1/notifications/%d/deliveries?limit=2", a.ID)
		var got []string
		var ids []int64
		var sizes []int
		path := base
		for page := 0; ; page++ {
			if page == 5 {
				t.Fatal("more than 5 pages")
			}
			p := e.deliveryPage(path)
			sizes = append(sizes, len(p.Deliveries))
			for _, d := range p.Deliveries {
				got = append(got, d.Recipient)
				ids = append(ids, d.ID)
				if d.NotificationID != a.ID {
					t.Errorf("page %d holds a delivery of notification %d", page, d.NotificationID)
				}
			}
			if p.NextCursor == nil {
				break
			}
			path = base + "&cursor=" + *p.NextCursor
		}
		if !slices.Equal(sizes, []int{2, 2, 1}) {
			t.Errorf("page sizes %v, want [2 2 1]", sizes)
		}
		if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Errorf("delivery ids %v, want ascending without repeats", ids)
		}
		slices.Sort(got)
		if !slices.Equal(got, recipients) {
			t.Errorf("pages hold %v, want each of %v once", got, recipients)
		}

		// An exact fit ends with a null cursor too, and limit defaults to a page of 100.
		p := e.deliveryPage(fmt.Sprintf("/v1/notifications/%d/deliveries?limit=5", a.ID))
		if len(p.Deliveries) != 5 || p.NextCursor != nil {
			t.Errorf("limit 5 over 5 deliveries: %d deliveries, cursor %v", len(p.Deliveries), p.NextCursor)
		}
		p = e.deliveryPage(fmt.Sprintf("/v1/notifications/%d/deliveries", a.ID))
		if len(p.Deliveries) != 5 || p.NextCursor != nil {
			t.Errorf("default limit: %d deliveries, cursor %v", len(p.Deliveries), p.NextCursor)
		}
	})
}

func TestRecipientHistory(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_h", oncepush.TransportFCM, nil)
		var sent []int64
		for i := range 3 {
			a := e.send(e.admin, obj{"recipients": []string{"u_h", "u_other"}, "title": fmt.Sprintf("Order %d shipped", i), "dedupeKey": fmt.Sprintf("order-%d", i)})
			sent = append(sent, a.ID)
			e.clock.Advance(time.Minute)
		}
		// The same event again: the history shows it was not sent twice.
		if a := e.send(e.admin, obj{"recipients": []string{"u_h", "u_other"}, "title": "Order 1 shipped", "dedupeKey": "order-1"}); !a.Duplicate {
			t.Errorf("a repeated event answered %+v", a)
		}
		e.drain()

		first := e.deliveryPage("/v1/recipients/u_h/deliveries?limit=2")
		if len(first.Deliveries) != 2 || first.NextCursor == nil {
			t.Fatalf("first page: %d deliveries, cursor %v; want 2 and a cursor", len(first.Deliveries), first.NextCursor)
		}
		second := e.deliveryPage("/v1/recipients/u_h/deliveries?limit=2&cursor=" + *first.NextCursor)
		if len(second.Deliveries) != 1 || second.NextCursor != nil {
			t.Fatalf("second page: %d deliveries, cursor %v; want 1 and null", len(second.Deliveries), second.NextCursor)
		}
		var got []int64
		for _, d := range append(first.Deliveries, second.Deliveries...) {
			got = append(got, d.NotificationID)
			if d.Recipient != "u_h" || d.Status != "sent" || len(d.Devices) != 1 || d.Devices[0].Submissions != 1 {
				t.Errorf("history entry %+v", d)
			}
		}
		slices.Reverse(sent)
		if !slices.Equal(got, sent) {
			t.Errorf("history lists notifications %v, want newest first %v", got, sent)
		}
		if n := e.fcm.Count(); n != 3 {
			t.Errorf("the provider got %d submissions, want 3", n)
		}
		if ds := e.deliveries("/v1/recipients/u_nobody/deliveries"); len(ds) != 0 {
			t.Errorf("an unknown recipient has %d deliveries", len(ds))
		}
	})
}

func TestUnknownNotification(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.do("GET", "/v1/notifications/999999", e.admin, nil).wantProblem(t, http.StatusNotFound, "not_found", "")
		e.do("GET", "/v1/notifications/999999/deliveries", e.admin, nil).wantProblem(t, http.StatusNotFound, "not_found", "")
	})
}

func TestScheduledNotification(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportRuStore, nil)
		at := epoch.Add(90 * time.Minute)
		a := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Reminder", "scheduledAt": at.Format(time.RFC3339), "ttlSeconds": 600})
		n := e.notification(a.ID)
		if !n.ScheduledAt.Equal(at) || !n.ExpiresAt.Equal(at.Add(10*time.Minute)) {
			t.Errorf("scheduled %s, expires %s; want %s and 10 minutes later", n.ScheduledAt, n.ExpiresAt, at)
		}
		e.drain()
		ds := e.deliveries("/v1/recipients/u_1/deliveries")
		if len(ds) != 1 || ds[0].Status != "pending" || ds[0].NextAttemptAt == nil || !ds[0].NextAttemptAt.Equal(at) || e.rus.Count() != 0 {
			t.Fatalf("before its time: %+v and %d submissions; want pending until %s", ds, e.rus.Count(), at)
		}
		e.clock.Set(at)
		e.drain()
		if e.rus.Count() != 1 {
			t.Errorf("at its time the provider got %d submissions, want 1", e.rus.Count())
		}
	})
}

// TestLargestPage: the documented maximum page size is served (the server asks
// the library for one row more, to know whether there is a next page).
func TestLargestPage(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		a := e.send(e.admin, obj{"recipients": []string{"u_1", "u_2"}, "title": "t"})
		e.do("GET", fmt.Sprintf("/v1/notifications/%d/deliveries?limit=1000", a.ID), e.admin, nil).want(t, http.StatusOK)
		e.do("GET", "/v1/recipients/u_1/deliveries?limit=1000", e.admin, nil).want(t, http.StatusOK)
		e.do("GET", "/v1/recipients/u_1/deliveries?limit=1001", e.admin, nil).wantProblem(t, http.StatusBadRequest, "invalid_field", "limit")
	})
}

// A notification scheduled for later can be canceled: every delivery ends
// canceled with its reason, the providers never see it, and the answer
// counts what ended. Canceling again cancels nothing; an unknown id is 404,
// a body 415.
func TestCancelNotification(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		e.register("u_2", oncepush.TransportAPNs, nil)
		at := epoch.Add(24 * time.Hour)
		a := e.send(e.admin, obj{"recipients": []string{"u_1", "u_2"}, "title": "Tomorrow", "scheduledAt": at.Format(time.RFC3339)})
		path := fmt.Sprintf("/v1/notifications/%d/cancel", a.ID)
		var res struct{ ID, Canceled, InFlight int64 }
		e.do("POST", path, e.admin, nil).want(t, http.StatusOK).decode(t, &res)
		if res.ID != a.ID || res.Canceled != 2 || res.InFlight != 0 {
			t.Fatalf("cancel answered %+v; want 2 canceled, none in flight", res)
		}
		e.clock.Set(at)
		e.drain()
		if n := e.fcm.Count() + e.apns.Count(); n != 0 {
			t.Fatalf("the providers got %d submissions of a canceled notification", n)
		}
		if n := e.notification(a.ID); n.Counts["canceled"] != 2 || n.Counts["pending"] != 0 {
			t.Errorf("counts %v; want 2 canceled", n.Counts)
		}
		for _, d := range e.deliveries(fmt.Sprintf("/v1/notifications/%d/deliveries", a.ID)) {
			if d.Status != "canceled" || d.LastError != "canceled" || d.FinishedAt == nil {
				t.Errorf("delivery %+v; want canceled, finished, saying so", d)
			}
		}
		e.do("POST", path, e.admin, nil).want(t, http.StatusOK).decode(t, &res)
		if res.Canceled != 0 {
			t.Errorf("a second cancel canceled %d", res.Canceled)
		}
		e.do("POST", "/v1/notifications/999999/cancel", e.admin, nil).wantProblem(t, http.StatusNotFound, "not_found", "")
		e.do("POST", path, e.admin, obj{"why": "no"}).wantProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	})
}

// A scheduledAt in the past is sent at once while its lifetime lasts. Past
// it, a send with a key (perhaps a retry of one already written) is
// accepted, and what it writes expires at once, saying why; without a key it
// is refused (see TestBadInputIsRefusedAndWritesNothing).
func TestScheduledInThePast(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		late := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "A bit late", "scheduledAt": epoch.Add(-time.Hour).Format(time.RFC3339)})
		keyed := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Too late", "dedupeKey": "too-late",
			"scheduledAt": epoch.Add(-48 * time.Hour).Format(time.RFC3339)})
		e.drain()
		if n := e.notification(late.ID); n.Counts["sent"] != 1 {
			t.Errorf("an hour late: counts %v, want sent", n.Counts)
		}
		ds := e.deliveries(fmt.Sprintf("/v1/notifications/%d/deliveries", keyed.ID))
		if want := "expired: its lifetime ended at 2026-01-04T09:00:00Z before it was sent"; len(ds) != 1 || ds[0].Status != "expired" || ds[0].LastError != want {
			t.Errorf("two days late, with a key: %+v; want expired saying %q", ds, want)
		}
		if e.fcm.Count() != 1 {
			t.Errorf("%d submissions, want only the one an hour late", e.fcm.Count())
		}
	})
}

// GET /v1/notifications lists newest first, filtered as asked, a page at a
// time; a bad filter or cursor is a 400 naming it.
func TestListNotifications(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		var ids []int64
		for i, n := range []obj{
			{"title": "One", "category": "news", "dedupeKey": "one"},
			{"title": "Two", "category": "billing"},
			{"title": "Three", "category": "news", "scheduledAt": epoch.Add(time.Hour).Format(time.RFC3339)},
		} {
			e.clock.Set(epoch.Add(time.Duration(i) * time.Minute))
			n["recipients"] = []string{"u_1"}
			ids = append(ids, e.send(e.admin, n).ID)
		}
		e.drain() // one and two are sent; three waits an hour
		type page struct {
			Notifications []struct {
				ID       int64
				Title    string
				Category string
			}
			NextCursor *string
		}
		list := func(query string) (got []int64, next *string) {
			t.Helper()
			var p page
			e.do("GET", "/v1/notifications"+query, e.admin, nil).want(t, http.StatusOK).decode(t, &p)
			for _, n := range p.Notifications {
				got = append(got, n.ID)
			}
			return got, p.NextCursor
		}
		for query, want := range map[string][]int64{
			"":                                  {ids[2], ids[1], ids[0]},
			"?category=news":                    {ids[2], ids[0]},
			"?status=pending":                   {ids[2]},
			"?status=done":                      {ids[1], ids[0]},
			"?dedupeKey=one":                    {ids[0]},
			"?createdFrom=2026-01-05T09:01:00Z": {ids[2], ids[1]},
			"?createdTo=2026-01-05T09:01:00Z":   {ids[0]},
			"?category=news&status=done":        {ids[0]},
			"?category=nothing":                 nil,
		} {
			if got, next := list(query); !slices.Equal(got, want) || next != nil {
				t.Errorf("%q: %v (next %v), want %v", query, got, next, want)
			}
		}
		var walked []int64
		query := "?limit=1"
		for range 5 {
			got, next := list(query)
			walked = append(walked, got...)
			if next == nil {
				break
			}
			query = "?limit=1&cursor=" + url.QueryEscape(*next)
		}
		if want := []int64{ids[2], ids[1], ids[0]}; !slices.Equal(walked, want) {
			t.Errorf("page by page: %v, want %v", walked, want)
		}
		for query, field := range map[string]string{
			"?cursor=nonsense":       "cursor",
			"?status=delivered":      "status",
			"?createdFrom=yesterday": "createdFrom",
			"?limit=0":               "limit",
		} {
			e.do("GET", "/v1/notifications"+query, e.admin, nil).wantProblem(t, http.StatusBadRequest, "invalid_field", field)
		}
	})
}
