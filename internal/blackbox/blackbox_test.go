package blackbox

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/internal/registry"
	"github.com/oncepush/oncepush/internal/server"
	"github.com/oncepush/oncepush/provider/hms"
)

// TestBinary builds the oncepush command once and runs every black-box test
// as its subtest, so that the binary (in this test's directory) outlives them
// all without a TestMain.
func TestBinary(t *testing.T) {
	bin := build(t)
	t.Run("Version", func(t *testing.T) { t.Parallel(); testVersion(t, bin) })
	t.Run("Help", func(t *testing.T) { t.Parallel(); testHelp(t, bin) })
	t.Run("VAPIDGenerate", func(t *testing.T) { t.Parallel(); testVAPIDGenerate(t, bin) })
	t.Run("FakeProvidersConfig", func(t *testing.T) { t.Parallel(); testFakeProvidersConfig(t, bin) })
	t.Run("FakeProvidersCertName", func(t *testing.T) { t.Parallel(); testFakeProvidersCertName(t, bin) })
	t.Run("ConfigErrors", func(t *testing.T) { t.Parallel(); testConfigErrors(t, bin) })
	t.Run("MetricsListener", func(t *testing.T) { t.Parallel(); testMetricsListener(t, bin) })
	t.Run("EveryKeyRevoked", func(t *testing.T) { t.Parallel(); testEveryKeyRevoked(t, bin) })
	t.Run("SlowClients", func(t *testing.T) { t.Parallel(); testSlowClients(t, bin) })
	t.Run("ConfigCanaries", func(t *testing.T) { t.Parallel(); testConfigCanaries(t, bin) })
	t.Run("READMEWalkthrough", func(t *testing.T) { t.Parallel(); testREADMEWalkthrough(t, bin) })
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			t.Run("Deliver", func(t *testing.T) { t.Parallel(); testDeliver(t, bin, db) })
			t.Run("CLI", func(t *testing.T) { t.Parallel(); testCLI(t, bin, db) })
			t.Run("SplitProcesses", func(t *testing.T) { t.Parallel(); testSplitProcesses(t, bin, db) })
			t.Run("SIGTERM", func(t *testing.T) { t.Parallel(); testSIGTERM(t, bin, db) })
			t.Run("Canaries", func(t *testing.T) { t.Parallel(); testCanaries(t, bin, db) })
			t.Run("Logs", func(t *testing.T) { t.Parallel(); testLogs(t, bin, db) })
			t.Run("Cancel", func(t *testing.T) { t.Parallel(); testCancel(t, bin, db) })
			t.Run("DirectSend", func(t *testing.T) { t.Parallel(); testDirectSend(t, bin, db) })
			if db.name == "postgres" {
				t.Run("CampaignTwoStarters", func(t *testing.T) { t.Parallel(); testCampaignTwoStarters(t, bin, db) })
			}
		})
	}
}

func testVersion(t *testing.T, bin string) {
	out := runOK(t, bin, "version")
	if !strings.HasPrefix(out, "oncepush ") || len(strings.TrimSpace(out)) <= len("oncepush") {
		t.Errorf("version printed %q, want \"oncepush <version>\"", out)
	}
	if r := run(t, bin, "version", "--no-such-flag"); r.code != 2 {
		t.Errorf("version with an unknown flag: exit code %d, want 2 (misuse)", r.code)
	}
	help := runOK(t, bin, "help")
	for _, cmd := range []string{"serve", "work", "migrate", "keys", "vapid", "send", "fake-providers", "version"} {
		if !strings.Contains(help, "\n  "+cmd+" ") {
			t.Errorf("help does not list %q:\n%s", cmd, help)
		}
	}
	if r := run(t, bin, "no-such-command"); r.code != 2 {
		t.Errorf("an unknown command: exit code %d, want 2", r.code)
	}
}

// testHelp: -h and --help on every command, and on every subcommand of
// keys and vapid, describe it (and its flags) on stdout and exit 0; a flag it
// does not take is said once, with a hint to the help, exit code 2.
func testHelp(t *testing.T, bin string) {
	for _, c := range []struct {
		cmd  []string
		want []string // in the help, besides "oncepush <cmd>: "
	}{
		{[]string{"serve"}, []string{"-listen", "-database", "-no-workers"}},
		{[]string{"work"}, []string{"-metrics-listen", "-database"}},
		{[]string{"migrate"}, []string{"-database"}},
		{[]string{"send"}, []string{"-to", "-dedupe-key"}},
		{[]string{"fake-providers"}, []string{"-listen"}},
		{[]string{"version"}, nil},
		{[]string{"keys"}, []string{"keys create", "keys list", "keys revoke"}},
		{[]string{"keys", "create"}, []string{"-name", "-scope"}},
		{[]string{"keys", "list"}, []string{"-database"}},
		{[]string{"keys", "revoke"}, []string{"ID", "-database"}},
		{[]string{"vapid"}, []string{"vapid generate"}},
		{[]string{"vapid", "generate"}, []string{"-json"}},
	} {
		name := strings.Join(c.cmd, " ")
		for _, h := range []string{"-h", "--help"} {
			r := run(t, bin, append(slices.Clone(c.cmd), h)...)
			if r.code != 0 || r.stderr != "" {
				t.Errorf("%s %s: exit code %d, stderr %q; want 0 and nothing", name, h, r.code, r.stderr)
			}
			if !strings.HasPrefix(r.stdout, "oncepush "+name+": ") || len(r.stdout) < len("oncepush "+name+": ")+10 {
				t.Errorf("%s %s printed %q, want a description", name, h, r.stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("%s %s does not mention %s:\n%s", name, h, w, r.stdout)
				}
			}
		}
		if name == "keys" || name == "vapid" {
			continue // their subcommands take the flags
		}
		r := run(t, bin, append(slices.Clone(c.cmd), "--no-such-flag")...)
		if r.code != 2 || strings.Count(r.stderr, "no-such-flag") != 1 || !strings.Contains(r.stderr, "--help") || r.stdout != "" {
			t.Errorf("%s --no-such-flag: exit code %d, stderr %q; want 2 and the error once, with a hint to --help", name, r.code, r.stderr)
		}
	}
}

// testVAPIDGenerate: the key pair is well formed, and the private key is one
// the server's Web Push configuration accepts.
func testVAPIDGenerate(t *testing.T, bin string) {
	var keys struct{ PublicKey, PrivateKey string }
	if err := json.Unmarshal([]byte(runOK(t, bin, "vapid", "generate", "--json")), &keys); err != nil {
		t.Fatal(err)
	}
	pub, err := base64.RawURLEncoding.DecodeString(keys.PublicKey)
	if err != nil || len(pub) != 65 || pub[0] != 4 {
		t.Errorf("public key %q: want an uncompressed P-256 point, base64url (%v)", keys.PublicKey, err)
	}
	if priv, err := base64.RawURLEncoding.DecodeString(keys.PrivateKey); err != nil || len(priv) != 32 {
		t.Errorf("private key: want 32 bytes, base64url (%v)", err)
	}
	path := filepath.Join(t.TempDir(), "vapid.json")
	f := config.File{Providers: config.Providers{oncepush.TransportWebPush: &registry.WebPush{
		VAPIDPrivateKey: keys.PrivateKey, VAPIDSubject: "mailto:ops@example.com",
	}}}
	writeJSON(t, path, f)
	st, err := config.Load(config.Flags{Config: path}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.BuildProviders(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("the generated private key is refused: %v", err)
	}
	if r := run(t, bin, "vapid"); r.code != 2 {
		t.Errorf("vapid without generate: exit code %d, want 2", r.code)
	}
}

// testFakeProvidersConfig: with no --dir, fake-providers writes its files
// into a temporary directory, prints a configuration that config.Load reads
// strictly and from which every provider builds, writes the same file there,
// and removes the directory when SIGTERM stops it.
func testFakeProvidersConfig(t *testing.T, bin string) {
	p := start(t, bin, "fake-providers", "--listen", "127.0.0.1:0")
	f := readFake(t, p, "")
	dir := filepath.Dir(sectionAPNs(f.config.Providers).KeyFile)
	written, err := os.ReadFile(filepath.Join(dir, "oncepush.json"))
	if err != nil {
		t.Fatalf("the configuration file: %v", err)
	}
	if strings.TrimSpace(string(written)) != f.raw {
		t.Errorf("oncepush.json differs from what was printed:\n%s\nprinted:\n%s", written, f.raw)
	}
	st, err := config.Load(config.Flags{Config: filepath.Join(dir, "oncepush.json")}, noEnv)
	if err != nil {
		t.Fatalf("config.Load refuses the printed configuration: %v", err)
	}
	providers, err := st.BuildProviders(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("the printed configuration's providers do not build: %v", err)
	}
	got := map[oncepush.Transport]bool{}
	for _, pr := range providers {
		got[pr.Transport()] = true
	}
	for _, tr := range transports {
		if !got[tr] {
			t.Errorf("no %s provider configured", tr)
		}
	}
	// Every URL points at the fake, whose certificate the CA file holds.
	pr := st.Providers
	for name, u := range map[string]string{"fcm.baseURL": sectionFCM(pr).BaseURL, "apns.host": sectionAPNs(pr).Host, "rustore.baseURL": sectionRuStore(pr).BaseURL} {
		if !strings.HasPrefix(u, f.url) {
			t.Errorf("%s = %q, not on the fake %s", name, u, f.url)
		}
	}
	if sub := f.subscription(); !strings.HasPrefix(sub.Token, `{"endpoint":"`+f.url+"/webpush/") {
		t.Errorf("subscription %q is not on the fake", sub.Token)
	}

	p.signal(syscall.SIGTERM)
	if code := p.exitCode(10 * time.Second); code != 0 {
		t.Errorf("fake-providers exited %d on SIGTERM, want 0", code)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the temporary directory %s outlives the process (%v)", dir, err)
	}

	// The fake has no authentication: it listens on loopback only.
	r := run(t, bin, "fake-providers", "--listen", "0.0.0.0:0")
	if r.code == 0 || !strings.Contains(r.stderr, "--listen") {
		t.Errorf("a non-loopback --listen: exit code %d, stderr %q; want a failure naming --listen", r.code, r.stderr)
	}
}

// testFakeProvidersCertName: --cert-name puts a provider's real host into
// the fake's certificate (for a client tunnelled to the fake), beside the
// loopback address it is reached at.
func testFakeProvidersCertName(t *testing.T, bin string) {
	p := start(t, bin, "fake-providers", "--listen", "127.0.0.1:0", "--cert-name", "fcm.googleapis.com", "--connect-listen", "127.0.0.1:0")
	f := readFake(t, p, "")
	p.waitFor(p.Stderr, "the CONNECT proxy's address", func(s string) (string, bool) {
		return s, strings.Contains(s, "CONNECT proxy: http://127.0.0.1:")
	})
	b, err := os.ReadFile(sectionFCM(f.config.Providers).CAFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("the CA file holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"fcm.googleapis.com", "127.0.0.1"} {
		if err := cert.VerifyHostname(host); err != nil {
			t.Errorf("the fake's certificate: %v", err)
		}
	}
	f.subscription() // the fake still answers on its loopback address

	r := run(t, bin, "fake-providers", "--listen", "127.0.0.1:0", "--cert-name", " ")
	if r.code == 0 || !strings.Contains(r.stderr, "--cert-name") {
		t.Errorf("an empty --cert-name: exit code %d, stderr %q; want a failure naming --cert-name", r.code, r.stderr)
	}
	r = run(t, bin, "fake-providers", "--listen", "127.0.0.1:0", "--connect-listen", "0.0.0.0:0")
	if r.code == 0 || !strings.Contains(r.stderr, "--connect-listen") {
		t.Errorf("a non-loopback --connect-listen: exit code %d, stderr %q; want a failure naming it", r.code, r.stderr)
	}
}

// testConfigErrors: a bad setting stops serve before it serves — exit code
// not 0, no API key created — with a message naming the setting.
func testConfigErrors(t *testing.T, bin string) {
	dir := t.TempDir()
	unknownKey := filepath.Join(dir, "unknown.json")
	if err := os.WriteFile(unknownKey, []byte(`{"engine": {"workers": 2, "wrokers": 3}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	noKeyFile := filepath.Join(dir, "nokeyfile.json")
	writeJSON(t, noKeyFile, config.File{Providers: config.Providers{oncepush.TransportAPNs: &registry.APNs{
		KeyFile: filepath.Join(dir, "missing", "AuthKey.p8"), KeyID: "ABCDEFGHIJ", TeamID: "KLMNOPQRST", Topic: "com.example.app",
	}}})
	file := func(body string) string {
		p := filepath.Join(t.TempDir(), "oncepush.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badDuration, capitals := file(`{"engine": {"runBudget": "soon"}}`), file(`{"engine": {"BATCHSIZE": 5}}`)
	for _, c := range []struct {
		name    string
		args    []string
		env     []string
		setting string // the start of the error, after "oncepush serve: "
	}{
		{"bad --listen", []string{"--listen", "nonsense"}, nil, "--listen: "},
		{"bad ONCEPUSH_LISTEN", nil, []string{"ONCEPUSH_LISTEN=127.0.0.1"}, "ONCEPUSH_LISTEN: "},
		{"bad listen in the file", nil, []string{"ONCEPUSH_CONFIG=" + file(`{"listen": "127.0.0.1"}`)}, "listen: "},
		{"unknown key in the config file", []string{"--config", unknownKey}, nil, "--config: " + unknownKey + ": unknown setting engine.wrokers"},
		{"unreadable provider key file", []string{"--config", noKeyFile}, nil, "providers.apns.keyFile: " + filepath.Join(dir, "missing", "AuthKey.p8") + " does not exist"},
		{"empty provider key file", []string{"--config", file(`{"providers": {"fcm": {"serviceAccountFile": ""}}}`)}, nil, "providers.fcm.serviceAccountFile: is empty"},
		{"bad --log-level", []string{"--log-level", "loud"}, nil, "--log-level: "},
		{"bad ONCEPUSH_LOG_LEVEL", nil, []string{"ONCEPUSH_LOG_LEVEL=loud"}, "ONCEPUSH_LOG_LEVEL: "},
		{"bad duration", []string{"--config", badDuration}, nil, "--config: " + badDuration + `: engine.runBudget: "soon" is not a duration`},
		{"engine refuses", []string{"--config", file(`{"engine": {"workers": -1}}`)}, nil, "engine.workers: must not be negative"},
		{"engine refuses a pair", []string{"--config", file(`{"engine": {"lease": "20s"}}`)}, nil, "engine.lease: 20s must exceed engine.runBudget + engine.sendTimeout"},
		{"a setting in capitals", []string{"--config", capitals}, nil, "--config: " + capitals + ": unknown setting engine.BATCHSIZE"},
		// Were oncepush_listen read, its error would come first.
		{"a variable in lower case", nil, []string{"oncepush_listen=nonsense", "ONCEPUSH_LOG_LEVEL=loud"}, "ONCEPUSH_LOG_LEVEL: "},
		{"a flag in capitals", []string{"--LISTEN", "127.0.0.1:0"}, nil, "flag provided but not defined: -LISTEN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "oncepush.db")
			args := append([]string{"serve", "--database", db, "--listen", "127.0.0.1:0"}, c.args...)
			if c.env != nil {
				args = []string{"serve", "--database", db}
			}
			r := runEnv(t, bin, c.env, args...)
			if r.code == 0 {
				t.Fatalf("serve exited 0; want a configuration error")
			}
			if !strings.HasPrefix(r.stderr, "oncepush serve: "+c.setting) {
				t.Errorf("the error does not start with %s:\n%s", c.setting, r.stderr)
			}
			if strings.Contains(r.stderr, "Config.") {
				t.Errorf("the error names a Go field, not the setting:\n%s", r.stderr)
			}
			if keyPattern.MatchString(r.stdout) {
				t.Errorf("serve created an API key before failing:\n%s", r.stdout)
			}
		})
	}
}

// testEveryKeyRevoked: serve on a database whose keys are all revoked
// creates no key (there were keys) and warns that the API refuses every
// request, saying how to create one; with an active key it says nothing.
func testEveryKeyRevoked(t *testing.T, bin string) {
	dir := t.TempDir()
	db, cfg := filepath.Join(dir, "oncepush.db"), filepath.Join(dir, "oncepush.json")
	writeJSON(t, cfg, config.File{})
	key := strings.TrimSpace(runOK(t, bin, "keys", "create", "--database", db, "--name", "only"))
	const warning = "every API key is revoked"
	for _, revoked := range []bool{false, true} {
		if revoked {
			runOK(t, bin, "keys", "revoke", "--database", db, key[:len("opk_")+8])
		}
		s := startServe(t, bin, db, cfg, false)
		// The warning comes before the line startServe waits for.
		out := s.proc.Stderr.String()
		if got := strings.Contains(out, warning) && strings.Contains(out, "oncepush keys create --name"); got != revoked {
			t.Errorf("every key revoked %v: warned %v:\n%s", revoked, got, out)
		}
		if keyPattern.MatchString(s.proc.Stdout.String()) {
			t.Errorf("serve created a key on a database that had one:\n%s", s.proc.Stdout.String())
		}
		s.proc.signal(syscall.SIGTERM)
		if code := s.proc.exitCode(10 * time.Second); code != 0 {
			t.Fatalf("serve exited %d on SIGTERM", code)
		}
	}
}

// testDeliver: devices of all four transports registered over HTTP receive a
// notification posted over HTTP, once each, through the fake providers, and
// the outcomes appear in the API; then each provider's dead-token answer
// deletes its device and its words are recorded.
func testDeliver(t *testing.T, bin string, db database) {
	f := startFake(t, bin)
	s := startServe(t, bin, db.new(t), f.serverConfig(t, nil), true)

	const who = "u_8831"
	fakeToken := map[oncepush.Transport]string{}
	for i, tr := range transports {
		tok, ft := token(f, tr, i)
		s.register(who, tr, tok)
		fakeToken[tr] = ft
	}
	a := s.send(map[string]any{
		"recipients": []string{who}, "type": "invoice.paid", "title": "Invoice paid", "body": "Globex paid inv_2201.",
		"link": "/invoices/inv_2201", "data": map[string]any{"invoice": "inv_2201"}, "dedupeKey": "invoice.paid:inv_2201",
	})
	if a.ID == 0 || a.Queued != 1 || a.Duplicates != 0 {
		t.Fatalf("send answered %+v, want one queued", a)
	}

	d := s.waitFinal(who, 1)[0]
	if d.Status != "sent" || d.NotificationID != a.ID || len(d.Devices) != len(transports) {
		t.Fatalf("delivery %+v: want sent to %d devices", d, len(transports))
	}
	byTransport := map[oncepush.Transport]attempt{}
	for _, at := range d.Devices {
		byTransport[at.Transport] = at
		if at.State != "accepted" || at.Submissions != 1 {
			t.Errorf("%s: state %s after %d submissions, want accepted after 1", at.Transport, at.State, at.Submissions)
		}
		// RuStore's answer carries no message id.
		if at.Transport != oncepush.TransportRuStore && at.ProviderID == "" {
			t.Errorf("%s: no provider id recorded", at.Transport)
		}
	}

	reqs := f.waitRequests(4)
	if len(reqs) != len(transports) {
		t.Fatalf("the fake received %d requests, want 4 (one per device)", len(reqs))
	}
	for _, r := range reqs {
		if r.Token != fakeToken[r.Transport] {
			t.Errorf("%s: request for token %q, want %q", r.Transport, r.Token, fakeToken[r.Transport])
		}
		if r.NotificationID != d.OncepushID {
			t.Errorf("%s: payload carries oncepush_id %q, want the delivery's %q", r.Transport, r.NotificationID, d.OncepushID)
		}
		// RuStore and Push Kit have no collapse identity on the wire.
		if r.Transport != oncepush.TransportRuStore && r.Transport != hms.Name && r.CollapseID != d.OncepushID {
			t.Errorf("%s: collapse id %q, want the notification id %q", r.Transport, r.CollapseID, d.OncepushID)
		}
		if r.Status < 200 || r.Status > 299 {
			t.Errorf("%s: the fake answered %d", r.Transport, r.Status)
		}
		switch r.Transport {
		case oncepush.TransportAPNs:
			if r.APNsID == "" || r.APNsID != byTransport[r.Transport].ProviderID {
				t.Errorf("apns-id %q, but the ledger recorded %q", r.APNsID, byTransport[r.Transport].ProviderID)
			}
		case oncepush.TransportWebPush:
			if !strings.Contains(r.Payload, `"title":"Invoice paid"`) {
				t.Errorf("web push payload (decrypted by the fake): %s", r.Payload)
			}
		}
	}

	// Metrics count what happened, by transport.
	status, body := s.call("", http.MethodGet, "/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d", status)
	}
	for _, tr := range transports {
		if !strings.Contains(string(body), fmt.Sprintf(`transport="%s"`, tr)) {
			t.Errorf("/metrics has no series for transport %s", tr)
		}
	}

	// Each provider's own dead-token answer deletes that device and is
	// recorded in its words; another recipient's device is untouched.
	words := map[oncepush.Transport]string{
		oncepush.TransportFCM: "UNREGISTERED", oncepush.TransportAPNs: "Unregistered",
		oncepush.TransportWebPush: "410", oncepush.TransportRuStore: "NOT_FOUND", hms.Name: "80300007",
	}
	for _, tr := range transports {
		f.program(tr, fakeToken[tr], fakepush.DeadTokenAnswer(tr))
	}
	kept, _ := token(f, oncepush.TransportFCM, 99)
	s.register("u_kept", oncepush.TransportFCM, kept)
	s.send(map[string]any{"recipients": []string{who, "u_kept"}, "title": "Still there?"})

	d = s.waitFinal(who, 2)[0]
	if d.Status != "failed" || len(d.Devices) != len(transports) {
		t.Fatalf("delivery to dead tokens %+v: want failed on %d devices", d, len(transports))
	}
	for _, at := range d.Devices {
		if at.State != "invalid" || !strings.Contains(at.Error, words[at.Transport]) {
			t.Errorf("%s: state %s, text %q; want invalid with the provider's %q", at.Transport, at.State, at.Error, words[at.Transport])
		}
	}
	if devs := s.devices(who); len(devs) != 0 {
		t.Errorf("dead devices kept: %+v", devs)
	}
	if devs := s.devices("u_kept"); len(devs) != 1 {
		t.Errorf("a live device of another recipient: %+v", devs)
	}
	if k := s.waitFinal("u_kept", 1)[0]; k.Status != "sent" {
		t.Errorf("the live device's delivery: %+v", k)
	}
}

// testDirectSend: a notification to device tokens, each listed twice, and
// sent twice under one dedupe key, reaches each provider exactly once per
// token, and each token's history is read under the implicit recipient that
// docs/api.md tells a client to compute.
func testDirectSend(t *testing.T, bin string, db database) {
	f := startFake(t, bin)
	s := startServe(t, bin, db.new(t), f.serverConfig(t, nil), true)

	var devices []map[string]string
	fakeToken := map[oncepush.Transport]string{}
	implicit := map[oncepush.Transport]string{}
	for i, tr := range transports {
		tok, ft := token(f, tr, 500+i)
		fakeToken[tr] = ft
		key := tok // the token's key: for webpush, its endpoint
		if tr == oncepush.TransportWebPush {
			var sub struct{ Endpoint string }
			if err := json.Unmarshal([]byte(tok), &sub); err != nil {
				t.Fatal(err)
			}
			key = sub.Endpoint
		}
		sum := sha256.Sum256([]byte(key))
		implicit[tr] = "device:" + string(tr) + ":" + hex.EncodeToString(sum[:])[:32]
		d := map[string]string{"transport": string(tr), "token": tok}
		devices = append(devices, d, d)
	}
	body := map[string]any{"devices": devices, "title": "Direct", "dedupeKey": "direct-1"}
	a := s.send(body)
	if n := len(transports); a.Queued != n || a.Duplicates != n {
		t.Fatalf("direct send answered %+v, want %d queued and %d duplicates", a, n, n)
	}
	if again := s.send(body); again.ID != a.ID || !again.Duplicate {
		t.Fatalf("the retry answered %+v, want the first answer as a duplicate", again)
	}
	for _, tr := range transports {
		d := s.waitFinal(implicit[tr], 1)
		if len(d) != 1 || d[0].Status != "sent" || d[0].NotificationID != a.ID {
			t.Fatalf("%s: deliveries under %s: %+v, want the one sent", tr, implicit[tr], d)
		}
		reqs := f.requests(tr)
		if len(reqs) != 1 || reqs[0].Token != fakeToken[tr] {
			t.Errorf("%s: the fake received %d requests (%+v), want one to the token", tr, len(reqs), reqs)
		}
	}

	// A token registered to a recipient is refused, not taken from it.
	s.register("u_owner", oncepush.TransportFCM, devices[0]["token"])
	status, b := s.call(s.key, http.MethodPost, "/v1/notifications", map[string]any{"devices": devices[:1], "title": "Taken?"})
	if p := problemOf(t, b); status != http.StatusConflict || p.Code != "token_registered" || p.Field != "devices[0].token" {
		t.Fatalf("direct send to a registered token: %d %+v, want 409 token_registered", status, p)
	}
}

// testCLI: migrate, keys create/list/revoke against a running server, and
// send through the command line, delivered by the running server.
func testCLI(t *testing.T, bin string, db database) {
	dbURL := db.new(t)
	runOK(t, bin, "migrate", "--database", dbURL)
	runOK(t, bin, "migrate", "--database", dbURL) // a migrated database is fine

	f := startFake(t, bin)
	cfg := f.serverConfig(t, nil)
	s := startServe(t, bin, dbURL, cfg, true)
	s.must(http.MethodGet, "/readyz", nil, http.StatusOK, nil)

	// keys create: a key with the scopes asked for, usable at once.
	key := strings.TrimSpace(runOK(t, bin, "keys", "create", "--database", dbURL, "--name", "ci-bot", "--scope", "send,read"))
	if !keyPattern.MatchString(key) || keyPattern.FindString(key) != key {
		t.Fatalf("keys create printed %q, want just the key", key)
	}
	id := key[:len("opk_")+8]
	notify := map[string]any{"recipients": []string{"nobody"}, "title": "with the new key"}
	if status, b := s.call(key, http.MethodPost, "/v1/notifications", notify); status != http.StatusAccepted {
		t.Fatalf("send with the new key: %d %s", status, b)
	}
	status, b := s.call(key, http.MethodPut, "/v1/recipients/nobody/devices", map[string]string{"transport": "fcm", "token": "fcm-token-00000001"})
	if p := problemOf(t, b); status != http.StatusForbidden || p.Code != server.CodeForbidden {
		t.Errorf("a key without the devices scope registered a device: %d %s", status, b)
	}

	listed := func() []string {
		for _, line := range strings.Split(runOK(t, bin, "keys", "list", "--database", dbURL), "\n") {
			if fields := strings.Fields(line); len(fields) > 0 && fields[0] == id {
				return fields
			}
		}
		t.Fatalf("keys list does not show %s", id)
		return nil
	}
	if l := listed(); len(l) != 5 || l[1] != "ci-bot" || l[2] != "send,read" || l[4] != "-" {
		t.Errorf("keys list: %q, want id, name ci-bot, scopes send,read, created, not revoked", l)
	}
	if strings.Contains(runOK(t, bin, "keys", "list", "--database", dbURL), key[len(id):]) {
		t.Error("keys list shows a key's secret")
	}

	// keys revoke: the running server refuses the key once its lookup cache
	// (server.KeyCacheTTLDefault, the documented bound) has let go of it.
	runOK(t, bin, "keys", "revoke", "--database", dbURL, id)
	// Time passing is the subject, in the server process (no hook reaches
	// it): longer than the TTL, the wait cannot be too short.
	time.Sleep(server.KeyCacheTTLDefault + 100*time.Millisecond)
	status, b = s.call(key, http.MethodPost, "/v1/notifications", notify)
	if p := problemOf(t, b); status != http.StatusUnauthorized || p.Code != server.CodeUnauthorized {
		t.Errorf("a revoked key: %d %s; want 401 %s", status, b, server.CodeUnauthorized)
	}
	if l := listed(); l[len(l)-1] == "-" {
		t.Errorf("keys list does not show the revocation: %q", l)
	}
	if r := run(t, bin, "keys", "revoke", "--database", dbURL, id); r.code == 0 {
		t.Error("revoking a revoked key succeeded")
	}
	s.must(http.MethodGet, "/v1/recipients/nobody/deliveries", nil, http.StatusOK, nil) // the admin key still works

	// send: queued by the command line, delivered by the running server.
	tok, ft := token(f, oncepush.TransportFCM, 1)
	s.register("u_cli", oncepush.TransportFCM, tok)
	sendArgs := []string{"send", "--database", dbURL, "--config", cfg, "--to", "u_cli", "--title", "From the command line",
		"--data", `{"n": 12345678901234567890, "s": "x"}`, "--link", "/from/cli", "--dedupe-key", "cli-1", "--ttl", "1h", "--json"}
	type sent struct {
		ID, Queued, Duplicates int64
		Duplicate              bool
	}
	var first, again sent
	if err := json.Unmarshal([]byte(runOK(t, bin, sendArgs...)), &first); err != nil {
		t.Fatal(err)
	}
	if first.ID == 0 || first.Queued != 1 || first.Duplicates != 0 || first.Duplicate {
		t.Fatalf("send printed %+v, want one queued", first)
	}
	// The same send again answers as the API does: the first answer, the
	// original notification's id, marked a duplicate.
	if err := json.Unmarshal([]byte(runOK(t, bin, sendArgs...)), &again); err != nil {
		t.Fatal(err)
	}
	if again != (sent{ID: first.ID, Queued: first.Queued, Duplicate: true}) {
		t.Errorf("the same send again printed %+v, want the first answer (id %d) marked a duplicate", again, first.ID)
	}
	text := runOK(t, bin, sendArgs[:len(sendArgs)-1]...)
	if !strings.Contains(text, fmt.Sprintf("id: %d\n", first.ID)) || !strings.Contains(text, "duplicate: true") {
		t.Errorf("the same send again, as text: %q; want id %d, a duplicate", text, first.ID)
	}
	// Another notification under the same key is refused, naming the flag.
	other := append(slices.Clone(sendArgs), "--body", "something else")
	if r := run(t, bin, other...); r.code != 1 || !strings.Contains(r.stderr, "--dedupe-key") {
		t.Errorf("another notification under the same key: exit code %d, stderr %q; want 1 naming --dedupe-key", r.code, r.stderr)
	}
	// The API and the command line agree on what a request is
	// (Client.RequestHash): the same notification over HTTP under the key
	// is the command line's, replayed.
	var viaAPI sendAnswer
	s.must(http.MethodPost, "/v1/notifications", map[string]any{"recipients": []string{"u_cli"}, "title": "From the command line",
		"data": json.RawMessage(`{"s": "x", "n": 12345678901234567890}`), "link": "/from/cli", "dedupeKey": "cli-1", "ttlSeconds": 3600},
		http.StatusAccepted, &viaAPI)
	if viaAPI.ID != first.ID || !viaAPI.Duplicate {
		t.Errorf("the command line's send over HTTP answered %+v, want id %d replayed", viaAPI, first.ID)
	}
	d := s.waitFinal("u_cli", 1)[0]
	if d.Status != "sent" || d.NotificationID != first.ID {
		t.Fatalf("the command line's delivery: %+v", d)
	}
	reqs := f.waitRequests(1)
	if len(reqs) != 1 || reqs[0].Token != ft || reqs[0].NotificationID != d.OncepushID {
		t.Fatalf("requests at the fake: %+v", reqs)
	}
	if !strings.Contains(reqs[0].Payload, "12345678901234567890") {
		t.Errorf("--data's number was not kept as written: %s", reqs[0].Payload)
	}

	// Invalid input: exit code 1, the flag named, nothing written.
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--title", "no recipient"}, "--to"},
		{[]string{"--to", "u_bad", "--title", "x", "--link", "no/leading/slash"}, "--link"},
		{[]string{"--to", "u_bad", "--title", "x", "--data", "[1, 2]"}, "--data"},
		{[]string{"--to", "u_bad", "--title", "x", "--data", `{"oncepush_id": "mine"}`}, "--data"},
		{[]string{"--to", "u_bad"}, "--title"},
		{[]string{"--to", "u_bad", "--title", "x", "--image", "ftp://example.com/a.png"}, "--image"},
		{[]string{"--to", "u_bad", "--title", "x", "--ambiguity", "sometimes"}, "--ambiguity"},
		{[]string{"--to", "u_bad", "--title", "x", "--ttl", "700h"}, "--ttl"},
		{[]string{"--to", "u_bad", "--title", "x", "--ttl", "soon"}, "--ttl"},
		{[]string{"--to", "u_bad", "--title", "x", "--scheduled-at", "tomorrow"}, "--scheduled-at"},
		{[]string{"--to", "u_bad", "--title", "x", "--dedupe-key", strings.Repeat("k", 201)}, "--dedupe-key"},
		{[]string{"--to", "u_bad," + strings.Repeat("r", 201), "--title", "x"}, "--to"},
	} {
		r := run(t, bin, append([]string{"send", "--database", dbURL}, c.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, c.flag) {
			t.Errorf("send %q: exit code %d, stderr %q; want 1 naming %s", c.args, r.code, r.stderr, c.flag)
		}
	}
	if r := run(t, bin, "send", "--database", dbURL, "--to", "u_bad", "--title", "x", "--no-such-flag"); r.code != 2 {
		t.Errorf("send with an unknown flag: exit code %d, want 2", r.code)
	}
	if ds := s.deliveries("u_bad"); len(ds) != 0 {
		t.Errorf("invalid sends wrote deliveries: %+v", ds)
	}
}

// testSplitProcesses: 'serve --no-workers' takes notifications and delivers
// none; 'work' on the same database delivers them.
func testSplitProcesses(t *testing.T, bin string, db database) {
	f := startFake(t, bin)
	dbURL := db.new(t)
	cfg := f.serverConfig(t, nil)
	api := startServe(t, bin, dbURL, cfg, true, "--no-workers")

	const n = 5
	var recipients []string
	for i := range n {
		r := fmt.Sprintf("u_split_%d", i)
		recipients = append(recipients, r)
		tok, _ := token(f, oncepush.TransportAPNs, i)
		api.register(r, oncepush.TransportAPNs, tok)
	}
	first := api.send(map[string]any{"recipients": recipients[:1], "title": "before the workers"})
	// The API process alone delivers nothing, however long it runs. Time
	// passing is the subject: a worker would have polled (every 1 s) by now;
	// a loaded machine can make this pass without a poll, never fail it.
	time.Sleep(1500 * time.Millisecond)
	if reqs := f.requests(""); len(reqs) != 0 {
		t.Fatalf("serve --no-workers delivered: %+v", reqs)
	}
	if ds := api.notificationDeliveries(first.ID); len(ds) != 1 || ds[0].Status != "pending" {
		t.Fatalf("before the workers: %+v, want one pending delivery", ds)
	}

	w := start(t, bin, "work", "--database", dbURL, "--config", cfg, "--log-format", "json")
	api.send(map[string]any{"recipients": recipients, "title": "with the workers"})
	for i, r := range recipients {
		want := 1
		if i == 0 {
			want = 2
		}
		for _, d := range api.waitFinal(r, want) {
			if d.Status != "sent" {
				t.Errorf("%s: %+v", r, d)
			}
		}
	}
	if reqs := f.requests(""); len(reqs) != n+1 {
		t.Errorf("the fake received %d requests, want %d", len(reqs), n+1)
	}
	if strings.Contains(w.Stdout.String(), "opk_") {
		t.Errorf("work printed an API key: %s", w.Stdout.String())
	}

	for _, p := range []*proc{w, api.proc} {
		p.signal(syscall.SIGTERM)
		if code := p.exitCode(15 * time.Second); code != 0 {
			t.Errorf("%s exited %d on SIGTERM, want 0", p.Name, code)
		}
	}
}

// testSIGTERM: SIGTERM while sends are in flight stops serve with exit code
// 0 within the shutdown deadline; a restart on the same database delivers the
// rest; no delivery is stranded and no (notification, device) pair reaches a
// provider twice.
func testSIGTERM(t *testing.T, bin string, db database) {
	const (
		shutdownTimeout = 10 * time.Second
		latency         = 1500 * time.Millisecond
		recipients      = 24
		notifications   = 3
	)
	f := startFake(t, bin)
	dbURL := db.new(t)
	cfg := f.serverConfig(t, func(c *config.File) {
		c.HTTP.ShutdownTimeout = config.Duration(shutdownTimeout)
		c.Engine.ConcurrentSends = 4 // a slow provider keeps most of a batch waiting
	})
	s := startServe(t, bin, dbURL, cfg, true)

	// Every recipient has a slow FCM device and a fast APNs one.
	var names []string
	for i := range recipients {
		r := fmt.Sprintf("u_term_%02d", i)
		names = append(names, r)
		fcmTok, _ := token(f, oncepush.TransportFCM, i)
		apnsTok, _ := token(f, oncepush.TransportAPNs, i)
		s.register(r, oncepush.TransportFCM, fcmTok)
		s.register(r, oncepush.TransportAPNs, apnsTok)
	}
	f.latency(oncepush.TransportFCM, latency)
	var ids []int64
	per := recipients / notifications
	for i := range notifications {
		a := s.send(map[string]any{"recipients": names[i*per : (i+1)*per], "title": fmt.Sprintf("busy %d", i)})
		ids = append(ids, a.ID)
	}
	eventually(t, "an FCM send in flight", func() bool {
		for _, id := range ids {
			for _, d := range s.notificationDeliveries(id) {
				for _, a := range d.Devices {
					if a.State == "sending" {
						return true
					}
				}
			}
		}
		return false
	})

	stopped := time.Now()
	s.proc.signal(syscall.SIGTERM)
	if code := s.proc.exitCode(shutdownTimeout + 5*time.Second); code != 0 {
		t.Fatalf("serve exited %d on SIGTERM, want 0", code)
	}
	took := time.Since(stopped)
	t.Logf("serve stopped %s after SIGTERM", took.Round(time.Millisecond))
	if took > shutdownTimeout {
		t.Errorf("serve took %s to stop, more than its shutdown deadline %s", took, shutdownTimeout)
	}
	if n := len(f.requests(oncepush.TransportFCM)); n >= recipients {
		t.Fatalf("all %d FCM sends were done before SIGTERM: the test proved nothing", n)
	}

	// Restart on the same database. A delivery left claimed by the stopped
	// process would wait for its lease (runBudget + 2×sendTimeout + 1 min,
	// 100 s by default) to expire: longer than waitTimeout.
	f.latency(oncepush.TransportFCM, 0)
	s2 := startServe(t, bin, dbURL, cfg, false)
	s2.key = s.key
	var all []delivery
	eventually(t, "every delivery final after the restart", func() bool {
		all = all[:0]
		for _, id := range ids {
			ds := s2.notificationDeliveries(id)
			for _, d := range ds {
				if d.Status == "pending" {
					return false
				}
			}
			all = append(all, ds...)
		}
		return len(all) == recipients
	})
	for _, d := range all {
		if d.Status != "sent" || len(d.Devices) != 2 {
			t.Errorf("%s: %+v, want sent to 2 devices", d.Recipient, d)
			continue
		}
		for _, a := range d.Devices {
			if a.State != "accepted" || a.Submissions != 1 {
				t.Errorf("%s %s: state %s after %d submissions; want accepted after 1", d.Recipient, a.Transport, a.State, a.Submissions)
			}
		}
	}
	type pair struct{ notification, token string }
	seen := map[pair]int{}
	for _, r := range f.requests("") {
		seen[pair{r.NotificationID, r.Token}]++
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("notification %s reached device %s %d times", p.notification, p.token, n)
		}
	}
	if len(seen) != 2*recipients {
		t.Errorf("%d (notification, device) pairs reached the fake, want %d", len(seen), 2*recipients)
	}

	s2.proc.signal(syscall.SIGTERM)
	if code := s2.proc.exitCode(shutdownTimeout + 5*time.Second); code != 0 {
		t.Errorf("the restarted serve exited %d on SIGTERM, want 0", code)
	}
}

func problemOf(t *testing.T, b []byte) problemAnswer {
	t.Helper()
	var p problemAnswer
	_ = json.Unmarshal(b, &p) // a body that is not a problem leaves it empty
	return p
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func noEnv(string) string { return "" }

// testMetricsListener: with --metrics-listen, /metrics is served there and
// not on the API's address; the backlog gauges are read before the first
// scrape, by the process, not by the scrape.
func testMetricsListener(t *testing.T, bin string) {
	api, addr := startServeWithMetrics(t, bin)
	if status, _ := api.call("", http.MethodGet, "/metrics", nil); status != http.StatusNotFound {
		t.Errorf("/metrics on the API's address: %d, want 404", status)
	}
	if status, _ := api.call("", http.MethodGet, "/healthz", nil); status != http.StatusOK {
		t.Errorf("/healthz on the API's address: %d, want 200", status)
	}
	status, body := doJSON(t, http.DefaultClient, http.MethodGet, "http://"+addr+"/metrics", "", nil)
	if status != http.StatusOK || !strings.Contains(string(body), "\noncepush_backlog_read_timestamp_seconds ") ||
		strings.Contains(string(body), "\noncepush_backlog_read_timestamp_seconds 0\n") {
		t.Errorf("/metrics on --metrics-listen: %d, without a backlog read:\n%s", status, body)
	}
	api.proc.signal(syscall.SIGTERM)
	if code := api.proc.exitCode(15 * time.Second); code != 0 {
		t.Errorf("serve exited %d on SIGTERM, want 0", code)
	}
}
