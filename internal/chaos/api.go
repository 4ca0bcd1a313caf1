//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	oncepushapi "github.com/oncepush/oncepush/api"
)

// api is the 'oncepush serve --no-workers' process and a client of its HTTP
// API. The process is killed and started again on the same port during a
// run; the client's callers retry.
type api struct {
	ps       *procs
	bin      string
	args     []string // serve's flags, the listen address included once known
	url      string   // http://127.0.0.1:port
	key      string   // the admin key the first start printed
	client   *http.Client
	proc     atomic.Pointer[proc]
	inFlight atomic.Int64 // POSTs of notifications sent and not yet answered
	// answered503 and answered500 count those answers to every request.
	answered503, answered500 atomic.Int64
}

var keyPattern = regexp.MustCompile(`opk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}`)

// startAPI runs the API on a port of its choosing, reads the port from its
// log and the first API key from its stdout.
func startAPI(ctx context.Context, ps *procs, bin, database, cfg string) (*api, error) {
	a := &api{
		ps: ps, bin: bin,
		args: []string{"serve", "--no-workers", "--database", database, "--config", cfg, "--log-format", "json"},
		client: &http.Client{
			Timeout:   20 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64},
		},
	}
	p, err := ps.start("api", bin, append(append([]string{}, a.args...), "--listen", "127.0.0.1:0"), nil)
	if err != nil {
		return nil, err
	}
	a.proc.Store(p)
	addr, err := waitListening(ctx, p)
	if err != nil {
		return nil, err
	}
	a.url = "http://" + addr
	a.args = append(a.args, "--listen", addr)
	if a.key, err = p.waitFor(ctx, p.Stdout, "the first API key", 30*time.Second, func(s string) (string, bool) {
		k := keyPattern.FindString(s)
		return k, k != ""
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// waitListening reads the address a serving process logged.
func waitListening(ctx context.Context, p *proc) (string, error) {
	return p.waitFor(ctx, p.Stderr, "the address it serves on", 60*time.Second, func(s string) (string, bool) {
		for _, line := range strings.Split(s, "\n") {
			var l struct{ Msg, Listen string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "oncepush serving" && l.Listen != "" {
				return l.Listen, true
			}
		}
		return "", false
	})
}

// restart starts the API again on its port after a kill.
func (a *api) restart(ctx context.Context) error {
	var last error
	// The port was the killed process's; binding it again can fail for a
	// moment while the kernel tears its sockets down. And 'serve' exits 1
	// while its database is down (a PostgreSQL restart).
	for deadline := time.Now().Add(restartWait); time.Now().Before(deadline); {
		p, err := a.ps.start("api", a.bin, a.args, nil)
		if err != nil {
			return err
		}
		if _, err := waitListening(ctx, p); err != nil {
			last = err
			_ = p.Kill()
			if err := sleep(ctx, 250*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		a.proc.Store(p)
		return nil
	}
	return fmt.Errorf("the API did not start again: %w", last)
}

// call makes one API request with the admin key and returns the status and
// body; a transport error (the process killed mid-request) is returned as is.
func (a *api) call(ctx context.Context, method, path string, header http.Header, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, r)
	if err != nil {
		return 0, nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
		a.answered503.Add(1)
	case http.StatusInternalServerError:
		a.answered500.Add(1)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// retryable reports whether an answer says "try again": the process was
// down (no answer) or the database was (503).
func retryable(status int, err error) bool {
	return err != nil || status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status >= 500
}

// mustTimeout bounds the retries of one request: longer than any restart
// of the API or of PostgreSQL takes.
const mustTimeout = 2 * time.Minute

// must makes a request until it is answered want (retrying while the API or
// its database is down, for at most mustTimeout), and decodes the answer
// into out.
func (a *api) must(ctx context.Context, method, path string, body any, want int, out any) error {
	ctx, cancel := context.WithTimeout(ctx, mustTimeout)
	defer cancel()
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		status, b, err := a.call(ctx, method, path, nil, body)
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		if retryable(status, err) {
			if err := sleep(ctx, delay); err != nil {
				return fmt.Errorf("%s %s: %w (last answer %d %v)", method, path, err, status, err)
			}
			continue
		}
		if status != want {
			return fmt.Errorf("%s %s: %d, want %d: %s", method, path, status, want, b)
		}
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return fmt.Errorf("%s %s: %w: %s", method, path, err, b)
			}
		}
		return nil
	}
}

// sendAnswer is the 202 of POST /v1/notifications.
type sendAnswer struct {
	ID         int64 `json:"id"`
	Queued     int   `json:"queued"`
	Duplicates int   `json:"duplicates"`
	Duplicate  bool  `json:"duplicate"`
}

// notificationBody is the POST /v1/notifications body the harness sends.
type notificationBody struct {
	Recipients []string          `json:"recipients"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Body       string            `json:"body"`
	Data       map[string]string `json:"data,omitempty"`
	DedupeKey  string            `json:"dedupeKey,omitempty"`
	Ambiguity  string            `json:"ambiguity"`
}

// postOnce posts a notification once: the key in the Idempotency-Key header
// or in the body's dedupeKey (the same request either way).
func (a *api) postOnce(ctx context.Context, body notificationBody, key string, inHeader bool) (int, sendAnswer, error) {
	var h http.Header
	if inHeader {
		h = http.Header{"Idempotency-Key": {key}}
		body.DedupeKey = ""
	} else {
		body.DedupeKey = key
	}
	a.inFlight.Add(1)
	status, b, err := a.call(ctx, http.MethodPost, "/v1/notifications", h, body)
	a.inFlight.Add(-1)
	var ans sendAnswer
	if err == nil && status == http.StatusAccepted {
		if err := json.Unmarshal(b, &ans); err != nil {
			return status, ans, fmt.Errorf("a 202 that is not a send answer: %s", b)
		}
	}
	return status, ans, err
}

// The ledger as GET /v1/recipients/{r}/deliveries shows it, in the API's
// own wire types.
type (
	deliveryView = oncepushapi.Delivery
	attemptView  = oncepushapi.DeviceAttempt
	deliveryPage = oncepushapi.DeliveryPage
)

// recipientDeliveries reads a recipient's whole delivery history.
func (a *api) recipientDeliveries(ctx context.Context, recipient string) ([]deliveryView, error) {
	var all []deliveryView
	cursor := ""
	for {
		path := "/v1/recipients/" + url.PathEscape(recipient) + "/deliveries?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var p deliveryPage
		if err := a.must(ctx, http.MethodGet, path, nil, http.StatusOK, &p); err != nil {
			return nil, err
		}
		all = append(all, p.Deliveries...)
		if p.NextCursor == nil {
			return all, nil
		}
		cursor = *p.NextCursor
	}
}

// deviceIDs lists the ids of a recipient's registered devices.
func (a *api) deviceIDs(ctx context.Context, recipient string) (map[int64]bool, error) {
	var p struct {
		Devices []struct {
			ID int64 `json:"id"`
		} `json:"devices"`
	}
	if err := a.must(ctx, http.MethodGet, "/v1/recipients/"+url.PathEscape(recipient)+"/devices", nil, http.StatusOK, &p); err != nil {
		return nil, err
	}
	ids := map[int64]bool{}
	for _, d := range p.Devices {
		ids[d.ID] = true
	}
	return ids, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
