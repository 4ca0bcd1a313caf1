package server_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
)

// Bodies the OpenAPI document does not allow — though encoding/json would take
// them — are refused on every route that takes one, with the documented
// status, code and field, and write nothing: not a row, not a preference.
func TestHostileBodiesAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
