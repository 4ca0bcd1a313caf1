package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/server"
)

// implicitRecipient computes a direct send's recipient as docs/api.md tells
// a client to: from outside, so that the documented derivation is tested.
func implicitRecipient(tr oncepush.Transport, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "device:" + string(tr) + ":" + hex.EncodeToString(sum[:])[:32]
}

// TestDirectSend: a notification to device tokens is one delivery per
// device, however often and however spelled they are listed, is idempotent
// like any send, and is read back under each device's implicit recipient.
func TestDirectSend(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		fcm, apns, web := e.token(oncepush.TransportFCM), e.token(oncepush.TransportAPNs), e.token(oncepush.TransportWebPush)
		var sub map[string]any // the subscription as an object, as browsers hand it over
		if err := json.Unmarshal([]byte(web), &sub); err != nil {
			t.Fatal(err)
		}
		body := obj{
			"devices": []obj{
				{"transport": "fcm", "token": fcm},
				{"transport": "apns", "token": strings.ToUpper(apns)},
				{"transport": "fcm", "token": fcm},
				{"transport": "webpush", "token": sub},
			},
			"title": "Direct", "dedupeKey": "direct-1",
		}
		first := e.send(e.admin, body)
		if first.Queued != 3 || first.Duplicates != 1 || first.Duplicate {
			t.Fatalf("direct send = %+v, want 3 queued and the token listed twice a duplicate", first)
		}
		if again := e.send(e.admin, body); again != (server.SendAnswer{ID: first.ID, Queued: 3, Duplicates: 1, Duplicate: true}) {
			t.Fatalf("the same direct send again = %+v, want the first answer as a duplicate", again)
		}
		body["title"] = "Another"
		e.do("POST", "/v1/notifications", e.admin, body).wantProblem(t, http.StatusConflict, "idempotency_conflict", "dedupeKey")

		e.drain()
		for _, p := range []struct {
			fake interface {
				Submissions() []oncepush.Submission
				Transport() oncepush.Transport
			}
			token string
			key   string // the token's key: apns in lower case, webpush its endpoint
		}{{e.fcm, fcm, fcm}, {e.apns, apns, apns}, {e.web, web, sub["endpoint"].(string)}} {
			subs := p.fake.Submissions()
			if len(subs) != 1 || string(subs[0].Token) != p.token {
				t.Fatalf("%d submissions to %s, want one to its token", len(subs), p.token[:12])
			}
			r := implicitRecipient(p.fake.Transport(), p.key)
			ds := e.deliveries("/v1/recipients/" + r + "/deliveries")
			if len(ds) != 1 || ds[0].NotificationID != first.ID || ds[0].Status != "sent" {
				t.Fatalf("%s's deliveries: %+v, want the one sent", r, ds)
			}
		}
	})
}

// TestDirectSendKeepsRegisteredTokens: a direct send naming a token
// registered to a recipient is refused whole (409 token_registered, naming
// the device as written), writes nothing, and leaves the token with its
// owner.
func TestDirectSendKeepsRegisteredTokens(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		tok := e.token(oncepush.TransportFCM)
		e.putDevice("alice", obj{"transport": "fcm", "token": tok})
		before := e.rows()
		body := obj{"devices": []obj{{"transport": "fcm", "token": e.token(oncepush.TransportFCM)}, {"transport": "fcm", "token": tok}}, "title": "Direct"}
		e.do("POST", "/v1/notifications", e.admin, body).wantProblem(t, http.StatusConflict, "token_registered", "devices[1].token")
		e.unchanged(t, before, "a refused direct send")
		e.send(e.admin, obj{"recipients": []string{"alice"}, "title": "Still hers"})
		e.drain()
		if subs := e.fcm.Submissions(); len(subs) != 1 || string(subs[0].Token) != tok {
			t.Fatalf("submissions %+v, want alice's one to her token", subs)
		}
	})
}
