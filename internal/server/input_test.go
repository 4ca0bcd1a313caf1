package server_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
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
		direct := func(devices ...obj) obj { // a direct send to the devices
			return obj{"devices": devices, "title": "Hello"}
		}
		fcmDevice := obj{"transport": "fcm", "token": e.token(oncepush.TransportFCM)}
		manyDevices := make([]obj, 10001)
		for i := range manyDevices {
			manyDevices[i] = fcmDevice
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
			{"recipients and devices", "POST", send, ok(obj{"devices": []obj{fcmDevice}}), nil, bad, c400, "devices"},
			{"devices: empty", "POST", send, direct(), nil, bad, c400, "devices"},
			{"devices: null", "POST", send, obj{"devices": nil, "title": "Hello"}, nil, bad, c400, "devices"},
			{"devices: 10,001", "POST", send, direct(manyDevices...), nil, bad, c400, "devices"},
			{"devices: not a token", "POST", send, direct(fcmDevice, obj{"transport": "fcm", "token": "not a token"}), nil, bad, c400, "devices[1].token"},
			{"devices: an http subscription", "POST", send, direct(fcmDevice, obj{"transport": "webpush", "token": httpSub}), nil, bad, c400, "devices[1].token"},
			{"devices: unknown transport", "POST", send, direct(obj{"transport": "pigeon", "token": "abcdefghij"}), nil, bad, c400, "devices[0].transport"},
			{"devices: no token", "POST", send, direct(obj{"transport": "fcm"}), nil, bad, "missing_field", "devices[0].token"},
			{"devices: unknown field", "POST", send, direct(obj{"transport": "fcm", "token": "abcdefghij", "platform": "ios"}), nil, bad, "unknown_field", "devices[0].platform"},
			{"no title and no body", "POST", send, ok(obj{"title": " ", "body": ""}), nil, bad, c400, "title"},
			{"link: a URL", "POST", send, ok(obj{"link": "https://example.com/x"}), nil, bad, c400, "link"},
			{"image: not http", "POST", send, ok(obj{"image": "ftp://example.com/a.png"}), nil, bad, c400, "image"},
			{"data: a reserved key", "POST", send, ok(obj{"data": obj{"oncepush_id": "x"}}), nil, bad, c400, "data"},
			{"data: too large", "POST", send, ok(obj{"data": obj{"x": strings.Repeat("d", 5000)}}), nil, bad, c400, "data"},
			{"ttlSeconds: zero", "POST", send, ok(obj{"ttlSeconds": 0}), nil, bad, c400, "ttlSeconds"},
			{"ttlSeconds: past 28 days", "POST", send, ok(obj{"ttlSeconds": 28*24*3600 + 1}), nil, bad, c400, "ttlSeconds"},
			{"scheduledAt: not a date", "POST", send, ok(obj{"scheduledAt": "tomorrow"}), nil, bad, c400, "scheduledAt"},
			{"scheduledAt: past its lifetime", "POST", send, ok(obj{"scheduledAt": "2026-01-03T09:00:00Z"}), nil, bad, c400, "scheduledAt"},
			{"scheduledAt: past its ttl", "POST", send, ok(obj{"scheduledAt": "2026-01-05T08:00:00Z", "ttlSeconds": 3600}), nil, bad, c400, "scheduledAt"},
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
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.do("POST", "/v1/notifications", e.admin, `{"recipients": ["u_1"], "title": "Hello"}`, "Content-Type", "").
			wantProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
		e.do("POST", "/v1/notifications", e.admin, `{"recipients": ["u_1"], "title": "Hello"}`, "Content-Type", "application/json; charset=utf-8").want(t, http.StatusAccepted)
	})
}

func TestUnknownNestedFieldIsNamedWithItsPath(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		body := obj{"quietHours": obj{"start": "22:00", "end": "07:00", "timeZone": "Europe/Zurich", "colour": 1}}
		e.do("PUT", "/v1/recipients/u_1/preferences", e.admin, body).wantProblem(t, http.StatusBadRequest, "unknown_field", "quietHours.colour")
	})
}

// Bodies the OpenAPI document does not allow — though encoding/json would take
// them — are refused on every route that takes one, with the documented
// status, code and field, and write nothing: not a row, not a preference.
func TestHostileBodiesAreRefusedAndWriteNothing(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		const (
			send  = "/v1/notifications"
			dev   = "/v1/recipients/u_1/devices"
			unreg = "/v1/devices"
			prefs = "/v1/recipients/u_1/preferences"
		)
		tok := e.token(oncepush.TransportFCM)
		web := e.token(oncepush.TransportWebPush)
		valid := map[string]string{
			send:  `{"recipients": ["u_1"], "title": "Hello"}`,
			dev:   `{"transport": "fcm", "token": "` + tok + `"}`,
			unreg: `{"transport": "fcm", "token": "` + tok + `"}`,
			prefs: `{"optOut": ["ads"]}`,
		}
		method := map[string]string{send: "POST", dev: "PUT", unreg: "DELETE", prefs: "PUT"}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write([]byte(valid[send]))
		_ = zw.Close()

		type hostile struct {
			name   string
			path   string
			body   string
			header []string
			status int
			code   string
			field  string
		}
		var cases []hostile
		for _, p := range []string{send, dev, unreg, prefs} {
			for _, c := range []hostile{
				{"null body", p, `null`, nil, 400, "invalid_json", ""},
				{"array body", p, `[]`, nil, 400, "invalid_json", ""},
				{"number body", p, `1`, nil, 400, "invalid_json", ""},
				{"no Content-Type", p, valid[p], []string{"Content-Type", ""}, 415, "unsupported_media_type", ""},
				{"JSON in Latin-1", p, valid[p], []string{"Content-Type", "application/json; charset=iso-8859-1"}, 415, "unsupported_media_type", ""},
				{"gzip, not compressed", p, valid[p], []string{"Content-Encoding", "gzip"}, 415, "unsupported_media_type", ""},
				{"invalid UTF-8 between values", p, strings.Replace(valid[p], "{", "{\xff", 1), nil, 400, "invalid_json", ""},
			} {
				cases = append(cases, c)
			}
		}
		cases = append(cases, []hostile{
			{"gzip, compressed", send, gz.String(), []string{"Content-Encoding", "gzip"}, 415, "unsupported_media_type", ""},

			// POST /v1/notifications
			{"RECIPIENTS", send, `{"RECIPIENTS": ["u_1"], "title": "Hello"}`, nil, 400, "unknown_field", "RECIPIENTS"},
			{"Title", send, `{"recipients": ["u_1"], "Title": "Hello"}`, nil, 400, "unknown_field", "Title"},
			{"dedupekey", send, `{"recipients": ["u_1"], "title": "Hello", "dedupekey": "k"}`, nil, 400, "unknown_field", "dedupekey"},
			{"title twice", send, `{"recipients": ["u_1"], "title": "Hello", "title": "Bye"}`, nil, 400, "invalid_json", "title"},
			{"recipients twice", send, `{"recipients": ["u_1"], "recipients": ["u_2"], "title": "Hello"}`, nil, 400, "invalid_json", "recipients"},
			{"a member without a name", send, `{"recipients": ["u_1"], "title": "Hello", "": 1}`, nil, 400, "unknown_field", `[""]`},
			{"a dotted data key twice", send, `{"recipients": ["u_1"], "title": "Hello", "data": {"a.b": {"c": 1, "c": 2}}}`, nil, 400, "invalid_json", `data["a.b"].c`},
			{"a data key twice", send, `{"recipients": ["u_1"], "title": "Hello", "data": {"a": 1, "a": 2}}`, nil, 400, "invalid_json", "data.a"},
			{"lone surrogate in title", send, `{"recipients": ["u_1"], "title": "\ud800"}`, nil, 400, "invalid_json", "title"},
			{"lone low surrogate in body", send, `{"recipients": ["u_1"], "title": "a", "body": "x\udc00"}`, nil, 400, "invalid_json", "body"},
			{"lone surrogate in a recipient", send, `{"recipients": ["u_1", "u_\ud83d"], "title": "a"}`, nil, 400, "invalid_json", "recipients[1]"},
			{"lone surrogate in data", send, `{"recipients": ["u_1"], "title": "a", "data": {"x": ["\udbff"]}}`, nil, 400, "invalid_json", "data.x[0]"},
			{"invalid UTF-8 in title", send, "{\"recipients\": [\"u_1\"], \"title\": \"caf\xe9\"}", nil, 400, "invalid_json", "title"},
			{"invalid UTF-8 in data", send, "{\"recipients\": [\"u_1\"], \"title\": \"a\", \"data\": {\"x\": \"\xc3\"}}", nil, 400, "invalid_json", "data.x"},
			{"ambiguity empty", send, `{"recipients": ["u_1"], "title": "a", "ambiguity": ""}`, nil, 400, "invalid_field", "ambiguity"},
			{"ambiguity null", send, `{"recipients": ["u_1"], "title": "a", "ambiguity": null}`, nil, 400, "invalid_field", "ambiguity"},
			{"title null", send, `{"recipients": ["u_1"], "title": null, "body": "b"}`, nil, 400, "invalid_field", "title"},
			{"recipients null", send, `{"recipients": null, "title": "a"}`, nil, 400, "invalid_field", "recipients"},
			{"a null recipient", send, `{"recipients": ["u_1", null], "title": "a"}`, nil, 400, "invalid_field", "recipients[1]"},
			{"dedupeKey null", send, `{"recipients": ["u_1"], "title": "a", "dedupeKey": null}`, nil, 400, "invalid_field", "dedupeKey"},
			{"link empty", send, `{"recipients": ["u_1"], "title": "a", "link": ""}`, nil, 400, "invalid_field", "link"},
			{"image empty", send, `{"recipients": ["u_1"], "title": "a", "image": ""}`, nil, 400, "invalid_field", "image"},
			{"ttlSeconds a fraction", send, `{"recipients": ["u_1"], "title": "a", "ttlSeconds": 1.5}`, nil, 400, "invalid_field", "ttlSeconds"},
			{"ttlSeconds huge", send, `{"recipients": ["u_1"], "title": "a", "ttlSeconds": 1e300}`, nil, 400, "invalid_field", "ttlSeconds"},
			{"ttlSeconds beyond a double", send, `{"recipients": ["u_1"], "title": "a", "ttlSeconds": 1e400}`, nil, 400, "invalid_json", "ttlSeconds"},
			{"a data number beyond a double", send, `{"recipients": ["u_1"], "title": "a", "data": {"n": [1e131072]}}`, nil, 400, "invalid_json", "data.n[0]"},
			{"a data number too small for a double", send, `{"recipients": ["u_1"], "title": "a", "data": {"n": -1e-400}}`, nil, 400, "invalid_json", "data.n"},
			{"type a boolean", send, `{"recipients": ["u_1"], "title": "a", "type": true}`, nil, 400, "invalid_field", "type"},

			// PUT /v1/recipients/{recipient}/devices
			{"Transport", dev, `{"Transport": "fcm", "token": "` + tok + `"}`, nil, 400, "unknown_field", "Transport"},
			{"TOKEN", dev, `{"transport": "fcm", "TOKEN": "` + tok + `"}`, nil, 400, "unknown_field", "TOKEN"},
			{"token twice", dev, `{"transport": "fcm", "token": "` + tok + `", "token": "` + tok + `"}`, nil, 400, "invalid_json", "token"},
			{"subscription endpoint twice", dev, `{"transport": "webpush", "token": ` + strings.Replace(web, `{"endpoint":`, `{"endpoint": "https://x.example/a", "endpoint":`, 1) + `}`, nil, 400, "invalid_json", "token.endpoint"},
			// The same, and a second value after it, in the token's string form,
			// which the body's own I-JSON check cannot see into.
			{"subscription endpoint twice, as a string", dev, `{"transport": "webpush", "token": ` +
				strconv.Quote(strings.Replace(web, `{"endpoint":`, `{"endpoint": "https://x.example/a", "endpoint":`, 1)) + `}`, nil, 400, "invalid_field", "token"},
			{"subscription and more, as a string", dev, `{"transport": "webpush", "token": ` + strconv.Quote(web+`{}`) + `}`, nil, 400, "invalid_field", "token"},
			{"transport null", dev, `{"transport": null, "token": "` + tok + `"}`, nil, 400, "invalid_field", "transport"},
			{"transport empty", dev, `{"transport": "", "token": "` + tok + `"}`, nil, 400, "invalid_field", "transport"},
			{"token null", dev, `{"transport": "fcm", "token": null}`, nil, 400, "invalid_field", "token"},
			{"token empty", dev, `{"transport": "fcm", "token": ""}`, nil, 400, "invalid_field", "token"},
			{"platform null", dev, `{"transport": "fcm", "token": "` + tok + `", "platform": null}`, nil, 400, "invalid_field", "platform"},
			{"lone surrogate in platform", dev, `{"transport": "fcm", "token": "` + tok + `", "platform": "\ud800"}`, nil, 400, "invalid_json", "platform"},
			{"invalid UTF-8 in locale", dev, "{\"transport\": \"fcm\", \"token\": \"" + tok + "\", \"locale\": \"d\xffe\"}", nil, 400, "invalid_json", "locale"},

			// DELETE /v1/devices
			{"unregister Token", unreg, `{"transport": "fcm", "Token": "` + tok + `"}`, nil, 400, "unknown_field", "Token"},
			{"unregister transport twice", unreg, `{"transport": "fcm", "transport": "apns", "token": "` + tok + `"}`, nil, 400, "invalid_json", "transport"},
			{"unregister recipient null", unreg, `{"transport": "fcm", "token": "` + tok + `", "recipient": null}`, nil, 400, "invalid_field", "recipient"},
			{"unregister transport missing", unreg, `{"token": "` + tok + `"}`, nil, 400, "missing_field", "transport"},

			// PUT /v1/recipients/{recipient}/preferences
			{"OptOut", prefs, `{"OptOut": ["news"]}`, nil, 400, "unknown_field", "OptOut"},
			{"optOut twice", prefs, `{"optOut": ["news"], "optOut": []}`, nil, 400, "invalid_json", "optOut"},
			{"a null opt-out", prefs, `{"optOut": [null]}`, nil, 400, "invalid_field", "optOut[0]"},
			{"lone surrogate in an opt-out", prefs, `{"optOut": ["\ud800"]}`, nil, 400, "invalid_json", "optOut[0]"},
			{"a quietHours member without a name", prefs, `{"quietHours": {"start": "22:00", "end": "07:00", "timeZone": "UTC", "": 1}}`, nil, 400, "unknown_field", `quietHours[""]`},
			{"quietHours.START", prefs, `{"quietHours": {"start": "22:00", "START": "23:00", "end": "07:00", "timeZone": "UTC"}}`, nil, 400, "unknown_field", "quietHours.START"},
			{"quietHours.start twice", prefs, `{"quietHours": {"start": "22:00", "start": "23:00", "end": "07:00", "timeZone": "UTC"}}`, nil, 400, "invalid_json", "quietHours.start"},
			{"quietHours.start missing", prefs, `{"quietHours": {"end": "07:00", "timeZone": "UTC"}}`, nil, 400, "missing_field", "quietHours.start"},
			{"quietHours.timeZone empty", prefs, `{"quietHours": {"start": "22:00", "end": "07:00", "timeZone": ""}}`, nil, 400, "invalid_field", "quietHours.timeZone"},
			{"quietHours.end null", prefs, `{"quietHours": {"start": "22:00", "end": null, "timeZone": "UTC"}}`, nil, 400, "invalid_field", "quietHours.end"},
		}...)

		// What must survive every refused request.
		e.register("u_1", oncepush.TransportFCM, nil)
		e.putPreferences("u_1", obj{"optOut": []string{"news"}})
		kept := e.do("GET", prefs, e.admin, nil).want(t, http.StatusOK).body
		for _, tc := range cases {
			r := e.refused(t, badRequest{
				name: tc.name, method: method[tc.path], path: tc.path, body: []byte(tc.body),
				header: append([]string{"Content-Type", "application/json"}, tc.header...),
				status: tc.status, code: tc.code, field: tc.field,
			})
			if tc.status == http.StatusUnsupportedMediaType && tc.header[0] == "Content-Encoding" && r.header.Get("Accept-Encoding") != "identity" {
				t.Errorf("%s: Accept-Encoding %q, want identity", tc.name, r.header.Get("Accept-Encoding"))
			}
			if now := e.do("GET", prefs, e.admin, nil).want(t, http.StatusOK).body; !bytes.Equal(now, kept) {
				t.Errorf("%s: the preferences are now %s, were %s", tc.name, now, kept)
			}
		}
	})
}

// What the document allows is still taken: null where it says null, a whole
// number written with a fraction, a charset of utf-8, no content coding.
func TestStrictDecodingTakesWhatTheDocumentAllows(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		for _, body := range []string{
			`{"recipients": ["u_1"], "title": "Hello", "data": null, "scheduledAt": null, "ttlSeconds": null}`,
			`{"recipients": ["u_1"], "title": "Hello \ud83d\ude00", "ttlSeconds": 60.0, "ambiguity": "at-most-once"}`,
			`{"recipients": ["u_1"], "title": "Hello", "data": {"n": null, "list": [null, {"a": null}]}}`,
		} {
			e.do("POST", "/v1/notifications", e.admin, body, "Content-Type", "application/json; charset=UTF-8").want(t, http.StatusAccepted)
		}
		e.do("POST", "/v1/notifications", e.admin, `{"recipients": ["u_1"], "title": "Hello"}`, "Content-Encoding", "identity").want(t, http.StatusAccepted)
		e.do("PUT", "/v1/recipients/u_1/preferences", e.admin, `{"optOut": null, "quietHours": null}`).want(t, http.StatusOK)
		e.do("PUT", "/v1/recipients/u_1/preferences", e.admin, `{}`).want(t, http.StatusOK)
		web := e.token(oncepush.TransportWebPush)
		sub := strings.Replace(web, `{"endpoint":`, `{"expirationTime": null, "endpoint":`, 1)
		e.do("PUT", "/v1/recipients/u_1/devices", e.admin, `{"transport": "webpush", "token": `+sub+`}`).want(t, http.StatusOK)
	})
}

// The operations that take no body refuse one (415) and do nothing: a body
// they ignored would be a client meaning something the server did not do.
func TestOperationsWithoutBodyRefuseOne(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, obj{"session": "s_1"})
		before := e.rows()
		for _, path := range []string{"/v1/recipients/u_1", "/v1/sessions/s_1/revoke"} {
			method := map[bool]string{true: "DELETE", false: "POST"}[strings.HasPrefix(path, "/v1/recipients")]
			for _, body := range []string{`{"keepDevices": true}`, `0`, ` `} {
				e.do(method, path, e.admin, body).wantProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
			}
		}
		e.unchanged(t, before, "bodies sent where none is taken")
		e.do("POST", "/v1/sessions/s_1/revoke", e.admin, nil).want(t, http.StatusNoContent)
		e.do("DELETE", "/v1/recipients/u_1", e.admin, nil).want(t, http.StatusNoContent)
	})
}

// Numbers in data travel with the digits the caller wrote: 2^53 + 1 is not a
// float64, and neither is an id of 20 digits.
func TestDataNumbersKeepTheirDigits(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		body := `{"recipients": ["u_1"], "title": "Order shipped", "data": {
			"order": 9007199254740993, "nested": {"ids": [12345678901234567890, -9007199254740993]},
			"price": 0.10000000000000000555}}`
		a := e.send(e.admin, body)
		e.drain()
		subs := e.fcm.Submissions()
		if len(subs) != 1 {
			t.Fatalf("%d submissions, want 1", len(subs))
		}
		want := map[string]string{
			"order":  "9007199254740993",
			"nested": `{"ids":[12345678901234567890,-9007199254740993]}`,
			"price":  "0.10000000000000000555",
		}
		for k, v := range want {
			// PostgreSQL's jsonb spaces a nested value out; the digits are the point.
			var got bytes.Buffer
			if err := json.Compact(&got, []byte(subs[0].Data[k])); err != nil || got.String() != v {
				t.Errorf("the provider received data[%q] = %q, want %q", k, subs[0].Data[k], v)
			}
		}
		// The notification shows what was stored, digit for digit.
		r := e.do("GET", "/v1/notifications/"+itoa(a.ID), e.admin, nil).want(t, http.StatusOK)
		for _, digits := range []string{"9007199254740993", "12345678901234567890", "-9007199254740993"} {
			if !bytes.Contains(r.body, []byte(digits)) {
				t.Errorf("GET /v1/notifications/%d does not show %s: %s", a.ID, digits, r.body)
			}
		}
	})
}

// Two bodies that differ only in a number beyond float64's precision are two
// requests: the second under the same key is a conflict, not a duplicate.
func TestDedupeKeyTellsLargeNumbersApart(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		first := `{"recipients": ["u_1"], "title": "Refund", "dedupeKey": "refund-1", "data": {"amount": 9007199254740993}}`
		other := `{"recipients": ["u_1"], "title": "Refund", "dedupeKey": "refund-1", "data": {"amount": 9007199254740992}}`
		e.send(e.admin, first)
		before := e.rows()
		e.do("POST", "/v1/notifications", e.admin, other).wantProblem(t, http.StatusConflict, "idempotency_conflict", "dedupeKey")
		e.unchanged(t, before, "a different amount under a used key")
		// The same body again is still a replay.
		if a := e.send(e.admin, first); !a.Duplicate {
			t.Errorf("the same body again answered %+v, want duplicate: true", a)
		}
	})
}

// A NUL character is valid JSON ("\u0000") but no text PostgreSQL can store:
// every stored text field refuses it with a 400 naming the field, on both
// drivers, and nothing is written (PostgreSQL answered 500, SQLite 202).
func TestNULIsRefusedInEveryTextField(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		tok := e.token(oncepush.TransportFCM)
		send := func(extra string) string {
			return `{"recipients": ["u_1"], "title": "Hello"` + extra + `}`
		}
		device := func(extra string) string { return `{"transport": "fcm", "token": "` + tok + `"` + extra + `}` }
		const nul = `\u0000`
		cases := []badRequest{
			{"title", "POST", "/v1/notifications", `{"recipients": ["u_1"], "title": "Hel` + nul + `lo"}`, nil, 400, "invalid_field", "title"},
			{"body", "POST", "/v1/notifications", send(`, "body": "` + nul + `"`), nil, 400, "invalid_field", "body"},
			{"type", "POST", "/v1/notifications", send(`, "type": "invoice` + nul + `"`), nil, 400, "invalid_field", "type"},
			{"recipient", "POST", "/v1/notifications", `{"recipients": ["u_1", "u_` + nul + `2"], "title": "Hello"}`, nil, 400, "invalid_field", "recipients[1]"},
			{"dedupeKey", "POST", "/v1/notifications", send(`, "dedupeKey": "k` + nul + `"`), nil, 400, "invalid_field", "dedupeKey"},
			{"category", "POST", "/v1/notifications", send(`, "category": "news` + nul + `"`), nil, 400, "invalid_field", "category"},
			{"link", "POST", "/v1/notifications", send(`, "link": "/orders/` + nul + `"`), nil, 400, "invalid_field", "link"},
			{"image", "POST", "/v1/notifications", send(`, "image": "https://img.example/` + nul + `"`), nil, 400, "invalid_field", "image"},
			{"data value", "POST", "/v1/notifications", send(`, "data": {"note": "a` + nul + `"}`), nil, 400, "invalid_field", "data"},
			{"data key", "POST", "/v1/notifications", send(`, "data": {"n` + nul + `te": "a"}`), nil, 400, "invalid_field", "data"},
			{"nested data", "POST", "/v1/notifications", send(`, "data": {"order": {"lines": [{"sku": "` + nul + `"}]}}`), nil, 400, "invalid_field", "data"},
			{"device platform", "PUT", "/v1/recipients/u_1/devices", device(`, "platform": "ios` + nul + `"`), nil, 400, "invalid_field", "platform"},
			{"device locale", "PUT", "/v1/recipients/u_1/devices", device(`, "locale": "de` + nul + `"`), nil, 400, "invalid_field", "locale"},
			{"device session", "PUT", "/v1/recipients/u_1/devices", device(`, "session": "s` + nul + `"`), nil, 400, "invalid_field", "session"},
			{"device time zone", "PUT", "/v1/recipients/u_1/devices", device(`, "timeZone": "UTC` + nul + `"`), nil, 400, "invalid_field", "timeZone"},
			{"device token", "PUT", "/v1/recipients/u_1/devices", `{"transport": "fcm", "token": "` + tok + nul + `"}`, nil, 400, "invalid_field", "token"},
			{"unregister recipient", "DELETE", "/v1/devices", device(`, "recipient": "u` + nul + `"`), nil, 400, "invalid_field", "recipient"},
			{"opt-out", "PUT", "/v1/recipients/u_1/preferences", `{"optOut": ["news", "ads` + nul + `"]}`, nil, 400, "invalid_field", "optOut[1]"},
			{"quiet hours zone", "PUT", "/v1/recipients/u_1/preferences", `{"quietHours": {"start": "22:00", "end": "07:00", "timeZone": "UTC` + nul + `"}}`, nil, 400, "invalid_field", "quietHours.timeZone"},
			{"path recipient, devices", "PUT", "/v1/recipients/u%00/devices", device(""), nil, 400, "invalid_field", "recipient"},
			{"path recipient, device list", "GET", "/v1/recipients/u%00/devices", nil, nil, 400, "invalid_field", "recipient"},
			{"path recipient, deliveries", "GET", "/v1/recipients/u%00/deliveries", nil, nil, 400, "invalid_field", "recipient"},
			{"path recipient, preferences", "PUT", "/v1/recipients/u%00/preferences", `{}`, nil, 400, "invalid_field", "recipient"},
			{"path recipient, read preferences", "GET", "/v1/recipients/u%00/preferences", nil, nil, 400, "invalid_field", "recipient"},
			{"path recipient, delete", "DELETE", "/v1/recipients/u%00", nil, nil, 400, "invalid_field", "recipient"},
			{"path session", "POST", "/v1/sessions/s%00/revoke", nil, nil, 400, "invalid_field", "session"},
		}
		for _, tc := range cases {
			e.refused(t, tc)
		}
	})
}
