package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/oncepush/oncepush"
)

// Numbers in data travel with the digits the caller wrote: 2^53 + 1 is not a
// float64, and neither is an id of 20 digits.
func TestDataNumbersKeepTheirDigits(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
