package server_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/apikey"
)

// writes are requests that would change the ledger if they were allowed.
func writes(e *env, fcmToken string) []struct {
	method, path string
	body         any
} {
	return []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/notifications", obj{"recipients": []string{"u_1"}, "title": "Hello"}},
		{"PUT", "/v1/recipients/u_2/devices", obj{"transport": "fcm", "token": e.token(oncepush.TransportFCM)}},
		{"PUT", "/v1/recipients/u_1/preferences", obj{"optOut": []string{"news"}}},
		{"DELETE", "/v1/devices", obj{"transport": "fcm", "token": fcmToken}},
		{"POST", "/v1/sessions/s_1/revoke", nil},
		{"DELETE", "/v1/recipients/u_1", nil},
	}
}

func TestUnauthenticatedRequestsWriteNothing(t *testing.T) {
	t.Parallel()
	each(t, envOptions{}, func(t *testing.T, e *env) {
		dev := obj{"transport": "fcm", "token": e.token(oncepush.TransportFCM), "session": "s_1"}
		e.do("PUT", "/v1/recipients/u_1/devices", e.admin, dev).want(t, http.StatusOK)

		revoked := e.key(apikey.ScopeAdmin)
		id, _ := apikey.Parse(revoked)
		if ok, err := e.ex.APIKeyRevoke(t.Context(), id.ID(), nil); err != nil || !ok {
			t.Fatalf("APIKeyRevoke: %v %v", ok, err)
		}
		unknown, err := apikey.New()
		if err != nil {
			t.Fatal(err)
		}
		e.secret(string(unknown))

		before := e.rows()
		for _, cred := range []struct{ name, header string }{
			{"no key", ""},
			{"another scheme", "Basic " + e.admin},
			{"no key after Bearer", "Bearer "},
			{"malformed key", "Bearer opk_nothex12_short"},
			{"key with a changed secret", "Bearer " + e.admin[:len(e.admin)-1] + flip(e.admin[len(e.admin)-1])},
			{"unknown key", "Bearer " + string(unknown)},
			{"revoked key", "Bearer " + revoked},
		} {
			for _, w := range writes(e, dev["token"].(string)) {
				r := e.do(w.method, w.path, "", w.body, "Authorization", cred.header)
				if r.status != http.StatusUnauthorized {
					t.Errorf("%s: %s %s: status %d, want 401: %s", cred.name, w.method, w.path, r.status, r.body)
					continue
				}
				r.wantProblem(t, http.StatusUnauthorized, "unauthorized", "")
			}
			r := e.do("GET", "/v1/recipients/u_1/devices", "", nil, "Authorization", cred.header)
			r.wantProblem(t, http.StatusUnauthorized, "unauthorized", "")
		}
		e.unchanged(t, before, "unauthenticated requests")
		e.drain()
		if n := e.submissions(); n != 0 {
			t.Errorf("the providers received %d submissions", n)
		}
		// The bearer scheme is case-insensitive (RFC 9110).
		e.do("GET", "/v1/recipients/u_1/devices", "", nil, "Authorization", "bearer "+e.admin).want(t, http.StatusOK)
	})
}

func TestScopes(t *testing.T) {
	t.Parallel()
	each(t, envOptions{}, func(t *testing.T, e *env) {
		dev := obj{"transport": "fcm", "token": e.token(oncepush.TransportFCM), "session": "s_1"}
		e.do("PUT", "/v1/recipients/u_1/devices", e.admin, dev).want(t, http.StatusOK)
		keys := map[string]string{
			apikey.ScopeSend:    e.key(apikey.ScopeSend),
			apikey.ScopeDevices: e.key(apikey.ScopeDevices),
			apikey.ScopeRead:    e.key(apikey.ScopeRead),
		}
		before := e.rows()
		// Every write, with every key that lacks its scope.
		need := []string{apikey.ScopeSend, apikey.ScopeDevices, apikey.ScopeDevices, apikey.ScopeDevices, apikey.ScopeDevices, apikey.ScopeDevices}
		for i, w := range writes(e, dev["token"].(string)) {
			for scope, key := range keys {
				if scope == need[i] {
					continue
				}
				r := e.do(w.method, w.path, key, w.body)
				if r.status != http.StatusForbidden {
					t.Errorf("%s key: %s %s: status %d, want 403: %s", scope, w.method, w.path, r.status, r.body)
					continue
				}
				r.wantProblem(t, http.StatusForbidden, "forbidden", "")
			}
		}
		// Reads need the read scope.
		for _, path := range []string{"/v1/notifications/1", "/v1/notifications/1/deliveries", "/v1/recipients/u_1/deliveries", "/v1/recipients/u_1/devices", "/v1/recipients/u_1/preferences"} {
			for _, scope := range []string{apikey.ScopeSend, apikey.ScopeDevices} {
				e.do("GET", path, keys[scope], nil).wantProblem(t, http.StatusForbidden, "forbidden", "")
			}
		}
		e.unchanged(t, before, "requests without the scope")

		// Each key can do what its scope allows.
		a := e.send(keys[apikey.ScopeSend], obj{"recipients": []string{"u_1"}, "title": "Hello"})
		e.do("GET", "/v1/recipients/u_1/devices", keys[apikey.ScopeRead], nil).want(t, http.StatusOK)
		e.do("GET", "/v1/notifications/"+itoa(a.ID), keys[apikey.ScopeRead], nil).want(t, http.StatusOK)
		e.do("PUT", "/v1/recipients/u_1/preferences", keys[apikey.ScopeDevices], obj{"optOut": []string{"news"}}).want(t, http.StatusOK)
		e.do("POST", "/v1/sessions/s_1/revoke", keys[apikey.ScopeDevices], nil).want(t, http.StatusNoContent)
	})
}

// flip changes a base64url character into another.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
