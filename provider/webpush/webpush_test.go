package webpush_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/internal/testlog"
	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/providertest"
	"github.com/oncepush/oncepush/provider/webpush"
	"github.com/oncepush/oncepush/pushtest"
)

const webpushT = provider.TransportWebPush

// bundle is what a test needs next to the provider.
type bundle struct {
	fake  *pushtest.FakeServer
	clock *pushtest.Clock
	logs  *testlog.Buffer
	cfg   webpush.Config
}

// setup starts a fake push service and a provider allowed to reach it
// (127.0.0.1 on its port, loopback allowed). mutate adjusts the config before New.
func setup(t *testing.T, mutate func(*webpush.Config)) (*webpush.Provider, *bundle) {
	t.Helper()
	fake := pushtest.NewFakeServer(t)
	_, priv := vapidKeys(t)
	// The fake checks the JWT's exp against the real time, so the clock
	// starts there.
	b := &bundle{fake: fake, clock: pushtest.NewClock(time.Now()), logs: &testlog.Buffer{}}
	u, err := url.Parse(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	b.cfg = webpush.Config{
		VAPIDPrivateKey: priv,
		VAPIDSubject:    "mailto:ops@example.com",
		AllowedHosts:    []string{u.Host}, // 127.0.0.1 and the fake's port

		AllowLoopback: true,
		TLSConfig:     fake.TLSConfig(),
		Clock:         b.clock,
		Logger:        slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	return providertest.Build(t, webpush.New, &b.cfg, mutate), b
}

// vapidKeys makes a VAPID key pair (webpush.GenerateVAPIDKeys), failing t
// if it cannot.
func vapidKeys(t *testing.T) (public, private string) {
	t.Helper()
	public, private, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	return public, private
}

// submission is a notification for the subscription token.
func (b *bundle) submission(token provider.Token) *provider.Submission {
	const id = "5f2b8c1e9a7d4e3f8b6a1c0d2e4f6a8b"
	return &provider.Submission{
		NotificationID: id,
		CollapseID:     id,
		DeliveryID:     17,
		DeviceID:       5,
		Token:          token,
		Type:           "order_shipped",
		Title:          "Your order shipped",
		Body:           "It arrives <Thursday> & not later",
		Data:           map[string]string{"order": "A-1001", "oncepush_id": id},
		Link:           "/orders/A-1001",
		Image:          "https://cdn.example.com/box.png",
		ExpiresAt:      b.clock.Now().Add(time.Hour),
	}
}

// subscriptionID is the fake's id for a subscription: the endpoint's last segment.
func subscriptionID(t *testing.T, token provider.Token) string {
	t.Helper()
	sub, err := provider.ParseWebPushSubscription(string(token))
	if err != nil {
		t.Fatal(err)
	}
	return path.Base(sub.Endpoint)
}

// withEndpoint returns the token with its endpoint replaced.
func withEndpoint(t *testing.T, token provider.Token, endpoint string) provider.Token {
	t.Helper()
	sub, err := provider.ParseWebPushSubscription(string(token))
	if err != nil {
		t.Fatal(err)
	}
	sub.Endpoint = endpoint
	return sub.Token()
}

func TestSendRoundTrip(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	token := b.fake.NewWebPushSubscription()
	s := b.submission(token)
	dataBefore := maps.Clone(s.Data)

	res := p.Send(context.Background(), s)
	if res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("outcome %v %q, want accepted", res.Outcome, res.Text)
	}
	if !strings.HasPrefix(res.ProviderID, b.fake.URL+"/webpush/msg/") {
		t.Errorf("ProviderID %q, want the Location header", res.ProviderID)
	}
	if !maps.Equal(s.Data, dataBefore) {
		t.Errorf("Send modified the submission's data: %v", s.Data)
	}
	reqs := b.fake.RequestsFor(webpushT)
	if len(reqs) != 1 {
		t.Fatalf("fake recorded %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Token != subscriptionID(t, token) || r.NotificationID != s.NotificationID || r.Status != http.StatusCreated {
		t.Errorf("recorded token %q, notification id %q, status %d", r.Token, r.NotificationID, r.Status)
	}
	var got map[string]any
	if err := json.Unmarshal(r.Payload, &got); err != nil {
		t.Fatalf("decrypted payload is not JSON: %v\n%s", err, r.Payload)
	}
	want := map[string]any{
		"title": s.Title, "body": s.Body, "image": s.Image, "link": s.Link,
		"data":        map[string]any{"order": "A-1001", "oncepush_id": s.NotificationID},
		"oncepush_id": s.NotificationID,
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("payload\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if ce, ct := r.Header.Get("Content-Encoding"), r.Header.Get("Content-Type"); ce != "aes128gcm" || ct != "application/octet-stream" {
		t.Errorf("Content-Encoding %q, Content-Type %q", ce, ct)
	}
	if r.Header.Get("Crypto-Key") != "" || r.Header.Get("Encryption") != "" {
		t.Error("the old aesgcm/WebPush headers were sent")
	}
}

// TestSendConcurrent shares one provider (JWT cache, connections) between
// goroutines; run with -race.
func TestSendConcurrent(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	tokens := make([]provider.Token, 4)
	for i := range tokens {
		tokens[i] = b.fake.NewWebPushSubscription()
	}
	const sends = 24
	providertest.AllAccepted(t, providertest.SendAll(sends, func(i int) provider.Result {
		return p.Send(context.Background(), b.submission(tokens[i%len(tokens)]))
	}))
	if n := b.fake.Count(); n != sends {
		t.Errorf("fake recorded %d requests, want %d", n, sends)
	}
}

func TestSendAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		answer     pushtest.FakeAnswer
		outcome    provider.Outcome
		textPrefix string
		retryAfter time.Duration
		providerID string
		logsError  bool
	}{
		{name: "201 created", answer: pushtest.FakeAnswer{}, outcome: provider.OutcomeAccepted},
		{name: "200 ok", answer: pushtest.FakeAnswer{Status: 200, Header: http.Header{"Location": {"https://push.example/m/1"}}},
			outcome: provider.OutcomeAccepted, providerID: "https://push.example/m/1"},
		{name: "202 accepted", answer: pushtest.FakeAnswer{Status: 202, Header: http.Header{"Location": {"https://push.example/m/2"}}},
			outcome: provider.OutcomeAccepted, providerID: "https://push.example/m/2"},
		{name: "404", answer: pushtest.WebPushError(404), outcome: provider.OutcomeInvalidToken,
			textPrefix: `404 Not Found: {"code":404,"errno":102,"error":"Not Found","message":"Request did not validate: invalid token"}`},
		{name: "410", answer: pushtest.WebPushError(410), outcome: provider.OutcomeInvalidToken,
			textPrefix: `410 Gone: {"code":410,"errno":106,`},
		{name: "413", answer: pushtest.WebPushError(413), outcome: provider.OutcomeRejected,
			textPrefix: "413 Request Entity Too Large: {"},
		{name: "429 with Retry-After", answer: providertest.WithRetryAfter(pushtest.WebPushError(429), "120"), outcome: provider.OutcomeRetry,
			textPrefix: "429 Too Many Requests: {", retryAfter: 2 * time.Minute},
		{name: "429 without Retry-After", answer: pushtest.WebPushError(429), outcome: provider.OutcomeRetry,
			textPrefix: "429 Too Many Requests: {"},
		{name: "400", answer: pushtest.WebPushError(400), outcome: provider.OutcomeRejected,
			textPrefix: "400 Bad Request: {"},
		{name: "401", answer: pushtest.WebPushError(401), outcome: provider.OutcomeRejected,
			textPrefix: "401 Unauthorized: {", logsError: true},
		{name: "403", answer: pushtest.WebPushError(403), outcome: provider.OutcomeRejected,
			textPrefix: "403 Forbidden: {", logsError: true},
		{name: "other 4xx", answer: pushtest.FakeAnswer{Status: 422, Body: "nope"}, outcome: provider.OutcomeRejected,
			textPrefix: "422 Unprocessable Entity: nope"},
		{name: "500 no body", answer: pushtest.FakeAnswer{Status: 500}, outcome: provider.OutcomeRetry,
			textPrefix: "500 Internal Server Error"},
		{name: "502 html", answer: pushtest.FakeAnswer{Status: 502, Body: "<html>\n<body>Bad   gateway</body></html>"},
			outcome: provider.OutcomeRetry, textPrefix: "502 Bad Gateway: <html> <body>Bad gateway</body></html>"},
		{name: "503 with Retry-After", answer: providertest.WithRetryAfter(pushtest.WebPushError(503), "30"), outcome: provider.OutcomeRetry,
			textPrefix: "503 Service Unavailable: {", retryAfter: 30 * time.Second},
		{name: "redirect not followed", answer: pushtest.FakeAnswer{Status: 307, Header: http.Header{"Location": {"https://169.254.169.254/"}}},
			outcome: provider.OutcomeRejected, textPrefix: "307 Temporary Redirect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, b := setup(t, nil)
			token := b.fake.NewWebPushSubscription()
			b.fake.Program(webpushT, subscriptionID(t, token), tc.answer)
			res := p.Send(context.Background(), b.submission(token))
			if res.Outcome != tc.outcome {
				t.Fatalf("outcome %v %q, want %v", res.Outcome, res.Text, tc.outcome)
			}
			if !strings.HasPrefix(res.Text, tc.textPrefix) || (tc.textPrefix == "" && res.Text != "") {
				t.Errorf("text %q, want it to start with %q", res.Text, tc.textPrefix)
			}
			if tc.textPrefix != "" && strings.Contains(res.Text, b.fake.URL) {
				t.Errorf("text %q holds the endpoint", res.Text)
			}
			if res.RetryAfter != tc.retryAfter || res.Throttle {
				t.Errorf("RetryAfter %v Throttle %v, want %v and no throttle", res.RetryAfter, res.Throttle, tc.retryAfter)
			}
			if tc.providerID != "" && res.ProviderID != tc.providerID {
				t.Errorf("ProviderID %q, want %q", res.ProviderID, tc.providerID)
			}
			logs := b.logs.String()
			if got := strings.Contains(logs, `"level":"ERROR"`); got != tc.logsError {
				t.Errorf("error logged: %v, want %v\n%s", got, tc.logsError, logs)
			}
			if strings.Contains(logs, subscriptionID(t, token)) {
				t.Errorf("the log holds the endpoint: %s", logs)
			}
			if n := b.fake.Count(); n != 1 {
				t.Errorf("fake recorded %d requests, want 1 (and no redirect followed)", n)
			}
		})
	}
}

func TestSendUnknownSubscriptionIsInvalid(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	token := withEndpoint(t, b.fake.NewWebPushSubscription(), b.fake.URL+"/webpush/gone")
	res := p.Send(context.Background(), b.submission(token))
	if res.Outcome != provider.OutcomeInvalidToken || !strings.HasPrefix(res.Text, "404 Not Found") {
		t.Fatalf("outcome %v %q, want invalid token 404", res.Outcome, res.Text)
	}
	if reqs := b.fake.Requests(); len(reqs) != 1 || reqs[0].Status != 404 || reqs[0].Token != "gone" {
		t.Errorf("recorded %+v, want one 404 for \"gone\"", reqs)
	}
}

func TestSendHeaders(t *testing.T) {
	t.Parallel()
	thirtyTwo := strings.Repeat("aB3-_", 6) + "xy"
	for _, tc := range []struct {
		name       string
		urgency    string
		expiresIn  time.Duration // from the clock's now; 0 = no ExpiresAt
		noExpiry   bool
		collapseID string
		ttl        string
		wantUrg    string
		wantTopic  string
	}{
		{name: "defaults", expiresIn: 90 * time.Second, collapseID: "5f2b8c1e9a7d4e3f8b6a1c0d2e4f6a8b",
			ttl: "90", wantUrg: "high", wantTopic: "5f2b8c1e9a7d4e3f8b6a1c0d2e4f6a8b"},
		{name: "urgency low, fraction of a second", urgency: "low", expiresIn: 90*time.Second + 900*time.Millisecond,
			collapseID: thirtyTwo, ttl: "90", wantUrg: "low", wantTopic: thirtyTwo},
		{name: "already expired", urgency: "very-low", expiresIn: -time.Minute, ttl: "0", wantUrg: "very-low"},
		{name: "no expiry", urgency: "normal", noExpiry: true, ttl: "86400", wantUrg: "normal"},
		{name: "topic too long", expiresIn: time.Hour, collapseID: thirtyTwo + "z", ttl: "3600", wantUrg: "high"},
		{name: "topic outside base64url", expiresIn: time.Hour, collapseID: "a=b", ttl: "3600", wantUrg: "high"},
		{name: "topic with a dot", expiresIn: time.Hour, collapseID: "a.b", ttl: "3600", wantUrg: "high"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, b := setup(t, func(c *webpush.Config) { c.Urgency = tc.urgency })
			s := b.submission(b.fake.NewWebPushSubscription())
			s.CollapseID = tc.collapseID
			s.ExpiresAt = b.clock.Now().Add(tc.expiresIn)
			if tc.noExpiry {
				s.ExpiresAt = time.Time{}
			}
			if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeAccepted {
				t.Fatalf("outcome %v %q, want accepted", res.Outcome, res.Text)
			}
			reqs := b.fake.Requests()
			if len(reqs) != 1 {
				t.Fatalf("fake recorded %d requests", len(reqs))
			}
			h := reqs[0].Header
			if h.Get("TTL") != tc.ttl || h.Get("Urgency") != tc.wantUrg {
				t.Errorf("TTL %q Urgency %q, want %q %q", h.Get("TTL"), h.Get("Urgency"), tc.ttl, tc.wantUrg)
			}
			if _, present := h["Topic"]; h.Get("Topic") != tc.wantTopic || (tc.wantTopic == "" && present) {
				t.Errorf("Topic %q (present %v), want %q", h.Get("Topic"), present, tc.wantTopic)
			}
			if reqs[0].CollapseID != tc.wantTopic {
				t.Errorf("recorded collapse id %q, want %q", reqs[0].CollapseID, tc.wantTopic)
			}
		})
	}
}

// messageSize is the length of the plaintext the provider sends for s: the
// documented payload shape.
func messageSize(t *testing.T, s *provider.Submission) int {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		Title      string            `json:"title"`
		Body       string            `json:"body"`
		Image      string            `json:"image,omitempty"`
		Link       string            `json:"link,omitempty"`
		Data       map[string]string `json:"data"`
		OncepushID string            `json:"oncepush_id"`
	}{s.Title, s.Body, s.Image, s.Link, s.Data, s.NotificationID})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Len() - 1
}

func TestSendPayloadLimit(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	token := b.fake.NewWebPushSubscription()

	s := b.submission(token)
	s.Body = ""
	s.Body = strings.Repeat("x", webpush.MaxPayload-messageSize(t, s))
	if n := messageSize(t, s); n != webpush.MaxPayload {
		t.Fatalf("test setup: payload %d bytes, want %d", n, webpush.MaxPayload)
	}
	if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("a %d-byte payload: %v %q, want accepted", webpush.MaxPayload, res.Outcome, res.Text)
	}
	if reqs := b.fake.Requests(); len(reqs) != 1 || len(reqs[0].Payload) != webpush.MaxPayload {
		t.Fatalf("fake did not record the full-size payload")
	}

	s.Body += "x"
	res := p.Send(context.Background(), s)
	if res.Outcome != provider.OutcomeRejected {
		t.Fatalf("a %d-byte payload: %v %q, want rejected", webpush.MaxPayload+1, res.Outcome, res.Text)
	}
	if n := b.fake.Count(); n != 1 {
		t.Errorf("an oversized payload reached the push service (%d requests)", n)
	}
}

func TestSendTransportFailures(t *testing.T) {
	t.Parallel()
	t.Run("dropped after the request was written", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, nil)
		token := b.fake.NewWebPushSubscription()
		b.fake.Program(webpushT, subscriptionID(t, token), pushtest.FakeAnswer{Drop: true})
		res := p.Send(context.Background(), b.submission(token))
		if res.Outcome != provider.OutcomeMaybeSent {
			t.Fatalf("outcome %v %q, want maybe-sent", res.Outcome, res.Text)
		}
		if b.fake.Count() != 1 {
			t.Error("the fake did not receive the request")
		}
	})
	t.Run("timeout after the request was written", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, nil)
		token := b.fake.NewWebPushSubscription()
		b.fake.Program(webpushT, subscriptionID(t, token), pushtest.FakeAnswer{Latency: time.Hour})
		// The send's time runs out once the fake holds the whole request:
		// the moment, not a guess at how long writing it takes.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		canceled := make(chan time.Time, 1)
		go func() {
			if b.fake.WaitReceived(ctx, 1) {
				canceled <- time.Now()
				cancel()
			}
		}()
		res := p.Send(ctx, b.submission(token))
		if res.Outcome != provider.OutcomeMaybeSent {
			t.Fatalf("outcome %v %q, want maybe-sent", res.Outcome, res.Text)
		}
		// A hang guard: the fake would hold the answer for an hour.
		if d := time.Since(<-canceled); d > time.Minute {
			t.Errorf("Send returned %v after its context ended", d)
		}
	})
	t.Run("closed port", func(t *testing.T) {
		t.Parallel()
		addr := providertest.ClosedAddr(t)
		p, b := setup(t, func(c *webpush.Config) { c.AllowedHosts = []string{addr} })
		token := withEndpoint(t, b.fake.NewWebPushSubscription(), "https://"+addr+"/webpush/x")
		res := p.Send(context.Background(), b.submission(token))
		if res.Outcome != provider.OutcomeRetry {
			t.Fatalf("outcome %v %q, want retry (never sent)", res.Outcome, res.Text)
		}
	})
}

// TestDialRefusesRebinding: a host name on the allow-list that resolves to a
// loopback address is refused when dialling, unless loopback is allowed.
func TestDialRefusesRebinding(t *testing.T) {
	t.Parallel()
	for _, allowLoopback := range []bool{false, true} {
		t.Run("AllowLoopback="+strconv.FormatBool(allowLoopback), func(t *testing.T) {
			t.Parallel()
			p, b := setup(t, func(c *webpush.Config) {
				_, port, _ := net.SplitHostPort(c.AllowedHosts[0])
				c.AllowedHosts = []string{"localhost:" + port}
				c.AllowLoopback = allowLoopback
				// The fake's certificate names example.com, not localhost.
				c.TLSConfig.ServerName = "example.com"
			})
			u, _ := url.Parse(b.fake.URL)
			token := b.fake.NewWebPushSubscription()
			token = withEndpoint(t, token, "https://localhost:"+u.Port()+"/webpush/"+subscriptionID(t, token))
			if err := p.ValidateToken(token); err != nil {
				t.Fatalf("ValidateToken refused an allow-listed host name: %v", err)
			}
			res := p.Send(context.Background(), b.submission(token))
			if allowLoopback {
				if res.Outcome != provider.OutcomeAccepted || b.fake.Count() != 1 {
					t.Fatalf("outcome %v %q, %d requests; want accepted", res.Outcome, res.Text, b.fake.Count())
				}
				return
			}
			if res.Outcome != provider.OutcomeRejected {
				t.Fatalf("outcome %v %q, want rejected at dial", res.Outcome, res.Text)
			}
			if n := b.fake.Count(); n != 0 {
				t.Errorf("the push service received %d requests", n)
			}
			if strings.Contains(res.Text, subscriptionID(t, token)) {
				t.Errorf("text %q holds the endpoint", res.Text)
			}
		})
	}
}

func TestSendRefusesEndpointNotAllowed(t *testing.T) {
	t.Parallel()
	p, b := setup(t, func(c *webpush.Config) { c.AllowLoopback = false })
	token := b.fake.NewWebPushSubscription() // https://127.0.0.1:port/…
	res := p.Send(context.Background(), b.submission(token))
	if res.Outcome != provider.OutcomeRejected {
		t.Fatalf("outcome %v %q, want rejected", res.Outcome, res.Text)
	}
	if n := b.fake.Count(); n != 0 {
		t.Errorf("the push service received %d requests", n)
	}
}

func TestSendUnusableSubscription(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	offCurve := &provider.WebPushSubscription{
		Endpoint: b.fake.URL + "/webpush/x",
		P256dh:   append([]byte{4}, make([]byte, 64)...),
		Auth:     make([]byte, 16),
	}
	for name, token := range map[string]provider.Token{
		"not JSON":          "not-a-subscription",
		"p256dh off curve":  offCurve.Token(),
		"auth wrong length": provider.Token(`{"endpoint":"` + b.fake.URL + `/webpush/x","keys":{"p256dh":"BAAA","auth":"AAAA"}}`),
	} {
		res := p.Send(context.Background(), b.submission(token))
		if res.Outcome != provider.OutcomeInvalidToken {
			t.Errorf("%s: outcome %v %q, want invalid token", name, res.Outcome, res.Text)
		}
	}
	if n := b.fake.Count(); n != 0 {
		t.Errorf("the push service received %d requests", n)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, priv := vapidKeys(t)
	good := webpush.Config{VAPIDPrivateKey: priv, VAPIDSubject: "mailto:ops@example.com"}
	for _, tc := range []struct {
		name   string
		mutate func(*webpush.Config)
		field  string // "" = valid
	}{
		{"defaults", func(*webpush.Config) {}, ""},
		{"https subject", func(c *webpush.Config) { c.VAPIDSubject = "https://example.com/contact" }, ""},
		{"every urgency", func(c *webpush.Config) { c.Urgency = "very-low" }, ""},
		{"no key", func(c *webpush.Config) { c.VAPIDPrivateKey = "" }, "VAPIDPrivateKey"},
		{"garbage key", func(c *webpush.Config) { c.VAPIDPrivateKey = "%%%" }, "VAPIDPrivateKey"},
		{"no subject", func(c *webpush.Config) { c.VAPIDSubject = "" }, "VAPIDSubject"},
		{"bare address", func(c *webpush.Config) { c.VAPIDSubject = "ops@example.com" }, "VAPIDSubject"},
		{"mailto without address", func(c *webpush.Config) { c.VAPIDSubject = "mailto:ops" }, "VAPIDSubject"},
		{"http subject", func(c *webpush.Config) { c.VAPIDSubject = "http://example.com" }, "VAPIDSubject"},
		{"urgency", func(c *webpush.Config) { c.Urgency = "urgent" }, "Urgency"},
		{"host with scheme", func(c *webpush.Config) { c.AllowedHosts = []string{"fcm.googleapis.com", "https://x.example.com"} }, "AllowedHosts[1]"},
		{"wildcard too broad", func(c *webpush.Config) { c.AllowedHosts = []string{"*.com"} }, "AllowedHosts[0]"},
	} {
		cfg := good
		tc.mutate(&cfg)
		p, err := webpush.New(cfg)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && err == nil:
			t.Errorf("%s: New accepted the config", tc.name)
		case tc.field != "" && !strings.Contains(err.Error(), tc.field):
			t.Errorf("%s: error %q does not name %s", tc.name, err, tc.field)
		case tc.field == "" && p.Transport() != webpushT:
			t.Errorf("%s: transport %q", tc.name, p.Transport())
		}
	}
}

func TestVAPIDPublicKey(t *testing.T) {
	t.Parallel()
	pub, priv := vapidKeys(t)
	p, err := webpush.New(webpush.Config{VAPIDPrivateKey: priv, VAPIDSubject: "mailto:ops@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if p.VAPIDPublicKey() != pub {
		t.Errorf("VAPIDPublicKey %q, want %q", p.VAPIDPublicKey(), pub)
	}
	pub2, priv2 := vapidKeys(t)
	if pub2 == pub || priv2 == priv {
		t.Error("two generated key pairs are equal")
	}
}

func TestConfigLogsRedacted(t *testing.T) {
	t.Parallel()
	_, priv := vapidKeys(t)
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "cfg", webpush.Config{VAPIDPrivateKey: priv, VAPIDSubject: "mailto:a@b.c"})
	if strings.Contains(buf.String(), priv) || !strings.Contains(buf.String(), "[redacted]") {
		t.Errorf("logged config: %s", buf.String())
	}
}
