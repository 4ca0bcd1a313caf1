package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/fakepush"
)

// fake is the `oncepush fake-providers` process every system sends to.
type fake struct {
	proc *proc
	url  string // https://127.0.0.1:port
	// connect is its CONNECT proxy, http://127.0.0.1:port, which hands
	// every tunnel to the fake itself (for gorush).
	connect string
	dir     string // its files: oncepush.json, fake-ca.pem, fcm-service-account.json
	hc      *http.Client
}

// The files fake-providers writes into its --dir.
const (
	fakeConfigFile  = "oncepush.json"
	fakeCAFile      = "fake-ca.pem"
	fakeFCMAccount  = "fcm-service-account.json"
	fcmGoogleHost   = "fcm.googleapis.com"
	benchTransport  = oncepush.TransportFCM
	receiptPageSize = 10000
)

func startFake(ctx context.Context, td *teardown, bin, dir string) (*fake, error) {
	p, err := startProc(td, "fake-providers", nil, bin, "fake-providers", "--listen", "127.0.0.1:0", "--dir", dir,
		"--cert-name", fcmGoogleHost, "--connect-listen", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// It prints its configuration (one JSON document) once it serves, and
	// its proxy's address.
	out, err := p.waitOutput(wctx, "printing its configuration", func(s string) bool {
		i := strings.Index(s, "{")
		return i >= 0 && json.Valid([]byte(firstJSON(s[i:]))) && connectProxy.MatchString(s)
	})
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Providers struct {
			FCM struct {
				BaseURL string `json:"baseURL"`
			} `json:"fcm"`
		} `json:"providers"`
	}
	if err := json.Unmarshal([]byte(firstJSON(out[strings.Index(out, "{"):])), &cfg); err != nil {
		return nil, fmt.Errorf("fake-providers' configuration: %w", err)
	}
	u, err := url.Parse(cfg.Providers.FCM.BaseURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("fake-providers' configuration: providers.fcm.baseURL %q", cfg.Providers.FCM.BaseURL)
	}
	pem, err := os.ReadFile(filepath.Join(dir, fakeCAFile))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", fakeCAFile)
	}
	f := &fake{proc: p, url: "https://" + u.Host, dir: dir, connect: connectProxy.FindStringSubmatch(out)[1], hc: &http.Client{
		Timeout:   time.Minute,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}}
	return f, nil
}

// connectProxy is how fake-providers says where its proxy is.
var connectProxy = regexp.MustCompile(`CONNECT proxy: (http://127\.0\.0\.1:[0-9]+)`)

// firstJSON cuts s after its first complete JSON value.
func firstJSON(s string) string {
	dec := json.NewDecoder(strings.NewReader(s))
	var v json.RawMessage
	if dec.Decode(&v) != nil {
		return s
	}
	return string(v)
}

func (f *fake) control(ctx context.Context, method, path string, body, out any) error {
	return fakepush.Call(ctx, f.hc, f.url, method, path, body, out, 0)
}

// prepare forgets what the fake received and sets its answer latency: the
// start of every measured case.
func (f *fake) prepare(ctx context.Context, latency time.Duration) error {
	if err := f.control(ctx, http.MethodPost, "/_fake/reset", nil, nil); err != nil {
		return err
	}
	return f.control(ctx, http.MethodPost, "/_fake/latency",
		fakepush.ControlLatency{Transport: benchTransport, LatencyMs: latency.Milliseconds()}, nil)
}

func (f *fake) stats(ctx context.Context) (fakepush.Stats, error) {
	var st fakepush.Stats
	err := f.control(ctx, http.MethodGet, "/_fake/stats", nil, &st)
	return st, err
}

// stallTimeout bounds a wait for sends: no new one for this long and the
// system is taken to have stopped sending.
const stallTimeout = 30 * time.Second

// waitReceived polls the fake's count until it has received n requests
// (whatever their fate). Polling every 5 ms is all it costs; the figures
// come from the receipts' own times (receipts).
func (f *fake) waitReceived(ctx context.Context, n int) error {
	last, progress := -1, time.Now()
	for {
		st, err := f.stats(ctx)
		if err != nil {
			return err
		}
		if st.Received >= n {
			return nil
		}
		if st.Received != last {
			last, progress = st.Received, time.Now()
		} else if time.Since(progress) > stallTimeout {
			return fmt.Errorf("the fake received %d of %d sends, and nothing more for %s", st.Received, n, stallTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the fake received %d of %d sends: %w", st.Received, n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitSettled waits until every request received has been answered (or
// dropped, or abandoned), before a case's receipts are checked: a request
// is recorded when it has been read, its status when it has been answered.
func (f *fake) waitSettled(ctx context.Context) (fakepush.Stats, error) {
	for {
		st, err := f.stats(ctx)
		if err != nil || st.Held == 0 {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("the fake still holds %d answers: %w", st.Held, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// receipts reads every request received since the last reset, in pages.
func (f *fake) receipts(ctx context.Context) ([]fakepush.ControlReceipt, error) {
	var all []fakepush.ControlReceipt
	var after int64
	for {
		var page []fakepush.ControlReceipt
		if err := f.control(ctx, http.MethodGet, fmt.Sprintf("/_fake/received?after=%d&limit=%d", after, receiptPageSize), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < receiptPageSize {
			return all, nil
		}
		after = page[len(page)-1].Seq
	}
}

// checkReceipts requires want requests, every one answered 200, and
// returns the time of the last one received.
func checkReceipts(rs []fakepush.ControlReceipt, want int) (last time.Time, err error) {
	ok := 0
	for _, r := range rs {
		if r.Status == http.StatusOK {
			ok++
		}
		if r.ReceivedAt.After(last) {
			last = r.ReceivedAt
		}
	}
	if len(rs) != want || ok != want {
		return last, fmt.Errorf("the fake received %d sends (%d answered 200), want %d answered 200", len(rs), ok, want)
	}
	return last, nil
}
