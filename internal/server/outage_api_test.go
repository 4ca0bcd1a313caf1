package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/internal/server"
)

// validRequests are requests every operation that needs a key would answer
// 2xx to, so that what they meet is the database, not validation.
func validRequests(e *env, id int64) map[string]struct {
	path string
	body any
} {
	tok := e.token(oncepush.TransportFCM)
	// A device of its own for the lookup, which DELETE /v1/devices leaves.
	kept := e.token(oncepush.TransportFCM)
	e.putDevice("u_1", obj{"transport": "fcm", "token": kept})
	// Campaigns of their own for the operations that change their status,
	// in whichever order the requests come.
	campaign := func() string {
		return "/v1/campaigns/" + itoa(e.createCampaign(obj{"message": obj{"title": "Sale"}, "audience": "recipients"}).ID)
	}
	draft, toStart, toCancel, interrupted := campaign(), campaign(), campaign(), campaign()
	answerOf[server.PageAnswer](e, "PUT", interrupted+"/recipients/1", obj{"recipients": []string{"u_1"}})
	answerOf[server.CampaignView](e, "POST", interrupted+"/start", nil)
	e.interrupt()
	return map[string]struct {
		path string
		body any
	}{
		"POST /v1/notifications":                     {"/v1/notifications", obj{"recipients": []string{"u_1"}, "title": "Hello"}},
		"GET /v1/notifications":                      {"/v1/notifications?status=pending&limit=10", nil},
		"GET /v1/notifications/{id}":                 {fmt.Sprintf("/v1/notifications/%d", id), nil},
		"GET /v1/notifications/{id}/deliveries":      {fmt.Sprintf("/v1/notifications/%d/deliveries", id), nil},
		"POST /v1/notifications/{id}/cancel":         {fmt.Sprintf("/v1/notifications/%d/cancel", id), nil},
		"GET /v1/recipients/{recipient}/deliveries":  {"/v1/recipients/u_1/deliveries", nil},
		"PUT /v1/recipients/{recipient}/devices":     {"/v1/recipients/u_1/devices", obj{"transport": "fcm", "token": tok}},
		"GET /v1/recipients/{recipient}/devices":     {"/v1/recipients/u_1/devices", nil},
		"DELETE /v1/devices":                         {"/v1/devices", obj{"transport": "fcm", "token": tok}},
		"POST /v1/devices/lookup":                    {"/v1/devices/lookup", obj{"transport": "fcm", "token": kept}},
		"GET /v1/activity":                           {"/v1/activity", nil},
		"POST /v1/sessions/{session}/revoke":         {"/v1/sessions/s_1/revoke", nil},
		"DELETE /v1/recipients/{recipient}":          {"/v1/recipients/u_2", nil},
		"GET /v1/recipients/{recipient}/preferences": {"/v1/recipients/u_1/preferences", nil},
		"PUT /v1/recipients/{recipient}/preferences": {"/v1/recipients/u_1/preferences", obj{"optOut": []string{"ads"}}},
		"POST /v1/campaigns":                         {"/v1/campaigns", obj{"message": obj{"title": "Sale"}, "audience": "devices"}},
		"GET /v1/campaigns":                          {"/v1/campaigns?status=draft&limit=10", nil},
		"GET /v1/campaigns/{id}":                     {draft, nil},
		"PUT /v1/campaigns/{id}":                     {draft, obj{"message": obj{"title": "Sale, now"}, "audience": "recipients"}},
		"PUT /v1/campaigns/{id}/recipients/{page}":   {draft + "/recipients/1", obj{"recipients": []string{"u_1"}}},
		"POST /v1/campaigns/{id}/schedule":           {draft + "/schedule", obj{"startAt": "2026-01-06T09:00:00Z"}},
		"POST /v1/campaigns/{id}/start":              {toStart + "/start", nil},
		"POST /v1/campaigns/{id}/cancel":             {toCancel + "/cancel", nil},
		"POST /v1/campaigns/{id}/resume":             {interrupted + "/resume", nil},
	}
}

// While the database cannot be reached — PostgreSQL restarting (backends
// terminated with 57P01, new connections refused with 57P03), a closed SQLite
// handle — every route answers 503 unavailable with Retry-After, never 500,
// with a key the server has already checked and keeps trusting for the
// whole test (so the handlers themselves meet the database, not the key's
// lookup). On PostgreSQL the first requests meet the connections the
// restart killed, every one of them (asserted), and the later ones a
// server that refuses new ones. After the restart, the same requests
// succeed. Every unexpected answer is reported with what the server logged
// while it made it: a 500's cause is in the log, not in the answer.
func TestDatabaseOutageAnswers503OnEveryRoute(t *testing.T) {
	each(t, envOptions{keyCacheTTL: time.Hour}, func(t *testing.T, e *env) {
		id := e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Exists"}).ID
		reqs := validRequests(e, id)
		ops := mustSpec(t).Operations()
		for _, op := range ops {
			if _, ok := reqs[op.Method+" "+op.Path]; op.Secured && !ok {
				t.Fatalf("no valid request for %s %s", op.Method, op.Path)
			}
		}
		e.do("GET", "/v1/recipients/u_1/devices", e.admin, nil).want(t, http.StatusOK) // the key is cached

		e.outage()
		for pass := range 2 {
			for _, op := range ops {
				rq, ok := reqs[op.Method+" "+op.Path]
				if !ok {
					continue
				}
				r, logged := e.doLogged(op.Method, rq.path, e.admin, rq.body)
				if r.status != http.StatusServiceUnavailable {
					t.Errorf("pass %d: %s %s: status %d, want 503: %s\nthe server logged:\n%s", pass, op.Method, rq.path, r.status, r.body, logged)
					continue
				}
				r.wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
				if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra <= 0 {
					t.Errorf("%s %s: Retry-After %q, want a number of seconds", op.Method, rq.path, r.header.Get("Retry-After"))
				}
			}
		}
		if e.outageConns != nil {
			if killed, met := e.outageConns(); killed == 0 || int(met) < killed {
				t.Errorf("the restart killed %d of the pool's connections and statements met %d of them: the requests did not meet what a restart leaves behind", killed, met)
			}
		}
		r := e.do("GET", "/readyz", "", nil)
		r.wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
		if r.header.Get("Retry-After") == "" {
			t.Error("/readyz: 503 without Retry-After")
		}
		e.do("GET", "/healthz", "", nil).want(t, http.StatusOK)

		if e.restore == nil {
			return // a closed SQLite handle does not come back
		}
		e.restore()
		for _, op := range ops {
			if rq, ok := reqs[op.Method+" "+op.Path]; ok {
				if r, logged := e.doLogged(op.Method, rq.path, e.admin, rq.body); r.status >= 300 {
					t.Errorf("after the restart: %s %s: status %d: %s\nthe server logged:\n%s", op.Method, rq.path, r.status, r.body, logged)
				}
			}
		}
	})
}

// A SQLite write that waits past the busy timeout for another process's
// write lock answers 503 (retry later), not 500; once the lock is gone the
// same request succeeds.
func TestSQLiteBusyAnswers503(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", envOptions{sqliteBusyTimeout: 50 * time.Millisecond})
	other, err := sql.Open("sqlite", sqlite.DSN(e.sqlitePath, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil { // another writer holds the lock
		t.Fatal(err)
	}
	body := obj{"recipients": []string{"u_1"}, "title": "Hello"}
	r := e.do("POST", "/v1/notifications", e.admin, body)
	r.wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
	if !strings.Contains(string(e.logs.Bytes()), "busy") && !strings.Contains(string(e.logs.Bytes()), "locked") {
		t.Errorf("the log does not say the database was busy:\n%s", e.logs.Bytes())
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	e.do("POST", "/v1/notifications", e.admin, body).want(t, http.StatusAccepted)
}
