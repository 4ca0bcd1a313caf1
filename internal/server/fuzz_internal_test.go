package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/oncepush/oncepush/api"
	"github.com/oncepush/oncepush/internal/openapitest"
	"github.com/oncepush/oncepush/internal/strictjson"
)

// FuzzDecode fuzzes the strict decoder of each request body type against
// the OpenAPI document's rules for that body. decode checks a body's shape —
// I-JSON, kinds, exact names, nulls, required members — and leaves values
// (patterns, enums, lengths, a token's form, a whole number of seconds) to
// the handler and the library. So the oracle is the document with its value
// keywords taken out (typesOnly): decode must accept a body exactly when it
// is I-JSON, within the body limit, and valid against that. A refusal is a
// *Problem with a stable code whose field, for a field's fault, is a path
// of the body (or, for a missing member, a required name under one); what
// is accepted, encoded again, decodes to the same request.

// fuzzBodyLimit is small, so that the fuzzer reaches the limit too.
const fuzzBodyLimit = 8 << 10

// sub is a subscription's shape, for the device seeds (its values are the
// library's to refuse).
var sub = `{"endpoint": "https://fcm.googleapis.com/fcm/send/abc", "expirationTime": null, "keys": {"p256dh": "BA", "auth": "CQ"}}`

// requestBodies are the request body types FuzzDecode picks from: the
// schema each is read against, and its seeds.
var requestBodies = []struct {
	schema string
	seeds  []string
}{
	{"NotificationRequest", []string{
		`{"recipients": ["u_1"], "title": "Hello"}`,
		`{"recipients": ["u_1", "u_2"], "type": "invoice.paid", "title": "Paid", "body": "€12.40", "data": {"invoice": "inv_1", "amount": 9007199254740993, "nested": {"a": [1, null, true]}},
		  "link": "/invoices/1", "image": "https://img.example/a.png", "category": "billing", "dedupeKey": "k1", "scheduledAt": "2026-01-05T09:00:00Z", "ttlSeconds": 3600, "ambiguity": "at-most-once"}`,
		`{"recipients": ["u_1"], "title": "a", "data": null, "scheduledAt": null, "ttlSeconds": null}`,
		`{"recipients": ["u_1"], "title": "a", "ttlSeconds": 60.0}`,
		`{"recipients": ["u_1"], "title": "a", "ttlSeconds": 1.5}`,
		`{"recipients": ["u_1"], "title": "a", "ttlSeconds": 1e300}`,
		`{"recipients": ["u_1"], "title": "a", "ttlSeconds": "60"}`,
		`{"recipients": ["u_1"], "title": "a", "data": {}}`,
		`{"recipients": ["u_1"], "title": "a", "data": []}`,
		`{"recipients": [], "title": "a"}`,
		`{"recipients": "u_1", "title": "a"}`,
		`{"recipients": ["u_1", null], "title": "a"}`,
		`{"recipients": ["u_1"], "title": null}`,
		`{"recipients": ["u_1"], "Title": "a"}`,
		`{"title": "a"}`,
		`{"devices": [{"transport": "fcm", "token": "dQw4w9WgXcQ:APA91b"}, {"transport": "webpush", "token": ` + sub + `}], "title": "a"}`,
		`{"devices": [{"transport": "fcm"}], "title": "a"}`,
		`{"devices": [{"transport": "fcm", "token": "t", "platform": "web"}], "title": "a"}`,
		`{"devices": [null], "title": "a"}`,
		`{"devices": {"transport": "fcm", "token": "t"}, "title": "a"}`,
		`{"recipients": ["u_1"], "devices": [], "title": "a"}`,
		`{"recipients": ["u_1"], "title": "a", "title": "b"}`,
		`{"recipients": ["u_1"], "title": "\ud800"}`,
		`{"recipients": ["u_1"], "title": "\u0000"}`,
		"{\"recipients\": [\"u_1\"], \"title\": \"caf\xe9\"}",
		`{"recipients": ["u_1"], "title": "a", "data": {"a": 1, "a": 2}}`,
		`{"recipients": ["u_1"], "title": "a", "data": {"n": 1e400}}`,
		`{"recipients": ["u_1"], "title": "a", "data": {"k": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`,
		`{"recipients": ["u_1"], "title": "a", "ambiguity": null}`,
		`{"recipients": ["u_1"], "title": "a", "a.b": 1, "c[0]": 2}`,
		`{"recipients": ["u_1"], "title": "` + strings.Repeat("x", fuzzBodyLimit) + `"}`,
		`null`, `[]`, `"x"`, `1`, ``, `{`, `{} {}`, `{}]`,
	}},
	{"DeviceRequest", []string{
		`{"transport": "fcm", "token": "dQw4w9WgXcQ:APA91b"}`,
		`{"transport": "webpush", "token": ` + sub + `, "platform": "web", "session": "s_1", "locale": "de-CH", "timeZone": "Europe/Zurich"}`,
		`{"transport": "webpush", "token": ` + strings.Replace(sub, `"endpoint"`, `"endpoint": "x", "endpoint"`, 1) + `}`,
		`{"transport": "webpush", "token": {}}`,
		`{"transport": "webpush", "token": []}`,
		`{"transport": "fcm", "token": 5}`,
		`{"transport": "fcm", "token": null}`,
		`{"transport": "fcm", "token": true}`,
		`{"transport": null, "token": "t"}`,
		`{"transport": "fcm"}`,
		`{"token": "t"}`,
		`{"transport": "fcm", "token": "t", "TimeZone": "UTC"}`,
		`{"transport": "fcm", "token": "t", "platform": null}`,
		`{"transport": "fcm", "token": "t\u0000"}`,
		`{"transport": "fcm", "token": "\udc00"}`,
	}},
	{"UnregisterRequest", []string{
		`{"transport": "apns", "token": "8f1e0cd7", "recipient": "u_1"}`,
		`{"transport": "apns", "token": "8f1e0cd7", "recipient": null}`,
		`{"transport": "apns", "transport": "fcm", "token": "8f1e0cd7"}`,
		`{"transport": "apns", "Token": "8f1e0cd7"}`,
		`{"transport": "webpush", "token": {"endpoint": 1}}`,
		`{"token": "t"}`,
	}},
	{"PreferencesRequest", []string{
		`{"optOut": ["marketing"], "quietHours": {"start": "22:00", "end": "07:00", "timeZone": "Europe/Zurich"}}`,
		`{"optOut": null, "quietHours": null}`,
		`{}`,
		`{"optOut": [null]}`,
		`{"optOut": "news"}`,
		`{"quietHours": {"start": "22:00", "end": "07:00"}}`,
		`{"quietHours": {"start": "22:00", "START": "23:00", "end": "07:00", "timeZone": "UTC"}}`,
		`{"quietHours": {"start": "22:00", "start": "23:00", "end": "07:00", "timeZone": "UTC"}}`,
		`{"quietHours": {"start": null, "end": "07:00", "timeZone": "UTC"}}`,
		`{"quietHours": []}`,
		`{"optOut": ["\ud800"]}`,
	}},
}

// The fuzzer's kind picks the body type: one target, so that one run of
// go test -fuzz fuzzes all four.
func FuzzDecode(f *testing.F) {
	for kind, b := range requestBodies {
		for _, s := range b.seeds {
			f.Add(uint8(kind), []byte(s))
		}
	}
	oracle, err := typesOnly()
	if err != nil {
		f.Fatal(err)
	}
	schemas := make([]*jsonschema.Schema, len(requestBodies))
	for i, b := range requestBodies {
		if schemas[i], err = oracle.Schema("/components/schemas/" + b.schema); err != nil {
			f.Fatal(err)
		}
	}
	required := requiredNames(oracle.Document())
	s := &core{maxBody: fuzzBodyLimit}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		schema := schemas[int(kind)%len(schemas)]
		switch int(kind) % len(schemas) {
		case 0:
			checkDecode[notificationRequest](t, s, schema, required, body)
		case 1:
			checkDecode[deviceRequest](t, s, schema, required, body)
		case 2:
			checkDecode[unregisterRequest](t, s, schema, required, body)
		case 3:
			checkDecode[preferencesBody](t, s, schema, required, body)
		}
	})
}

// problemCodes are the codes decode may refuse with; fieldCodes say which
// of them name a field of the body.
var (
	problemCodes = []string{CodeInvalidJSON, CodeInvalidField, CodeUnknownField, CodeMissingField, CodeBodyTooLarge}
	fieldCodes   = []string{CodeInvalidField, CodeUnknownField, CodeMissingField}
)

// checkDecode decodes body as a T and checks the answer against schema, the
// document's types for T.
func checkDecode[T any](t *testing.T, s *core, schema *jsonschema.Schema, required map[string]bool, body []byte) {
	t.Helper()
	var req T
	err := s.decode(httptest.NewRecorder(), jsonRequest(body), &req)
	doc, parseErr := strictjson.Parse(body)
	switch {
	case len(body) > fuzzBodyLimit:
		wantProblem(t, err, http.StatusRequestEntityTooLarge, CodeBodyTooLarge)
		return
	case parseErr != nil:
		p := wantProblem(t, err, http.StatusBadRequest, CodeInvalidJSON)
		var se *strictjson.Error
		if errors.As(parseErr, &se) && p.Field != se.Path {
			t.Fatalf("%q: invalid_json names %q; the fault is at %q", body, p.Field, se.Path)
		}
		return
	}
	inst, jerr := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if jerr != nil {
		t.Fatalf("%q: strictjson accepted what jsonschema cannot read: %v", body, jerr)
	}
	verr := schema.Validate(inst)
	if err != nil {
		var p *Problem
		if !errors.As(err, &p) || p.Status != http.StatusBadRequest || !slices.Contains(problemCodes, p.Code) {
			t.Fatalf("%q: refused with %#v, want a 400 problem with a stable code", body, err)
		}
		if verr == nil {
			t.Fatalf("%q: refused (%v), but the document's types allow it", body, err)
		}
		if slices.Contains(fieldCodes, p.Code) {
			checkField(t, body, doc, p, required)
		}
		return
	}
	if verr != nil {
		t.Fatalf("%q: accepted, but the document's types refuse it: %v", body, verr)
	}
	// What was accepted, encoded again, is the same request.
	again, merr := json.Marshal(req)
	if merr != nil {
		t.Fatalf("%q: the accepted request does not encode: %v", body, merr)
	}
	var req2 T
	if err := s.decode(httptest.NewRecorder(), jsonRequest(again), &req2); err != nil {
		t.Fatalf("%q accepted, encoded again as %s, is refused: %v", body, again, err)
	}
	if !reflect.DeepEqual(emptyMapsNil(req), emptyMapsNil(req2)) {
		t.Fatalf("%q decoded as %#v; encoded again as %s it decodes as %#v", body, req, again, req2)
	}
}

func jsonRequest(body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func wantProblem(t *testing.T, err error, status int, code string) *Problem {
	t.Helper()
	var p *Problem
	if !errors.As(err, &p) || p.Status != status || p.Code != code {
		t.Fatalf("got %#v, want %d %s", err, status, code)
	}
	return p
}

// checkField: an invalid or unknown field is a path of the body; a missing
// one is a required name, at the top or under a path of the body.
func checkField(t *testing.T, body []byte, doc *strictjson.Value, p *Problem, required map[string]bool) {
	t.Helper()
	paths := map[string]bool{}
	var walk func(v *strictjson.Value, path string)
	walk = func(v *strictjson.Value, path string) {
		paths[path] = true
		for _, m := range v.Members {
			walk(m.Value, strictjson.Join(path, m.Name))
		}
		for i, e := range v.Elems {
			walk(e, strictjson.Index(path, i))
		}
	}
	walk(doc, "")
	if p.Code != CodeMissingField {
		if p.Field == "" || !paths[p.Field] {
			t.Fatalf("%q: %s names %q, which is not a field of the body", body, p.Code, p.Field)
		}
		return
	}
	// Required names hold no dot, so the name is what follows the last.
	parent, name := "", p.Field
	if i := strings.LastIndexByte(p.Field, '.'); i >= 0 {
		parent, name = p.Field[:i], p.Field[i+1:]
	}
	if required[name] && paths[parent] && !paths[p.Field] {
		return
	}
	t.Fatalf("%q: missing_field names %q, which is no required member absent from the body", body, p.Field)
}

// typesOnly is the OpenAPI document with what decode leaves to others taken
// out: value keywords (pattern, enum, lengths, bounds, formats, name rules,
// NotificationRequest's anyOf on a non-blank title or body and its oneOf of
// recipients or devices, which the handler enforces), integer as any
// number (ttlSeconds' fraction is the handler's), and a device token as any
// string or object (tokenField; the library reads it).
var typesOnly = sync.OnceValues(func() (*openapitest.Spec, error) {
	var doc map[string]any
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		return nil, err
	}
	value := []string{"pattern", "enum", "const", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
		"exclusiveMaximum", "minItems", "maxItems", "uniqueItems", "multipleOf", "format", "propertyNames", "anyOf"}
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range value {
				delete(v, k)
			}
			switch typ := v["type"].(type) {
			case string:
				if typ == "integer" {
					v["type"] = "number"
				}
			case []any:
				for i, t := range typ {
					if t == "integer" {
						typ[i] = "number"
					}
				}
			}
			for _, e := range v {
				strip(e)
			}
		case []any:
			for _, e := range v {
				strip(e)
			}
		}
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	strip(schemas)
	delete(schemas["NotificationRequest"].(map[string]any), "oneOf")
	schemas["DeviceToken"] = map[string]any{"type": []any{"string", "object"}}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return openapitest.Load(b)
})

// requiredNames are the names any schema of the document requires.
func requiredNames(doc map[string]any) map[string]bool {
	out := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, r := range asList(v["required"]) {
				if s, ok := r.(string); ok {
					out[s] = true
				}
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc["components"])
	return out
}

// emptyMapsNil is v with its empty maps as nil: an empty data object and
// none encode alike (omitempty), and are stored alike by the library.
func emptyMapsNil(v any) any {
	rv := reflect.ValueOf(&v).Elem().Elem()
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	for i := range cp.NumField() {
		if f := cp.Field(i); f.Kind() == reflect.Map && f.Len() == 0 && f.CanSet() {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return cp.Interface()
}
