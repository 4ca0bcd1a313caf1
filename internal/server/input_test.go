package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/strictjson"
)

// badRequest is a request the server must refuse, naming the field at fault.
type badRequest struct {
	name         string
	method, path string
	body         any // as env.do sends it
	header       []string
	status       int
	code, field  string
}

// refused sends tc's request with the admin key and checks that it is refused
// as tc says — status, problem code and field, as problem+json — and that it
// wrote nothing. It returns the answer for checks of the case's own.
func (e *env) refused(t *testing.T, tc badRequest) *reply {
	t.Helper()
	before := e.rows()
	r := e.do(tc.method, tc.path, e.admin, tc.body, tc.header...)
	var p problemBody
	_ = json.Unmarshal(r.body, &p)
	if r.status != tc.status || p.Status != tc.status || p.Code != tc.code || p.Field != tc.field {
		t.Errorf("%s: %s %s: got %d %s (field %q), want %d %s (field %q): %s",
			tc.name, tc.method, tc.path[:min(len(tc.path), 60)], r.status, p.Code, p.Field, tc.status, tc.code, tc.field, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", tc.name, ct)
	}
	e.unchanged(t, before, tc.name)
	return r
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	each(t, envOptions{}, func(t *testing.T, e *env) {
		const send = "/v1/notifications"
		const dev = "/v1/recipients/u_1/devices"
		const prefs = "/v1/recipients/u_1/preferences"
		ok := func(extra obj) obj { // a valid notification, changed by extra
			b := obj{"recipients": []string{"u_1"}, "title": "Hello"}
			maps.Copy(b, extra)
			return b
		}
		device := func(extra obj) obj {
			b := obj{"transport": "fcm", "token": e.token(oncepush.TransportFCM)}
			maps.Copy(b, extra)
			return b
		}
		quiet := func(extra obj) obj {
			q := obj{"start": "22:00", "end": "07:00", "timeZone": "Europe/Zurich"}
			for k, v := range extra {
				if v == nil {
					delete(q, k)
				} else {
					q[k] = v
				}
			}
			return obj{"quietHours": q}
		}
		httpSub := strings.Replace(e.token(oncepush.TransportWebPush), "https://", "http://", 1)
		many := make([]string, 10001)
		for i := range many {
			many[i] = fmt.Sprintf("u_%d", i)
		}
		foreignCursor := base64.RawURLEncoding.EncodeToString([]byte("x12"))
		const bad, c400 = http.StatusBadRequest, "invalid_field"

		cases := []badRequest{
			// Not JSON, or not one JSON object.
			{"truncated JSON", "POST", send, `{"recipients": ["u_1"], "title": `, nil, bad, "invalid_json", ""},
			{"syntax error", "POST", send, `{"recipients": ["u_1"],}`, nil, bad, "invalid_json", ""},
			{"an array", "POST", send, `[]`, nil, bad, "invalid_json", ""},
			{"a string", "POST", send, `"hello"`, nil, bad, "invalid_json", ""},
			{"trailing data", "POST", send, `{"recipients": ["u_1"], "title": "a"} {}`, nil, bad, "invalid_json", ""},
			{"empty body", "POST", send, ``, nil, bad, "invalid_json", ""},
			{"device: syntax error", "PUT", dev, `{"transport": fcm}`, nil, bad, "invalid_json", ""},
			{"unregister: truncated", "DELETE", "/v1/devices", `{"transport": "fcm", `, nil, bad, "invalid_json", ""},
			{"preferences: trailing data", "PUT", prefs, `{} x`, nil, bad, "invalid_json", ""},

			// Wrong types.
			{"title: a number", "POST", send, ok(obj{"title": 5}), nil, bad, c400, "title"},
			{"recipients: a string", "POST", send, ok(obj{"recipients": "x"}), nil, bad, c400, "recipients"},
			{"recipients: numbers", "POST", send, ok(obj{"recipients": []int{1}}), nil, bad, c400, "recipients[0]"},
			{"data: an array", "POST", send, ok(obj{"data": []any{}}), nil, bad, c400, "data"},
			{"data: a string", "POST", send, ok(obj{"data": "x"}), nil, bad, c400, "data"},
			{"ttlSeconds: a string", "POST", send, ok(obj{"ttlSeconds": "60"}), nil, bad, c400, "ttlSeconds"},
			{"scheduledAt: a number", "POST", send, ok(obj{"scheduledAt": 1767600000}), nil, bad, c400, "scheduledAt"},
			{"transport: a number", "PUT", dev, device(obj{"transport": 1}), nil, bad, c400, "transport"},
			{"token: a number", "PUT", dev, device(obj{"token": 5}), nil, bad, c400, "token"},
			{"token: an array", "DELETE", "/v1/devices", obj{"transport": "fcm", "token": []string{"a"}}, nil, bad, c400, "token"},
			{"optOut: a string", "PUT", prefs, obj{"optOut": "news"}, nil, bad, c400, "optOut"},
			{"quietHours: a string", "PUT", prefs, obj{"quietHours": "22-07"}, nil, bad, c400, "quietHours"},
			{"quietHours.start: a number", "PUT", prefs, quiet(obj{"start": 22}), nil, bad, c400, "quietHours.start"},

			// Wrong values.
			{"no recipients", "POST", send, obj{"title": "Hello"}, nil, bad, "missing_field", "recipients"},
			{"recipients: null", "POST", send, ok(obj{"recipients": nil}), nil, bad, c400, "recipients"},
			{"recipients: empty", "POST", send, ok(obj{"recipients": []string{}}), nil, bad, c400, "recipients"},
			{"recipients: an empty one", "POST", send, ok(obj{"recipients": []string{"u_1", ""}}), nil, bad, c400, "recipients[1]"},
			{"recipients: too long", "POST", send, ok(obj{"recipients": []string{strings.Repeat("r", 201)}}), nil, bad, c400, "recipients[0]"},
			{"recipients: 10,001", "POST", send, ok(obj{"recipients": many}), nil, bad, c400, "recipients"},
			{"no title and no body", "POST", send, ok(obj{"title": " ", "body": ""}), nil, bad, c400, "title"},
			{"link: a URL", "POST", send, ok(obj{"link": "https://example.com/x"}), nil, bad, c400, "link"},
			{"image: not http", "POST", send, ok(obj{"image": "ftp://example.com/a.png"}), nil, bad, c400, "image"},
			{"data: a reserved key", "POST", send, ok(obj{"data": obj{"oncepush_id": "x"}}), nil, bad, c400, "data"},
			{"data: too large", "POST", send, ok(obj{"data": obj{"x": strings.Repeat("d", 5000)}}), nil, bad, c400, "data"},
			{"ttlSeconds: zero", "POST", send, ok(obj{"ttlSeconds": 0}), nil, bad, c400, "ttlSeconds"},
			{"ttlSeconds: past 28 days", "POST", send, ok(obj{"ttlSeconds": 28*24*3600 + 1}), nil, bad, c400, "ttlSeconds"},
			{"scheduledAt: not a date", "POST", send, ok(obj{"scheduledAt": "tomorrow"}), nil, bad, c400, "scheduledAt"},
			{"ambiguity: unknown", "POST", send, ok(obj{"ambiguity": "sometimes"}), nil, bad, c400, "ambiguity"},
			{"dedupeKey: too long", "POST", send, ok(obj{"dedupeKey": strings.Repeat("k", 201)}), nil, bad, c400, "dedupeKey"},
			{"Idempotency-Key: too long", "POST", send, ok(nil), []string{"Idempotency-Key", strings.Repeat("k", 201)}, bad, c400, "dedupeKey"},
			{"device: no transport", "PUT", dev, obj{"token": e.token(oncepush.TransportFCM)}, nil, bad, "missing_field", "transport"},
			{"device: no token", "PUT", dev, obj{"transport": "fcm"}, nil, bad, "missing_field", "token"},
			{"device: unknown transport", "PUT", dev, device(obj{"transport": "pigeon"}), nil, bad, c400, "transport"},
			{"device: APNs token not hex", "PUT", dev, obj{"transport": "apns", "token": "not-a-hex-token-" + strings.Repeat("z", 60)}, nil, bad, c400, "token"},
			{"device: FCM token with spaces", "PUT", dev, obj{"transport": "fcm", "token": "has spaces in it"}, nil, bad, c400, "token"},
			{"device: Web Push over http", "PUT", dev, obj{"transport": "webpush", "token": json.RawMessage(httpSub)}, nil, bad, c400, "token"},
			{"device: Web Push over http, as a string", "PUT", dev, obj{"transport": "webpush", "token": httpSub}, nil, bad, c400, "token"},
			{"device: Web Push without keys", "PUT", dev, obj{"transport": "webpush", "token": obj{"endpoint": "https://push.example.net/x"}}, nil, bad, c400, "token"},
			{"device: invalid time zone", "PUT", dev, device(obj{"timeZone": "Mars/Olympus"}), nil, bad, c400, "timeZone"},
			{"device: Local is no zone", "PUT", dev, device(obj{"timeZone": "Local"}), nil, bad, c400, "timeZone"},
			{"device: platform too long", "PUT", dev, device(obj{"platform": strings.Repeat("p", 33)}), nil, bad, c400, "platform"},
			{"unregister: unknown transport", "DELETE", "/v1/devices", obj{"transport": "pigeon", "token": "abcdefghij"}, nil, bad, c400, "transport"},
			{"unregister: no token", "DELETE", "/v1/devices", obj{"transport": "fcm"}, nil, bad, "missing_field", "token"},
			{"quiet hours: invalid time zone", "PUT", prefs, quiet(obj{"timeZone": "Mars/Olympus"}), nil, bad, c400, "quietHours.timeZone"},
			{"quiet hours: no time zone", "PUT", prefs, quiet(obj{"timeZone": nil}), nil, bad, "missing_field", "quietHours.timeZone"},
			{"quiet hours: start 25:00", "PUT", prefs, quiet(obj{"start": "25:00"}), nil, bad, c400, "quietHours.start"},
			{"quiet hours: end 7:00", "PUT", prefs, quiet(obj{"end": "7:00"}), nil, bad, c400, "quietHours.end"},
			{"quiet hours: empty window", "PUT", prefs, quiet(obj{"end": "22:00"}), nil, bad, c400, "quietHours.end"},
			{"optOut: an empty category", "PUT", prefs, obj{"optOut": []string{"news", ""}}, nil, bad, c400, "optOut[1]"},

			// Unknown fields.
			{"unknown field", "POST", send, ok(obj{"colour": "red"}), nil, bad, "unknown_field", "colour"},
			{"field of another spelling", "POST", send, ok(obj{"dedupKey": "k"}), nil, bad, "unknown_field", "dedupKey"},
			{"device: unknown field", "PUT", dev, device(obj{"os": "ios"}), nil, bad, "unknown_field", "os"},
			{"unregister: unknown field", "DELETE", "/v1/devices", obj{"transport": "fcm", "token": "abcdefghij", "id": 4}, nil, bad, "unknown_field", "id"},
			{"preferences: unknown field", "PUT", prefs, obj{"optOut": []string{}, "optIn": []string{"news"}}, nil, bad, "unknown_field", "optIn"},

			// Not JSON at all.
			{"text/plain notification", "POST", send, `{"recipients": ["u_1"], "title": "Hello"}`, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType, "unsupported_media_type", ""},
			{"form-encoded device", "PUT", dev, `transport=fcm&token=abc`, []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType, "unsupported_media_type", ""},
			{"XML preferences", "PUT", prefs, `<optOut/>`, []string{"Content-Type", "application/xml"}, http.StatusUnsupportedMediaType, "unsupported_media_type", ""},
			{"text/plain unregister", "DELETE", "/v1/devices", `{}`, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType, "unsupported_media_type", ""},

			// Path and query parameters.
			{"id: not a number", "GET", "/v1/notifications/abc", nil, nil, bad, c400, "id"},
			{"id: zero", "GET", "/v1/notifications/0/deliveries", nil, nil, bad, c400, "id"},
			{"recipient: too long", "GET", "/v1/recipients/" + strings.Repeat("r", 201) + "/preferences", nil, nil, bad, c400, "recipient"},
			{"recipient: too long, devices", "PUT", "/v1/recipients/" + strings.Repeat("r", 201) + "/devices", device(nil), nil, bad, c400, "recipient"},
			{"recipient: too long, delete", "DELETE", "/v1/recipients/" + strings.Repeat("r", 201), nil, nil, bad, c400, "recipient"},
			{"session: too long", "POST", "/v1/sessions/" + strings.Repeat("s", 201) + "/revoke", nil, nil, bad, c400, "session"},
			{"limit: zero", "GET", "/v1/recipients/u_1/deliveries?limit=0", nil, nil, bad, c400, "limit"},
			{"limit: past 1000", "GET", "/v1/recipients/u_1/deliveries?limit=1001", nil, nil, bad, c400, "limit"},
			{"limit: not a number", "GET", "/v1/notifications/1/deliveries?limit=ten", nil, nil, bad, c400, "limit"},
			{"limit: devices", "GET", "/v1/recipients/u_1/devices?limit=-1", nil, nil, bad, c400, "limit"},
			{"cursor: not base64", "GET", "/v1/recipients/u_1/deliveries?cursor=%21%21", nil, nil, bad, c400, "cursor"},
			{"cursor: not ours", "GET", "/v1/recipients/u_1/deliveries?cursor=" + foreignCursor, nil, nil, bad, c400, "cursor"},
			{"cursor: devices", "GET", "/v1/recipients/u_1/devices?cursor=" + foreignCursor, nil, nil, bad, c400, "cursor"},
		}
		// One notification, so that the notification paths exist.
		e.send(e.admin, obj{"recipients": []string{"u_0"}, "title": "Exists"})
		for _, tc := range cases {
			e.refused(t, tc)
		}
	})
}

func TestOversizeBodyIsRefused(t *testing.T) {
	t.Parallel()
	each(t, envOptions{}, func(t *testing.T, e *env) {
		before := e.rows()
		big := `{"recipients": ["u_1"], "title": "` + strings.Repeat("t", 2<<20) + `"}`
		for _, req := range []struct{ method, path string }{
			{"POST", "/v1/notifications"},
			{"PUT", "/v1/recipients/u_1/devices"},
			{"PUT", "/v1/recipients/u_1/preferences"},
			{"DELETE", "/v1/devices"},
		} {
			e.do(req.method, req.path, e.admin, big).wantProblem(t, http.StatusRequestEntityTooLarge, "body_too_large", "")
		}
		e.unchanged(t, before, "oversize requests")
	})
	t.Run("configured limit", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "sqlite", envOptions{maxBody: 1024})
		body := obj{"recipients": []string{"u_1"}, "title": strings.Repeat("t", 900)}
		e.do("POST", "/v1/notifications", e.admin, body).want(t, http.StatusAccepted)
		body["title"] = strings.Repeat("t", 1100)
		e.do("POST", "/v1/notifications", e.admin, body).wantProblem(t, http.StatusRequestEntityTooLarge, "body_too_large", "")
	})
}

// TestCostlyBodiesAreRefusedCheaply: bodies within the size limit that cost
// more to read than their size — brackets nested deeper than anything the API
// takes, a long array under a long name — answer 400 at once, however
// they are arranged, and write nothing.
func TestCostlyBodiesAreRefusedCheaply(t *testing.T) {
	t.Parallel()
	each(t, envOptions{}, func(t *testing.T, e *env) {
		const n = 100000
		for _, tc := range []struct {
			name, method, path, body string
			code, field              string
		}{
			{"nested arrays as the body", "POST", "/v1/notifications", strings.Repeat("[", n) + strings.Repeat("]", n), "invalid_json", strings.Repeat("[0]", strictjson.MaxDepth)},
			{"nested arrays in data", "POST", "/v1/notifications",
				`{"recipients": ["u_1"], "title": "a", "data": {"x": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}`, "invalid_json", "data.x" + strings.Repeat("[0]", strictjson.MaxDepth-2)},
			{"nested objects in a token", "PUT", "/v1/recipients/u_1/devices",
				`{"transport": "webpush", "token": ` + strings.Repeat(`{"a": `, n) + `1` + strings.Repeat("}", n) + `}`, "invalid_json", "token" + strings.Repeat(".a", strictjson.MaxDepth-1)},
			{"a long array under a long name", "POST", "/v1/notifications",
				`{"recipients": ["u_1"], "title": "a", "data": {"` + strings.Repeat("n", 100000) + `": [` + strings.Repeat("0,", n) + `0]}}`, "invalid_field", "data"},
		} {
			before := e.rows()
			// No wall-clock bound here: it failed on a loaded machine (18 s
			// under the race detector with busy loops beside it).
			// strictjson's TestParseCostIsLinear bounds the cost exactly.
			r := e.do(tc.method, tc.path, e.admin, tc.body)
			r.wantProblem(t, http.StatusBadRequest, tc.code, tc.field)
			e.unchanged(t, before, tc.name)
		}
	})
}

func TestBodyNeedsItsContentType(t *testing.T) {
	t.Parallel()
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.do("POST", "/v1/notifications", e.admin, `{"recipients": ["u_1"], "title": "Hello"}`, "Content-Type", "").
			wantProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
		e.do("POST", "/v1/notifications", e.admin, `{"recipients": ["u_1"], "title": "Hello"}`, "Content-Type", "application/json; charset=utf-8").want(t, http.StatusAccepted)
	})
}

func TestUnknownNestedFieldIsNamedWithItsPath(t *testing.T) {
	t.Parallel()
	each(t, envOptions{}, func(t *testing.T, e *env) {
		body := obj{"quietHours": obj{"start": "22:00", "end": "07:00", "timeZone": "Europe/Zurich", "colour": 1}}
		e.do("PUT", "/v1/recipients/u_1/preferences", e.admin, body).wantProblem(t, http.StatusBadRequest, "unknown_field", "quietHours.colour")
	})
}
