package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/server"
)

// answers is a provider's answers in turn; the last one repeats.
func answers(rs ...oncepush.Result) func(context.Context, *oncepush.Submission) oncepush.Result {
	var n atomic.Int64
	return func(context.Context, *oncepush.Submission) oncepush.Result {
		return rs[min(int(n.Add(1))-1, len(rs)-1)]
	}
}

// A retry after a definite refusal is no second copy; a resend after a lost
// answer may be. The API says which, per device and per delivery, by the
// ledger's own rule.
func TestMayHaveReachedTwice(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		retried := e.register("u_retried", oncepush.TransportFCM, nil)
		resent := e.register("u_resent", oncepush.TransportAPNs, nil)
		lost := e.register("u_lost", oncepush.TransportRuStore, nil)
		e.fcm.Answer(answers(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 UNAVAILABLE"}, oncepush.Result{Outcome: oncepush.OutcomeAccepted}))
		e.apns.Answer(answers(oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer"}, oncepush.Result{Outcome: oncepush.OutcomeAccepted}))
		e.rus.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer"})

		a := e.send(e.admin, obj{"recipients": []string{"u_retried", "u_resent"}, "title": "Invoice paid"})
		b := e.send(e.admin, obj{"recipients": []string{"u_lost"}, "title": "Once at most", "ambiguity": "at-most-once"})
		e.drain()
		e.clock.Advance(2 * time.Hour) // past every backoff
		e.drain()

		for _, c := range []struct {
			recipient string
			dev       server.DeviceView
			state     string
			subs, at  int
			twice     bool
		}{
			{"u_retried", retried, "accepted", 2, 1, false},
			{"u_resent", resent, "accepted", 2, 2, true},
			{"u_lost", lost, "ambiguous", 1, 1, false},
		} {
			ds := e.deliveries("/v1/recipients/" + c.recipient + "/deliveries")
			if len(ds) != 1 || len(ds[0].Devices) != 1 {
				t.Fatalf("%s: %+v", c.recipient, ds)
			}
			d, dev := ds[0], ds[0].Devices[0]
			if dev.DeviceID != c.dev.ID || dev.State != c.state || dev.Submissions != c.subs || dev.ReachedAtMost != c.at || d.MayHaveReachedTwice != c.twice {
				t.Errorf("%s: device %d %s, %d submissions, reachedAtMost %d, mayHaveReachedTwice %v; want %s, %d, %d, %v",
					c.recipient, dev.DeviceID, dev.State, dev.Submissions, dev.ReachedAtMost, d.MayHaveReachedTwice, c.state, c.subs, c.at, c.twice)
			}
		}
		// The deliveries carry their notification's title, both lists.
		for _, d := range e.deliveries(fmt.Sprintf("/v1/notifications/%d/deliveries", a.ID)) {
			if d.Title != "Invoice paid" {
				t.Errorf("delivery %d's title %q", d.ID, d.Title)
			}
		}
		if ds := e.deliveries("/v1/recipients/u_lost/deliveries"); ds[0].Title != "Once at most" || ds[0].NotificationID != b.ID {
			t.Errorf("u_lost's delivery: %+v", ds[0])
		}
	})
}

// The notifications list says where each notification stands and filters
// by the delivery statuses a user would type; the delivery lists filter by
// status too; an unknown status is a 400 naming the parameter.
func TestListByOutcome(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_ok", oncepush.TransportFCM, nil)
		e.register("u_bad", oncepush.TransportRuStore, nil)
		e.register("u_later", oncepush.TransportAPNs, nil)
		e.rus.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: "400 bad message"})
		e.apns.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 later", RetryAfter: time.Hour})

		sent := e.send(e.admin, obj{"recipients": []string{"u_ok"}, "title": "All good"}).ID
		e.clock.Advance(time.Minute)
		mixed := e.send(e.admin, obj{"recipients": []string{"u_ok", "u_bad", "u_none"}, "title": "Some failed", "dedupeKey": "mixed"}).ID
		e.clock.Advance(time.Minute)
		later := e.send(e.admin, obj{"recipients": []string{"u_later"}, "title": "Retrying"}).ID
		e.drain()

		type item struct {
			ID     int64
			Status string
			Counts map[string]int
		}
		list := func(query string) (got []int64, items map[int64]item) {
			t.Helper()
			var p struct{ Notifications []item }
			e.do("GET", "/v1/notifications"+query, e.admin, nil).want(t, http.StatusOK).decode(t, &p)
			items = map[int64]item{}
			for _, n := range p.Notifications {
				got = append(got, n.ID)
				items[n.ID] = n
			}
			return got, items
		}
		_, items := list("")
		if n := items[mixed]; n.Status != "done" || n.Counts["sent"] != 1 || n.Counts["failed"] != 1 || n.Counts["no_devices"] != 1 || n.Counts["pending"] != 0 {
			t.Errorf("the mixed notification in the list: %+v", n)
		}
		if n := items[later]; n.Status != "pending" || n.Counts["pending"] != 1 {
			t.Errorf("the retrying notification in the list: %+v", n)
		}
		for query, want := range map[string][]int64{
			"?status=failed":                  {mixed},
			"?status=sent":                    {mixed, sent},
			"?status=no_devices":              {mixed},
			"?status=pending":                 {later},
			"?status=done":                    {mixed, sent},
			"?status=ambiguous":               nil,
			"?status=failed&dedupeKey=mixed":  {mixed},
			"?status=pending&dedupeKey=mixed": nil,
		} {
			if got, _ := list(query); !slices.Equal(got, want) {
				t.Errorf("%s: %v, want %v", query, got, want)
			}
		}
		p := e.do("GET", "/v1/notifications?status=delivered", e.admin, nil).wantProblem(t, http.StatusBadRequest, "invalid_field", "status")
		if !strings.Contains(p.Detail, "failed") || !strings.Contains(p.Detail, `"delivered"`) {
			t.Errorf("the refusal does not say what status takes: %q", p.Detail)
		}

		// The rows of one notification, by status, a page at a time.
		path := fmt.Sprintf("/v1/notifications/%d/deliveries", mixed)
		for status, want := range map[string]string{"failed": "u_bad", "sent": "u_ok", "no_devices": "u_none"} {
			ds := e.deliveries(path + "?status=" + status)
			if len(ds) != 1 || ds[0].Recipient != want || ds[0].Status != status {
				t.Errorf("%s?status=%s: %+v, want %s's", path, status, ds, want)
			}
		}
		var walked []string
		q := "?status=failed&limit=1"
		for range 5 {
			page := e.deliveryPage(path + q)
			for _, d := range page.Deliveries {
				walked = append(walked, d.Recipient)
			}
			if page.NextCursor == nil {
				break
			}
			q = "?status=failed&limit=1&cursor=" + url.QueryEscape(*page.NextCursor)
		}
		if !slices.Equal(walked, []string{"u_bad"}) {
			t.Errorf("failed deliveries page by page: %v", walked)
		}
		if ds := e.deliveries("/v1/recipients/u_ok/deliveries?status=sent"); len(ds) != 2 {
			t.Errorf("u_ok's sent deliveries: %d, want 2", len(ds))
		}
		if ds := e.deliveries("/v1/recipients/u_ok/deliveries?status=failed"); len(ds) != 0 {
			t.Errorf("u_ok's failed deliveries: %+v", ds)
		}
		for _, p := range []string{path, "/v1/recipients/u_ok/deliveries"} {
			for _, bad := range []string{"done", "Failed", "sending"} {
				e.do("GET", p+"?status="+bad, e.admin, nil).wantProblem(t, http.StatusBadRequest, "invalid_field", "status")
			}
		}
	})
}
