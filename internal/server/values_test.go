package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// valueKeywords finds every schema of a request — a body's, at any depth,
// or a parameter's — that holds a pattern or a format: what constrains a
// value beyond its type, which the strict decoder leaves to the handlers.
// It returns their JSON pointers into the document, sorted.
func valueKeywords(doc map[string]any) []string {
	found := map[string]bool{}
	var walk func(ptr string, v any, depth int)
	walk = func(ptr string, v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > 20 {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			target := strings.TrimPrefix(ref, "#")
			walk(target, lookupPointer(doc, target), depth+1)
			return
		}
		if _, ok := m["pattern"]; ok {
			found[ptr] = true
		}
		if _, ok := m["format"]; ok {
			found[ptr] = true
		}
		for _, kw := range []string{"items", "propertyNames", "not", "additionalProperties"} {
			walk(ptr+"/"+kw, m[kw], depth+1)
		}
		for _, kw := range []string{"oneOf", "anyOf", "allOf"} {
			for i, sub := range asSlice(m[kw]) {
				walk(fmt.Sprintf("%s/%s/%d", ptr, kw, i), sub, depth+1)
			}
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for name, sub := range props {
				walk(ptr+"/properties/"+escapePointer(name), sub, depth+1)
			}
		}
	}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			opm, ok := op.(map[string]any)
			if !ok {
				continue
			}
			base := "/paths/" + escapePointer(path) + "/" + method
			for i, p := range asSlice(opm["parameters"]) {
				pm := p.(map[string]any)
				ptr := fmt.Sprintf("%s/parameters/%d", base, i)
				if ref, ok := pm["$ref"].(string); ok {
					ptr = strings.TrimPrefix(ref, "#")
					pm = lookupPointer(doc, ptr).(map[string]any)
				}
				walk(ptr+"/schema", pm["schema"], 0)
			}
			if rb, ok := opm["requestBody"].(map[string]any); ok {
				for mt, c := range rb["content"].(map[string]any) {
					walk(base+"/requestBody/content/"+escapePointer(mt)+"/schema", c.(map[string]any)["schema"], 0)
				}
			}
		}
	}
	out := make([]string, 0, len(found))
	for p := range found {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func lookupPointer(doc map[string]any, ptr string) any {
	var v any = doc
	for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			v = c[seg]
		case []any:
			i, _ := strconv.Atoi(seg)
			v = c[i]
		}
	}
	return v
}

// valueProbe is one request that carries a value where a keyword of the
// document constrains it.
type valueProbe struct {
	method string
	// path is the request's path; "%s" in it is the value, escaped.
	path string
	// body is the request's body with the value in place; nil when the
	// value is in the path.
	body func(v string) any
	// schema is the pointer of the body's schema (or of the parameter's).
	schema string
	// field is what a refusal must name.
	field string
}

// valueCase tries the values under one pointer of the document: each of
// refused must be refused by the document and by the server (400
// invalid_field naming the field, nothing written); each of taken must be
// taken by both.
type valueCase struct {
	probes         []valueProbe
	refused, taken []string
}

// dateTimes are date-times the document's format refuses: time.Parse
// took the first (a one-digit hour).
var dateTimesRefused = []string{"2026-01-05T9:00:00Z", "2026-01-05 10:00:00Z", "2026-02-30T10:00:00Z", "2026-01-05T10:00:00",
	"2026-01-05T10:00:00+0100", "2026-01-05T22:59:60Z", "10000-01-01T00:00:00Z"}

// TestRequestValuesFollowTheDocument: every value a pattern or a format of
// the document refuses, in every request body and parameter, the server
// refuses too, naming the field (9:00 for 09:00 was taken); and values it
// allows — a lower-case t or z, a leap second — are taken. A pattern or
// format added to the document without a case here fails the test.
func TestRequestValuesFollowTheDocument(t *testing.T) {
	s := mustSpec(t)
	each(t, envOptions{}, func(t *testing.T, e *env) {
		notif := func(field string, extra func(v string) obj) valueProbe {
			return valueProbe{method: "POST", path: "/v1/notifications", schema: "/components/schemas/NotificationRequest", field: field,
				body: func(v string) any {
					b := obj{"recipients": []string{"u_1"}, "title": "Hello"}
					for k, x := range extra(v) {
						b[k] = x
					}
					return b
				}}
		}
		campaign := func(field string, extra func(v string) obj) valueProbe {
			return valueProbe{method: "POST", path: "/v1/campaigns", schema: "/components/schemas/CampaignRequest", field: field,
				body: func(v string) any { return sale(extra(v)) }}
		}
		device := func(field string, extra func(v string) obj) valueProbe {
			return valueProbe{method: "PUT", path: "/v1/recipients/u_1/devices", schema: "/components/schemas/DeviceRequest", field: field,
				body: func(v string) any {
					b := obj{"transport": "fcm", "token": e.token("fcm")}
					for k, x := range extra(v) {
						b[k] = x
					}
					return b
				}}
		}
		c := e.createCampaign(sale(nil))
		n := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello"})
		sub := func(endpoint string) obj {
			return obj{"endpoint": endpoint, "keys": obj{"p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "auth": "BTBZMqHH6r4Tts7J_aSIgg"}}
		}
		cases := map[string]valueCase{
			"/components/schemas/NotificationRequest/properties/scheduledAt": {
				probes:  []valueProbe{notif("scheduledAt", func(v string) obj { return obj{"scheduledAt": v} })},
				refused: dateTimesRefused,
				taken:   []string{"2026-01-05t10:00:00z", "2026-12-31T23:59:60Z", "2027-01-01T00:59:60+01:00", "2026-01-05T10:00:00.123456789Z"},
			},
			"/components/schemas/CampaignSchedule/properties/startAt": {
				probes: []valueProbe{{method: "POST", path: fmt.Sprintf("/v1/campaigns/%d/schedule", c.ID), schema: "/components/schemas/CampaignSchedule",
					field: "startAt", body: func(v string) any { return obj{"startAt": v} }}},
				refused: dateTimesRefused,
				taken:   []string{"2026-01-05t10:00:00z", "2026-12-31T23:59:60Z"},
			},
			"/paths/~1v1~1notifications/get/parameters/3/schema": {
				probes:  []valueProbe{{method: "GET", path: "/v1/notifications?createdFrom=%s", schema: "/paths/~1v1~1notifications/get/parameters/3/schema", field: "createdFrom"}},
				refused: dateTimesRefused,
				taken:   []string{"2026-01-05t10:00:00z", "2026-12-31T23:59:60Z"},
			},
			"/paths/~1v1~1notifications/get/parameters/4/schema": {
				probes:  []valueProbe{{method: "GET", path: "/v1/notifications?createdTo=%s", schema: "/paths/~1v1~1notifications/get/parameters/4/schema", field: "createdTo"}},
				refused: dateTimesRefused,
				taken:   []string{"2026-01-05t10:00:00z", "2026-12-31T23:59:60Z"},
			},
			"/components/parameters/NotificationID/schema": {
				probes:  []valueProbe{{method: "GET", path: "/v1/notifications/%s", schema: "/components/parameters/NotificationID/schema", field: "id"}},
				refused: []string{"0", "-1", "x", "1x"},
				taken:   []string{strconv.FormatInt(n.ID, 10)},
			},
			"/components/parameters/CampaignID/schema": {
				probes:  []valueProbe{{method: "GET", path: "/v1/campaigns/%s", schema: "/components/parameters/CampaignID/schema", field: "id"}},
				refused: []string{"0", "-1", "x"},
				taken:   []string{strconv.FormatInt(c.ID, 10)},
			},
			"/components/schemas/LocalTime/properties/date": {
				probes:  []valueProbe{campaign("localTime.date", func(v string) obj { return obj{"localTime": obj{"date": v, "time": "09:00"}} })},
				refused: []string{"2027-3-28", "2027-03-8", "2027-02-29", "27-03-28", "2027-03-28T09:00:00Z"},
				taken:   []string{"2028-02-29"},
			},
			"/components/schemas/LocalTime/properties/time": {
				probes:  []valueProbe{campaign("localTime.time", func(v string) obj { return obj{"localTime": obj{"date": "2027-03-28", "time": v}} })},
				refused: []string{"9:00", "9:5", "24:00", "29:00", "09:60", "09:00:00", " 9:00"},
				taken:   []string{"00:00", "23:59"},
			},
			"/components/schemas/QuietHours/properties/start": {
				probes: []valueProbe{{method: "PUT", path: "/v1/recipients/u_1/preferences", schema: "/components/schemas/PreferencesRequest", field: "quietHours.start",
					body: func(v string) any { return obj{"quietHours": obj{"start": v, "end": "07:00", "timeZone": "UTC"}} }}},
				refused: []string{"9:00", "24:00", "22:60", "22:00:00"},
				taken:   []string{"22:00", "00:00"},
			},
			"/components/schemas/QuietHours/properties/end": {
				probes: []valueProbe{{method: "PUT", path: "/v1/recipients/u_1/preferences", schema: "/components/schemas/PreferencesRequest", field: "quietHours.end",
					body: func(v string) any { return obj{"quietHours": obj{"start": "22:00", "end": v, "timeZone": "UTC"}} }}},
				refused: []string{"7:00", "24:00", "07:60"},
				taken:   []string{"07:00", "23:59"},
			},
			"/components/schemas/NotificationRequest/properties/link": {
				probes:  []valueProbe{notif("link", func(v string) obj { return obj{"link": v} })},
				refused: []string{"orders/1", "//evil.example/x", "https://evil.example/x", ""},
				taken:   []string{"/", "/orders/1"},
			},
			"/components/schemas/CampaignMessageRequest/properties/link": {
				probes:  []valueProbe{campaign("message.link", func(v string) obj { return obj{"message": obj{"title": "t", "link": v}} })},
				refused: []string{"orders/1", "//evil.example/x", ""},
				taken:   []string{"/sale"},
			},
			"/components/schemas/NotificationRequest/properties/image": {
				probes:  []valueProbe{notif("image", func(v string) obj { return obj{"image": v} })},
				refused: []string{"ftp://x/y.png", "https:///y.png", "/y.png", ""},
				taken:   []string{"https://cdn.example/y.png", "HTTPS://cdn.example/y.png", "http://cdn.example/y.png"},
			},
			"/components/schemas/CampaignMessageRequest/properties/image": {
				probes:  []valueProbe{campaign("message.image", func(v string) obj { return obj{"message": obj{"title": "t", "image": v}} })},
				refused: []string{"ftp://x/y.png", "https:///y.png", ""},
				taken:   []string{"HTTPS://cdn.example/y.png"},
			},
			"/components/schemas/NotificationRequest/anyOf/0/properties/title": {
				probes: []valueProbe{{method: "POST", path: "/v1/notifications", schema: "/components/schemas/NotificationRequest", field: "title",
					body: func(v string) any { return obj{"recipients": []string{"u_1"}, "title": v} }}},
				refused: []string{"", " ", "\t\n"},
				taken:   []string{"x"},
			},
			"/components/schemas/NotificationRequest/anyOf/1/properties/body": {
				probes: []valueProbe{{method: "POST", path: "/v1/notifications", schema: "/components/schemas/NotificationRequest", field: "title",
					body: func(v string) any { return obj{"recipients": []string{"u_1"}, "body": v} }}},
				refused: []string{"", " "},
				taken:   []string{"x"},
			},
			"/components/schemas/CampaignMessageRequest/anyOf/0/properties/title": {
				probes:  []valueProbe{campaign("message.title", func(v string) obj { return obj{"message": obj{"title": v}} })},
				refused: []string{"", " "},
				taken:   []string{"x"},
			},
			"/components/schemas/CampaignMessageRequest/anyOf/1/properties/body": {
				probes:  []valueProbe{campaign("message.title", func(v string) obj { return obj{"message": obj{"body": v}} })},
				refused: []string{"", " "},
				taken:   []string{"x"},
			},
			"/components/schemas/NotificationRequest/properties/data": {
				probes:  []valueProbe{notif("data", func(v string) obj { return obj{"data": obj{v: 1}} })},
				refused: []string{"oncepush_id", "oncepush_x", "collapse_key", "collapse_key2", "From", "MESSAGE_TYPE", "google.x", "Gcm"},
				taken:   []string{"fromage", "x_oncepush_"},
			},
			"/components/schemas/DeviceRequest/properties/tags/items": {
				probes:  []valueProbe{device("tags[0]", func(v string) obj { return obj{"tags": []string{v}} })},
				refused: []string{"", "a b", "é", strings.Repeat("x", 65), "a/b"},
				taken:   []string{"vip", "a.b:c-d_E", strings.Repeat("x", 64)},
			},
			"/components/schemas/DeviceFilter/properties/tags/items": {
				probes:  []valueProbe{campaign("filter.tags[0]", func(v string) obj { return obj{"audience": "devices", "filter": obj{"tags": []string{v}}} })},
				refused: []string{"", "a b", strings.Repeat("x", 65)},
				taken:   []string{"vip"},
			},
			"/components/schemas/WebPushSubscription/properties/endpoint": {
				probes: []valueProbe{
					device("token", func(v string) obj { return obj{"transport": "webpush", "token": sub(v)} }),
					notif("devices[0].token", func(v string) obj {
						return obj{"recipients": nil, "devices": []obj{{"transport": "webpush", "token": sub(v)}}}
					}),
				},
				refused: []string{"http://push.example.net/x", "ftp://push.example.net/x", "push.example.net/x"},
			},
		}

		for _, ptr := range valueKeywords(s.Document()) {
			covered := false
			for p := range cases {
				covered = covered || ptr == p || strings.HasPrefix(ptr, p+"/")
			}
			if !covered {
				t.Errorf("%s holds a pattern or a format that no case of this test tries: add one", ptr)
			}
		}
		for ptr, vc := range cases {
			for _, pr := range vc.probes {
				schema, err := s.Schema(pr.schema)
				if err != nil {
					t.Fatalf("%s: %v", pr.schema, err)
				}
				for _, v := range vc.refused {
					if documentTakes(t, schema, pr, v) {
						t.Errorf("%s: the document takes %q; a refused value must be one it refuses", ptr, v)
						continue
					}
					e.refused(t, badRequest{name: fmt.Sprintf("%s %q", ptr, v), method: pr.method, path: probeRequestPath(pr, v),
						body: probeRequestBody(pr, v), status: http.StatusBadRequest, code: "invalid_field", field: pr.field})
				}
				for _, v := range vc.taken {
					if !documentTakes(t, schema, pr, v) {
						t.Errorf("%s: the document refuses %q; a taken value must be one it takes", ptr, v)
						continue
					}
					if r := e.do(pr.method, probeRequestPath(pr, v), e.admin, probeRequestBody(pr, v)); r.status >= 300 {
						t.Errorf("%s: the document takes %q, the server answers %d: %s", ptr, v, r.status, r.body)
					}
				}
			}
		}
	})
}

func probeRequestPath(pr valueProbe, v string) string {
	if !strings.Contains(pr.path, "%s") {
		return pr.path
	}
	if strings.Contains(pr.path, "?") {
		return fmt.Sprintf(pr.path, url.QueryEscape(v))
	}
	return fmt.Sprintf(pr.path, url.PathEscape(v))
}

func probeRequestBody(pr valueProbe, v string) any {
	if pr.body == nil {
		return nil
	}
	b := pr.body(v)
	if m, ok := b.(obj); ok {
		for k, x := range m {
			if x == nil {
				delete(m, k)
			}
		}
	}
	return b
}

// documentTakes validates the probe's request with the value against its
// schema: the body, or the parameter (an integer parameter as JSON).
func documentTakes(t *testing.T, schema *jsonschema.Schema, pr valueProbe, v string) bool {
	t.Helper()
	var inst any = v
	if pr.body != nil {
		raw, err := json.Marshal(probeRequestBody(pr, v))
		if err != nil {
			t.Fatal(err)
		}
		if inst, err = jsonschema.UnmarshalJSON(bytes.NewReader(raw)); err != nil {
			t.Fatal(err)
		}
	} else if !strings.Contains(pr.path, "?") {
		n, err := jsonschema.UnmarshalJSON(strings.NewReader(v))
		if err != nil {
			return false // not a number at all
		}
		inst = n
	}
	return schema.Validate(inst) == nil
}
