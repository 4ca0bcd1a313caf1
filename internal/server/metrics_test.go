package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// /metrics needs no key, so a scrape must not be a way to make the database
// work: it serves what the process last read. With the database gone, a
// scrape still answers with the last backlog read, and no read was attempted
// (none failed).
func TestScrapeDoesNotQueryTheDatabase(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// With SeparateMetrics, /metrics is served on the operations listener only:
// the API's listener answers 404 there.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	t.Parallel()
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
