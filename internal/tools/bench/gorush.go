package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// gorush runs a gorush binary the user built from its public source,
// sending FCM to the fake: its Firebase client cannot be given an endpoint,
// so HTTPS_PROXY sends its connections to fcm.googleapis.com to the fake's
// CONNECT proxy, which hands them to the fake itself; the fake's
// certificate names that host (SSL_CERT_FILE trusts it). The OAuth
// token_uri of the fake's service account is a loopback address, which Go
// never proxies (D77).
type gorush struct {
	proc *proc
	base string
	hc   *http.Client
}

// gorushConfig is gorush's YAML (JSON is YAML): the HTTP API on loopback,
// FCM only, its in-memory queue and statistics.
func gorushConfig(port, keyPath string, workers, queue int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"core": map[string]any{
			"enabled": true, "address": "127.0.0.1", "port": port,
			"worker_num": workers, "queue_num": queue, "max_notification": 100,
			"sync": false, "mode": "release", "ssl": false,
		},
		"grpc":    map[string]any{"enabled": false},
		"android": map[string]any{"enabled": true, "key_path": keyPath, "credential": "", "max_retry": 0},
		"ios":     map[string]any{"enabled": false},
		"huawei":  map[string]any{"enabled": false},
		"queue":   map[string]any{"engine": "local"},
		"log": map[string]any{
			"format": "string", "access_log": "stdout", "access_level": "error",
			"error_log": "stderr", "error_level": "error", "hide_token": true, "hide_messages": true,
		},
		"stat": map[string]any{"engine": "memory"},
	}, "", "  ")
}

func startGorush(ctx context.Context, td *teardown, bin, dir string, f *fake, workers, queue int) (*gorush, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cfg, err := gorushConfig(port, filepath.Join(f.dir, fakeFCMAccount), workers, queue)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "gorush.yml")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		return nil, err
	}
	env := []string{
		"HTTPS_PROXY=" + f.connect, "HTTP_PROXY=", "NO_PROXY=", "https_proxy=", "http_proxy=", "no_proxy=",
		"SSL_CERT_FILE=" + filepath.Join(f.dir, fakeCAFile), "SSL_CERT_DIR=" + dir,
		"GOOGLE_APPLICATION_CREDENTIALS=",
	}
	p, err := startProc(td, "gorush", env, bin, "-c", path)
	if err != nil {
		return nil, err
	}
	g := &gorush{proc: p, base: "http://" + addr,
		hc: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.waitHTTP(wctx, g.hc, g.base+"/healthz"); err != nil {
		return nil, err
	}
	return g, nil
}

// system is gorush as the load sees it: POST /api/push with one Android
// notification to the tokens; the oncepush_id the fake matches receipts by
// travels in its data.
func (g *gorush) system(devices int, runID string) *system {
	tokens := make([]string, devices)
	for i := range tokens {
		tokens[i] = deviceToken(i)
	}
	s := &system{
		name: "gorush", url: g.base + "/api/push", hc: g.hc, accepted: http.StatusOK, header: http.Header{},
		tokens: tokens,
		proc:   func() *proc { return g.proc },
		body: func(key string, tokens []string) ([]byte, string) {
			id := "gorush-" + runID + "-" + key
			b, _ := json.Marshal(map[string]any{"notifications": []map[string]any{{
				"tokens": tokens, "platform": 2, "title": "bench", "message": "notification " + key,
				"data": map[string]string{"oncepush_id": id},
			}}})
			return b, id
		},
	}
	// Idle: every task gorush took is done, sent or failed.
	s.idle = func(ctx context.Context) (bool, error) {
		var st struct {
			Busy      int64  `json:"busy_workers"`
			Success   uint64 `json:"success_tasks"`
			Failure   uint64 `json:"failure_tasks"`
			Submitted uint64 `json:"submitted_tasks"`
		}
		err := s.getJSON(ctx, g.base+"/api/stat/app", &st)
		return st.Busy == 0 && st.Success+st.Failure >= st.Submitted, err
	}
	return s
}

// gorushVersion is what gorush -V prints, for the report.
func gorushVersion(ctx context.Context, bin string) string {
	out, err := commandOutput(ctx, bin, "-V")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.Join(strings.Fields(out), " ")
}

// notRunGorush is the column of a run without -gorush.
const notRunGorush = "not run (no -gorush)"
