package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
)

// Times in requests: the API takes exactly the date-times, dates and
// times of day its document describes, and no time it could not write
// back in an answer.

// TestFarFutureTimesAreRefused: a time the API could not write back — an
// expiry (scheduledAt + ttlSeconds) past 9999-12-31T23:59:59Z, the last
// second RFC 3339 has — is refused naming the field, and writes nothing;
// the last time it can write is taken, and read back.
func TestFarFutureTimesAreRefused(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		send := func(at string, ttl int) obj {
			return obj{"recipients": []string{"u_1"}, "title": "t", "scheduledAt": at, "ttlSeconds": ttl}
		}
		c := e.createCampaign(sale(nil))
		for _, tc := range []badRequest{
			{name: "scheduled at the end of 9999", method: "POST", path: "/v1/notifications", body: send("9999-12-31T23:59:59Z", 60)},
			{name: "expiring past 9999", method: "POST", path: "/v1/notifications", body: send("9999-12-30T00:00:00Z", 3*86400)},
			{name: "expiring past 9999, in another zone", method: "POST", path: "/v1/notifications", body: send("9999-12-31T12:00:00-12:00", 60)},
			{name: "with a key", method: "POST", path: "/v1/notifications", body: func() obj {
				b := send("9999-12-31T23:59:59Z", 60)
				b["dedupeKey"] = "far"
				return b
			}()},
			{name: "a campaign starting at the end of 9999", method: "POST", path: fmt.Sprintf("/v1/campaigns/%d/schedule", c.ID),
				body: obj{"startAt": "9999-12-31T23:59:59Z"}, field: "startAt"},
			{name: "a campaign at a local time on the last day of 9999", method: "POST", path: "/v1/campaigns",
				body: sale(obj{"localTime": obj{"date": "9999-12-31", "time": "09:00"}}), field: "localTime.date"},
		} {
			tc.status, tc.code = http.StatusBadRequest, "invalid_field"
			if tc.field == "" {
				tc.field = "scheduledAt"
			}
			p := e.refused(t, tc)
			var pb problemBody
			_ = json.Unmarshal(p.body, &pb)
			if !strings.Contains(pb.Detail, "9999-12-31T23:59:59Z") {
				t.Errorf("%s: the detail %q does not say what the latest time is", tc.name, pb.Detail)
			}
		}
		// The last second there is, reached exactly: taken and read back.
		a := e.send(e.admin, send("9999-12-30T23:59:59Z", 86400))
		if n := e.notification(a.ID); !n.ExpiresAt.Equal(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)) {
			t.Errorf("expires %s, want the last second of 9999", n.ExpiresAt)
		}
		if page := answerOf[struct{ Notifications []json.RawMessage }](e, "GET", "/v1/notifications", nil); len(page.Notifications) != 1 {
			t.Errorf("the list holds %d notifications, want the one sent", len(page.Notifications))
		}
	})
}

// TestZeroInstantIsATime: "0001-01-01T00:00:00Z" is an instant like any
// other, long past its lifetime, not the absence of a time (the library's
// zero): refused, with or without a key, and nothing is sent.
func TestZeroInstantIsATime(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		for _, tc := range []badRequest{
			{name: "zero instant", body: obj{"recipients": []string{"u_1"}, "title": "t", "scheduledAt": "0001-01-01T00:00:00Z"}},
			{name: "zero instant in a zone", body: obj{"recipients": []string{"u_1"}, "title": "t", "scheduledAt": "0001-01-01T01:00:00+01:00"}},
			{name: "zero instant with a key", body: obj{"recipients": []string{"u_1"}, "title": "t", "scheduledAt": "0001-01-01T00:00:00Z", "dedupeKey": "z"}},
		} {
			tc.method, tc.path, tc.status, tc.code, tc.field = "POST", "/v1/notifications", http.StatusBadRequest, "invalid_field", "scheduledAt"
			e.refused(t, tc)
		}
		e.drain()
		if n := e.fcm.Count(); n != 0 {
			t.Errorf("the provider got %d submissions", n)
		}
	})
}
