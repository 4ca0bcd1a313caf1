package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/apikey"
)

// TestRequestsStayWithTheirRecipient: a request about one recipient reads and
// changes that recipient's devices and history only, whatever its id holds —
// SQL wildcards, path separators, case, a forged cursor.
func TestRequestsStayWithTheirRecipient(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		victimTok := e.token(oncepush.TransportFCM)
		e.putDevice("u_1", obj{"transport": "fcm", "token": victimTok})
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
			if page := e.deliveryPage(p + "/deliveries"); len(page.Deliveries) != 0 {
				t.Errorf("history of %q holds %d deliveries", id, len(page.Deliveries))
			}
			e.do("DELETE", p, e.admin, nil).want(t, http.StatusNoContent)
		}
		// u_2's history, read with a cursor made from u_1's delivery id,
		// still shows only u_2's.
		cursor := base64.RawURLEncoding.EncodeToString([]byte("d" + itoa(victimHistory[0].ID+1)))
		for _, d := range e.deliveryPage("/v1/recipients/u_2/deliveries?cursor=" + cursor).Deliveries {
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

// TestAPIKeysAreStoredAsHashes: the database holds a key's id, name, scopes
// and SHA-256, never its secret — not in a column, not in SQLite's file or
// its write-ahead log — and a key whose hash is known but not its secret
// (a database dump) opens nothing.
func TestAPIKeysAreStoredAsHashes(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		key := e.key(apikey.ScopeRead)
		secret := key[len("opk_")+9:]
		var rows string
		if e.db == "sqlite" {
			rows = e.text(`SELECT group_concat(quote(id) || quote(name) || hex(hash) || quote(scopes) || quote(created_at) || quote(revoked_at), ',') FROM oncepush_api_key`)
			for _, f := range []string{e.sqlitePath, e.sqlitePath + "-wal"} {
				b, err := os.ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s holds a key's secret", filepath.Base(f))
				}
			}
		} else {
			rows = e.text(`SELECT string_agg(k::text, ',') FROM oncepush_api_key k`)
		}
		if rows == "" {
			t.Fatal("no key rows read")
		}
		if strings.Contains(rows, secret) {
			t.Errorf("the key table holds a key's secret: %s", rows)
		}
		sum := sha256.Sum256([]byte(key))
		if !strings.Contains(strings.ToLower(rows), hex.EncodeToString(sum[:])) {
			t.Errorf("the key table does not hold the key's SHA-256: %s", rows)
		}
		// What a dump gives: the id and the hash. Neither is a key.
		for _, guess := range []string{apikey.Key(key).ID(), hex.EncodeToString(sum[:]), apikey.Key(key).ID() + "_" + hex.EncodeToString(sum[:])} {
			e.do("GET", "/v1/recipients/u_1/devices", "", nil, "Authorization", "Bearer "+guess).wantProblem(t, http.StatusUnauthorized, "unauthorized", "")
		}
		e.do("GET", "/v1/recipients/u_1/devices", key, nil).want(t, http.StatusOK)
	})
}

// TestOpenEndpointsRevealLittle: what answers without a key says what the
// documentation says and no more. /healthz: status and version. /readyz:
// ready. /metrics: counts by transport, outcome, status and route pattern —
// never a recipient, a token, a key, a path as requested. Problem answers
// to 401, 404 and 405: the documented fields, nothing from inside.
func TestOpenEndpointsRevealLittle(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		const who = "u_metrics_canary_5e4d"
		tok := e.token(oncepush.TransportFCM)
		e.putDevice(who, obj{"transport": "fcm", "token": tok})
		e.send(e.admin, obj{"recipients": []string{who}, "title": "Hello", "dedupeKey": "canary-dedupe-key-3c2b"})
		e.drain()
		e.do("GET", "/v1/recipients/"+who+"/deliveries", e.admin, nil).want(t, http.StatusOK)
		e.do("GET", "/v1/canary-path-9a8b/"+who, e.admin, nil).wantProblem(t, http.StatusNotFound, "not_found", "")
		e.do("GET", "/v1/recipients/"+who+"/devices", "", nil, "Authorization", "Bearer opk_00000000_"+strings.Repeat("A", 43)).
			wantProblem(t, http.StatusUnauthorized, "unauthorized", "")

		var health map[string]any
		e.do("GET", "/healthz", "", nil).want(t, http.StatusOK).decode(t, &health)
		if len(health) != 2 || health["status"] != "ok" || health["version"] == nil {
			t.Errorf("/healthz says %v, want status and version only", health)
		}
		var ready map[string]any
		e.do("GET", "/readyz", "", nil).want(t, http.StatusOK).decode(t, &ready)
		if len(ready) != 1 || ready["status"] != "ready" {
			t.Errorf("/readyz says %v", ready)
		}

		metrics := string(e.do("GET", "/metrics", "", nil).want(t, http.StatusOK).body)
		for _, s := range []string{who, tok, "canary-dedupe-key-3c2b", "canary-path-9a8b", apikey.Key(e.admin).ID(), "opk_"} {
			if strings.Contains(metrics, s) {
				t.Errorf("/metrics holds %q", s)
			}
		}
		patterns := map[string]bool{}
		for _, r := range e.routes {
			patterns[r.Method+" "+r.Path] = true
		}
		for _, line := range strings.Split(metrics, "\n") {
			_, rest, ok := strings.Cut(line, `route="`)
			if !ok {
				continue
			}
			route, _, _ := strings.Cut(rest, `"`)
			if !patterns[route] {
				t.Errorf("/metrics has a route label %q that is not a route of the table", route)
			}
		}

		for _, r := range []*reply{
			e.do("GET", "/v1/recipients/"+who+"/devices", "", nil),
			e.do("GET", "/nothing/here", "", nil),
			e.do("PATCH", "/v1/devices", "", nil),
		} {
			var p map[string]any
			r.decode(t, &p)
			for k := range p {
				switch k {
				case "type", "title", "status", "code", "detail", "instance":
				default:
					t.Errorf("a %d answer has the field %q: %s", r.status, k, r.body)
				}
			}
			if r.header.Get("Server") != "" || r.header.Get("X-Powered-By") != "" {
				t.Errorf("a %d answer names the server: %v", r.status, r.header)
			}
		}
	})
}

// A path with an empty, "." or ".." segment is a path the API does not know:
// 404, not http.ServeMux's 307 to the cleaned path, which a client follows
// by sending its method and body to another route (DELETE
// /v1/recipients/../devices became DELETE /v1/devices).
func TestUncleanPathsAreNotRedirected(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		tok := e.token(oncepush.TransportFCM)
		e.do("PUT", "/v1/recipients/u_1/devices", e.admin, obj{"transport": "fcm", "token": tok}).want(t, http.StatusOK)
		before := e.rows()
		for _, c := range []struct{ method, path string }{
			{"PUT", "/v1/recipients//devices"},
			{"DELETE", "/v1/recipients/../devices"},
			{"DELETE", "/v1/recipients/u_1/./../../devices"},
			{"POST", "//v1/notifications"},
			{"GET", "/v1/recipients/u_1/devices/."},
		} {
			r := e.do(c.method, c.path, e.admin, obj{"transport": "fcm", "token": tok, "recipients": []string{"u_1"}, "title": "t"})
			r.wantProblem(t, http.StatusNotFound, "not_found", "")
			if loc := r.header.Get("Location"); loc != "" {
				t.Errorf("%s %s: Location %q", c.method, c.path, loc)
			}
		}
		e.unchanged(t, before, "requests to unclean paths")
		// An escaped slash is part of a segment, not a separator.
		e.do("GET", "/v1/recipients/u_1%2F%2Fx/devices", e.admin, nil).want(t, http.StatusOK)
	})
}

// A path parameter that is a slash alone, escaped, is refused naming the
// parameter: http.ServeMux routes such a path nowhere (a 404 for an
// operation the document describes). A slash within a value is routed.
func TestLoneSlashParameterIsNamed(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		before := e.rows()
		for _, c := range []struct{ method, path, field string }{
			{"POST", "/v1/sessions/%2F/revoke", "session"},
			{"DELETE", "/v1/recipients/%2f", "recipient"},
			{"GET", "/v1/recipients/%2F/devices", "recipient"},
			{"GET", "/v1/notifications/%2F", "id"},
		} {
			e.do(c.method, c.path, e.admin, nil).wantProblem(t, http.StatusBadRequest, "invalid_field", c.field)
		}
		e.do("POST", "/v1/sessions/%2F/revoke", "", nil).wantProblem(t, http.StatusUnauthorized, "unauthorized", "")
		e.do("POST", "/v1/sessions/%2F/revoke", e.key(apikey.ScopeRead), nil).wantProblem(t, http.StatusForbidden, "forbidden", "")
		e.unchanged(t, before, "lone slashes")
		e.do("POST", "/v1/sessions/%2F%2F/revoke", e.admin, nil).want(t, http.StatusNoContent)
		e.do("GET", "/v1/recipients/a%2F/devices", e.admin, nil).want(t, http.StatusOK)
	})
}
