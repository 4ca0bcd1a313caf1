package openapitest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/oncepush/oncepush/api"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/openapitest"
)

func load(t *testing.T) *openapitest.Spec {
	t.Helper()
	s, err := openapitest.Load(api.OpenAPI)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

// TestDocumentIsWellFormed checks what compiling the schemas does not: the
// document's structure, its references, its operations and its examples.
func TestDocumentIsWellFormed(t *testing.T) {
	t.Parallel()
	s := load(t)
	doc := s.Document()

	info, _ := doc["info"].(map[string]any)
	if info["title"] != "oncepush" || info["version"] == "" || info["version"] == nil {
		t.Errorf("info: title %v, version %v", info["title"], info["version"])
	}
	scheme := dig(doc, "components", "securitySchemes", "apiKey")
	if scheme["type"] != "http" || scheme["scheme"] != "bearer" {
		t.Errorf("securitySchemes.apiKey = %v, want an http bearer scheme", scheme)
	}

	// Every reference resolves.
	walk(doc, "", func(ptr string, obj map[string]any) {
		ref, ok := obj["$ref"].(string)
		if !ok {
			return
		}
		target, ok := strings.CutPrefix(ref, "#")
		if !ok {
			t.Errorf("#%s: $ref %q is not local", ptr, ref)
			return
		}
		if _, err := pointer(doc, target); err != nil {
			t.Errorf("#%s: $ref %q does not resolve: %v", ptr, ref, err)
		}
	})

	tags := map[string]bool{}
	for _, tg := range asSlice(doc["tags"]) {
		tags[tg.(map[string]any)["name"].(string)] = true
	}
	ids := map[string]string{}
	scopes := apikey.AllScopes
	paths := doc["paths"].(map[string]any)
	for _, op := range s.Operations() {
		where := op.Method + " " + op.Path
		if op.ID == "" {
			t.Errorf("%s has no operationId", where)
		} else if other, dup := ids[op.ID]; dup {
			t.Errorf("%s and %s share the operationId %s", where, other, op.ID)
		}
		ids[op.ID] = where
		if op.Secured {
			if !slices.Contains(scopes, op.Scope) {
				t.Errorf("%s is secured; its x-oncepush-scope %q is not one of %v", where, op.Scope, scopes)
			}
			for _, st := range []int{401, 403} {
				if !slices.Contains(op.Statuses, st) {
					t.Errorf("%s is secured but does not document %d", where, st)
				}
			}
		} else if op.Scope != "" {
			t.Errorf("%s needs no key but names the scope %q", where, op.Scope)
		}
		if !slices.ContainsFunc(op.Statuses, func(st int) bool { return st >= 200 && st < 300 }) {
			t.Errorf("%s documents no success", where)
		}
		raw := paths[op.Path].(map[string]any)[strings.ToLower(op.Method)].(map[string]any)
		for _, tg := range asSlice(raw["tags"]) {
			if !tags[tg.(string)] {
				t.Errorf("%s uses the undeclared tag %v", where, tg)
			}
		}

		// Path parameters: exactly those of the template, each required.
		inTemplate := regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(op.Path, -1)
		var want, got []string
		for _, m := range inTemplate {
			want = append(want, m[1])
		}
		for _, p := range asSlice(raw["parameters"]) {
			p := deref(t, doc, p.(map[string]any))
			if p["in"] == "path" {
				got = append(got, p["name"].(string))
				if p["required"] != true {
					t.Errorf("%s: path parameter %v must be required", where, p["name"])
				}
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Errorf("%s: path parameters %v, the template has %v", where, got, want)
		}
	}

	// Every example is valid against its schema.
	examples := 0
	walk(doc, "", func(ptr string, obj map[string]any) {
		if _, ok := obj["schema"]; !ok || !strings.Contains(ptr, "/content/") {
			return
		}
		var values []any
		if ex, ok := obj["example"]; ok {
			values = append(values, ex)
		}
		for _, ex := range mapOf(obj["examples"]) {
			values = append(values, ex.(map[string]any)["value"])
		}
		if len(values) == 0 {
			return
		}
		sch, err := s.Schema(ptr + "/schema")
		if err != nil {
			t.Errorf("#%s/schema: %v", ptr, err)
			return
		}
		for _, v := range values {
			examples++
			if err := sch.Validate(v); err != nil {
				t.Errorf("the example at #%s does not match its schema: %v", ptr, err)
			}
		}
	})
	if examples == 0 {
		t.Error("found no examples to check")
	}
}

// TestLoadRefusesBrokenDocuments: Load is the first check of the document.
func TestLoadRefusesBrokenDocuments(t *testing.T) {
	t.Parallel()
	var base map[string]any
	if err := json.Unmarshal(api.OpenAPI, &base); err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(doc map[string]any)) []byte {
		var doc map[string]any
		_ = json.Unmarshal(api.OpenAPI, &doc)
		f(doc)
		b, _ := json.Marshal(doc)
		return b
	}
	for name, doc := range map[string][]byte{
		"not JSON":    []byte(`{"openapi": "3.1.0",`),
		"OpenAPI 3.0": mutate(func(d map[string]any) { d["openapi"] = "3.0.3" }),
		"schema with a wrong keyword value": mutate(func(d map[string]any) {
			dig(d, "components", "schemas", "SendAnswer")["type"] = 5
		}),
		"dangling schema reference": mutate(func(d map[string]any) {
			dig(d, "components", "schemas", "DeliveryPage", "properties", "deliveries", "items")["$ref"] = "#/components/schemas/Nope"
		}),
		"dangling response reference": mutate(func(d map[string]any) {
			dig(d, "paths", "/v1/devices", "delete", "responses")["400"] = map[string]any{"$ref": "#/components/responses/Nope"}
		}),
		"no NotFound response": mutate(func(d map[string]any) { delete(dig(d, "components", "responses"), "NotFound") }),
		"default response": mutate(func(d map[string]any) {
			dig(d, "paths", "/healthz", "get", "responses")["default"] = map[string]any{"description": "x"}
		}),
	} {
		if _, err := openapitest.Load(doc); err == nil {
			t.Errorf("%s: Load accepted it", name)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	s := load(t)
	const (
		send    = `{"id": 7, "queued": 2, "duplicates": 0, "duplicate": false}`
		sendReq = `{"recipients": ["u_1"], "title": "Hi"}`
		problem = `{"type": "https://oncepush.dev/problems/%s", "title": "T", "status": %d, "code": "%s", %s"instance": "/x"}`
		page    = `{"deliveries": [%s], "nextCursor": %s}`
		pending = `{"id": 3, "notificationId": 7, "recipient": "u_1", "type": "order.shipped", "title": "Shipped", "oncepushId": "0123456789abcdef0123456789abcdef", "dedupeKey": "", "status": "pending", "attempts": 0, "nextAttemptAt": "2026-01-05T09:00:00Z", "lastError": "", "createdAt": "2026-01-05T09:00:00Z", "finishedAt": %s, "devices": [], "mayHaveReachedTwice": false}`
	)
	prob := func(code string, status int, field string) string {
		f := ""
		if field != "" {
			f = fmt.Sprintf(`"field": %q, `, field)
		}
		return fmt.Sprintf(problem, code, status, code, f)
	}
	auth := http.Header{"Authorization": {"Bearer opk_x"}, "Content-Type": {"application/json"}}
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	problemCT := http.Header{"Content-Type": {"application/problem+json"}}
	retryIn5 := http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"5"}}
	withAllow := func(allow string) http.Header {
		return http.Header{"Content-Type": {"application/problem+json"}, "Allow": {allow}}
	}
	for _, tc := range []struct {
		name       string
		method     string
		url        string
		reqHeader  http.Header
		reqBody    string
		status     int
		respHeader http.Header
		respBody   string
		ok         bool
	}{
		{"send accepted", "POST", "/v1/notifications", auth, sendReq, 202, jsonCT, send, true},
		{"answer lacks a field", "POST", "/v1/notifications", auth, sendReq, 202, jsonCT, `{"id": 7, "queued": 2, "duplicates": 0}`, false},
		{"answer has an extra field", "POST", "/v1/notifications", auth, sendReq, 202, jsonCT, `{"id": 7, "queued": 2, "duplicates": 0, "duplicate": false, "x": 1}`, false},
		{"answer has a wrong type", "POST", "/v1/notifications", auth, sendReq, 202, jsonCT, `{"id": "7", "queued": 2, "duplicates": 0, "duplicate": false}`, false},
		{"undocumented status", "POST", "/v1/notifications", auth, sendReq, 200, jsonCT, send, false},
		{"undocumented content type", "POST", "/v1/notifications", auth, sendReq, 202, http.Header{"Content-Type": {"text/plain"}}, send, false},
		{"answer is not JSON", "POST", "/v1/notifications", auth, sendReq, 202, jsonCT, `{"id": 7,`, false},
		{"accepted an unknown field", "POST", "/v1/notifications", auth, `{"recipients": ["u_1"], "title": "Hi", "colour": "red"}`, 202, jsonCT, send, false},
		{"accepted an empty title and body", "POST", "/v1/notifications", auth, `{"recipients": ["u_1"], "title": " "}`, 202, jsonCT, send, false},
		{"accepted without a key", "POST", "/v1/notifications", jsonCT, sendReq, 202, jsonCT, send, false},
		{"accepted without a body", "POST", "/v1/notifications", auth, "", 202, jsonCT, send, false},
		{"accepted an undocumented media type", "POST", "/v1/notifications", http.Header{"Authorization": {"Bearer k"}, "Content-Type": {"text/plain"}}, sendReq, 202, jsonCT, send, false},
		{"refused a bad body", "POST", "/v1/notifications", auth, `{"recipients": "u_1"}`, 400, problemCT, prob("invalid_field", 400, "recipients"), true},
		{"400 without the field", "POST", "/v1/notifications", auth, `{"recipients": "u_1"}`, 400, problemCT, prob("invalid_field", 400, ""), false},
		{"400 with a code of another status", "POST", "/v1/notifications", auth, sendReq, 400, problemCT, prob("forbidden", 400, ""), false},
		{"problem code not in the enum", "POST", "/v1/notifications", auth, sendReq, 401, problemCT, prob("nope", 401, ""), false},
		{"problem as plain JSON", "POST", "/v1/notifications", auth, sendReq, 401, jsonCT, prob("unauthorized", 401, ""), false},
		{"conflict names dedupeKey", "POST", "/v1/notifications", auth, sendReq, 409, problemCT, prob("idempotency_conflict", 409, "dedupeKey"), true},
		{"conflict without the field", "POST", "/v1/notifications", auth, sendReq, 409, problemCT, prob("idempotency_conflict", 409, ""), false},
		{"idempotency header too long", "POST", "/v1/notifications", http.Header{"Authorization": {"Bearer k"}, "Idempotency-Key": {strings.Repeat("k", 201)}}, sendReq, 202, jsonCT, send, false},

		{"page, last", "GET", "/v1/notifications/7/deliveries?limit=2", auth, "", 200, jsonCT, fmt.Sprintf(page, fmt.Sprintf(pending, "null"), "null"), true},
		{"page, more", "GET", "/v1/notifications/7/deliveries?limit=2&cursor=ZDM", auth, "", 200, jsonCT, fmt.Sprintf(page, "", `"ZDM"`), true},
		{"cursor of a wrong type", "GET", "/v1/notifications/7/deliveries", auth, "", 200, jsonCT, fmt.Sprintf(page, "", "5"), false},
		{"pending but finished", "GET", "/v1/notifications/7/deliveries", auth, "", 200, jsonCT, fmt.Sprintf(page, fmt.Sprintf(pending, `"2026-01-05T09:00:00Z"`), "null"), false},
		{"not a date-time", "GET", "/v1/notifications/7/deliveries", auth, "", 200, jsonCT, fmt.Sprintf(page, strings.Replace(fmt.Sprintf(pending, "null"), "2026-01-05T09:00:00Z", "yesterday", 1), "null"), false},
		{"accepted a limit out of range", "GET", "/v1/notifications/7/deliveries?limit=5000", auth, "", 200, jsonCT, fmt.Sprintf(page, "", "null"), false},
		{"accepted an id that is not a number", "GET", "/v1/notifications/abc/deliveries", auth, "", 200, jsonCT, fmt.Sprintf(page, "", "null"), false},
		{"refused an id that is not a number", "GET", "/v1/notifications/abc", auth, "", 400, problemCT, prob("invalid_field", 400, "id"), true},

		{"unregistered", "DELETE", "/v1/devices", auth, `{"transport": "fcm", "token": "abcdefgh"}`, 204, http.Header{}, "", true},
		{"unregistered a subscription", "DELETE", "/v1/devices", auth, `{"transport": "webpush", "token": {"endpoint": "https://push.example/x", "expirationTime": null, "keys": {"p256dh": "BA", "auth": "AA"}}}`, 204, http.Header{}, "", true},
		{"accepted a token of a wrong type", "DELETE", "/v1/devices", auth, `{"transport": "fcm", "token": 5}`, 204, http.Header{}, "", false},
		{"204 with a body", "DELETE", "/v1/devices", auth, `{"transport": "fcm", "token": "abcdefgh"}`, 204, jsonCT, `{}`, false},
		{"revoked, body sent", "POST", "/v1/sessions/s1/revoke", auth, `{}`, 204, http.Header{}, "", false},

		{"preferences", "GET", "/v1/recipients/u_1/preferences", auth, "", 200, jsonCT, `{"optOut": [], "quietHours": null}`, true},
		{"preferences with quiet hours", "GET", "/v1/recipients/u_1/preferences", auth, "", 200, jsonCT, `{"optOut": ["a"], "quietHours": {"start": "22:00", "end": "07:00", "timeZone": "Europe/Zurich"}}`, true},
		{"preferences, optOut null", "GET", "/v1/recipients/u_1/preferences", auth, "", 200, jsonCT, `{"optOut": null, "quietHours": null}`, false},
		{"recipient too long", "PUT", "/v1/recipients/" + strings.Repeat("r", 201) + "/preferences", auth, `{}`, 200, jsonCT, `{"optOut": [], "quietHours": null}`, false},
		{"escaped recipient", "GET", "/v1/recipients/u%2F1/preferences", auth, "", 200, jsonCT, `{"optOut": [], "quietHours": null}`, true},

		{"metrics", "GET", "/metrics", nil, "", 200, http.Header{"Content-Type": {"text/plain; version=0.0.4; charset=utf-8"}}, "# HELP x\n", true},
		{"health", "GET", "/healthz", nil, "", 200, jsonCT, `{"status": "ok", "version": ""}`, true},
		{"ready, not", "GET", "/readyz", nil, "", 503, retryIn5, prob("unavailable", 503, ""), true},
		{"ready, not, no Retry-After", "GET", "/readyz", nil, "", 503, problemCT, prob("unavailable", 503, ""), false},

		{"unknown path", "GET", "/v1/nope", nil, "", 404, problemCT, prob("not_found", 404, ""), true},
		{"unknown path answered", "GET", "/v1/nope", nil, "", 200, jsonCT, `{}`, false},
		{"wrong method", "PATCH", "/v1/recipients/u_1/devices", nil, "", 405, withAllow("GET, PUT"), prob("method_not_allowed", 405, ""), true},
		{"wrong method, Allow differs", "PATCH", "/v1/recipients/u_1/devices", nil, "", 405, withAllow("GET"), prob("method_not_allowed", 405, ""), false},
		{"wrong method, no Allow", "PATCH", "/v1/recipients/u_1/devices", nil, "", 405, problemCT, prob("method_not_allowed", 405, ""), false},
		{"wrong method answered", "POST", "/healthz", nil, "", 200, jsonCT, `{"status": "ok", "version": ""}`, false},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		x := &openapitest.Exchange{
			Method: tc.method, URL: u, RequestHeader: tc.reqHeader, RequestBody: []byte(tc.reqBody),
			Status: tc.status, ResponseHeader: tc.respHeader, ResponseBody: []byte(tc.respBody),
		}
		if x.RequestHeader == nil {
			x.RequestHeader = http.Header{}
		}
		err = s.Check(x)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && err == nil {
			t.Errorf("%s: Check found nothing wrong", tc.name)
		}
	}
}

// recorder is a testing.TB that keeps what Errorf reports.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestTransport(t *testing.T) {
	t.Parallel()
	s := load(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/healthz":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status": "ok", "version": "t"}`)
		case "/readyz": // drifted: a field the document does not have
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status": "ready", "since": 1}`)
		case "/v1/notifications": // echoes the body it got into the answer's id
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprintf(w, `{"id": %d, "queued": 1, "duplicates": 0, "duplicate": false}`, len(body))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"type": "https://oncepush.dev/problems/internal", "title": "T", "status": 500, "code": "internal", "instance": "/"}`)
		}
	}))
	t.Cleanup(srv.Close)
	rec := &recorder{TB: t}
	var seen []string // what the extra check was given
	also := func(x *openapitest.Exchange) {
		seen = append(seen, fmt.Sprintf("%s %s %d %s", x.Method, x.URL.Path, x.Status, x.ResponseBody))
	}
	client := &http.Client{Transport: s.Transport(rec, nil, also)}
	get := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer opk_x")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if _, body := get("GET", "/healthz", ""); !strings.Contains(body, `"t"`) {
		t.Errorf("the caller got %q, not the server's body", body)
	}
	sent := `{"recipients": ["u_1"], "title": "Hi"}`
	if _, body := get("POST", "/v1/notifications", sent); !strings.Contains(body, fmt.Sprintf(`"id": %d`, len(sent))) {
		t.Errorf("the server did not get the whole request body: %s", body)
	}
	if len(rec.errs) != 0 {
		t.Fatalf("valid exchanges reported: %v", rec.errs)
	}
	get("GET", "/readyz", "")
	if len(rec.errs) != 1 {
		t.Fatalf("a drifted answer: %d reports, want 1: %v", len(rec.errs), rec.errs)
	}
	get("GET", "/v1/notifications/1", "")
	if len(rec.errs) != 2 || !strings.Contains(rec.errs[1], "500") {
		t.Fatalf("a 500: reports %v, want one about the failure", rec.errs)
	}
	if len(seen) != 4 || seen[0] != `GET /healthz 200 {"status": "ok", "version": "t"}` {
		t.Errorf("the extra check was given %q, want each of the 4 exchanges with its answer", seen)
	}
}

// walk calls fn for every object in v, with its JSON pointer.
func walk(v any, ptr string, fn func(ptr string, obj map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		fn(ptr, v)
		for k, c := range v {
			walk(c, ptr+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), fn)
		}
	case []any:
		for i, c := range v {
			walk(c, fmt.Sprintf("%s/%d", ptr, i), fn)
		}
	}
}

func pointer(doc any, ptr string) (any, error) {
	v := doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%q is not in an object", tok)
		}
		if v, ok = m[tok]; !ok {
			return nil, fmt.Errorf("no %q", tok)
		}
	}
	return v, nil
}

func deref(t *testing.T, doc map[string]any, obj map[string]any) map[string]any {
	t.Helper()
	if ref, ok := obj["$ref"].(string); ok {
		v, err := pointer(doc, strings.TrimPrefix(ref, "#"))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		return v.(map[string]any)
	}
	return obj
}

func dig(v map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		v, _ = v[k].(map[string]any)
	}
	return v
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
