package blackbox

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/registry"
	"github.com/oncepush/oncepush/provider/hms"
	"github.com/oncepush/oncepush/pushtest"
)

// canaries are the secrets of one server: its credentials, API keys and
// device tokens. None may appear in its logs, its metrics or an answer's
// error text; the first API key only in the one message that prints it.
type canaries struct {
	t     *testing.T
	names map[string]string // secret → what it is
}

func (c *canaries) add(what, secret string) {
	if len(secret) < 12 {
		c.t.Fatalf("canary %s is too short to search for: %q", what, secret)
	}
	c.names[secret] = what
}

// addPEM adds the lines of a PEM key's body: a key printed in any form
// that keeps its base64 holds them.
func (c *canaries) addPEM(what string, b []byte) {
	block, _ := pem.Decode(b)
	if block == nil {
		c.t.Fatalf("%s is not PEM", what)
	}
	body := strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes})))
	lines := strings.Split(body, "\n")
	for _, l := range lines[1 : len(lines)-1] {
		if len(l) >= 32 {
			c.add(what, l)
		}
	}
}

// check fails the test for every canary in text.
func (c *canaries) check(where, text string) {
	c.t.Helper()
	for s, what := range c.names {
		if strings.Contains(text, s) {
			i := strings.Index(text, s)
			c.t.Errorf("%s holds the %s: …%s…", where, what, text[max(0, i-80):min(len(text), i+len(s)+40)])
		}
	}
}

// fakeCanaries are the fake providers' credentials, as the server reads
// them from its configuration.
func fakeCanaries(t *testing.T, f *fake) *canaries {
	c := &canaries{t: t, names: map[string]string{}}
	pr := f.config.Providers
	sa, err := os.ReadFile(sectionFCM(pr).ServiceAccountFile)
	if err != nil {
		t.Fatal(err)
	}
	var acct struct {
		PrivateKey string `json:"private_key"`
	}
	if err := json.Unmarshal(sa, &acct); err != nil {
		t.Fatal(err)
	}
	c.addPEM("FCM service-account private key", []byte(acct.PrivateKey))
	p8, err := os.ReadFile(sectionAPNs(pr).KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	c.addPEM("APNs signing key", p8)
	c.add("VAPID private key", sectionWebPush(pr).VAPIDPrivateKey)
	c.add("RuStore service token", sectionRuStore(pr).ServiceToken)
	return c
}

// testCanaries sends canary secrets through every path of a real server
// at --log-level debug — start-up, registration, sends accepted and refused
// by providers whose error text repeats the device token, the service token
// and terminal escapes, credentials refused by a provider (which the server
// logs), API errors for bad keys and bad input, metrics, SIGTERM — and
// greps everything the process wrote and answered for them. Configuration
// errors holding secrets are run separately (testConfigCanaries).
func testCanaries(t *testing.T, bin string, db database) {
	f := startFake(t, bin)
	c := fakeCanaries(t, f)
	dbURL := db.new(t)
	cfg := f.serverConfig(t, nil)
	s := startServe(t, bin, dbURL, cfg, true, "--log-level", "debug")
	c.add("first API key", s.key)

	// Keys made and revoked with the command line.
	made := run(t, bin, "keys", "create", "--database", dbURL, "--name", "canary", "--scope", "read")
	if made.code != 0 {
		t.Fatalf("keys create: %d %s", made.code, made.stderr)
	}
	readKey := strings.TrimSpace(made.stdout)
	c.add("read API key", readKey)
	c.check("keys create's stderr", made.stderr)
	gone := strings.TrimSpace(runOK(t, bin, "keys", "create", "--database", dbURL, "--name", "gone"))
	c.add("revoked API key", gone)
	revoked := run(t, bin, "keys", "revoke", "--database", dbURL, gone[:len("opk_")+8])
	c.check("keys revoke's output", revoked.stdout+revoked.stderr)
	listed := run(t, bin, "keys", "list", "--database", dbURL)
	c.check("keys list's output", listed.stdout+listed.stderr)

	// The devices: one per transport for each of three recipients — sent
	// to, refused with echoing text, refused as our credentials.
	type device struct {
		recipient string
		tr        oncepush.Transport
		token     string
		fakeToken string // what the fake programs and records it under
	}
	var devices []device
	for i, who := range []string{"u_canary_ok", "u_canary_echo", "u_canary_creds"} {
		for _, tr := range transports {
			d := device{recipient: who, tr: tr}
			switch tr {
			case oncepush.TransportAPNs:
				d.token = fmt.Sprintf("ca11ab1e%056x", i)
			case oncepush.TransportWebPush:
				sub := f.subscription()
				d.token, d.fakeToken = sub.Token, sub.ID
				var parts struct {
					Endpoint string
					Keys     struct{ P256dh, Auth string }
				}
				if err := json.Unmarshal([]byte(sub.Token), &parts); err != nil {
					t.Fatal(err)
				}
				c.add("Web Push endpoint", parts.Endpoint)
				c.add("Web Push subscription id", sub.ID)
				c.add("Web Push p256dh", parts.Keys.P256dh)
			default:
				d.token = fmt.Sprintf("CANARY%s%d:APA91b-%s-device-token-7d1f3a", tr, i, who)
			}
			if d.fakeToken == "" {
				d.fakeToken = d.token
			}
			c.add(fmt.Sprintf("%s device token of %s", tr, who), d.token)
			s.register(who, tr, d.token)
			devices = append(devices, d)
		}
	}
	st := sectionRuStore(f.config.Providers).ServiceToken
	const escapes = " \x1b[2J\x1b[31mALERT\x1b[0m \u009b31m \u202eevil\u202c\r\nlevel=ERROR msg=forged"
	for _, d := range devices {
		// What the provider was sent: the device token, and RuStore's
		// service token (the others' credentials are made by the server).
		echo := "token " + d.token + escapes
		if d.tr == oncepush.TransportRuStore {
			echo = "token " + d.token + " service token " + st + escapes
		}
		var a pushtest.FakeAnswer
		switch {
		case d.recipient == "u_canary_echo" && d.tr == oncepush.TransportFCM:
			a = pushtest.FCMError(400, "INVALID_ARGUMENT", echo, "")
		case d.recipient == "u_canary_echo" && d.tr == oncepush.TransportAPNs:
			a = pushtest.APNsError(400, echo)
		case d.recipient == "u_canary_echo" && d.tr == oncepush.TransportWebPush:
			a = pushtest.FakeAnswer{Status: 400, Body: echo}
		case d.recipient == "u_canary_echo" && d.tr == oncepush.TransportRuStore:
			a = pushtest.RuStoreError(400, "FAILED_PRECONDITION", echo)
		case d.recipient == "u_canary_echo" && d.tr == hms.Name:
			a = pushtest.HMSError(400, "80100003", echo)
		case d.recipient == "u_canary_creds" && d.tr == oncepush.TransportFCM:
			a = pushtest.FCMError(403, "PERMISSION_DENIED", echo, "")
		case d.recipient == "u_canary_creds" && d.tr == oncepush.TransportAPNs:
			a = pushtest.APNsError(403, "InvalidProviderToken "+echo)
		case d.recipient == "u_canary_creds" && d.tr == oncepush.TransportWebPush:
			a = pushtest.FakeAnswer{Status: 403, Body: echo}
		case d.recipient == "u_canary_creds" && d.tr == oncepush.TransportRuStore:
			a = pushtest.RuStoreError(401, "UNAUTHENTICATED", echo)
		case d.recipient == "u_canary_creds" && d.tr == hms.Name:
			a = pushtest.HMSError(403, "80300002", echo)
		default:
			continue
		}
		f.program(d.tr, d.fakeToken, a)
	}

	var ids []int64
	for _, who := range []string{"u_canary_ok", "u_canary_echo", "u_canary_creds"} {
		ids = append(ids, s.send(map[string]any{"recipients": []string{who}, "title": "Canary", "body": "for " + who,
			"data": map[string]any{"note": "plain"}, "dedupeKey": "canary-" + who}).ID)
	}
	s.waitFinal("u_canary_ok", 1)
	s.waitFinal("u_canary_echo", 1)
	f.waitRequests(len(devices))
	eventually(t, "the refused credentials in the log", func() bool {
		return strings.Contains(s.proc.Stderr.String(), "rustore: the service token was refused")
	})

	// Everything the API answers about them.
	var answers []string
	get := func(key, path string) {
		status, b := s.call(key, http.MethodGet, path, nil)
		if status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, status, b)
		}
		answers = append(answers, string(b))
	}
	for _, who := range []string{"u_canary_ok", "u_canary_echo", "u_canary_creds"} {
		get(s.key, "/v1/recipients/"+who+"/deliveries")
		get(readKey, "/v1/recipients/"+who+"/devices")
		get(s.key, "/v1/recipients/"+who+"/preferences")
	}
	for _, id := range ids {
		get(s.key, fmt.Sprintf("/v1/notifications/%d", id))
		get(s.key, fmt.Sprintf("/v1/notifications/%d/deliveries", id))
	}
	get("", "/metrics")
	get("", "/healthz")
	get("", "/readyz")
	// The echoing provider's words are in the ledger, without the secrets.
	for _, d := range s.deliveries("u_canary_echo") {
		if !strings.Contains(d.LastError, "[redacted]") {
			t.Errorf("u_canary_echo's delivery: last error %q, want the provider's words with the secrets redacted", d.LastError)
		}
	}

	// Error answers: bad keys, a key in the wrong place, input that holds
	// a secret where it does not belong.
	for _, bad := range []struct {
		key, method, path string
		body              any
	}{
		{gone, http.MethodGet, "/v1/recipients/u_canary_ok/devices", nil},
		{s.key[:len(s.key)-1] + "x", http.MethodGet, "/v1/recipients/u_canary_ok/devices", nil},
		{readKey, http.MethodPost, "/v1/notifications", map[string]any{"recipients": []string{"u_canary_ok"}, "title": "no"}},
		{s.key, http.MethodPut, "/v1/recipients/u_canary_ok/devices", map[string]string{"transport": "apns", "token": "not-hex-" + st}},
		{s.key, http.MethodPut, "/v1/recipients/u_canary_ok/devices", map[string]string{"transport": "fcm", "token": "bad token " + readKey}},
		{s.key, http.MethodPut, "/v1/recipients/u_canary_ok/devices", map[string]any{"transport": "webpush", "token": map[string]any{
			"endpoint": "https://evil.example/" + readKey, "keys": map[string]string{"p256dh": readKey, "auth": readKey}}}},
		{s.key, http.MethodPost, "/v1/notifications", map[string]any{"recipients": []string{"u_canary_ok"}, "title": "x", "link": "https://" + readKey}},
		{s.key, http.MethodDelete, "/v1/devices", map[string]string{"transport": "nope", "token": readKey}},
		{"", http.MethodGet, "/v1/recipients/u_canary_ok/devices?access_token=" + url.QueryEscape(readKey), nil},
	} {
		status, b := s.call(bad.key, bad.method, bad.path, bad.body)
		if status < 400 {
			t.Errorf("%s %s: %d, want an error", bad.method, bad.path, status)
		}
		answers = append(answers, string(b))
	}
	for i, a := range answers {
		c.check(fmt.Sprintf("answer %d", i), a)
	}
	// The fake's configuration allows 127.0.0.1 (AllowLoopback); nothing
	// else internal is let in, by address or by name.
	sub := f.subscription()
	for _, host := range []string{"169.254.169.254", "10.0.0.1", "[::ffff:169.254.169.254]", "0.0.0.0", "2130706433", "localhost", "metadata.google.internal"} {
		var tok map[string]any
		if err := json.Unmarshal([]byte(sub.Token), &tok); err != nil {
			t.Fatal(err)
		}
		tok["endpoint"] = "https://" + host + "/latest/meta-data/" + sub.ID
		status, b := s.call(s.key, http.MethodPut, "/v1/recipients/u_canary_ssrf/devices", map[string]any{"transport": "webpush", "token": tok})
		if p := problemOf(t, b); status != http.StatusBadRequest || p.Field != "token" {
			t.Errorf("a Web Push endpoint on %s: %d %s, want 400 naming token", host, status, b)
		}
		c.check("a refused endpoint's answer", string(b))
	}

	s.proc.signal(syscall.SIGTERM)
	if code := s.proc.exitCode(20 * time.Second); code != 0 {
		t.Errorf("serve exited %d on SIGTERM, want 0", code)
	}
	stderr := s.proc.Stderr.String()
	if !strings.Contains(stderr, `"level":"DEBUG"`) {
		t.Errorf("no debug line in the log: was --log-level debug taken?")
	}
	c.check("serve's log (stderr)", stderr)
	checkEscapes(t, "serve's log", stderr)
	// stdout holds the first key's message, and nothing else of a secret.
	c.check("serve's stdout without the first key's message", strings.ReplaceAll(s.proc.Stdout.String(), s.key, ""))
}

// testConfigCanaries: serve refusing a configuration whose credentials are
// malformed, and which hold a canary, says which setting is wrong without
// repeating the value — in text and JSON log formats, at debug level.
func testConfigCanaries(t *testing.T, bin string) {
	const canary = "CANARYc0nf1gS3cr3tV4lue9x8y7z"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badPEM := "-----BEGIN PRIVATE KEY-----\n" + canary + canary + "\n-----END PRIVATE KEY-----\n"
	sa, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "p", "private_key_id": "k",
		"private_key": badPEM, "client_email": "a@p.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token"})
	saFile := write("sa.json", string(sa))
	notJSON := write("sa-broken.json", `{"type": "service_account", "private_key": "`+canary+``)
	p8 := write("AuthKey.p8", badPEM)
	hmsKey, _ := json.Marshal(map[string]string{"project_id": "p", "key_id": "k", "private_key": badPEM, "sub_account": "s",
		"token_uri": "https://oauth-login.cloud.huawei.com/oauth2/v3/token"})
	hmsFile := write("hms.json", string(hmsKey))
	hmsNotJSON := write("hms-broken.json", `{"project_id": "p", "private_key": "`+canary+``)
	for _, tc := range []struct {
		name    string
		file    config.File
		args    []string
		setting string
	}{
		{"VAPID private key", config.File{Providers: config.Providers{oncepush.TransportWebPush: &registry.WebPush{VAPIDPrivateKey: canary, VAPIDSubject: "mailto:a@example.com"}}}, nil, "providers.webpush"},
		{"VAPID private key PEM", config.File{Providers: config.Providers{oncepush.TransportWebPush: &registry.WebPush{VAPIDPrivateKey: badPEM, VAPIDSubject: "mailto:a@example.com"}}}, nil, "providers.webpush"},
		{"FCM private key", config.File{Providers: config.Providers{oncepush.TransportFCM: &registry.FCM{ServiceAccountFile: saFile}}}, nil, "providers.fcm"},
		{"FCM key file not JSON", config.File{Providers: config.Providers{oncepush.TransportFCM: &registry.FCM{ServiceAccountFile: notJSON}}}, nil, "providers.fcm"},
		{"APNs key", config.File{Providers: config.Providers{oncepush.TransportAPNs: &registry.APNs{KeyFile: p8, KeyID: "ABCDEFGHIJ", TeamID: "KLMNOPQRST", Topic: "com.example.app"}}}, nil, "providers.apns"},
		{"Push Kit private key", config.File{Providers: config.Providers{hms.Name: &registry.HMS{KeyFile: hmsFile}}}, nil, "providers.hms.keyFile"},
		{"Push Kit key file not JSON", config.File{Providers: config.Providers{hms.Name: &registry.HMS{KeyFile: hmsNotJSON}}}, nil, "providers.hms.keyFile"},
		{"RuStore token", config.File{Providers: config.Providers{oncepush.TransportRuStore: &registry.RuStore{ProjectID: "p", ServiceToken: canary + " " + canary}}}, nil, "providers.rustore"},
		{"database password in a URL", config.File{}, []string{"--database", "postgres://push:" + canary + "@127.0.0.1:1/db?connect_timeout=1"}, "--database"},
		{"database password in key=value", config.File{}, []string{"--database", "host=127.0.0.1 user=push password=" + canary}, "--database"},
	} {
		for _, format := range []string{"text", "json"} {
			t.Run(tc.name+" "+format, func(t *testing.T) {
				t.Parallel()
				cfg := filepath.Join(t.TempDir(), "oncepush.json")
				writeJSON(t, cfg, tc.file)
				args := []string{"serve", "--listen", "127.0.0.1:0", "--config", cfg, "--log-level", "debug", "--log-format", format,
					"--database", filepath.Join(t.TempDir(), "oncepush.db")}
				r := run(t, bin, append(args, tc.args...)...)
				if r.code == 0 {
					t.Fatal("serve started")
				}
				if !strings.Contains(r.stderr, tc.setting) {
					t.Errorf("the error does not name %s:\n%s", tc.setting, r.stderr)
				}
				if strings.Contains(r.stdout+r.stderr, canary) {
					t.Errorf("the output repeats the secret:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				}
			})
		}
	}
}

// checkEscapes fails the test when a JSON log line's strings, decoded,
// hold a control character a terminal or a log reader would act on.
func checkEscapes(t *testing.T, where, log string) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				continue
			}
			for _, r := range s {
				if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u202e' {
					t.Errorf("%s: attribute %s holds %U: %q", where, k, r, s)
					break
				}
			}
		}
	}
}

// testSlowClients: a client that sends its request headers a byte at a time,
// or never finishes them, is cut off by the server's header timeout on the
// API listener and the metrics listener alike, and a header block over the
// limit is refused.
func testSlowClients(t *testing.T, bin string) {
	api, ops := startServeWithMetrics(t, bin)
	const headerTimeout = 5 * time.Second // internal/cli's readHeaderTimeout
	for name, addr := range map[string]string{"api": strings.TrimPrefix(api.url, "http://"), "metrics": ops} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				_, _ = io.Copy(io.Discard, conn)
			}()
			// A header line a second, never the blank line that ends them.
			_, _ = conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n"))
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-closed:
					if took := time.Since(start); took < headerTimeout-time.Second || took > headerTimeout+5*time.Second {
						t.Errorf("the connection was closed after %s; the header timeout is %s", took, headerTimeout)
					}
					return
				case <-tick.C:
					if time.Since(start) > headerTimeout+10*time.Second {
						t.Fatalf("a request whose headers never end held its connection for %s", time.Since(start))
					}
					_, _ = conn.Write([]byte("X-Slow: 1\r\n"))
				}
			}
		})
	}
	t.Run("oversized headers", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequest(http.MethodGet, api.url+"/healthz", nil)
		req.Header.Set("X-Big", strings.Repeat("a", 128<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			// Refused while the client was still writing them.
			t.Logf("128 KiB of headers: %v", err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("128 KiB of headers: %d, want 431", resp.StatusCode)
		}
	})
}
