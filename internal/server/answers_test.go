package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
)

// What every answer of the API is, whatever it answers: never sniffed into
// another type, markup in stored text never written raw into JSON, and
// never a 200 whose body failed to encode.

// TestEveryAnswerIsNosniff: every answer — an operation's, a refusal, a
// 404, a 405, /metrics, /openapi.json, /healthz, the operations listener's
// — says X-Content-Type-Options: nosniff, so no browser reads a JSON
// answer holding someone's text as HTML. (env.checkAnswer asks the same of
// every answer of every test of the package.)
func TestEveryAnswerIsNosniff(t *testing.T) {
	s := mustSpec(t)
	each(t, envOptions{}, func(t *testing.T, e *env) {
		var answers []*reply
		for _, op := range s.Operations() {
			// Without a key (401 for a secured one), and with one.
			answers = append(answers, e.do(op.Method, probePath(op.Path), "", probeBody(op)))
			answers = append(answers, e.do(op.Method, probePath(op.Path), e.admin, probeBody(op)))
		}
		answers = append(answers,
			e.do("GET", "/nothing/here", "", nil),
			e.do("PATCH", "/v1/devices", "", nil),
			e.do("GET", "/v1/recipients/%2F/devices", e.admin, nil),
			e.do("GET", "/v1/recipients//devices", e.admin, nil),
			e.do("POST", "/v1/notifications", e.admin, "{"),
		)
		for _, r := range answers {
			if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("a %d answer (%s) has X-Content-Type-Options %q, want nosniff", r.status, r.header.Get("Content-Type"), got)
			}
		}
		for _, path := range []string{"/metrics", "/healthz", "/readyz", "/nothing", "/v1/notifications"} {
			resp, err := http.Get(e.opsURL + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("the operations listener's %s (%d) has X-Content-Type-Options %q, want nosniff", path, resp.StatusCode, got)
			}
		}
	})
}

// TestStoredMarkupIsEscapedInJSON: markup a sender stored (a title, a
// body, data, a key) is written into every JSON answer with <, > and &
// escaped, so that an answer read as HTML runs nothing; decoded, it is the
// text as sent.
func TestStoredMarkupIsEscapedInJSON(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		const markup = `<img src=x onerror=alert(1)>&amp;`
		e.register("u_1", oncepush.TransportFCM, nil)
		a := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": markup, "body": markup,
			"data": obj{"html": markup, markup: 1}, "category": "a<b", "dedupeKey": markup})
		c := e.createCampaign(sale(obj{"name": markup}))
		for _, path := range []string{
			fmt.Sprintf("/v1/notifications/%d", a.ID),
			"/v1/notifications",
			fmt.Sprintf("/v1/notifications/%d/deliveries", a.ID),
			"/v1/recipients/u_1/deliveries",
			fmt.Sprintf("/v1/campaigns/%d", c.ID),
			"/v1/campaigns",
		} {
			r := e.do("GET", path, e.admin, nil).want(t, http.StatusOK)
			if i := bytes.IndexAny(r.body, "<>&"); i >= 0 {
				t.Errorf("GET %s writes %q raw: …%s…", path, r.body[i], r.body[max(0, i-20):min(len(r.body), i+20)])
			}
		}
		if n := e.notification(a.ID); n.Title != markup || n.Body != markup || n.Category != "a<b" {
			t.Errorf("decoded, the notification is %q / %q / %q; want the text as sent", n.Title, n.Body, n.Category)
		}
		r := e.do("POST", "/v1/notifications", e.admin, obj{"recipients": []string{"u_1"}, "title": "t", "link": "<x>"})
		r.wantProblem(t, http.StatusBadRequest, "invalid_field", "link")
		if bytes.ContainsAny(r.body, "<>") {
			t.Errorf("a refusal writes markup raw: %s", r.body)
		}
	})
}

// TestStoredTimeTheAPICannotWriteIs500: a row written before times were
// bounded (or by hand) with an expiry past year 9999 makes its reads
// answer 500 problem+json, logged with the cause — never 200 with an
// empty body — and every other read still answers.
func TestStoredTimeTheAPICannotWriteIs500(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		a := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "t"})
		other := e.send(e.admin, obj{"recipients": []string{"u_2"}, "title": "t"})
		far := "'10000-01-02T00:00:00Z'"
		if e.db == "sqlite" {
			far = fmt.Sprint(time.Date(10000, 1, 2, 0, 0, 0, 0, time.UTC).UnixMicro())
		}
		e.text(fmt.Sprintf("UPDATE oncepush_message SET expires_at = %s WHERE id = %d RETURNING 'ok'", far, a.ID))
		e.logs.Reset()
		for _, path := range []string{fmt.Sprintf("/v1/notifications/%d", a.ID), "/v1/notifications"} {
			// Not through env's client, which fails a test at any 500.
			req, _ := http.NewRequestWithContext(t.Context(), "GET", e.url+path, nil)
			req.Header.Set("Authorization", "Bearer "+e.admin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			r := &reply{status: resp.StatusCode, header: resp.Header, body: body}
			r.wantProblem(t, http.StatusInternalServerError, "internal", "")
			if !strings.Contains(e.logs.String(), "year outside of range") {
				t.Errorf("GET %s: the log does not say why it failed:\n%s", path, e.logs.String())
			}
			e.logs.Reset()
		}
		e.notification(other.ID)
	})
}
