package server_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/server"
)

// postConcurrently posts n notifications at once, the body of the i-th
// request being body(i), and returns the replies once all have come back.
func postConcurrently(e *env, n int, body func(i int) obj, header ...string) []*reply {
	e.t.Helper()
	replies := make([]*reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i], errs[i] = e.request("POST", "/v1/notifications", e.admin, body(i), header...)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			e.t.Fatalf("request %d: %v", i, err)
		}
	}
	return replies
}

// postSameConcurrently sends the same request n times at once and returns
// the answers, each of which must be 202.
func postSameConcurrently(e *env, n int, body obj, header ...string) []server.SendAnswer {
	e.t.Helper()
	answers := make([]server.SendAnswer, n)
	for i, r := range postConcurrently(e, n, func(int) obj { return body }, header...) {
		r.want(e.t, http.StatusAccepted).decode(e.t, &answers[i])
	}
	return answers
}

// checkOneNotification checks that concurrent identical requests queued one
// notification: the same id in every answer, duplicate false on exactly one,
// one delivery per recipient in the API and in the ledger, and one submission
// per device after draining.
func checkOneNotification(t *testing.T, e *env, answers []server.SendAnswer, recipients []string) {
	t.Helper()
	first := 0
	for i, a := range answers {
		if a.ID != answers[0].ID || a.Queued != len(recipients) || a.Duplicates != 0 {
			t.Errorf("answer %d is %+v; answer 0 is %+v", i, a, answers[0])
		}
		if !a.Duplicate {
			first++
		}
	}
	if first != 1 {
		t.Errorf("%d answers say duplicate: false, want exactly 1", first)
	}
	if got := e.count("oncepush_message"); got != 1 {
		t.Errorf("the ledger holds %d messages, want 1", got)
	}
	if got := e.count("oncepush_delivery"); got != len(recipients) {
		t.Errorf("the ledger holds %d deliveries, want %d", got, len(recipients))
	}
	id := answers[0].ID
	if n := e.notification(id); n.Counts["pending"] != len(recipients) {
		t.Errorf("counts %v, want %d pending", n.Counts, len(recipients))
	}
	var got []string
	for _, d := range e.deliveries(fmt.Sprintf("/v1/notifications/%d/deliveries", id)) {
		got = append(got, d.Recipient)
	}
	slices.Sort(got)
	if !slices.Equal(got, recipients) {
		t.Errorf("deliveries for %v, want one each for %v", got, recipients)
	}
	e.drain()
	if n := e.submissions(); n != len(recipients) {
		t.Errorf("the providers received %d submissions, want %d (one per device)", n, len(recipients))
	}
	if n := e.notification(id); n.Counts["sent"] != len(recipients) {
		t.Errorf("after delivery: counts %v, want %d sent", n.Counts, len(recipients))
	}
}

func TestConcurrentDuplicatePostsQueueOnce(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		recipients := []string{"u_1", "u_2", "u_3"}
		for _, r := range recipients {
			e.register(r, oncepush.TransportFCM, nil)
		}
		body := obj{"recipients": recipients, "title": "Invoice paid", "dedupeKey": "invoice-7"}
		answers := postSameConcurrently(e, 20, body)
		checkOneNotification(t, e, answers, recipients)

		// Later, the same request again: the first answer, nothing new.
		before := e.rows()
		again := e.send(e.admin, body)
		if again.ID != answers[0].ID || !again.Duplicate {
			t.Errorf("a later repeat answered %+v, want id %d and duplicate: true", again, answers[0].ID)
		}
		e.unchanged(t, before, "a later repeat")
	})
}

func TestIdempotencyKeyHeader(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		recipients := []string{"u_1", "u_2"}
		for _, r := range recipients {
			e.register(r, oncepush.TransportAPNs, nil)
		}
		body := obj{"recipients": recipients, "title": "Booking confirmed"}
		answers := postSameConcurrently(e, 20, body, "Idempotency-Key", "booking-42")
		checkOneNotification(t, e, answers, recipients)

		// The header is an alias of dedupeKey: the body field replays it too,
		// and so does the same key in both places.
		withField := obj{"recipients": recipients, "title": "Booking confirmed", "dedupeKey": "booking-42"}
		before := e.rows()
		for _, header := range [][]string{nil, {"Idempotency-Key", "booking-42"}} {
			a := e.send(e.admin, withField, header...)
			if a.ID != answers[0].ID || !a.Duplicate {
				t.Errorf("dedupeKey in the body (header %v) answered %+v, want a replay of %d", header, a, answers[0].ID)
			}
		}
		// Whitespace and field order do not make another request.
		a := e.send(e.admin, `{ "title": "Booking confirmed",  "recipients": ["u_1", "u_2"] }`, "Idempotency-Key", "booking-42")
		if a.ID != answers[0].ID || !a.Duplicate {
			t.Errorf("the same body, spelled differently, answered %+v", a)
		}
		e.unchanged(t, before, "replays")
		if n := e.submissions(); n != len(recipients) {
			t.Errorf("the providers received %d submissions, want %d", n, len(recipients))
		}
	})
}

func TestIdempotencyConflict(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		first := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello", "dedupeKey": "k-1"})
		before := e.rows()
		for _, tc := range []struct {
			name   string
			body   obj
			header []string
		}{
			{"another title", obj{"recipients": []string{"u_1"}, "title": "Hello again", "dedupeKey": "k-1"}, nil},
			{"another recipient", obj{"recipients": []string{"u_2"}, "title": "Hello", "dedupeKey": "k-1"}, nil},
			{"one more field", obj{"recipients": []string{"u_1"}, "title": "Hello", "dedupeKey": "k-1", "category": "news"}, nil},
			{"key in the header", obj{"recipients": []string{"u_1"}, "title": "Hello again"}, []string{"Idempotency-Key", "k-1"}},
		} {
			r := e.do("POST", "/v1/notifications", e.admin, tc.body, tc.header...)
			if r.status != http.StatusConflict {
				t.Errorf("%s: status %d, want 409: %s", tc.name, r.status, r.body)
				continue
			}
			r.wantProblem(t, http.StatusConflict, "idempotency_conflict", "dedupeKey")
		}
		// Two different keys at once is a mistake of the client's.
		r := e.do("POST", "/v1/notifications", e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello", "dedupeKey": "k-1"}, "Idempotency-Key", "k-2")
		r.wantProblem(t, http.StatusBadRequest, "invalid_field", "dedupeKey")
		e.unchanged(t, before, "refused requests")

		// The original still replays.
		if a := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello", "dedupeKey": "k-1"}); a.ID != first.ID || !a.Duplicate {
			t.Errorf("replay after conflicts answered %+v, want %+v with duplicate: true", a, first)
		}
	})
}

// TestIdempotencyKeyHeldWhileScheduled: the record of a dedupeKey lives as
// long as the key itself. A notification scheduled past the retention period
// holds its key while it waits, so cleanup in between must leave a different
// body refused and the same body replayed; once the delivery is sent and its
// retention has passed, key and record are free together.
func TestIdempotencyKeyHeldWhileScheduled(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		at := epoch.Add(8 * 24 * time.Hour)
		body := obj{"recipients": []string{"u_1"}, "title": "Renewal due", "dedupeKey": "renewal-9",
			"scheduledAt": at.Format(time.RFC3339)}
		other := obj{"recipients": []string{"u_1"}, "title": "Renewal overdue", "dedupeKey": "renewal-9"}
		first := e.send(e.admin, body)

		e.clock.Advance(oncepush.RetentionDefault + time.Hour)
		e.cleanup()
		e.do("POST", "/v1/notifications", e.admin, other).wantProblem(t, http.StatusConflict, "idempotency_conflict", "dedupeKey")
		if a := e.send(e.admin, body); a.ID != first.ID || !a.Duplicate {
			t.Errorf("the original after cleanup answered %+v, want a replay of %+v", a, first)
		}

		e.clock.Set(at)
		e.drain()
		if n := e.submissions(); n != 1 {
			t.Fatalf("the providers received %d submissions, want 1", n)
		}
		e.clock.Advance(oncepush.RetentionDefault - time.Hour)
		e.cleanup()
		e.do("POST", "/v1/notifications", e.admin, other).wantProblem(t, http.StatusConflict, "idempotency_conflict", "dedupeKey")

		e.clock.Advance(2 * time.Hour)
		if st := e.cleanup(); st.Deliveries != 1 || st.Idempotency != 1 {
			t.Errorf("cleanup past retention: %+v, want the delivery and its record deleted", st)
		}
		if a := e.send(e.admin, other); a.Duplicate || a.Queued != 1 {
			t.Errorf("a new body once the key is free answered %+v, want it queued", a)
		}
	})
}

func TestRecipientsListedTwiceAreDuplicates(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		a := e.send(e.admin, obj{"recipients": []string{"u_1", "u_2", "u_1"}, "body": "Two of you"})
		if a.Queued != 2 || a.Duplicates != 1 || a.Duplicate {
			t.Errorf("answer %+v, want 2 queued and 1 duplicate", a)
		}
		if got := e.count("oncepush_delivery"); got != 2 {
			t.Errorf("%d deliveries, want 2", got)
		}
	})
}

func TestConcurrentConflictingBodies(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		bodies := []obj{
			{"recipients": []string{"u_1", "u_2"}, "title": "Version A", "dedupeKey": "race"},
			{"recipients": []string{"u_1", "u_3"}, "title": "Version B", "dedupeKey": "race"},
		}
		const n = 20
		replies := postConcurrently(e, n, func(i int) obj { return bodies[i%2] })

		// One body won the key: its requests answer 202 with one id, the
		// other body's requests 409, and only the winner's deliveries exist.
		won := map[int]int{}
		var ids []int64
		fresh := 0
		for i, r := range replies {
			switch r.status {
			case http.StatusAccepted:
				var a server.SendAnswer
				r.decode(t, &a)
				won[i%2]++
				ids = append(ids, a.ID)
				if !a.Duplicate {
					fresh++
				}
			case http.StatusConflict:
				r.wantProblem(t, http.StatusConflict, "idempotency_conflict", "dedupeKey")
			default:
				t.Errorf("request %d: status %d: %s", i, r.status, r.body)
			}
		}
		if len(won) != 1 || len(ids) != n/2 || fresh != 1 || len(slices.Compact(ids)) != 1 {
			t.Fatalf("accepted per body %v, ids %v, %d not duplicates; want one body accepted %d times under one id, once fresh", won, ids, fresh, n/2)
		}
		if m, d := e.count("oncepush_message"), e.count("oncepush_delivery"); m != 1 || d != 2 {
			t.Errorf("the ledger holds %d messages and %d deliveries, want 1 and 2", m, d)
		}
	})
}

// A request is the notification it would write, defaults applied
// (Client.RequestHash): a replay that spells a default out, sends empty data,
// lists the recipients in another order (or one twice) or writes the same
// instant in another offset is the same request and replays; one that
// changes what would be written is refused.
func TestReplayIsTheSameNotificationDefaultsApplied(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.register("u_1", oncepush.TransportFCM, nil)
		e.register("u_2", oncepush.TransportFCM, nil)
		base := func(extra obj) obj {
			b := obj{"recipients": []string{"u_1", "u_2"}, "title": "Hello", "dedupeKey": "same", "scheduledAt": "2026-01-05T09:30:00Z"}
			maps.Copy(b, extra)
			return b
		}
		first := e.send(e.admin, base(nil))
		before := e.rows()
		for name, extra := range map[string]obj{
			"the default ambiguity":     {"ambiguity": "resend"},
			"empty data":                {"data": obj{}},
			"null data":                 {"data": nil},
			"the default lifetime":      {"ttlSeconds": 86400},
			"the recipients reversed":   {"recipients": []string{"u_2", "u_1"}},
			"a recipient twice":         {"recipients": []string{"u_1", "u_2", "u_1"}},
			"the instant in +01:00":     {"scheduledAt": "2026-01-05T10:30:00+01:00"},
			"ttlSeconds as 86400.0":     {"ttlSeconds": json.Number("86400.0")},
			"every default spelled out": {"ambiguity": "resend", "ttlSeconds": 86400, "data": obj{}},
		} {
			if a := e.send(e.admin, base(extra)); a.ID != first.ID || !a.Duplicate {
				t.Errorf("%s: answered %+v, want the first answer (%d) replayed", name, a, first.ID)
			}
		}
		for name, extra := range map[string]obj{
			"another policy":   {"ambiguity": "at-most-once"},
			"another lifetime": {"ttlSeconds": 3600},
			"some data":        {"data": obj{"x": "1"}},
			"another instant":  {"scheduledAt": "2026-01-05T09:31:00Z"},
			"fewer recipients": {"recipients": []string{"u_1"}},
		} {
			if r := e.do("POST", "/v1/notifications", e.admin, base(extra)); r.status != http.StatusConflict {
				t.Errorf("%s: status %d, want 409: %s", name, r.status, r.body)
			}
		}
		e.unchanged(t, before, "replays and refused requests")
	})
}
