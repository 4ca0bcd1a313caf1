package blackbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/registry"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/pushtest"
)

// database makes a fresh database for a test: its URL or file path.
type database struct {
	name string
	new  func(t *testing.T) string
}

var databases = []database{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "oncepush.db") }},
	{"postgres", func(t *testing.T) string { return testdb.Schema(t) }},
}

// fake is an 'oncepush fake-providers' process.
type fake struct {
	t      *testing.T
	url    string       // https://127.0.0.1:port
	config *config.File // the configuration it printed
	raw    string       // … as printed
	dir    string       // where it wrote its files
	client *http.Client // trusts the fake's certificate
	proc   *proc
}

// startFake starts fake providers, writing their files into a directory of
// the test, and reads the configuration they print.
func startFake(t *testing.T, bin string) *fake {
	t.Helper()
	dir := t.TempDir()
	p := start(t, bin, "fake-providers", "--listen", "127.0.0.1:0", "--dir", dir)
	return readFake(t, p, dir)
}

func readFake(t *testing.T, p *proc, dir string) *fake {
	t.Helper()
	raw := p.waitFor(p.Stdout, "its configuration", func(s string) (string, bool) {
		s = strings.TrimSpace(s)
		return s, s != "" && json.Valid([]byte(s))
	})
	f := &fake{t: t, raw: raw, dir: dir, proc: p, config: &config.File{}}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(f.config); err != nil {
		t.Fatalf("fake-providers printed a configuration that is not a config.File: %v\n%s", err, raw)
	}
	pr := f.config.Providers
	if sectionAPNs(pr) == nil || sectionFCM(pr) == nil || sectionWebPush(pr) == nil || sectionRuStore(pr) == nil {
		t.Fatalf("fake-providers configured only some providers:\n%s", raw)
	}
	f.url = sectionAPNs(pr).Host
	pem, err := os.ReadFile(sectionAPNs(pr).CAFile)
	if err != nil {
		t.Fatalf("the fake's CA file: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("the fake's CA file %s holds no certificate", sectionAPNs(pr).CAFile)
	}
	f.client = &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	t.Cleanup(f.client.CloseIdleConnections)
	return f
}

// control calls a control endpoint and decodes its JSON answer into out.
func (f *fake) control(method, path string, body, out any, want int) {
	f.t.Helper()
	status, b := doJSON(f.t, f.client, method, f.url+path, "", body)
	if status != want {
		f.t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			f.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// requests returns what the fake received (of one transport, or all for "").
func (f *fake) requests(tr oncepush.Transport) []pushtest.ControlRequest {
	f.t.Helper()
	path := "/_fake/requests"
	if tr != "" {
		path += "?transport=" + string(tr)
	}
	var reqs []pushtest.ControlRequest
	f.control(http.MethodGet, path, nil, &reqs, http.StatusOK)
	return reqs
}

// waitRequests waits until the fake received at least n requests.
func (f *fake) waitRequests(n int) []pushtest.ControlRequest {
	f.t.Helper()
	var reqs []pushtest.ControlRequest
	eventually(f.t, fmt.Sprintf("%d requests at the fake", n), func() bool {
		reqs = f.requests("")
		return len(reqs) >= n
	})
	return reqs
}

// received lists every request the fake has read whole, whatever became of
// it (answered, dropped, held, or abandoned by a client that went away).
func (f *fake) received() []pushtest.ControlReceipt {
	f.t.Helper()
	var all []pushtest.ControlReceipt
	for after := int64(0); ; {
		var page []pushtest.ControlReceipt
		f.control(http.MethodGet, fmt.Sprintf("/_fake/received?after=%d&limit=1000", after), nil, &page, http.StatusOK)
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].Seq
	}
}

// program sets the answers for a transport's token ("" = every token).
func (f *fake) program(tr oncepush.Transport, token string, answers ...pushtest.FakeAnswer) {
	f.t.Helper()
	p := pushtest.ControlProgram{Transport: tr, Token: token, Answers: []pushtest.ControlAnswer{}}
	for _, a := range answers {
		p.Answers = append(p.Answers, pushtest.ControlAnswerOf(a))
	}
	f.control(http.MethodPost, "/_fake/program", p, nil, http.StatusNoContent)
}

// latency delays every answer of the transport.
func (f *fake) latency(tr oncepush.Transport, d time.Duration) {
	f.t.Helper()
	f.control(http.MethodPost, "/_fake/latency", pushtest.ControlLatency{Transport: tr, LatencyMs: d.Milliseconds()}, nil, http.StatusNoContent)
}

// subscription creates a Web Push subscription on the fake.
func (f *fake) subscription() pushtest.ControlSubscription {
	f.t.Helper()
	var s pushtest.ControlSubscription
	f.control(http.MethodPost, "/_fake/webpush/subscriptions", nil, &s, http.StatusCreated)
	return s
}

// serverConfig writes a configuration file for a server on the fake: the
// fake's providers, the defaults, and whatever mod changes.
func (f *fake) serverConfig(t *testing.T, mod func(*config.File)) string {
	t.Helper()
	c := *f.config
	if mod != nil {
		mod(&c)
	}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "oncepush.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiServer is an 'oncepush serve' process.
type apiServer struct {
	t    *testing.T
	url  string // http://127.0.0.1:port
	key  string // the first API key (admin), printed on the first start
	proc *proc
}

var keyPattern = regexp.MustCompile(`opk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}`)

// startServe runs 'oncepush serve' (or 'serve --no-workers': pass it in
// args) on the database with the configuration, on a port of its choosing,
// which it reports in its log. With firstStart, it reads the API key that
// the first start prints.
func startServe(t *testing.T, bin, db, cfg string, firstStart bool, args ...string) *apiServer {
	t.Helper()
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--database", db, "--config", cfg, "--log-format", "json"}, args...)
	p := start(t, bin, args...)
	addr := p.waitFor(p.Stderr, "the address it serves on", func(s string) (string, bool) {
		for _, line := range strings.Split(s, "\n") {
			var l struct{ Listen string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Listen != "" {
				return l.Listen, true
			}
		}
		return "", false
	})
	s := &apiServer{t: t, url: "http://" + addr, proc: p}
	if firstStart {
		s.key = p.waitFor(p.Stdout, "the first API key", func(s string) (string, bool) {
			k := keyPattern.FindString(s)
			return k, k != ""
		})
	}
	return s
}

// startServeWithMetrics is startServe, for the first time, on an empty
// configuration and with --metrics-listen on a port of its choosing; it
// returns the server and the metrics address it reports in its log.
func startServeWithMetrics(t *testing.T, bin string) (*apiServer, string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "oncepush.json")
	writeJSON(t, cfg, config.File{})
	api := startServe(t, bin, filepath.Join(t.TempDir(), "oncepush.db"), cfg, true, "--metrics-listen", "127.0.0.1:0")
	addr := api.proc.waitFor(api.proc.Stderr, "the metrics address", func(s string) (string, bool) {
		for _, line := range strings.Split(s, "\n") {
			var l struct {
				MetricsListen string `json:"metrics_listen"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.MetricsListen != "" {
				return l.MetricsListen, true
			}
		}
		return "", false
	})
	return api, addr
}

// call makes an API request with key and returns the status and body.
func (s *apiServer) call(key, method, path string, body any) (int, []byte) {
	s.t.Helper()
	return doJSON(s.t, http.DefaultClient, method, s.url+path, key, body)
}

// must makes an API request with the admin key that must answer want, and
// decodes the answer into out.
func (s *apiServer) must(method, path string, body any, want int, out any) {
	s.t.Helper()
	status, b := s.call(s.key, method, path, body)
	if status != want {
		s.t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// register registers a device for the recipient.
func (s *apiServer) register(recipient string, tr oncepush.Transport, token string) {
	s.t.Helper()
	s.must(http.MethodPut, "/v1/recipients/"+url.PathEscape(recipient)+"/devices",
		map[string]string{"transport": string(tr), "token": token}, http.StatusOK, nil)
}

// send posts a notification and returns its answer.
func (s *apiServer) send(body map[string]any) sendAnswer {
	s.t.Helper()
	var a sendAnswer
	s.must(http.MethodPost, "/v1/notifications", body, http.StatusAccepted, &a)
	return a
}

// deliveries returns the recipient's delivery history, newest first.
func (s *apiServer) deliveries(recipient string) []delivery {
	s.t.Helper()
	var p struct{ Deliveries []delivery }
	s.must(http.MethodGet, "/v1/recipients/"+url.PathEscape(recipient)+"/deliveries?limit=500", nil, http.StatusOK, &p)
	return p.Deliveries
}

// notificationDeliveries returns a notification's deliveries.
func (s *apiServer) notificationDeliveries(id int64) []delivery {
	s.t.Helper()
	var p struct{ Deliveries []delivery }
	s.must(http.MethodGet, fmt.Sprintf("/v1/notifications/%d/deliveries?limit=500", id), nil, http.StatusOK, &p)
	return p.Deliveries
}

// waitFinal waits until every delivery of the recipient has left pending,
// and returns them.
func (s *apiServer) waitFinal(recipient string, n int) []delivery {
	s.t.Helper()
	var ds []delivery
	eventually(s.t, fmt.Sprintf("%d final deliveries to %s", n, recipient), func() bool {
		ds = s.deliveries(recipient)
		if len(ds) < n {
			return false
		}
		for _, d := range ds {
			if d.Status == "pending" {
				return false
			}
		}
		return true
	})
	return ds
}

// devices lists the recipient's devices.
func (s *apiServer) devices(recipient string) []struct{ Transport, Token string } {
	s.t.Helper()
	var p struct {
		Devices []struct{ Transport, Token string }
	}
	s.must(http.MethodGet, "/v1/recipients/"+url.PathEscape(recipient)+"/devices", nil, http.StatusOK, &p)
	return p.Devices
}

// The API's answers, as far as the tests read them.
type (
	sendAnswer struct {
		ID         int64
		Queued     int
		Duplicates int
		Duplicate  bool
	}
	delivery struct {
		ID             int64
		NotificationID int64
		Recipient      string
		OncepushID     string
		Status         string
		Attempts       int
		LastError      string
		Devices        []attempt
	}
	attempt struct {
		DeviceID    int64
		Transport   oncepush.Transport
		State       string
		Submissions int
		Ambiguous   int
		ProviderID  string
		Error       string
	}
	problemAnswer struct {
		Status int
		Code   string
		Field  string
	}
)

// doJSON makes an HTTP request with a JSON body (when body is not nil) and a
// bearer key (when key is not empty).
func doJSON(t *testing.T, c *http.Client, method, u, key string, body any) (int, []byte) {
	t.Helper()
	status, b, err := request(t.Context(), c, method, u, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return status, b
}

// request is doJSON for goroutines other than the test's: it returns its
// error instead of failing the test.
func request(ctx context.Context, c *http.Client, method, u, key string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("read the answer: %w", err)
	}
	return resp.StatusCode, b, nil
}

// eventually polls cond until it holds, failing the test after waitTimeout.
// It polls what child processes show (over HTTP, in their output): no hook of
// the engine reaches another process.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, waitTimeout, what, cond)
}

// eventuallyWithin is eventually with a bound of its own, for waits longer
// than waitTimeout.
func eventuallyWithin(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tokens are device tokens of each transport's shape; Web Push ones are
// subscriptions on the fake. For Web Push, the fake records requests under
// the subscription's id, which is returned as the second value.
func token(f *fake, tr oncepush.Transport, n int) (token, fakeToken string) {
	switch tr {
	case oncepush.TransportAPNs:
		t := fmt.Sprintf("%064x", n)
		return t, t
	case oncepush.TransportWebPush:
		s := f.subscription()
		return s.Token, s.ID
	}
	t := fmt.Sprintf("%s-blackbox-%06d", tr, n)
	return t, t
}

// transports are the transports the server speaks: the built-in ones and
// Huawei Push Kit.
var transports = registry.Default().Names()

// The sections of a configuration, by transport (nil when absent).
func sectionFCM(p config.Providers) *registry.FCM {
	return section[*registry.FCM](p, oncepush.TransportFCM)
}
func sectionAPNs(p config.Providers) *registry.APNs {
	return section[*registry.APNs](p, oncepush.TransportAPNs)
}
func sectionWebPush(p config.Providers) *registry.WebPush {
	return section[*registry.WebPush](p, oncepush.TransportWebPush)
}
func sectionRuStore(p config.Providers) *registry.RuStore {
	return section[*registry.RuStore](p, oncepush.TransportRuStore)
}

func section[S registry.Section](p config.Providers, t oncepush.Transport) S {
	s, _ := p[t].(S)
	return s
}
