package server_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"

	"github.com/oncepush/oncepush"
)

// TestRequestsStayWithTheirRecipient: a request about one recipient reads and
// changes that recipient's devices and history only, whatever its id holds —
// SQL wildcards, path separators, case, a forged cursor.
func TestRequestsStayWithTheirRecipient(t *testing.T) {
	t.Parallel()
	each(t, envOptions{}, func(t *testing.T, e *env) {
		victimTok := e.token(oncepush.TransportFCM)
		e.do("PUT", "/v1/recipients/u_1/devices", e.admin, obj{"transport": "fcm", "token": victimTok}).want(t, http.StatusOK)
		both := e.send(e.admin, obj{"recipients": []string{"u_1", "u_2"}, "title": "For both"})
		e.drain()
		victimHistory := e.deliveries("/v1/recipients/u_1/deliveries")
		if len(victimHistory) != 1 {
			t.Fatalf("u_1's history: %+v", victimHistory)
		}

		for _, id := range []string{"u_%", "u__", "%", "u_1%", "u_1 ", "U_1", "u_1/../u_1", "*", "u_[1]"} {
			p := "/v1/recipients/" + url.PathEscape(id)
			if ds := e.devices(url.PathEscape(id)); len(ds) != 0 {
				t.Errorf("devices of %q: %+v", id, ds)
			}
			var page deliveryPage
			e.do("GET", p+"/deliveries", e.admin, nil).want(t, http.StatusOK).decode(t, &page)
			if len(page.Deliveries) != 0 {
				t.Errorf("history of %q holds %d deliveries", id, len(page.Deliveries))
			}
			e.do("DELETE", p, e.admin, nil).want(t, http.StatusNoContent)
		}
		// u_2's history, read with a cursor made from u_1's delivery id,
		// still shows only u_2's.
		cursor := base64.RawURLEncoding.EncodeToString([]byte("d" + itoa(victimHistory[0].ID+1)))
		var page deliveryPage
		e.do("GET", "/v1/recipients/u_2/deliveries?cursor="+cursor, e.admin, nil).want(t, http.StatusOK).decode(t, &page)
		for _, d := range page.Deliveries {
			if d.Recipient != "u_2" {
				t.Errorf("u_2's history shows a delivery of %q", d.Recipient)
			}
		}
		// Unregistering u_1's token on behalf of another recipient answers
		// like success and keeps it.
		e.do("DELETE", "/v1/devices", e.admin, obj{"transport": "fcm", "token": victimTok, "recipient": "u_2"}).want(t, http.StatusNoContent)
		if ds := e.devices("u_1"); len(ds) != 1 {
			t.Errorf("u_1's devices after another recipient's unregistering: %+v", ds)
		}
		if n := e.notification(both.ID).Counts["sent"]; n != 1 {
			t.Errorf("the notification counts %d sent, want 1", n)
		}
	})
}
