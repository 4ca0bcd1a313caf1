package fcm_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/fcm"
	"github.com/oncepush/oncepush/provider/internal/providertest"
	"github.com/oncepush/oncepush/pushtest"
)

const project = "oncepush-test"

// bundle is what a test needs besides the provider.
type bundle struct {
	fake  *pushtest.FakeServer
	clock *pushtest.Clock
	logs  *providertest.Logs
}

// setup starts a fake server and a provider wired to it, both on one test
// clock. edit may change the configuration before New.
func setup(t *testing.T, edit func(*fcm.Config)) (*fcm.Provider, *bundle) {
	t.Helper()
	return setupAt(t, time.Now(), edit)
}

// setupAt is setup with the clock standing at now.
func setupAt(t *testing.T, now time.Time, edit func(*fcm.Config)) (*fcm.Provider, *bundle) {
	t.Helper()
	clock := pushtest.NewClock(now)
	return setupWith(t, pushtest.NewFakeServerWith(t, &pushtest.FakeOptions{Clock: clock}), clock, edit)
}

// setupOn makes a provider for an existing fake server on the wall clock
// (tests that share one server use different device tokens).
func setupOn(t *testing.T, fake *pushtest.FakeServer, edit func(*fcm.Config)) (*fcm.Provider, *bundle) {
	t.Helper()
	return setupWith(t, fake, pushtest.NewClock(time.Now()), edit)
}

func setupWith(t *testing.T, fake *pushtest.FakeServer, clock *pushtest.Clock, edit func(*fcm.Config)) (*fcm.Provider, *bundle) {
	t.Helper()
	b := &bundle{fake: fake, clock: clock, logs: &providertest.Logs{}}
	cfg := fcm.Config{
		ServiceAccountJSON: fake.FCMServiceAccount(project),
		BaseURL:            fake.URL + "/fcm",
		TLSConfig:          fake.TLSConfig(),
		Clock:              b.clock,
		Logger:             b.logs.Logger(),
	}
	return providertest.Build(t, fcm.New, &cfg, edit), b
}

// submission is a typical notification for the device token.
func submission(token string, clock *pushtest.Clock) *provider.Submission {
	return &provider.Submission{
		NotificationID: "5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f",
		CollapseID:     "5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f",
		SubmissionID:   "8d3c1a52-6f0e-5b7d-9a4c-2e1f0b3d5c7a",
		DeliveryID:     7,
		DeviceID:       17,
		Token:          provider.Token(token),
		Type:           "order_shipped",
		Title:          "Your order shipped",
		Body:           "It arrives on Tuesday.",
		Data:           map[string]string{"oncepush_id": "5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f", "order": "A-1042"},
		Link:           "/orders/A-1042",
		Image:          "https://img.example.com/parcel.png",
		ExpiresAt:      clock.Now().Add(time.Hour),
	}
}

// wire is the request body as FCM reads it.
type wire struct {
	Message struct {
		providertest.V1Message
		Android struct {
			CollapseKey string `json:"collapse_key"`
			Priority    string `json:"priority"`
			TTL         string `json:"ttl"`
		} `json:"android"`
		APNs struct {
			Headers map[string]string `json:"headers"`
		} `json:"apns"`
		Webpush struct {
			Headers    map[string]string `json:"headers"`
			FCMOptions *struct {
				Link string `json:"link"`
			} `json:"fcm_options"`
		} `json:"webpush"`
	} `json:"message"`
}

func decodeWire(t *testing.T, payload []byte) wire {
	t.Helper()
	var w wire
	if err := json.Unmarshal(payload, &w); err != nil {
		t.Fatalf("recorded payload is not JSON: %v\n%s", err, payload)
	}
	return w
}

func TestSendMessageShape(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	withOrigin := func(c *fcm.Config) { c.WebOrigin = "https://app.example.com/" }

	tests := []struct {
		name      string
		edit      func(*fcm.Config)
		change    func(s *provider.Submission, now time.Time)
		wantTTL   string
		wantLink  string // webpush.fcm_options.link; "" = none
		wantData  map[string]string
		wantNotif bool
	}{
		{
			name: "full message with web origin", edit: withOrigin,
			wantTTL: "3600s", wantLink: "https://app.example.com/orders/A-1042", wantNotif: true,
			wantData: map[string]string{"oncepush_id": "5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f", "order": "A-1042", "oncepush_link": "/orders/A-1042"},
		},
		{
			name:    "no web origin: no fcm_options",
			wantTTL: "3600s", wantNotif: true,
			wantData: map[string]string{"oncepush_id": "5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f", "order": "A-1042", "oncepush_link": "/orders/A-1042"},
		},
		{
			name: "no link", edit: withOrigin,
			change:  func(s *provider.Submission, _ time.Time) { s.Link = "" },
			wantTTL: "3600s", wantNotif: true,
			wantData: map[string]string{"oncepush_id": "5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f", "order": "A-1042"},
		},
		{
			name:    "expired: ttl 0",
			change:  func(s *provider.Submission, now time.Time) { s.ExpiresAt = now.Add(-time.Minute) },
			wantTTL: "0s", wantNotif: true,
			wantData: map[string]string{"oncepush_id": "5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f", "order": "A-1042", "oncepush_link": "/orders/A-1042"},
		},
		{
			name:    "far future: ttl capped at 28 days",
			change:  func(s *provider.Submission, now time.Time) { s.ExpiresAt = now.Add(90 * 24 * time.Hour) },
			wantTTL: "2419200s", wantNotif: true,
			wantData: map[string]string{"oncepush_id": "5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f", "order": "A-1042", "oncepush_link": "/orders/A-1042"},
		},
		{
			name: "fractional seconds are cut",
			change: func(s *provider.Submission, now time.Time) {
				s.ExpiresAt = now.Add(90*time.Second + 700*time.Millisecond)
			},
			wantTTL: "90s", wantNotif: true,
			wantData: map[string]string{"oncepush_id": "5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f", "order": "A-1042", "oncepush_link": "/orders/A-1042"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, b := setupOn(t, fake, tt.edit)
			token := "shape-token-" + string(rune('a'+i))
			s := submission(token, b.clock)
			if tt.change != nil {
				tt.change(s, b.clock.Now())
			}
			before := maps.Clone(s.Data)

			res := p.Send(context.Background(), s)
			if res.Outcome != provider.OutcomeAccepted {
				t.Fatalf("Send: %v %q, want accepted", res.Outcome, res.Text)
			}
			if !strings.HasPrefix(res.ProviderID, "projects/"+project+"/messages/") {
				t.Errorf("ProviderID %q, want FCM's message name", res.ProviderID)
			}
			if !maps.Equal(s.Data, before) {
				t.Errorf("Send modified Submission.Data: %v, was %v", s.Data, before)
			}
			reqs := requestsFor(fake, token)
			if len(reqs) != 1 {
				t.Fatalf("fake recorded %d requests for the token, want 1", len(reqs))
			}
			r := reqs[0]
			if r.CollapseID != s.CollapseID || r.NotificationID != s.NotificationID {
				t.Errorf("recorded collapse %q, notification %q; want %q, %q", r.CollapseID, r.NotificationID, s.CollapseID, s.NotificationID)
			}
			w := decodeWire(t, r.Payload)
			m := w.Message
			if m.Token != token {
				t.Errorf("token %q, want %q", m.Token, token)
			}
			if !maps.Equal(m.Data, tt.wantData) {
				t.Errorf("data %v, want %v", m.Data, tt.wantData)
			}
			if n := m.Notification; tt.wantNotif && (n == nil || n.Title != s.Title || n.Body != s.Body || n.Image != s.Image) {
				t.Errorf("notification %+v, want title, body and image of the submission", n)
			}
			if m.Android.CollapseKey != s.CollapseID || m.Android.Priority != "high" || m.Android.TTL != tt.wantTTL {
				t.Errorf("android %+v, want collapse_key %q, priority high, ttl %q", m.Android, s.CollapseID, tt.wantTTL)
			}
			wantAPNs := map[string]string{
				"apns-collapse-id": s.CollapseID,
				"apns-priority":    "10",
				"apns-expiration":  jsonInt(s.ExpiresAt.Unix()),
			}
			if !maps.Equal(m.APNs.Headers, wantAPNs) {
				t.Errorf("apns headers %v, want %v", m.APNs.Headers, wantAPNs)
			}
			wantWeb := map[string]string{"TTL": strings.TrimSuffix(tt.wantTTL, "s"), "Urgency": "high", "Topic": s.CollapseID}
			if !maps.Equal(m.Webpush.Headers, wantWeb) {
				t.Errorf("webpush headers %v, want %v", m.Webpush.Headers, wantWeb)
			}
			gotLink := ""
			if m.Webpush.FCMOptions != nil {
				gotLink = m.Webpush.FCMOptions.Link
			}
			if gotLink != tt.wantLink {
				t.Errorf("webpush.fcm_options.link %q, want %q", gotLink, tt.wantLink)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
		})
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// requestsFor is what the fake recorded for one FCM device token.
func requestsFor(fake *pushtest.FakeServer, token string) []pushtest.FakeRequest {
	return providertest.RequestsFor(fake, provider.TransportFCM, token)
}

// TestErrorAnswers covers FCM's error table: each answer's outcome, text,
// and wait, and that none is retried inside Send.
func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	dataViolation := pushtest.FakeAnswer{Status: 400, Body: `{"error":{"code":400,"message":"Invalid value at 'message.data[0].value'","status":"INVALID_ARGUMENT","details":[` +
		`{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"},` +
		`{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.data[0].value","description":"Invalid value"}]}]}}`}

	// minuteAnd is a time d past a minute boundary, for the project quota's
	// default pause (until the next minute).
	minuteAnd := func(d time.Duration) time.Time {
		return time.Date(2026, 3, 2, 14, 7, 0, 0, time.UTC).Add(d)
	}
	const projectQuotaText = "429 RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' " +
		"of service 'fcm.googleapis.com' for consumer 'project_number:100000000001'."

	tests := []struct {
		name          string
		answer        pushtest.FakeAnswer
		now           time.Time // the provider's clock, when it matters
		want          provider.Outcome
		wantText      string
		wantRetry     time.Duration
		wantThrottle  bool
		wantErrorLogs bool
	}{
		{name: "unregistered",
			answer: pushtest.FCMError(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED"),
			want:   provider.OutcomeInvalidToken, wantText: "404 UNREGISTERED: Requested entity was not found."},
		{name: "sender id mismatch",
			answer: pushtest.FCMError(403, "PERMISSION_DENIED", "SenderId mismatch", "SENDER_ID_MISMATCH"),
			want:   provider.OutcomeInvalidToken, wantText: "403 SENDER_ID_MISMATCH: SenderId mismatch"},
		{name: "invalid argument about the token",
			answer: pushtest.FCMInvalidTokenArgument(),
			want:   provider.OutcomeInvalidToken, wantText: "400 INVALID_ARGUMENT: The registration token is not a valid FCM registration token"},
		{name: "invalid argument about the message",
			answer: dataViolation,
			want:   provider.OutcomeRejected, wantText: "400 INVALID_ARGUMENT: Invalid value at 'message.data[0].value'"},
		{name: "invalid argument without details",
			answer: pushtest.FCMError(400, "INVALID_ARGUMENT", "Request contains an invalid argument.", ""),
			want:   provider.OutcomeRejected, wantText: "400 INVALID_ARGUMENT: Request contains an invalid argument."},
		{name: "invalid argument FcmError without field violation",
			answer: pushtest.FCMError(400, "INVALID_ARGUMENT", "Message is too big", "INVALID_ARGUMENT"),
			want:   provider.OutcomeRejected, wantText: "400 INVALID_ARGUMENT: Message is too big"},
		// 429: only the project's quota pauses the transport; a device's or
		// topic's rate, or a 429 that does not say, backs off that device.
		{name: "project quota pauses the transport until the next minute",
			answer: pushtest.FCMProjectQuotaExceeded(), now: minuteAnd(45 * time.Second),
			want: provider.OutcomeRetry, wantText: projectQuotaText, wantRetry: 15 * time.Second, wantThrottle: true},
		{name: "project quota on the minute pauses a whole minute",
			answer: pushtest.FCMProjectQuotaExceeded(), now: minuteAnd(0),
			want: provider.OutcomeRetry, wantText: projectQuotaText, wantRetry: time.Minute, wantThrottle: true},
		{name: "project quota honours a short Retry-After",
			answer: providertest.WithRetryAfter(pushtest.FCMProjectQuotaExceeded(), "1"), now: minuteAnd(5 * time.Second),
			want: provider.OutcomeRetry, wantText: projectQuotaText, wantRetry: time.Second, wantThrottle: true},
		{name: "project quota honours a long Retry-After",
			answer: providertest.WithRetryAfter(pushtest.FCMProjectQuotaExceeded(), "300"),
			want:   provider.OutcomeRetry, wantText: projectQuotaText, wantRetry: 5 * time.Minute, wantThrottle: true},
		{name: "device rate backs off the device by default a minute",
			answer: pushtest.FCMDeviceRateExceeded(),
			want:   provider.OutcomeRetry, wantText: "429 QUOTA_EXCEEDED: Device message rate exceeded.", wantRetry: fcm.RateLimitRetryDefault},
		{name: "device rate honours Retry-After of one second",
			answer: providertest.WithRetryAfter(pushtest.FCMDeviceRateExceeded(), "1"),
			want:   provider.OutcomeRetry, wantText: "429 QUOTA_EXCEEDED: Device message rate exceeded.", wantRetry: time.Second},
		{name: "device rate honours a long Retry-After",
			answer: providertest.WithRetryAfter(pushtest.FCMDeviceRateExceeded(), "300"),
			want:   provider.OutcomeRetry, wantText: "429 QUOTA_EXCEEDED: Device message rate exceeded.", wantRetry: 5 * time.Minute},
		{name: "429 without details backs off the device",
			answer: pushtest.FCMError(429, "RESOURCE_EXHAUSTED", "Too many requests.", ""),
			want:   provider.OutcomeRetry, wantText: "429 RESOURCE_EXHAUSTED: Too many requests.", wantRetry: fcm.RateLimitRetryDefault},
		{name: "429 from a proxy backs off the device",
			answer: providertest.WithRetryAfter(pushtest.FakeAnswer{Status: 429, Body: "Too Many Requests"}, "2"),
			want:   provider.OutcomeRetry, wantText: "429 Too Many Requests: Too Many Requests", wantRetry: 2 * time.Second},
		{name: "another quota of the project's is not the send quota",
			answer: pushtest.FakeAnswer{Status: 429, Body: `{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":[` +
				`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com",` +
				`"metadata":{"quota_limit":"SendsPerMinutePerProjectPerUser","quota_unit":"1/min/{project}/{user}"}}]}}`},
			want: provider.OutcomeRetry, wantText: "429 RESOURCE_EXHAUSTED: Quota exceeded.", wantRetry: fcm.RateLimitRetryDefault},
		{name: "unavailable honours Retry-After",
			answer: providertest.WithRetryAfter(pushtest.FCMError(503, "UNAVAILABLE", "The service is unavailable.", "UNAVAILABLE"), "30"),
			want:   provider.OutcomeRetry, wantText: "503 UNAVAILABLE: The service is unavailable.", wantRetry: 30 * time.Second},
		{name: "internal",
			answer: pushtest.FCMError(500, "INTERNAL", "Internal error encountered.", "INTERNAL"),
			want:   provider.OutcomeRetry, wantText: "500 INTERNAL: Internal error encountered."},
		{name: "third party auth error",
			answer: pushtest.FCMError(401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service", "THIRD_PARTY_AUTH_ERROR"),
			want:   provider.OutcomeRejected, wantText: "401 THIRD_PARTY_AUTH_ERROR: Auth error from APNS or Web Push Service", wantErrorLogs: true},
		{name: "502 html page",
			answer: pushtest.FakeAnswer{Status: 502, Body: "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>Bad Gateway</body></html>"},
			want:   provider.OutcomeRetry, wantText: "502 Bad Gateway: <html> <head><title>502 Bad Gateway</title></head> <body>Bad Gateway</body></html>"},
		{name: "404 without FcmError keeps the token",
			answer: pushtest.FCMError(404, "NOT_FOUND", "Requested entity was not found.", ""),
			want:   provider.OutcomeRejected, wantText: "404 NOT_FOUND: Requested entity was not found."},
		{name: "403 permission denied is a configuration error",
			answer: pushtest.FCMError(403, "PERMISSION_DENIED", "Permission 'cloudmessaging.messages.create' denied.", ""),
			want:   provider.OutcomeRejected, wantText: "403 PERMISSION_DENIED: Permission 'cloudmessaging.messages.create' denied.", wantErrorLogs: true},
		{name: "other 4xx",
			answer: pushtest.FakeAnswer{Status: 413, Body: "request too large"},
			want:   provider.OutcomeRejected, wantText: "413 Request Entity Too Large: request too large"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, b := setupOn(t, fake, nil)
			if !tt.now.IsZero() {
				// A time of its own, which the fake judges the
				// provider's credentials by too.
				p, b = setupAt(t, tt.now, nil)
			}
			token := "error-token-" + string(rune('a'+i))
			b.fake.Program(provider.TransportFCM, token, tt.answer)

			res := p.Send(context.Background(), submission(token, b.clock))
			providertest.CheckResult(t, res, provider.Result{Outcome: tt.want, Text: tt.wantText, RetryAfter: tt.wantRetry, Throttle: tt.wantThrottle})
			if n := len(requestsFor(b.fake, token)); n != 1 {
				t.Errorf("fake recorded %d requests, want 1 (no resend inside Send)", n)
			}
			if got := b.logs.Errors() > 0; got != tt.wantErrorLogs {
				t.Errorf("error logged: %v, want %v\n%s", got, tt.wantErrorLogs, b.logs.Text())
			}
		})
	}
}

func TestConcurrentSendsFetchOneToken(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	const n = 200
	providertest.AllAccepted(t, providertest.SendAll(n, func(i int) provider.Result {
		return p.Send(context.Background(), submission("concurrent-token-"+jsonInt(int64(i)), b.clock))
	}))
	if got := b.fake.FCMTokenRequests(); got != 1 {
		t.Errorf("%d concurrent sends made %d token requests, want 1", n, got)
	}
	if got := b.fake.Count(); got != n {
		t.Errorf("fake recorded %d sends, want %d", got, n)
	}
}

func TestTokenCachedUntilFiveMinutesBeforeExpiry(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	send := func() {
		t.Helper()
		if res := p.Send(context.Background(), submission("cache-token-1", b.clock)); res.Outcome != provider.OutcomeAccepted {
			t.Fatalf("Send: %v %q", res.Outcome, res.Text)
		}
	}
	send()
	b.clock.Advance(54*time.Minute + 59*time.Second) // the fake's tokens live an hour
	send()
	if got := b.fake.FCMTokenRequests(); got != 1 {
		t.Fatalf("token requests before the refresh margin: %d, want 1", got)
	}
	b.clock.Advance(2 * time.Second)
	send()
	if got := b.fake.FCMTokenRequests(); got != 2 {
		t.Fatalf("token requests after the refresh margin: %d, want 2", got)
	}
	send()
	if got := b.fake.FCMTokenRequests(); got != 2 {
		t.Fatalf("token requests with a fresh token: %d, want 2", got)
	}
}

func TestUnauthorizedRefreshesTokenOnce(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	if res := p.Send(context.Background(), submission("refresh-token-1", b.clock)); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("first send: %v %q", res.Outcome, res.Text)
	}
	b.fake.RevokeFCMAccessTokens() // FCM now answers 401 to the cached token

	res := p.Send(context.Background(), submission("refresh-token-1", b.clock))
	if res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("send after revocation: %v %q, want accepted with a new token", res.Outcome, res.Text)
	}
	if got := b.fake.FCMTokenRequests(); got != 2 {
		t.Errorf("token requests: %d, want 2 (one refresh)", got)
	}
	if got := len(requestsFor(b.fake, "refresh-token-1")); got != 2 {
		t.Errorf("accepted sends recorded: %d, want 2", got)
	}
	if b.logs.Errors() != 0 {
		t.Errorf("a refreshed token is routine, but an error was logged:\n%s", b.logs.Text())
	}
}

func TestConcurrentUnauthorizedSendsShareOneRefresh(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	if res := p.Send(context.Background(), submission("shared-refresh-0", b.clock)); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("first send: %v %q", res.Outcome, res.Text)
	}
	b.fake.RevokeFCMAccessTokens()
	const n = 50
	providertest.AllAccepted(t, providertest.SendAll(n, func(i int) provider.Result {
		return p.Send(context.Background(), submission("shared-refresh-"+jsonInt(int64(i+1)), b.clock))
	}))
	if got := b.fake.FCMTokenRequests(); got != 2 {
		t.Errorf("token requests: %d, want 2 (%d sends refused at once share one refresh)", got, n)
	}
}

func TestPersistentUnauthorizedIsRejectedAfterOneRefresh(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	const token = "unauthorized-token-1"
	b.fake.Program(provider.TransportFCM, token,
		pushtest.FCMError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", ""))

	res := p.Send(context.Background(), submission(token, b.clock))
	if res.Outcome != provider.OutcomeRejected || res.Text != "401 UNAUTHENTICATED: Request had invalid authentication credentials." {
		t.Errorf("Send: %v %q, want rejected with FCM's text", res.Outcome, res.Text)
	}
	if got := b.fake.FCMTokenRequests(); got != 2 {
		t.Errorf("token requests: %d, want 2 (exactly one refresh)", got)
	}
	if got := len(requestsFor(b.fake, token)); got != 2 {
		t.Errorf("sends: %d, want 2 (the first and one retry with the new token)", got)
	}
	if b.logs.Errors() == 0 {
		t.Error("refused credentials were not logged as an error")
	}
}

func TestUnsendableMessagesAreRejectedWithoutRequest(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	tests := []struct {
		name   string
		change func(*provider.Submission)
	}{
		{"data too large", func(s *provider.Submission) {
			s.Data = maps.Clone(s.Data)
			s.Data["blob"] = strings.Repeat("x", 4000)
		}},
		{"body too large", func(s *provider.Submission) { s.Body = strings.Repeat("é", 2100) }},
		{"reserved data key", func(s *provider.Submission) {
			s.Data = map[string]string{"google.sent_time": "1"}
		}},
		{"reserved data key from", func(s *provider.Submission) { s.Data = map[string]string{"from": "me"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, b := setupOn(t, fake, nil)
			s := submission("unsendable-token", b.clock)
			tt.change(s)
			if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeRejected || res.Text == "" {
				t.Errorf("Send: %v %q, want rejected with a reason", res.Outcome, res.Text)
			}
		})
	}
	t.Cleanup(func() {
		if n := fake.Count(); n != 0 {
			t.Errorf("fake recorded %d sends of unsendable messages, want 0", n)
		}
		if n := fake.FCMTokenRequests(); n != 0 {
			t.Errorf("%d token requests for unsendable messages, want 0", n)
		}
	})
}

func TestPayloadAtTheLimitIsSent(t *testing.T) {
	t.Parallel()
	p, b := setup(t, nil)
	s := submission("limit-token-1", b.clock)
	s.Title, s.Body, s.Image, s.Link = "", "", "", ""
	// {"k":"…"} is 8 bytes of JSON around the value.
	s.Data = map[string]string{"k": strings.Repeat("x", fcm.MaxPayload-8)}
	if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("a payload of exactly %d bytes: %v %q, want accepted", fcm.MaxPayload, res.Outcome, res.Text)
	}
	s.Data = map[string]string{"k": strings.Repeat("x", fcm.MaxPayload-7)}
	if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeRejected {
		t.Fatalf("a payload of %d bytes: %v %q, want rejected", fcm.MaxPayload+1, res.Outcome, res.Text)
	}
}

func TestTransportFailures(t *testing.T) {
	t.Parallel()

	t.Run("reset after the request was read is maybe-sent", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, nil)
		b.fake.Program(provider.TransportFCM, "drop-token-1", pushtest.FakeAnswer{Drop: true})
		res := p.Send(context.Background(), submission("drop-token-1", b.clock))
		if res.Outcome != provider.OutcomeMaybeSent {
			t.Errorf("Send: %v %q, want maybe-sent", res.Outcome, res.Text)
		}
		if n := len(requestsFor(b.fake, "drop-token-1")); n != 1 {
			t.Errorf("fake recorded %d requests, want 1", n)
		}
	})

	t.Run("closed port is retry", func(t *testing.T) {
		t.Parallel()
		addr := providertest.ClosedAddr(t)
		p, b := setup(t, func(c *fcm.Config) { c.BaseURL = "https://" + addr + "/fcm" })
		res := p.Send(context.Background(), submission("closed-token-1", b.clock))
		if res.Outcome != provider.OutcomeRetry {
			t.Errorf("Send: %v %q, want retry", res.Outcome, res.Text)
		}
	})

	t.Run("unreachable token endpoint is retry", func(t *testing.T) {
		t.Parallel()
		addr := providertest.ClosedAddr(t)
		p, b := setup(t, func(c *fcm.Config) {
			c.ServiceAccountJSON = editAccount(t, c.ServiceAccountJSON, "token_uri", "https://"+addr+"/token")
		})
		res := p.Send(context.Background(), submission("tokenless-token-1", b.clock))
		if res.Outcome != provider.OutcomeRetry {
			t.Errorf("Send: %v %q, want retry", res.Outcome, res.Text)
		}
		if b.fake.Count() != 0 {
			t.Error("a message was sent without an access token")
		}
	})

	t.Run("refused service account is rejected and alerted", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, func(c *fcm.Config) {
			// A key Google does not know: the assertion's signature fails.
			c.ServiceAccountJSON = editAccount(t, c.ServiceAccountJSON, "private_key", rsaKeyPEM(t))
		})
		res := p.Send(context.Background(), submission("unknown-key-token-1", b.clock))
		if res.Outcome != provider.OutcomeRejected || !strings.HasPrefix(res.Text, "access token: 400 invalid_grant") {
			t.Errorf("Send: %v %q, want rejected with the token endpoint's answer", res.Outcome, res.Text)
		}
		if b.fake.Count() != 0 {
			t.Error("a message was sent without an access token")
		}
		if b.logs.Errors() == 0 {
			t.Error("refused service account not logged as an error")
		}
	})

	t.Run("cancelled context does not block", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, nil)
		b.fake.SetLatency(provider.TransportFCM, 5*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		res := p.Send(ctx, submission("slow-token-1", b.clock))
		if res.Outcome != provider.OutcomeMaybeSent && res.Outcome != provider.OutcomeRetry {
			t.Errorf("Send: %v %q, want maybe-sent (or retry if the token was not fetched in time)", res.Outcome, res.Text)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("Send took %s after its context ended", d)
		}
	})
}

func editAccount(t *testing.T, account []byte, field string, value any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(account, &m); err != nil {
		t.Fatal(err)
	}
	if value == nil {
		delete(m, field)
	} else {
		m[field] = value
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rsaKeyPEM(t *testing.T) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func TestNewRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	good := fake.FCMServiceAccount(project)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}))

	tests := []struct {
		name   string
		cfg    fcm.Config
		naming string // the error must name this
	}{
		{"empty", fcm.Config{}, "ServiceAccountJSON"},
		{"not JSON", fcm.Config{ServiceAccountJSON: []byte("-----BEGIN PRIVATE KEY-----\nMIIE")}, "not JSON"},
		{"JSON of the wrong shape", fcm.Config{ServiceAccountJSON: []byte(`{"type": 1}`)}, "JSON"},
		{"missing project_id", fcm.Config{ServiceAccountJSON: editAccount(t, good, "project_id", nil)}, "project_id"},
		{"missing private_key_id", fcm.Config{ServiceAccountJSON: editAccount(t, good, "private_key_id", nil)}, "private_key_id"},
		{"missing private_key", fcm.Config{ServiceAccountJSON: editAccount(t, good, "private_key", nil)}, "private_key"},
		{"missing client_email", fcm.Config{ServiceAccountJSON: editAccount(t, good, "client_email", nil)}, "client_email"},
		{"missing token_uri", fcm.Config{ServiceAccountJSON: editAccount(t, good, "token_uri", nil)}, "token_uri"},
		{"missing type", fcm.Config{ServiceAccountJSON: editAccount(t, good, "type", nil)}, "type"},
		{"wrong type", fcm.Config{ServiceAccountJSON: editAccount(t, good, "type", "authorized_user")}, "service_account"},
		{"ECDSA key", fcm.Config{ServiceAccountJSON: editAccount(t, good, "private_key", ecPEM)}, "RSA"},
		{"key not PEM", fcm.Config{ServiceAccountJSON: editAccount(t, good, "private_key", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC")}, "PEM"},
		{"plain-http token_uri", fcm.Config{ServiceAccountJSON: editAccount(t, good, "token_uri", "http://oauth2.example.com/token")}, "token_uri"},
		{"plain-http BaseURL", fcm.Config{ServiceAccountJSON: good, BaseURL: "http://fcm.example.com"}, "BaseURL"},
		{"WebOrigin with a path", fcm.Config{ServiceAccountJSON: good, WebOrigin: "https://app.example.com/home"}, "WebOrigin"},
		{"WebOrigin not https", fcm.Config{ServiceAccountJSON: good, WebOrigin: "http://app.example.com"}, "WebOrigin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := fcm.New(tt.cfg)
			// Never the key: "MII" starts every PEM RSA key's base64.
			providertest.CheckConfigError(t, err, tt.naming, "MII")
		})
	}
}

func TestLoadServiceAccount(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	path := t.TempDir() + "/key.json"
	if err := os.WriteFile(path, fake.FCMServiceAccount(project), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := fcm.LoadServiceAccount(path)
	if err != nil {
		t.Fatalf("LoadServiceAccount: %v", err)
	}
	p, err := fcm.New(fcm.Config{ServiceAccountJSON: b})
	if err != nil {
		t.Fatalf("New with the loaded file: %v", err)
	}
	if p.ProjectID() != project {
		t.Errorf("ProjectID %q, want %q", p.ProjectID(), project)
	}
	if _, err := fcm.LoadServiceAccount(t.TempDir() + "/absent.json"); err == nil {
		t.Error("LoadServiceAccount of an absent file succeeded")
	}
}

func TestConfigLogsNoKey(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	cfg := fcm.Config{ServiceAccountJSON: fake.FCMServiceAccount(project), BaseURL: fake.URL + "/fcm"}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("configured", "fcm", cfg)
	if strings.Contains(buf.String(), "PRIVATE KEY") || strings.Contains(buf.String(), "private_key_id") {
		t.Errorf("logging the Config leaked the key file: %s", buf.String())
	}
}

// TestClientClockReachesTheProvider: a provider configured without a clock
// tells the time of the client it serves (UseClock) — TTLs, the token cache,
// the OAuth assertion — and a fake server on the same clock, far from the
// wall clock, accepts its credentials and expires its tokens as the clock
// moves. A clock of its own wins over the client's.
func TestClientClockReachesTheProvider(t *testing.T) {
	t.Parallel()
	clock := pushtest.NewClock(time.Date(2021, 6, 1, 8, 0, 0, 0, time.UTC))
	fake := pushtest.NewFakeServerWith(t, &pushtest.FakeOptions{Clock: clock})
	p, err := fcm.New(fcm.Config{
		ServiceAccountJSON: fake.FCMServiceAccount(project), BaseURL: fake.URL + "/fcm",
		TLSConfig: fake.TLSConfig(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.UseClock(clock)
	ttl := func(token string) string {
		t.Helper()
		s := submission(token, clock)
		s.ExpiresAt = clock.Now().Add(90 * time.Minute)
		if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeAccepted {
			t.Fatalf("Send: %v %q", res.Outcome, res.Text)
		}
		reqs := requestsFor(fake, token)
		var w wire
		if err := json.Unmarshal(reqs[len(reqs)-1].Payload, &w); err != nil {
			t.Fatal(err)
		}
		return w.Message.Android.TTL
	}
	if got := ttl("clock-token-1"); got != "5400s" {
		t.Errorf("TTL %q, want 5400s: the client's clock, not the wall clock", got)
	}
	// An hour on, the fake's token has expired and the provider's cache
	// knows: a new token is fetched, with an assertion judged on the clock.
	clock.Advance(time.Hour)
	if got := ttl("clock-token-2"); got != "5400s" {
		t.Errorf("TTL %q after an hour, want 5400s", got)
	}
	if got := fake.FCMTokenRequests(); got != 2 {
		t.Errorf("token requests: %d, want 2 (one per hour of the clock)", got)
	}

	own := pushtest.NewClock(clock.Now().Add(-30 * time.Minute))
	q, err := fcm.New(fcm.Config{
		ServiceAccountJSON: fake.FCMServiceAccount(project), BaseURL: fake.URL + "/fcm",
		TLSConfig: fake.TLSConfig(), Clock: own, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	q.UseClock(clock)
	s := submission("clock-token-3", clock)
	s.ExpiresAt = clock.Now().Add(time.Minute)
	if res := q.Send(context.Background(), s); res.Outcome != provider.OutcomeAccepted {
		t.Fatalf("Send with a clock of its own: %v %q", res.Outcome, res.Text)
	}
	var w wire
	if err := json.Unmarshal(requestsFor(fake, "clock-token-3")[0].Payload, &w); err != nil {
		t.Fatal(err)
	}
	if w.Message.Android.TTL != "1860s" {
		t.Errorf("TTL %q with a clock of its own 30 min behind, want 1860s", w.Message.Android.TTL)
	}
}
