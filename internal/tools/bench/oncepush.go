package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/internal/tools/loadkit"
)

// scratchDatabase creates a PostgreSQL database of its own on the server
// adminURL names, dropped at teardown, and returns its URL.
func scratchDatabase(ctx context.Context, td *teardown, adminURL, prefix string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL at %s: %w", redacted(adminURL), err)
	}
	defer conn.Close(ctx)
	name := prefix + strings.ToLower(rand.Text()[:10])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	td.add(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			fmt.Printf("bench: drop database %s: %v\n", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Printf("bench: drop database %s: %v\n", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

func redacted(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}

// oncepushServer runs `oncepush serve` on one database, sending to the fake.
type oncepushServer struct {
	bin, database, config string
	key                   string
	proc                  *proc
	base                  string // http://127.0.0.1:port
	hc                    *http.Client
	td                    *teardown
}

func newOncepush(ctx context.Context, td *teardown, bin, database string, f *fake) (*oncepushServer, error) {
	o := &oncepushServer{bin: bin, database: database, config: filepath.Join(f.dir, fakeConfigFile), td: td,
		hc: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}}
	cmd := exec.CommandContext(ctx, bin, "keys", "create", "--name", "bench", "--scope", "admin", "--database", database)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("oncepush keys create: %v: %s", err, stderr.String())
	}
	o.key = strings.TrimSpace(string(out))
	return o, nil
}

// start runs serve, with or without the delivery workers, and waits until
// it is ready.
func (o *oncepushServer) start(ctx context.Context, workers bool) error {
	addr, err := freePort()
	if err != nil {
		return err
	}
	args := []string{"serve", "--database", o.database, "--config", o.config, "--listen", addr, "--log-level", "warn"}
	if !workers {
		args = append(args, "--no-workers")
	}
	if o.proc, err = startProc(o.td, "oncepush serve", nil, o.bin, args...); err != nil {
		return err
	}
	o.base = "http://" + addr
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return o.proc.waitHTTP(wctx, o.hc, o.base+"/readyz")
}

// stop ends serve gracefully (SIGTERM: it finishes what is in flight).
func (o *oncepushServer) stop() {
	if o.proc != nil {
		o.proc.stop()
	}
}

// system is the server as the load sees it.
func (o *oncepushServer) system(name string, recipients []string, runID string, since time.Time) *system {
	byToken := make(map[string]string, len(recipients))
	tokens := make([]string, len(recipients))
	for i, r := range recipients {
		tokens[i] = deviceToken(i)
		byToken[tokens[i]] = r
	}
	s := &system{
		name: name, url: o.base + "/v1/notifications", hc: o.hc, accepted: http.StatusAccepted,
		header:   http.Header{"Authorization": {"Bearer " + o.key}},
		tokens:   tokens,
		proc:     func() *proc { return o.proc },
		database: postgresURL(o.database),
		body: func(key string, tokens []string) ([]byte, string) {
			rs := make([]string, len(tokens))
			for i, t := range tokens {
				rs[i] = byToken[t]
			}
			key = runID + "-" + key
			b, _ := json.Marshal(map[string]any{"recipients": rs, "type": "bench", "title": "bench",
				"body": "notification " + key, "dedupeKey": key})
			return b, loadkit.NotificationID("bench", rs[0], key)
		},
	}
	// Idle: no notification of this run (created since) has a pending
	// delivery; a history written by -history is older.
	pending := "/v1/notifications?status=pending&limit=1&createdFrom=" + url.QueryEscape(since.UTC().Format(time.RFC3339Nano))
	s.idle = func(ctx context.Context) (bool, error) {
		var page struct {
			Notifications []json.RawMessage `json:"notifications"`
		}
		err := s.getJSON(ctx, o.base+pending, &page)
		return len(page.Notifications) == 0, err
	}
	return s
}

// deviceToken is the FCM token of device i, the same for every system.
func deviceToken(i int) string { return fmt.Sprintf("bench-fcm-token-%07d", i) }

// register gives each of n recipients one FCM device, over the API.
func (o *oncepushServer) register(ctx context.Context, n int) ([]string, error) {
	names := make([]string, n)
	var fail firstError
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%07d", i)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			b, _ := json.Marshal(map[string]string{"transport": "fcm", "token": deviceToken(i)})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, o.base+"/v1/recipients/"+names[i]+"/devices", bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer "+o.key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := o.hc.Do(req)
			if err != nil {
				fail.set(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				fail.set(fmt.Errorf("register device %d: status %d", i, resp.StatusCode))
			}
		})
	}
	wg.Wait()
	return names, fail.err
}

// drain measures the workers alone: n single-device notifications queued
// by a server without workers, then a server with workers started; the
// rate runs from the fake's first receipt to its last (the start-up of the
// process is not counted). The CPU each part used from the start of the
// workers' server until the fake had every send is added to cpu. The
// server is left running with workers.
func (o *oncepushServer) drain(ctx context.Context, s *system, f *fake, n, conns int, cpu *cpuUse) (float64, error) {
	// Wait until the earlier cases' work is sent, while there are workers.
	if err := s.start(ctx, f, 0); err != nil {
		return 0, err
	}
	o.stop()
	if err := o.start(ctx, false); err != nil {
		return 0, err
	}
	s.url = o.base + "/v1/notifications"
	var fail firstError
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range conns {
		wg.Go(func() {
			for i := seq.Add(1); i <= int64(n) && ctx.Err() == nil; i = seq.Add(1) {
				_, _, err := s.post(ctx, i, 1)
				fail.set(err)
			}
		})
	}
	wg.Wait()
	if fail.err != nil {
		return 0, fail.err
	}
	o.stop()
	before, err := cpuParts{fake: f.proc.pid(), database: s.database}.snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("CPU use: %w", err)
	}
	if err := o.start(ctx, true); err != nil {
		return 0, err
	}
	s.url = o.base + "/v1/notifications"
	if err := f.waitReceived(ctx, n); err != nil {
		return 0, s.failure(err)
	}
	// The new server's CPU is all of its life so far: from zero.
	after, err := cpuParts{system: o.proc.pid(), fake: f.proc.pid(), database: s.database}.snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("CPU use: %w", err)
	}
	cpu.add(after.since(before, n))
	// The fake records a request when it has read it and its status when it
	// has answered: on a busy machine the last one can be read unanswered.
	if _, err := f.waitSettled(ctx); err != nil {
		return 0, s.failure(err)
	}
	rs, err := f.receipts(ctx)
	if err != nil {
		return 0, err
	}
	last, err := checkReceipts(rs, n)
	if err != nil {
		return 0, err
	}
	first := last
	for _, r := range rs {
		if r.ReceivedAt.Before(first) {
			first = r.ReceivedAt
		}
	}
	if !last.After(first) {
		return 0, fmt.Errorf("drain of %d sends took no measurable time", n)
	}
	return float64(n-1) / last.Sub(first).Seconds(), nil
}

// postgresURL is database when it names a PostgreSQL database, else "".
func postgresURL(database string) string {
	if strings.HasPrefix(database, "postgres") {
		return database
	}
	return ""
}
