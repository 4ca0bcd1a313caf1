package blackbox

import (
	"encoding/json"
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
	s.proc.waitFor(s.proc.stderr, "the delivery's log lines", func(out string) (string, bool) {
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
	out := s.proc.stderr.String()
	for what, secret := range map[string]string{"the API key": s.key, "the FCM token": fcmTok, "the APNs token": apnsTok} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %s", what)
		}
	}
}
