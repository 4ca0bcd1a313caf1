package server_test

import (
	"testing"

	"github.com/oncepush/oncepush"
)

// A NUL character is valid JSON ("\u0000") but no text PostgreSQL can store:
// every stored text field refuses it with a 400 naming the field, on both
// drivers, and nothing is written (PostgreSQL answered 500, SQLite 202).
func TestNULIsRefusedInEveryTextField(t *testing.T) {
	t.Parallel()
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
