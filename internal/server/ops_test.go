package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/api"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/server"
)

func TestHealthAndReadiness(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		var h struct{ Status, Version string }
		e.do("GET", "/healthz", "", nil).want(t, http.StatusOK).decode(t, &h)
		if h.Status != "ok" || h.Version != "test" {
			t.Errorf("/healthz answered %+v", h)
		}
		var r struct{ Status string }
		e.do("GET", "/readyz", "", nil).want(t, http.StatusOK).decode(t, &r)
		if r.Status != "ready" {
			t.Errorf("/readyz answered %+v", r)
		}
	})
}

func TestNotReadyBeforeMigration(t *testing.T) {
	each(t, envOptions{unmigrated: true}, func(t *testing.T, e *env) {
		e.do("GET", "/readyz", "", nil).wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
		e.do("GET", "/healthz", "", nil).want(t, http.StatusOK)
		// Without the key table no key can be checked: unavailable, not unauthorized.
		e.do("GET", "/v1/recipients/u_1/devices", e.unknownKey(), nil).wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
	})
}

// The server's own schema is migrated apart from the engine's: a database
// with the engine's tables alone is not ready either.
func TestNotReadyBeforeServerMigration(t *testing.T) {
	each(t, envOptions{engineOnly: true}, func(t *testing.T, e *env) {
		p := e.do("GET", "/readyz", "", nil).wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
		if !strings.Contains(p.Detail, "not migrated") {
			t.Errorf("/readyz detail %q, want it to say the database is not migrated", p.Detail)
		}
		e.do("GET", "/v1/recipients/u_1/devices", e.unknownKey(), nil).wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
	})
}

func TestDatabaseUnreachable(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		fresh := e.key(apikey.ScopeAdmin) // never used: not in the server's key cache
		e.closeDB()
		e.do("GET", "/readyz", "", nil).wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
		e.do("GET", "/healthz", "", nil).want(t, http.StatusOK)
		// Every operation that needs a key answers 503: the key cannot be checked.
		for _, op := range mustSpec(t).Operations() {
			if !op.Secured {
				continue
			}
			r := e.do(op.Method, probePath(op.Path), fresh, probeBody(op))
			if r.status != http.StatusServiceUnavailable {
				t.Errorf("%s %s: status %d, want 503: %s", op.Method, op.Path, r.status, r.body)
				continue
			}
			r.wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
		}
	})
}

// /readyz needs no key: its answer must not hand anyone the database's
// user, name, address or file. The cause goes to the log.
func TestReadinessKeepsTheDatabaseErrorInTheLog(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.outage()
		// The pool's connections die first (57P01), then new ones are
		// refused (57P03, whose text names the user, database and address).
		for range outagePoolConns + 2 {
			r := e.do("GET", "/readyz", "", nil)
			p := r.wantProblem(t, http.StatusServiceUnavailable, "unavailable", "")
			if p.Detail != "the database cannot be reached" {
				t.Errorf("/readyz detail %q, want the generic one", p.Detail)
			}
			for _, w := range e.dbWords {
				if w != "" && bytes.Contains(r.body, []byte(w)) {
					t.Errorf("/readyz tells %q: %s", w, r.body)
				}
			}
		}
		cause := map[string]string{"sqlite": "database is closed", "postgres": "57P03"}[e.db]
		if !bytes.Contains(e.logs.Bytes(), []byte(cause)) {
			t.Errorf("the log does not hold the cause (%s):\n%s", cause, e.logs.Bytes())
		}
	})
}

func TestOpenAPIDocumentIsServed(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		r := e.do("GET", "/openapi.json", "", nil).want(t, http.StatusOK)
		if !bytes.Equal(r.body, api.OpenAPI) {
			t.Error("/openapi.json is not the checked-in document")
		}
	})
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		for _, path := range []string{"/v1/nope", "/v1", "/v2/notifications", "/v1/notifications/1/deliveries/2", "/v1/devices/x"} {
			e.do("GET", path, e.admin, nil).wantProblem(t, http.StatusNotFound, "not_found", "")
		}
		for _, tc := range []struct{ method, path, allow string }{
			{"PUT", "/v1/notifications", "GET, POST"},
			{"DELETE", "/v1/notifications", "GET, POST"},
			{"POST", "/v1/notifications/1", "GET"},
			{"PUT", "/v1/notifications/1/deliveries", "GET"},
			{"POST", "/v1/recipients/u_1/deliveries", "GET"},
			{"PATCH", "/v1/recipients/u_1/devices", "GET, PUT"},
			{"DELETE", "/v1/recipients/u_1/devices", "GET, PUT"},
			{"GET", "/v1/devices", "DELETE"},
			{"GET", "/v1/sessions/s_1/revoke", "POST"},
			{"GET", "/v1/recipients/u_1", "DELETE"},
			{"POST", "/v1/recipients/u_1/preferences", "GET, PUT"},
		} {
			before := e.rows()
			r := e.do(tc.method, tc.path, e.admin, nil)
			r.wantProblem(t, http.StatusMethodNotAllowed, "method_not_allowed", "")
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
			}
			e.unchanged(t, before, tc.method+" "+tc.path)
		}
	})
}

func TestWrongMethodOnOperationsEndpoints(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
			r := e.do("POST", path, "", nil)
			r.wantProblem(t, http.StatusMethodNotAllowed, "method_not_allowed", "")
			if got := r.header.Get("Allow"); !strings.Contains(got, "GET") {
				t.Errorf("POST %s: Allow %q", path, got)
			}
		}
	})
}

// metricValues reads the samples of the API's /metrics.
func metricValues(t *testing.T, e *env) map[string]float64 {
	t.Helper()
	return parseMetrics(t, e.do("GET", "/metrics", "", nil))
}

// parseMetrics reads the samples of a Prometheus text exposition, by name
// with labels.
func parseMetrics(t *testing.T, r *reply) map[string]float64 {
	t.Helper()
	r.want(t, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("/metrics Content-Type %q", ct)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		// Label values may hold spaces ("POST /v1/notifications"); the value
		// is the last field.
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name, value := line[:i], line[i+1:]
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[name] = v
	}
	return out
}

func TestMetricsMoveAfterASend(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		const queued, dedup = "oncepush_deliveries_queued_total", "oncepush_dedup_hits_total"
		const accepted = `oncepush_device_attempts_total{outcome="accepted",transport="fcm"}`
		before := metricValues(t, e)
		for _, name := range []string{queued, dedup} {
			if _, ok := before[name]; !ok {
				t.Fatalf("/metrics has no %s", name)
			}
		}
		e.register("u_1", oncepush.TransportFCM, nil)
		e.send(e.admin, obj{"recipients": []string{"u_1", "u_2", "u_1"}, "title": "Hello"})
		e.drain()

		after := metricValues(t, e)
		if d := after[queued] - before[queued]; d != 2 {
			t.Errorf("%s moved by %v, want 2", queued, d)
		}
		if d := after[dedup] - before[dedup]; d != 1 {
			t.Errorf("%s moved by %v, want 1", dedup, d)
		}
		if after[accepted] != 1 {
			t.Errorf("%s = %v, want 1", accepted, after[accepted])
		}
		var names []string
		for n := range after {
			names = append(names, n)
		}
		if !slices.ContainsFunc(names, func(n string) bool {
			return strings.HasPrefix(n, "oncepush_http_requests_total{") && strings.Contains(n, `route="POST /v1/notifications"`)
		}) {
			t.Error("/metrics counts no POST /v1/notifications request")
		}
	})
}

// /metrics needs no key, so a scrape must not be a way to make the database
// work: it serves what the process last read. With the database gone, a
// scrape still answers with the last backlog read, and no read was attempted
// (none failed).
func TestScrapeDoesNotQueryTheDatabase(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		const (
			backlog = "oncepush_due_backlog"
			oldest  = "oncepush_due_oldest_age_seconds"
			readAt  = "oncepush_backlog_read_timestamp_seconds"
			errs    = "oncepush_backlog_read_errors_total"
		)
		e.send(e.admin, obj{"recipients": []string{"u_1", "u_2", "u_3"}, "title": "Hello"})
		if got := metricValues(t, e)[backlog]; got != 0 {
			t.Errorf("before any read, %s = %v: a scrape read the database", backlog, got)
		}
		e.clock.Advance(30 * time.Second)
		e.refreshBacklog()
		read := metricValues(t, e)
		if read[backlog] != 3 || read[oldest] != 30 || read[readAt] != float64(e.clock.Now().Unix()) {
			t.Errorf("after a read: %s %v, %s %v, %s %v; want 3, 30 and the clock's now", backlog, read[backlog], oldest, read[oldest], readAt, read[readAt])
		}
		e.send(e.admin, obj{"recipients": []string{"u_4"}, "title": "Hello"})
		e.outage()
		for range 3 {
			now := metricValues(t, e)
			if now[errs] != read[errs] || now[backlog] != 3 {
				t.Fatalf("%s %v (was %v), %s %v (was 3): a scrape read the database", errs, now[errs], read[errs], backlog, now[backlog])
			}
		}
	})
}

// However large the backlog, a read counts at most the cap, and says so.
func TestBacklogCountIsCapped(t *testing.T) {
	each(t, envOptions{backlogMax: 2}, func(t *testing.T, e *env) {
		e.send(e.admin, obj{"recipients": []string{"u_1", "u_2", "u_3"}, "title": "Hello"})
		e.refreshBacklog()
		m := metricValues(t, e)
		if m["oncepush_due_backlog"] != 2 || m["oncepush_due_backlog_cap"] != 2 {
			t.Errorf("3 due, cap 2: oncepush_due_backlog %v, oncepush_due_backlog_cap %v; want 2 and 2",
				m["oncepush_due_backlog"], m["oncepush_due_backlog_cap"])
		}
	})
}

// Backpressure: once the oldest due delivery, as the last backlog read found
// it, has waited longer than the bound, a send for now is refused with 429
// overloaded and Retry-After and writes nothing; a send scheduled further
// ahead than the bound is still taken; once the workers catch up (the next
// read), sends are taken again.
func TestBackpressureRefusesSendsWhileTheBacklogIsTooOld(t *testing.T) {
	each(t, envOptions{maxBacklogAge: time.Minute}, func(t *testing.T, e *env) {
		hello := obj{"recipients": []string{"u_1"}, "title": "Hello"}
		e.send(e.admin, hello)
		e.clock.Advance(61 * time.Second)
		e.send(e.admin, hello) // the read is older than the backlog's age: taken
		e.refreshBacklog()

		before := e.rows()
		r := e.do("POST", "/v1/notifications", e.admin, hello)
		p := r.wantProblem(t, http.StatusTooManyRequests, server.CodeOverloaded, "")
		if got := r.header.Get("Retry-After"); got != "6" {
			t.Errorf("Retry-After %q; want 6 (the reads' interval: a tenth of the one-minute bound)", got)
		}
		if !strings.Contains(p.Detail, "1m1s") || !strings.Contains(p.Detail, "http.maxBacklogAge") {
			t.Errorf("detail %q: want the oldest due age and the setting named", p.Detail)
		}
		e.unchanged(t, before, "a send refused by backpressure")

		later := e.clock.Now().Add(2 * time.Minute).Format(time.RFC3339)
		e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Later", "scheduledAt": later})
		soon := e.clock.Now().Add(30 * time.Second).Format(time.RFC3339)
		e.do("POST", "/v1/notifications", e.admin, obj{"recipients": []string{"u_1"}, "title": "Soon", "scheduledAt": soon}).
			wantProblem(t, http.StatusTooManyRequests, server.CodeOverloaded, "")

		e.drain()
		e.refreshBacklog()
		e.send(e.admin, hello)
	})
}

// Without a bound, however old the backlog, sends are taken.
func TestNoBackpressureWithoutABound(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello"})
		e.clock.Advance(24 * time.Hour)
		e.refreshBacklog()
		e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello"})
	})
}

// With SeparateMetrics, /metrics is served on the operations listener only:
// the API's listener answers 404 there.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	each(t, envOptions{separateMetrics: true}, func(t *testing.T, e *env) {
		e.do("GET", "/metrics", "", nil).wantProblem(t, http.StatusNotFound, "not_found", "")
		e.do("GET", "/healthz", "", nil).want(t, http.StatusOK)
		e.send(e.admin, obj{"recipients": []string{"u_1"}, "title": "Hello"})

		get := func(path string) (int, string) {
			t.Helper()
			resp, err := http.Get(e.opsURL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		status, body := get("/metrics")
		if status != http.StatusOK || !strings.Contains(body, `oncepush_http_requests_total{code="202",route="POST /v1/notifications"} 1`) {
			t.Errorf("operations /metrics: %d, and it does not count the API's request:\n%s", status, body)
		}
		for _, path := range []string{"/healthz", "/readyz"} {
			if status, body := get(path); status != http.StatusOK {
				t.Errorf("operations %s: %d %s", path, status, body)
			}
		}
		if status, _ := get("/v1/recipients/u_1/devices"); status != http.StatusNotFound {
			t.Errorf("operations listener serves the API: %d", status)
		}
		resp, err := http.Post(e.opsURL+"/metrics", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" {
			t.Errorf("POST /metrics on the operations listener: %d, Allow %q; want 405 and GET", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
}

// With the access log on, every request is one info line naming its route
// pattern, status, duration and the key's id; never the key, never the raw
// path (a recipient id). Off, there is none.
func TestAccessLog(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("on=%v", on), func(t *testing.T) {
			each(t, envOptions{accessLog: on}, func(t *testing.T, e *env) {
				e.register("u_private_42", oncepush.TransportFCM, nil)
				e.send(e.admin, obj{"recipients": []string{"u_private_42"}, "title": "Hello"})
				e.do("GET", "/v1/nowhere", e.admin, nil).want(t, http.StatusNotFound)
				e.do("GET", "/healthz", "", nil).want(t, http.StatusOK)
				var lines []map[string]any
				for _, l := range e.logs.Records(t) {
					if l["msg"] == "http request" {
						lines = append(lines, l)
					}
				}
				if !on {
					if len(lines) != 0 {
						t.Fatalf("access log off, yet %d lines: %v", len(lines), lines)
					}
					return
				}
				keyID := apikey.Key(e.admin).ID()
				want := []struct {
					route  string
					status float64
					key    string
				}{
					{"PUT /v1/recipients/{recipient}/devices", 200, keyID},
					{"POST /v1/notifications", 202, keyID},
					{"unmatched", 404, ""},
					{"GET /healthz", 200, ""},
				}
				if len(lines) != len(want) {
					t.Fatalf("%d access lines, want %d: %v", len(lines), len(want), lines)
				}
				for i, w := range want {
					l := lines[i]
					if l["level"] != "INFO" || l["route"] != w.route || l["status"] != w.status || l["key_id"] != w.key || l["duration"] == nil {
						t.Errorf("line %d: %v; want route %q, status %v, key id %q", i, l, w.route, w.status, w.key)
					}
				}
				if text := e.logs.String(); strings.Contains(text, "u_private_42/devices") || strings.Contains(text, "/v1/nowhere") {
					t.Error("the access log holds a raw path")
				}
			})
		})
	}
}

// Backpressure measures the lane a request joins: an unpaced campaign's
// deliveries, all due and waiting past the bound, do not refuse a send,
// which is claimed before them (D87); transactional sends waiting past it
// do. /metrics shows each lane's backlog.
func TestBackpressureMeasuresTheLaneTheSendJoins(t *testing.T) {
	each(t, envOptions{maxBacklogAge: time.Minute}, func(t *testing.T, e *env) {
		var rs []string
		for i := range 5 {
			rs = append(rs, fmt.Sprintf("u_%d", i))
			e.register(rs[i], oncepush.TransportFCM, nil)
		}
		c := e.createCampaign(sale(nil))
		e.upload(c.ID, 1, rs...)
		e.campaignDo(c.ID, "start")
		if st := e.expandAll(); st.Written != 5 {
			t.Fatalf("the expansion wrote %d deliveries, want 5", st.Written)
		}
		e.clock.Advance(2 * time.Minute)
		e.refreshBacklog()
		metrics := metricValues(t, e)
		for k, want := range map[string]float64{
			`oncepush_lane_due_backlog{lane="campaign"}`: 5, `oncepush_lane_due_oldest_age_seconds{lane="campaign"}`: 120,
			`oncepush_lane_due_backlog{lane="transactional"}`: 0, `oncepush_lane_due_oldest_age_seconds{lane="transactional"}`: 0,
			`oncepush_due_backlog`: 5, `oncepush_due_oldest_age_seconds`: 120,
		} {
			if got, ok := metrics[k]; !ok || got != want {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
			}
		}
		hello := obj{"recipients": []string{"u_1"}, "title": "Password reset"}
		e.send(e.admin, hello) // behind the campaign's lane, not in it: taken

		e.clock.Advance(61 * time.Second)
		e.refreshBacklog()
		e.do("POST", "/v1/notifications", e.admin, hello).wantProblem(t, http.StatusTooManyRequests, server.CodeOverloaded, "")
	})
}
