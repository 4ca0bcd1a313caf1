package blackbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/oncepush/oncepush"
)

// testDirectSend: a notification to device tokens, each listed twice, and
// sent twice under one dedupe key, reaches each provider exactly once per
// token, and each token's history is read under the implicit recipient that
// docs/api.md tells a client to compute.
func testDirectSend(t *testing.T, bin string, db database) {
	f := startFake(t, bin)
	s := startServe(t, bin, db.new(t), f.serverConfig(t, nil), true)

	var devices []map[string]string
	fakeToken := map[oncepush.Transport]string{}
	implicit := map[oncepush.Transport]string{}
	for i, tr := range oncepush.Transports() {
		tok, ft := token(f, tr, 500+i)
		fakeToken[tr] = ft
		key := tok // the token's key: for webpush, its endpoint
		if tr == oncepush.TransportWebPush {
			var sub struct{ Endpoint string }
			if err := json.Unmarshal([]byte(tok), &sub); err != nil {
				t.Fatal(err)
			}
			key = sub.Endpoint
		}
		sum := sha256.Sum256([]byte(key))
		implicit[tr] = "device:" + string(tr) + ":" + hex.EncodeToString(sum[:])[:32]
		d := map[string]string{"transport": string(tr), "token": tok}
		devices = append(devices, d, d)
	}
	body := map[string]any{"devices": devices, "title": "Direct", "dedupeKey": "direct-1"}
	a := s.send(body)
	if a.Queued != 4 || a.Duplicates != 4 {
		t.Fatalf("direct send answered %+v, want 4 queued and 4 duplicates", a)
	}
	if again := s.send(body); again.ID != a.ID || !again.Duplicate {
		t.Fatalf("the retry answered %+v, want the first answer as a duplicate", again)
	}
	for _, tr := range oncepush.Transports() {
		d := s.waitFinal(implicit[tr], 1)
		if len(d) != 1 || d[0].Status != "sent" || d[0].NotificationID != a.ID {
			t.Fatalf("%s: deliveries under %s: %+v, want the one sent", tr, implicit[tr], d)
		}
		reqs := f.requests(tr)
		if len(reqs) != 1 || reqs[0].Token != fakeToken[tr] {
			t.Errorf("%s: the fake received %d requests (%+v), want one to the token", tr, len(reqs), reqs)
		}
	}

	// A token registered to a recipient is refused, not taken from it.
	s.register("u_owner", oncepush.TransportFCM, devices[0]["token"])
	status, b := s.call(s.key, http.MethodPost, "/v1/notifications", map[string]any{"devices": devices[:1], "title": "Taken?"})
	if p := problemOf(t, b); status != http.StatusConflict || p.Code != "token_registered" || p.Field != "devices[0].token" {
		t.Fatalf("direct send to a registered token: %d %+v, want 409 token_registered", status, p)
	}
}
