package blackbox

// What an operator sees and does through the binary: the delivery logs, and
// canceling a notification.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/pushtest"
)

// testLogs: what an operator reads of a delivery with a retry and a dead
// token, from the binary at its default level with --access-log: the run's
// summary, a warn line for each answer in the provider's words, and the
// request that queued it — without a token or the key.
func testLogs(t *testing.T, bin string, db database) {
	f := startFake(t, bin)
	s := startServe(t, bin, db.new(t), f.serverConfig(t, nil), true, "--access-log")
	fcmTok, fcmFake := token(f, oncepush.TransportFCM, 1)
	apnsTok, apnsFake := token(f, oncepush.TransportAPNs, 2)
	s.register("u_logs", oncepush.TransportFCM, fcmTok)
	s.register("u_logs", oncepush.TransportAPNs, apnsTok)
	f.program(oncepush.TransportFCM, fcmFake, pushtest.FCMError(503, "UNAVAILABLE", "The service is currently unavailable.", ""))
	f.program(oncepush.TransportAPNs, apnsFake, fakepush.DeadTokenAnswer(oncepush.TransportAPNs))
	s.send(map[string]any{"recipients": []string{"u_logs"}, "title": "Logged"})

	keyID := apikey.Key(s.key).ID()
	type line struct {
		Level, Msg, Transport, Error, Route, Recipient string
		KeyID                                          string `json:"key_id"`
		Status                                         int
		FCM                                            map[string]int `json:"fcm"`
		APNs                                           map[string]int `json:"apns"`
	}
	found := map[string]bool{}
	s.proc.waitFor(s.proc.Stderr, "the delivery's log lines", func(out string) (string, bool) {
		for _, raw := range strings.Split(out, "\n") {
			var l line
			if json.Unmarshal([]byte(raw), &l) != nil {
				continue
			}
			switch {
			case l.Msg == "delivery run" && l.Level == "INFO" && l.FCM["retry"] == 1 && l.APNs["invalid_token"] == 1:
				found["summary"] = true
			case l.Msg == "provider asked to retry" && l.Level == "WARN" && l.Transport == "fcm" && l.Recipient == "u_logs" &&
				strings.HasPrefix(l.Error, "fcm 503 UNAVAILABLE: The service is currently unavailable."):
				found["retry"] = true
			case l.Msg == "invalid token; device deleted" && l.Level == "WARN" && l.Transport == "apns" &&
				strings.HasPrefix(l.Error, "apns 410 Unregistered"):
				found["invalid"] = true
			case l.Msg == "http request" && l.Route == "POST /v1/notifications" && l.Status == 202 && l.KeyID == keyID:
				found["access"] = true
			}
		}
		return "", len(found) == 4
	})
	out := s.proc.Stderr.String()
	for what, secret := range map[string]string{"the API key": s.key, "the FCM token": fcmTok, "the APNs token": apnsTok} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %s", what)
		}
	}
}

// testCancel: a notification scheduled for 2030 is canceled through the
// binary's API: its deliveries end canceled at once, the providers never see
// it, and the list shows it done.
func testCancel(t *testing.T, bin string, db database) {
	f := startFake(t, bin)
	s := startServe(t, bin, db.new(t), f.serverConfig(t, nil), true)
	for i, tr := range []oncepush.Transport{oncepush.TransportFCM, oncepush.TransportAPNs} {
		tok, _ := token(f, tr, 40+i)
		s.register("u_cancel", tr, tok)
		other, _ := token(f, tr, 50+i)
		s.register(fmt.Sprintf("u_cancel_%d", i), tr, other)
	}
	a := s.send(map[string]any{"recipients": []string{"u_cancel", "u_cancel_0", "u_cancel_1"}, "title": "In 2030",
		"scheduledAt": "2030-01-07T09:00:00Z"})
	var res struct{ ID, Canceled, InFlight int64 }
	s.must("POST", fmt.Sprintf("/v1/notifications/%d/cancel", a.ID), nil, http.StatusOK, &res)
	if res.ID != a.ID || res.Canceled != 3 || res.InFlight != 0 {
		t.Fatalf("cancel answered %+v; want 3 canceled", res)
	}
	for _, d := range s.notificationDeliveries(a.ID) {
		if d.Status != "canceled" || d.LastError != "canceled" || len(d.Devices) != 0 {
			t.Errorf("delivery %+v; want canceled, no device submitted", d)
		}
	}
	s.must("POST", fmt.Sprintf("/v1/notifications/%d/cancel", a.ID), nil, http.StatusOK, &res)
	if res.Canceled != 0 {
		t.Errorf("a second cancel canceled %d", res.Canceled)
	}
	// Listed as done, not pending: nothing of it is left to send.
	for status, want := range map[string]int{"done": 1, "pending": 0} {
		var page struct{ Notifications []struct{ ID int64 } }
		s.must("GET", "/v1/notifications?status="+status, nil, http.StatusOK, &page)
		if len(page.Notifications) != want || (want == 1 && page.Notifications[0].ID != a.ID) {
			t.Errorf("GET /v1/notifications?status=%s: %+v, want %d (notification %d)", status, page.Notifications, want, a.ID)
		}
	}
	if n := len(f.requests(oncepush.TransportFCM)) + len(f.requests(oncepush.TransportAPNs)); n != 0 {
		t.Errorf("the fake received %d requests for a canceled notification", n)
	}
}
