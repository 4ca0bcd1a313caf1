package apns_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/apns"
	"github.com/oncepush/oncepush/provider/internal/providertest"
	"github.com/oncepush/oncepush/pushtest"
)

// bundle is what a test needs besides the provider.
type bundle struct {
	fake  *pushtest.FakeServer
	clock *pushtest.Clock
	logs  *providertest.Logs
	cfg   apns.Config
}

// setup starts a fake server and a provider pointed at it; opts adjust the
// configuration before New.
func setup(t *testing.T, opts ...func(*apns.Config)) (*apns.Provider, *bundle) {
	t.Helper()
	fake := pushtest.NewFakeServer(t)
	return setupWith(t, fake, opts...)
}

// setupWith makes a provider for an existing fake server (tests that share one).
func setupWith(t *testing.T, fake *pushtest.FakeServer, opts ...func(*apns.Config)) (*apns.Provider, *bundle) {
	t.Helper()
	b := &bundle{fake: fake, clock: pushtest.NewClock(time.Now()), logs: &providertest.Logs{}}
	key, keyID, teamID := fake.APNsKey()
	b.cfg = apns.Config{
		Key:       key,
		KeyID:     keyID,
		TeamID:    teamID,
		Topic:     "com.example.app",
		Host:      fake.URL,
		TLSConfig: fake.TLSConfig(),
		Clock:     b.clock,
		Logger:    b.logs.Logger(),
	}
	p := providertest.Build(t, apns.New, &b.cfg, opts...)
	t.Cleanup(func() { p.Close() })
	return p, b
}

// deviceToken returns the i-th test device token (64 hex characters).
func deviceToken(i int) string {
	sum := sha256.Sum256([]byte("device " + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])
}

// submission is a typical alert for device i.
func submission(i int) *provider.Submission {
	id := fmt.Sprintf("%032x", i+1000)
	return &provider.Submission{
		NotificationID: id,
		CollapseID:     id,
		SubmissionID:   fmt.Sprintf("6f6e6365-7075-5368-8a1d-%012x", 1000+i), // a UUID v5, as the engine's
		DeliveryID:     int64(1000 + i),
		DeviceID:       int64(i),
		Token:          provider.Token(deviceToken(i)),
		Type:           "order_shipped",
		Title:          "Your order shipped",
		Body:           "It arrives on Tuesday.",
		Data:           map[string]string{"oncepush_id": id, "order": "42"},
		ExpiresAt:      time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	good, keyID, teamID := fake.APNsKey()

	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalPKCS8PrivateKey(p384)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sec1DER, _ := x509.MarshalECPrivateKey(p256)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKCS8PrivateKey(edKey)

	tests := []struct {
		name  string
		edit  func(*apns.Config)
		field string // "" = accepted
	}{
		{"valid", func(*apns.Config) {}, ""},
		{"sandbox", func(c *apns.Config) { c.Environment = apns.EnvironmentSandbox; c.Host = "" }, ""},
		{"background", func(c *apns.Config) { c.PushType = apns.PushTypeBackground }, ""},
		{"key empty", func(c *apns.Config) { c.Key = nil }, "Key"},
		{"key not PEM", func(c *apns.Config) { c.Key = []byte("MIGTAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBHkwdwIBAQQg") }, "Key"},
		{"key is SEC1, not PKCS #8", func(c *apns.Config) { c.Key = pemBlock("EC PRIVATE KEY", sec1DER) }, "Key"},
		{"key block is not a key", func(c *apns.Config) { c.Key = pemBlock("PRIVATE KEY", []byte("not DER")) }, "Key"},
		{"key not EC", func(c *apns.Config) { c.Key = pemBlock("PRIVATE KEY", edDER) }, "Key"},
		{"key wrong curve", func(c *apns.Config) { c.Key = pemBlock("PRIVATE KEY", p384DER) }, "Key"},
		{"KeyID missing", func(c *apns.Config) { c.KeyID = "" }, "KeyID"},
		{"KeyID is a file name", func(c *apns.Config) { c.KeyID = "AuthKey_" + keyID + ".p8" }, "KeyID"},
		{"TeamID missing", func(c *apns.Config) { c.TeamID = "" }, "TeamID"},
		{"TeamID not alphanumeric", func(c *apns.Config) { c.TeamID = "ABCDE-1234" }, "TeamID"},
		{"Topic missing", func(c *apns.Config) { c.Topic = "" }, "Topic"},
		{"Environment unknown", func(c *apns.Config) { c.Environment = "development" }, "Environment"},
		{"Host not https", func(c *apns.Config) { c.Host = "http://127.0.0.1:1" }, "Host"},
		{"Host with a path", func(c *apns.Config) { c.Host = "https://127.0.0.1:1/3/device" }, "Host"},
		{"PushType unknown", func(c *apns.Config) { c.PushType = "voip" }, "PushType"},
		{"TokenRefresh too short", func(c *apns.Config) { c.TokenRefresh = 5 * time.Minute }, "TokenRefresh"},
		{"TokenRefresh too long", func(c *apns.Config) { c.TokenRefresh = time.Hour }, "TokenRefresh"},
		{"SafeguardMinAnswers above window", func(c *apns.Config) { c.SafeguardWindow = 10; c.SafeguardMinAnswers = 11 }, "SafeguardMinAnswers"},
		{"SafeguardWindow negative", func(c *apns.Config) { c.SafeguardWindow = -1 }, "SafeguardWindow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := apns.Config{Key: good, KeyID: keyID, TeamID: teamID, Topic: "com.example.app", Host: fake.URL}
			tt.edit(&cfg)
			p, err := apns.New(cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("New: %v, want success", err)
				}
				p.Close()
				return
			}
			var ce *apns.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("New = %v, want a *ConfigError naming %s", err, tt.field)
			}
			if ce.Field != tt.field {
				t.Fatalf("ConfigError.Field = %q (%v), want %q", ce.Field, err, tt.field)
			}
		})
	}
}

func TestReadKeyFile(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	p8, keyID, teamID := fake.APNsKey()
	path := filepath.Join(t.TempDir(), "AuthKey_"+keyID+".p8")
	if err := os.WriteFile(path, p8, 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := apns.ReadKeyFile(path)
	if err != nil {
		t.Fatalf("ReadKeyFile: %v", err)
	}
	p, err := apns.New(apns.Config{Key: key, KeyID: keyID, TeamID: teamID, Topic: "com.example.app", Host: fake.URL, TLSConfig: fake.TLSConfig()})
	if err != nil {
		t.Fatalf("New with the key read from a file: %v", err)
	}
	defer p.Close()
	if res := p.Send(t.Context(), submission(1)); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("send with the key read from a file: %v %q", res.Outcome, res.Text)
	}
	if _, err := apns.ReadKeyFile(filepath.Join(t.TempDir(), "missing.p8")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadKeyFile(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestConfigLogsNoKey(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	key, keyID, teamID := fake.APNsKey()
	var sb strings.Builder
	slog.New(slog.NewTextHandler(&sb, nil)).Info("config", slog.Any("apns", apns.Config{Key: key, KeyID: keyID, TeamID: teamID}))
	if strings.Contains(sb.String(), "PRIVATE KEY") || !strings.Contains(sb.String(), keyID) {
		t.Fatalf("logged config: %s; want the key redacted and the key id shown", sb.String())
	}
}

func TestSendAccepted(t *testing.T) {
	t.Parallel()
	p, b := setup(t)
	s := submission(1)
	data := maps.Clone(s.Data)

	res := p.Send(t.Context(), s)
	if res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("Send: %v %q, want accepted", res.Outcome, res.Text)
	}
	reqs := b.fake.RequestsFor(provider.TransportAPNs)
	if len(reqs) != 1 {
		t.Fatalf("fake recorded %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Token != deviceToken(1) || r.APNsID != s.SubmissionID || r.CollapseID != s.CollapseID || r.NotificationID != s.NotificationID {
		t.Fatalf("recorded token %q apns-id %q collapse %q notification %q; want %q %q %q %q",
			r.Token, r.APNsID, r.CollapseID, r.NotificationID, deviceToken(1), s.SubmissionID, s.CollapseID, s.NotificationID)
	}
	if res.ProviderID != s.SubmissionID {
		t.Fatalf("ProviderID = %q, want the apns-id %q", res.ProviderID, s.SubmissionID)
	}
	if !maps.Equal(s.Data, data) {
		t.Fatalf("Send changed the submission's data: %v, was %v", s.Data, data)
	}
}

func TestProviderIDIsTheAnsweredAPNsID(t *testing.T) {
	t.Parallel()
	p, b := setup(t)
	s := submission(1)
	s.SubmissionID = "" // APNs makes one up and answers it
	res := p.Send(t.Context(), s)
	reqs := b.fake.RequestsFor(provider.TransportAPNs)
	if res.Outcome != provider.OutcomeAccepted || len(reqs) != 1 {
		t.Fatalf("Send: %v %q with %d requests, want accepted once", res.Outcome, res.Text, len(reqs))
	}
	if reqs[0].Header.Get("apns-id") != "" {
		t.Fatalf("sent apns-id %q for an empty SubmissionID", reqs[0].Header.Get("apns-id"))
	}
	if res.ProviderID == "" || res.ProviderID != reqs[0].APNsID {
		t.Fatalf("ProviderID = %q, want the apns-id APNs answered (%q)", res.ProviderID, reqs[0].APNsID)
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	tests := []struct {
		pushType, priority string
	}{
		{apns.PushTypeAlert, "10"},
		{apns.PushTypeBackground, "5"},
	}
	for i, tt := range tests {
		t.Run(tt.pushType, func(t *testing.T) {
			t.Parallel()
			p, _ := setupWith(t, fake, func(c *apns.Config) { c.PushType = tt.pushType; c.Topic = "com.example." + tt.pushType })
			s := submission(i)
			s.SubmissionID = strings.ToUpper(s.SubmissionID) // sent in lowercase regardless
			if res := p.Send(t.Context(), s); res.Outcome != provider.OutcomeAccepted {
				t.Fatalf("Send: %v %q", res.Outcome, res.Text)
			}
			var h http.Header
			for _, r := range fake.RequestsFor(provider.TransportAPNs) {
				if r.Token == deviceToken(i) {
					h = r.Header
				}
			}
			if h == nil {
				t.Fatal("the fake recorded no request for the device")
			}
			want := map[string]string{
				"apns-topic":       "com.example." + tt.pushType,
				"apns-push-type":   tt.pushType,
				"apns-priority":    tt.priority,
				"apns-expiration":  strconv.FormatInt(s.ExpiresAt.Unix(), 10),
				"apns-collapse-id": s.CollapseID,
				"apns-id":          strings.ToLower(s.SubmissionID),
			}
			for k, v := range want {
				if got := h.Values(k); len(got) != 1 || got[0] != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if h.Get("Authorization") != "" {
				t.Error("the fake recorded the authorization header")
			}
		})
	}
}

func TestOptionalHeadersOmitted(t *testing.T) {
	t.Parallel()
	p, b := setup(t)
	s := submission(1)
	s.CollapseID, s.ExpiresAt = "", time.Time{}
	if res := p.Send(t.Context(), s); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("Send: %v %q", res.Outcome, res.Text)
	}
	h := b.fake.RequestsFor(provider.TransportAPNs)[0].Header
	for _, k := range []string{"apns-collapse-id", "apns-expiration"} {
		if v, ok := h[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("%s = %q sent for an empty value", k, v)
		}
	}
}

func TestPayload(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	type aps struct {
		Alert            map[string]string `json:"alert"`
		Sound            string            `json:"sound"`
		MutableContent   int               `json:"mutable-content"`
		ContentAvailable int               `json:"content-available"`
	}
	tests := []struct {
		name     string
		pushType string
		edit     func(*provider.Submission)
		wantAPS  aps
		wantTop  map[string]string // top-level keys besides aps
	}{
		{
			name:    "alert",
			edit:    func(*provider.Submission) {},
			wantAPS: aps{Alert: map[string]string{"title": "Your order shipped", "body": "It arrives on Tuesday."}, Sound: "default"},
			wantTop: map[string]string{"oncepush_id": "", "order": "42"},
		},
		{
			name: "link and image",
			edit: func(s *provider.Submission) {
				s.Link = "/orders/42"
				s.Image = "https://cdn.example.com/parcel.png"
				s.Title = "Tom & Jerry <3"
			},
			wantAPS: aps{Alert: map[string]string{"title": "Tom & Jerry <3", "body": "It arrives on Tuesday."}, Sound: "default", MutableContent: 1},
			wantTop: map[string]string{"oncepush_id": "", "order": "42", "oncepush_link": "/orders/42", "oncepush_image": "https://cdn.example.com/parcel.png"},
		},
		{
			name:    "body only",
			edit:    func(s *provider.Submission) { s.Title = "" },
			wantAPS: aps{Alert: map[string]string{"body": "It arrives on Tuesday."}, Sound: "default"},
			wantTop: map[string]string{"oncepush_id": "", "order": "42"},
		},
		{
			name:     "background",
			pushType: apns.PushTypeBackground,
			edit:     func(*provider.Submission) {},
			wantAPS:  aps{ContentAvailable: 1},
			wantTop:  map[string]string{"oncepush_id": "", "order": "42", "oncepush_title": "Your order shipped", "oncepush_body": "It arrives on Tuesday."},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _ := setupWith(t, fake, func(c *apns.Config) { c.PushType = tt.pushType })
			s := submission(i)
			tt.edit(s)
			if res := p.Send(t.Context(), s); res.Outcome != provider.OutcomeAccepted {
				t.Fatalf("Send: %v %q", res.Outcome, res.Text)
			}
			var raw []byte
			for _, r := range fake.RequestsFor(provider.TransportAPNs) {
				if r.Token == deviceToken(i) {
					raw = r.Payload
				}
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatalf("payload %s: %v", raw, err)
			}
			var got aps
			if err := json.Unmarshal(doc["aps"], &got); err != nil {
				t.Fatalf("aps %s: %v", doc["aps"], err)
			}
			if !maps.Equal(got.Alert, tt.wantAPS.Alert) || got.Sound != tt.wantAPS.Sound ||
				got.MutableContent != tt.wantAPS.MutableContent || got.ContentAvailable != tt.wantAPS.ContentAvailable {
				t.Errorf("aps = %s, want %+v", doc["aps"], tt.wantAPS)
			}
			if tt.pushType == apns.PushTypeBackground && doc["aps"] != nil && strings.Contains(string(doc["aps"]), "alert") {
				t.Errorf("background aps carries an alert: %s", doc["aps"])
			}
			delete(doc, "aps")
			want := maps.Clone(tt.wantTop)
			want["oncepush_id"] = s.NotificationID
			gotTop := map[string]string{}
			for k, v := range doc {
				var str string
				if err := json.Unmarshal(v, &str); err != nil {
					t.Fatalf("top-level %s = %s, want a string", k, v)
				}
				gotTop[k] = str
			}
			if !maps.Equal(gotTop, want) {
				t.Errorf("top-level keys = %v, want %v", gotTop, want)
			}
			if strings.Contains(string(raw), `\u003c`) {
				t.Errorf("payload escapes HTML, wasting bytes: %s", raw)
			}
		})
	}
}

func TestRejectedWithoutRequest(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	tests := []struct {
		name string
		edit func(*provider.Submission)
		want provider.Outcome
	}{
		{"payload over 4096 bytes", func(s *provider.Submission) {
			s.Data = map[string]string{"oncepush_id": s.NotificationID, "blob": strings.Repeat("x", 4000)}
		}, provider.OutcomeRejected},
		{"collapse id over 64 bytes", func(s *provider.Submission) { s.CollapseID = strings.Repeat("c", 65) }, provider.OutcomeRejected},
		{"data key aps", func(s *provider.Submission) {
			s.Data = map[string]string{"oncepush_id": s.NotificationID, "aps": "{}"}
		}, provider.OutcomeRejected},
		{"token not hexadecimal", func(s *provider.Submission) { s.Token = "not-a-token/../../x" }, provider.OutcomeInvalidToken},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _ := setupWith(t, fake)
			s := submission(i)
			tt.edit(s)
			res := p.Send(t.Context(), s)
			if res.Outcome != tt.want || res.Text == "" {
				t.Fatalf("Send: %v %q, want %v with a text", res.Outcome, res.Text, tt.want)
			}
			for _, r := range fake.RequestsFor(provider.TransportAPNs) {
				if r.Token == deviceToken(i) {
					t.Fatalf("a request reached the fake for %s", tt.name)
				}
			}
		})
	}
	// Just within the limits is sent.
	p, _ := setupWith(t, fake)
	s := submission(100)
	s.CollapseID = strings.Repeat("c", 64)
	if res := p.Send(t.Context(), s); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("64-byte collapse id: %v %q, want accepted", res.Outcome, res.Text)
	}
}

func TestPayloadAtTheLimitIsSent(t *testing.T) {
	t.Parallel()
	p, b := setup(t)
	s := submission(1)
	s.Data = map[string]string{"oncepush_id": s.NotificationID, "blob": ""}
	// Grow the blob until the payload is exactly 4096 bytes, then one more.
	probe := func(n int) provider.Result {
		s.Data = map[string]string{"oncepush_id": s.NotificationID, "blob": strings.Repeat("x", n)}
		return p.Send(t.Context(), s)
	}
	if res := probe(0); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("small payload: %v %q", res.Outcome, res.Text)
	}
	base := len(b.fake.RequestsFor(provider.TransportAPNs)[0].Payload)
	if res := probe(apns.MaxPayloadBytes - base); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("4096-byte payload: %v %q, want accepted", res.Outcome, res.Text)
	}
	reqs := b.fake.RequestsFor(provider.TransportAPNs)
	if n := len(reqs[len(reqs)-1].Payload); n != apns.MaxPayloadBytes {
		t.Fatalf("payload was %d bytes, the test meant %d", n, apns.MaxPayloadBytes)
	}
	if res := probe(apns.MaxPayloadBytes - base + 1); res.Outcome != provider.OutcomeRejected {
		t.Fatalf("4097-byte payload: %v %q, want rejected", res.Outcome, res.Text)
	}
	if n := b.fake.Count(); n != 2 {
		t.Fatalf("fake recorded %d requests, want 2 (the oversized one never sent)", n)
	}
}

func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	since := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	unregistered := pushtest.FakeAnswer{Status: 410, Body: fmt.Sprintf(`{"reason":"Unregistered","timestamp":%d}`, since.UnixMilli())}
	helper410 := pushtest.APNsError(410, "ExpiredToken")
	var ts struct{ Timestamp int64 }
	if err := json.Unmarshal([]byte(helper410.Body), &ts); err != nil || ts.Timestamp == 0 {
		t.Fatalf("APNsError(410) body %s carries no timestamp", helper410.Body)
	}
	helper410Since := time.UnixMilli(ts.Timestamp).UTC().Format(time.RFC3339)

	type row struct {
		answer     pushtest.FakeAnswer
		outcome    provider.Outcome
		text       string
		retryAfter time.Duration
		throttle   bool
		alert      bool // an error is logged
	}
	rows := []row{
		{unregistered, provider.OutcomeInvalidToken, "410 Unregistered (since 2026-01-05T09:00:00Z)", 0, false, false},
		{helper410, provider.OutcomeInvalidToken, "410 ExpiredToken (since " + helper410Since + ")", 0, false, false},
		{pushtest.APNsError(400, "BadDeviceToken"), provider.OutcomeInvalidToken, "400 BadDeviceToken", 0, false, false},
		{pushtest.APNsError(400, "DeviceTokenNotForTopic"), provider.OutcomeInvalidToken, "400 DeviceTokenNotForTopic", 0, false, false},
		{pushtest.APNsError(413, "PayloadTooLarge"), provider.OutcomeRejected, "413 PayloadTooLarge", 0, false, false},
		{providertest.WithRetryAfter(pushtest.APNsError(429, "TooManyRequests"), "30"), provider.OutcomeRetry, "429 TooManyRequests", 30 * time.Second, false, false},
		{pushtest.APNsError(429, "TooManyRequests"), provider.OutcomeRetry, "429 TooManyRequests", 0, false, false},
		{providertest.WithRetryAfter(pushtest.APNsError(429, "TooManyProviderTokenUpdates"), "60"), provider.OutcomeRetry, "429 TooManyProviderTokenUpdates", time.Minute, true, false},
		{pushtest.APNsError(500, "InternalServerError"), provider.OutcomeRetry, "500 InternalServerError", 0, false, false},
		{providertest.WithRetryAfter(pushtest.APNsError(503, "ServiceUnavailable"), "120"), provider.OutcomeRetry, "503 ServiceUnavailable", 2 * time.Minute, false, false},
		{pushtest.APNsError(503, "Shutdown"), provider.OutcomeRetry, "503 Shutdown", 0, false, false},
		{pushtest.APNsError(400, "IdleTimeout"), provider.OutcomeRetry, "400 IdleTimeout", 0, false, false},
		{pushtest.APNsError(405, "MethodNotAllowed"), provider.OutcomeRejected, "405 MethodNotAllowed", 0, false, false},
		{pushtest.APNsError(404, "BadPath"), provider.OutcomeRejected, "404 BadPath", 0, false, false},
		{pushtest.APNsError(502, "SomethingNew"), provider.OutcomeRetry, "502 SomethingNew", 0, false, false},
		{pushtest.FakeAnswer{Status: 502, Body: "<html><body>Bad gateway</body></html>"}, provider.OutcomeRetry, "502 Bad Gateway: <html><body>Bad gateway</body></html>", 0, false, false},
		{pushtest.FakeAnswer{Status: 504}, provider.OutcomeRetry, "504 Gateway Timeout", 0, false, false},
	}
	for _, reason := range []string{"BadCollapseId", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic",
		"DuplicateHeaders", "InvalidPushType", "MissingTopic", "PayloadEmpty", "TopicDisallowed", "BadCertificateOrWhatever"} {
		rows = append(rows, row{pushtest.APNsError(400, reason), provider.OutcomeRejected, "400 " + reason, 0, false, false})
	}
	for _, reason := range []string{"InvalidProviderToken", "MissingProviderToken", "BadCertificate", "BadCertificateEnvironment", "Forbidden"} {
		rows = append(rows, row{pushtest.APNsError(403, reason), provider.OutcomeRejected, "403 " + reason, 0, false, true})
	}

	for i, tt := range rows {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			p, b := setupWith(t, fake)
			s := submission(i)
			fake.Program(provider.TransportAPNs, deviceToken(i), tt.answer)
			res := p.Send(t.Context(), s)
			providertest.CheckResult(t, res, provider.Result{Outcome: tt.outcome, Text: tt.text, RetryAfter: tt.retryAfter, Throttle: tt.throttle})
			if res.Outcome == provider.OutcomeAccepted || res.ProviderID != "" {
				t.Errorf("ProviderID %q on an error answer", res.ProviderID)
			}
			if got := b.logs.Errors(); (got > 0) != tt.alert {
				t.Errorf("%d errors logged, want alert=%v", got, tt.alert)
			}
			if strings.Contains(b.logs.Text(), deviceToken(i)) {
				t.Errorf("the device token appears in the log: %s", b.logs.Text())
			}
		})
	}
}

func TestCredentialAlertIsRateLimited(t *testing.T) {
	t.Parallel()
	p, b := setup(t)
	b.fake.Program(provider.TransportAPNs, "", pushtest.APNsError(403, "InvalidProviderToken"))
	for i := range 10 {
		if res := p.Send(t.Context(), submission(i)); res.Outcome != provider.OutcomeRejected {
			t.Fatalf("send %d: %v %q, want rejected", i, res.Outcome, res.Text)
		}
	}
	if n := b.logs.Errors(); n != 1 {
		t.Fatalf("%d errors logged for 10 refusals within a minute, want 1", n)
	}
	b.clock.Advance(2 * time.Minute)
	p.Send(t.Context(), submission(11))
	if n := b.logs.Errors(); n != 2 {
		t.Fatalf("%d errors logged after a minute passed, want 2", n)
	}
}

func TestJWTReusedAcrossSends(t *testing.T) {
	t.Parallel()
	p, b := setup(t)
	providertest.AllAccepted(t, providertest.SendAll(50, func(i int) provider.Result { return p.Send(t.Context(), submission(i)) }))
	if n := b.fake.Count(); n != 50 {
		t.Fatalf("fake recorded %d requests, want 50", n)
	}
	if n := b.fake.APNsTokensSeen(); n != 1 {
		t.Fatalf("fake saw %d provider tokens for 50 sends, want 1", n)
	}
}

func TestJWTRenewedAfterRefreshAge(t *testing.T) {
	t.Parallel()
	// The fake checks iat against the wall clock: start the test clock 45
	// minutes back so both tokens are within APNs's hour.
	start := time.Now().Add(-45 * time.Minute)
	p, b := setup(t, func(c *apns.Config) { c.Clock = pushtest.NewClock(start) })
	clock := b.cfg.Clock.(*pushtest.Clock)
	send := func(n int) {
		t.Helper()
		for i := range n {
			if res := p.Send(t.Context(), submission(i)); res.Outcome != provider.OutcomeAccepted {
				t.Fatalf("send: %v %q", res.Outcome, res.Text)
			}
		}
	}
	steps := []struct {
		advance time.Duration
		want    int
	}{
		{0, 1},
		{19 * time.Minute, 1},
		{20 * time.Minute, 1}, // 39 minutes old: still under the refresh age
		{2 * time.Minute, 2},  // 41 minutes: replaced
		{10 * time.Minute, 2},
	}
	for _, st := range steps {
		clock.Advance(st.advance)
		send(5)
		if n := b.fake.APNsTokensSeen(); n != st.want {
			t.Fatalf("after %s: the fake saw %d provider tokens, want %d", clock.Now().Sub(start), n, st.want)
		}
	}
}

func TestExpiredProviderTokenRenewsAndSends(t *testing.T) {
	t.Parallel()
	p, b := setup(t)
	s := submission(1)
	b.fake.Program(provider.TransportAPNs, deviceToken(1), pushtest.APNsError(403, "ExpiredProviderToken"), pushtest.FakeAnswer{})
	res := p.Send(t.Context(), s)
	if res.Outcome != provider.OutcomeAccepted || res.ProviderID != s.SubmissionID {
		t.Fatalf("Send: %v %q %q, want accepted after one renewal", res.Outcome, res.Text, res.ProviderID)
	}
	if n := b.fake.APNsTokensSeen(); n != 2 {
		t.Fatalf("fake saw %d provider tokens, want 2 (the refused one and its replacement)", n)
	}
	if n := b.fake.Count(); n != 2 {
		t.Fatalf("fake recorded %d requests, want 2", n)
	}
	// The replacement is kept: later sends do not renew again.
	for i := range 5 {
		p.Send(t.Context(), submission(10+i))
	}
	if n := b.fake.APNsTokensSeen(); n != 2 {
		t.Fatalf("fake saw %d provider tokens after more sends, want still 2", n)
	}
}

func TestExpiredProviderTokenTwiceIsRetry(t *testing.T) {
	t.Parallel()
	// A clock two hours behind: every token it makes is expired for APNs.
	p, b := setup(t, func(c *apns.Config) { c.Clock = pushtest.NewClock(time.Now().Add(-2 * time.Hour)) })
	results := providertest.SendAll(10, func(i int) provider.Result { return p.Send(t.Context(), submission(i)) })
	for i, res := range results {
		if res.Outcome != provider.OutcomeRetry || res.Text != "403 ExpiredProviderToken" {
			t.Fatalf("send %d: %v %q, want retry \"403 ExpiredProviderToken\"", i, res.Outcome, res.Text)
		}
	}
	// Ten refused sends share one renewal.
	if n := b.fake.APNsTokensSeen(); n != 2 {
		t.Fatalf("fake saw %d provider tokens, want 2", n)
	}
}

// TestExpiredProviderTokenRenewalsAreBounded: with a clock APNs finds two
// hours late, every token is refused as expired, the replacement too. A send
// that starts on the replacement must not renew it again — APNs answers
// 429 TooManyProviderTokenUpdates to a key whose token changes more often
// than every 20 minutes — so one renewal serves the key for 20 minutes of
// the provider's clock; meanwhile an expired answer is a retry, due when the
// key may renew again. The sends run one after the other, so every one after
// the first starts on the replacement: the interleaving that, among ten
// concurrent sends, made a third token now and then.
func TestExpiredProviderTokenRenewalsAreBounded(t *testing.T) {
	t.Parallel()
	clock := pushtest.NewClock(time.Now().Add(-2 * time.Hour))
	p, b := setup(t, func(c *apns.Config) { c.Clock = clock })
	start := clock.Now()
	var retryAfters []time.Duration
	send := func(i int) {
		t.Helper()
		res := p.Send(t.Context(), submission(i))
		if res.Outcome != provider.OutcomeRetry || res.Text != "403 ExpiredProviderToken" {
			t.Fatalf("send %d at +%v: %v %q, want retry \"403 ExpiredProviderToken\"", i, clock.Now().Sub(start), res.Outcome, res.Text)
		}
		retryAfters = append(retryAfters, res.RetryAfter)
	}
	wantTokens := func(when string, want int) {
		t.Helper()
		if n := b.fake.APNsTokensSeen(); n != want {
			t.Fatalf("%s: the fake saw %d provider tokens, want %d", when, n, want)
		}
	}
	send(0) // the first token, refused, renewed once, refused again
	wantTokens("after the first send", 2)
	send(1) // on the replacement: no renewal
	send(2)
	wantTokens("after two sends on the replacement", 2)
	clock.Advance(19 * time.Minute)
	send(3)
	wantTokens("19 minutes after the renewal", 2)
	clock.Advance(time.Minute)
	send(4) // the bound is over: one renewal, refused too
	send(5)
	wantTokens("20 minutes after the renewal", 3)
	// Each retry is due when the key may renew again.
	want := []time.Duration{20 * time.Minute, 20 * time.Minute, 20 * time.Minute, time.Minute, 20 * time.Minute, 20 * time.Minute}
	if !slices.Equal(retryAfters, want) {
		t.Fatalf("retry after %v, want %v", retryAfters, want)
	}
}

// TestTokenEchoedInAnyCaseIsRedacted: APNs device tokens are hexadecimal,
// which APNs reads in either case; oncepush stores them in lower case. An
// answer that echoes the token in upper case or mixed case — in the reason
// APNs's credentials alert logs, or in a body that is not APNs JSON — must
// reach neither the result (the ledger) nor the log.
func TestTokenEchoedInAnyCaseIsRedacted(t *testing.T) {
	t.Parallel()
	p, b := setup(t)
	token := deviceToken(1)
	mixed := []byte(token)
	for i := 0; i < len(mixed); i += 2 {
		mixed[i] = strings.ToUpper(string(mixed[i]))[0]
	}
	for _, a := range []pushtest.FakeAnswer{
		pushtest.APNsError(403, "Forbidden for "+strings.ToUpper(token)),
		{Status: 500, Body: "upstream failed for /3/device/" + strings.ToUpper(token)},
		{Status: 502, Body: "upstream failed for /3/device/" + string(mixed)},
	} {
		b.fake.Program(provider.TransportAPNs, token, a)
		res := p.Send(t.Context(), submission(1))
		if strings.Contains(strings.ToLower(res.Text), token) || strings.Contains(strings.ToLower(res.ProviderID), token) {
			t.Errorf("answer %d %q: the device token is in the result: %q %q", a.Status, a.Body, res.Text, res.ProviderID)
		}
		if !strings.Contains(res.Text, "[redacted]") {
			t.Errorf("answer %d %q: result %q, want the token there redacted", a.Status, a.Body, res.Text)
		}
	}
	if b.logs.Errors() == 0 {
		t.Fatal("the credentials alert was not logged")
	}
	if logs := b.logs.Text(); strings.Contains(strings.ToLower(logs), token) {
		t.Fatalf("the device token is in the log:\n%s", logs)
	}
}

func TestBadDeviceTokenSafeguard(t *testing.T) {
	t.Parallel()
	p, b := setup(t) // defaults: the last 100 answers, at least 20 of them
	bad := pushtest.APNsError(400, "BadDeviceToken")
	b.fake.Program(provider.TransportAPNs, "", bad)
	const guarded = "400 BadDeviceToken (not deleting: most tokens fail this way; check sandbox/production)"
	for i := range 30 {
		res := p.Send(t.Context(), submission(i))
		if i < apns.SafeguardMinAnswersDefault-1 {
			if res.Outcome != provider.OutcomeInvalidToken || res.Text != "400 BadDeviceToken" {
				t.Fatalf("answer %d: %v %q, want invalid token before the window fills", i+1, res.Outcome, res.Text)
			}
			continue
		}
		if res.Outcome != provider.OutcomeRejected || res.Text != guarded {
			t.Fatalf("answer %d: %v %q, want rejected %q", i+1, res.Outcome, res.Text, guarded)
		}
	}
	if n := b.logs.Errors(); n != 1 {
		t.Fatalf("%d errors logged, want 1 (one per window)", n)
	}
	if strings.Contains(b.logs.Text(), deviceToken(25)) {
		t.Fatal("the alert logged a device token")
	}
	// Configuration fixed: good answers outweigh the bad ones again, and a
	// dead token is deleted as before.
	b.fake.Program(provider.TransportAPNs, "")
	for i := range 40 {
		if res := p.Send(t.Context(), submission(100+i)); res.Outcome != provider.OutcomeAccepted {
			t.Fatalf("good send: %v %q", res.Outcome, res.Text)
		}
	}
	b.fake.Program(provider.TransportAPNs, deviceToken(200), bad)
	if res := p.Send(t.Context(), submission(200)); res.Outcome != provider.OutcomeInvalidToken {
		t.Fatalf("after recovery: %v %q, want invalid token", res.Outcome, res.Text)
	}
}

// TestBadDeviceTokenSafeguardWindow: with a window of 10 answers, 4 of them
// needed to trip, BadDeviceToken deletes while at most half the window is
// BadDeviceToken, and once tripped the safeguard alerts once per window.
func TestBadDeviceTokenSafeguardWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		sends  int
		bad    func(i int) bool // whether send i is answered BadDeviceToken
		want   func(i int) provider.Outcome
		errors int
	}{
		{
			// Alternate good and bad: never more than half bad.
			name: "minority still deletes", sends: 40,
			bad: func(i int) bool { return i%2 == 1 },
			want: func(i int) provider.Outcome {
				if i%2 == 1 {
					return provider.OutcomeInvalidToken
				}
				return provider.OutcomeAccepted
			},
		},
		{
			// Tripped at answer 4, then once per 10 answers: 14, 24.
			name: "threshold", sends: 25,
			bad: func(int) bool { return true },
			want: func(i int) provider.Outcome {
				if i < 3 {
					return provider.OutcomeInvalidToken
				}
				return provider.OutcomeRejected
			},
			errors: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, b := setup(t, func(c *apns.Config) { c.SafeguardWindow = 10; c.SafeguardMinAnswers = 4 })
			for i := range tt.sends {
				if tt.bad(i) {
					b.fake.Program(provider.TransportAPNs, deviceToken(i), pushtest.APNsError(400, "BadDeviceToken"))
				}
				if res, want := p.Send(t.Context(), submission(i)), tt.want(i); res.Outcome != want {
					t.Fatalf("answer %d: %v %q, want %v", i+1, res.Outcome, res.Text, want)
				}
			}
			if n := b.logs.Errors(); n != tt.errors {
				t.Fatalf("%d errors logged over %d answers with a window of 10, want %d", n, tt.sends, tt.errors)
			}
		})
	}
}

func TestHTTP2OneConnection(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		protos []string
	)
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			mu.Lock()
			defer mu.Unlock()
			conns[info.Conn] = true
		},
		TLSHandshakeDone: func(st tls.ConnectionState, err error) {
			mu.Lock()
			defer mu.Unlock()
			protos = append(protos, st.NegotiatedProtocol)
		},
	})
	if res := p.Send(ctx, submission(0)); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("first send: %v %q", res.Outcome, res.Text)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if res := p.Send(ctx, submission(i+1)); res.Outcome != provider.OutcomeAccepted {
				t.Errorf("send: %v %q", res.Outcome, res.Text)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(protos) != 1 || protos[0] != "h2" {
		t.Fatalf("TLS handshakes negotiated %q, want one \"h2\"", protos)
	}
	if len(conns) != 1 {
		t.Fatalf("51 sends used %d connections, want 1 (multiplexed)", len(conns))
	}
}

func TestTransportFailures(t *testing.T) {
	t.Parallel()
	t.Run("dropped after the request was read", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t)
		b.fake.Program(provider.TransportAPNs, deviceToken(1), pushtest.FakeAnswer{Drop: true})
		res := p.Send(t.Context(), submission(1))
		if res.Outcome != provider.OutcomeMaybeSent {
			t.Fatalf("Send: %v %q, want maybe-sent", res.Outcome, res.Text)
		}
		if b.fake.Count() != 1 {
			t.Fatalf("fake recorded %d requests, want 1", b.fake.Count())
		}
		if strings.Contains(res.Text, deviceToken(1)) {
			t.Fatalf("the text holds the device token: %q", res.Text)
		}
	})
	t.Run("no answer before the timeout", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t)
		b.fake.Program(provider.TransportAPNs, deviceToken(1), pushtest.FakeAnswer{Latency: time.Hour})
		// The send's time runs out once the fake holds the whole request:
		// the moment, not a guess at how long writing it takes.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			if b.fake.WaitReceived(ctx, 1) {
				cancel()
			}
		}()
		if res := p.Send(ctx, submission(1)); res.Outcome != provider.OutcomeMaybeSent {
			t.Fatalf("Send: %v %q, want maybe-sent", res.Outcome, res.Text)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		addr := providertest.ClosedAddr(t)
		p, _ := setup(t, func(c *apns.Config) { c.Host = "https://" + addr })
		res := p.Send(t.Context(), submission(1))
		if res.Outcome != provider.OutcomeRetry {
			t.Fatalf("Send: %v %q, want retry (never sent)", res.Outcome, res.Text)
		}
		if strings.Contains(res.Text, deviceToken(1)) {
			t.Fatalf("the text holds the device token: %q", res.Text)
		}
	})
}
