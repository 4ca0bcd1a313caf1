package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/apikey"
)

// openRoutes are the routes that ask for no key (docs/api.md, docs/security.md).
var openRoutes = []string{"GET /", "GET /healthz", "GET /readyz", "GET /openapi.json", "GET /metrics"}

// TestEveryRouteRefusesWhoMayNotUseIt walks the server's own route table, so
// a route added without a scope, or without a test request here, fails. Each
// route is asked with no key, the wrong scheme, a malformed, altered,
// unknown or revoked key, a key in the query string instead of the header,
// and a key with every scope but the route's. Each answers 401 or 403 and
// nothing is written or sent; then a key with exactly the route's scope gets
// past the check.
func TestEveryRouteRefusesWhoMayNotUseIt(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		fcmTok := e.token(oncepush.TransportFCM)
		e.putDevice("u_1", obj{"transport": "fcm", "token": fcmTok, "session": "s_1"})
		sent := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello"})
		e.drain()
		campaign := e.createCampaign(obj{"message": obj{"title": "Sale"}, "audience": "recipients"})

		// A request per route that would do its work if it were allowed.
		requests := map[string]any{
			"POST /v1/notifications":                     obj{"recipients": []string{"u_1"}, "title": "Hello again"},
			"GET /v1/notifications":                      nil,
			"GET /v1/notifications/{id}":                 nil,
			"GET /v1/notifications/{id}/deliveries":      nil,
			"POST /v1/notifications/{id}/cancel":         nil,
			"GET /v1/recipients/{recipient}/deliveries":  nil,
			"PUT /v1/recipients/{recipient}/devices":     obj{"transport": "apns", "token": e.token(oncepush.TransportAPNs)},
			"GET /v1/recipients/{recipient}/devices":     nil,
			"DELETE /v1/devices":                         obj{"transport": "fcm", "token": fcmTok},
			"POST /v1/devices/lookup":                    obj{"transport": "fcm", "token": fcmTok},
			"GET /v1/activity":                           nil,
			"POST /v1/sessions/{session}/revoke":         nil,
			"DELETE /v1/recipients/{recipient}":          nil,
			"GET /v1/recipients/{recipient}/preferences": nil,
			"PUT /v1/recipients/{recipient}/preferences": obj{"optOut": []string{"news"}},
			"POST /v1/campaigns":                         obj{"message": obj{"title": "Sale"}, "audience": "devices"},
			"GET /v1/campaigns":                          nil,
			"GET /v1/campaigns/{id}":                     nil,
			"PUT /v1/campaigns/{id}":                     obj{"message": obj{"title": "Sale, now"}, "audience": "recipients"},
			"PUT /v1/campaigns/{id}/recipients/{page}":   obj{"recipients": []string{"u_1"}},
			"POST /v1/campaigns/{id}/schedule":           obj{"startAt": epoch.Add(time.Hour).Format(time.RFC3339)},
			"POST /v1/campaigns/{id}/start":              nil,
			"POST /v1/campaigns/{id}/cancel":             nil,
			"POST /v1/campaigns/{id}/resume":             nil,
		}
		// {id} is the notification's, or under /v1/campaigns the campaign's.
		fillNotification := strings.NewReplacer("{id}", itoa(sent.ID), "{recipient}", "u_1", "{session}", "s_1")
		fillCampaign := strings.NewReplacer("{id}", itoa(campaign.ID), "{page}", "1")
		fill := func(path string) string {
			if strings.HasPrefix(path, "/v1/campaigns/") {
				return fillCampaign.Replace(path)
			}
			return fillNotification.Replace(path)
		}

		revoked := e.key(apikey.ScopeAdmin)
		if ok, err := e.store.APIKeyRevoke(t.Context(), apikey.Key(revoked).ID(), nil); err != nil || !ok {
			t.Fatalf("APIKeyRevoke: %v %v", ok, err)
		}
		unknown := e.unknownKey()
		last := len(e.admin) - 1
		unauthenticated := []struct{ name, header string }{
			{"no key", ""},
			{"Basic scheme", "Basic " + e.admin},
			{"Token scheme", "Token " + e.admin},
			{"the key alone", e.admin},
			{"Bearer and nothing", "Bearer "},
			{"two spaces", "Bearer  " + e.admin},
			{"the key and more", "Bearer " + e.admin + " x"},
			{"the key twice", "Bearer " + e.admin + "," + e.admin},
			{"malformed", "Bearer opk_nothex12_short"},
			{"altered secret", "Bearer " + e.admin[:last] + flip(e.admin[last])},
			{"unknown", "Bearer " + unknown},
			{"revoked", "Bearer " + revoked},
		}
		scoped := map[string]string{}
		for _, sc := range []string{apikey.ScopeSend, apikey.ScopeDevices, apikey.ScopeRead, apikey.ScopeCampaigns} {
			var others []string
			for _, o := range []string{apikey.ScopeSend, apikey.ScopeDevices, apikey.ScopeRead, apikey.ScopeCampaigns} {
				if o != sc {
					others = append(others, o)
				}
			}
			scoped[sc] = e.key(others...) // every scope but sc (and admin)
		}

		before := e.rows()
		submitted := e.submissions()
		var guarded []string
		for _, rt := range e.routes {
			name := rt.Method + " " + rt.Path
			if rt.Scope == "" {
				if !slices.Contains(openRoutes, name) {
					t.Errorf("%s asks for no key; only %v may", name, openRoutes)
				}
				continue
			}
			body, ok := requests[name]
			if !ok {
				t.Errorf("%s: no request for this route here; add one", name)
				continue
			}
			guarded = append(guarded, name)
			path := fill(rt.Path)
			for _, c := range unauthenticated {
				r := e.do(rt.Method, path, "", body, "Authorization", c.header)
				if r.status != http.StatusUnauthorized {
					t.Errorf("%s, %s: status %d, want 401: %s", name, c.name, r.status, r.body)
					continue
				}
				r.wantProblem(t, http.StatusUnauthorized, "unauthorized", "")
				if r.header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s, %s: a 401 without WWW-Authenticate", name, c.name)
				}
			}
			// Keys are read from the header only: not from the query, nor
			// from a cookie.
			for _, q := range []string{"access_token", "api_key", "key", "token"} {
				r := e.do(rt.Method, path+"?"+q+"="+url.QueryEscape(e.admin), "", body)
				if r.status != http.StatusUnauthorized {
					t.Errorf("%s with the key in ?%s: status %d, want 401", name, q, r.status)
				}
			}
			r := e.do(rt.Method, path, "", body, "Cookie", "oncepush_key="+e.admin)
			if r.status != http.StatusUnauthorized {
				t.Errorf("%s with the key in a cookie: status %d, want 401", name, r.status)
			}
			r = e.do(rt.Method, path, scoped[rt.Scope], body)
			if r.status != http.StatusForbidden {
				t.Errorf("%s with every scope but %s: status %d, want 403: %s", name, rt.Scope, r.status, r.body)
			} else {
				r.wantProblem(t, http.StatusForbidden, "forbidden", "")
			}
		}
		if len(guarded) != len(requests) {
			t.Errorf("the table guards %d routes, this test has requests for %d: %v", len(guarded), len(requests), guarded)
		}
		e.drain()
		e.unchanged(t, before, "requests refused by their key")
		if n := e.submissions(); n != submitted {
			t.Errorf("refused requests made %d submissions", n-submitted)
		}

		// A key with exactly the route's scope is let through.
		for _, rt := range e.routes {
			if rt.Scope == "" {
				continue
			}
			name := rt.Method + " " + rt.Path
			r := e.do(rt.Method, fill(rt.Path), e.key(rt.Scope), requests[name])
			if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
				t.Errorf("%s with a %s key: status %d: %s", name, rt.Scope, r.status, r.body)
			}
		}
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
