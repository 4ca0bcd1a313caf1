package rustore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/providertest"
	"github.com/oncepush/oncepush/provider/rustore"
	"github.com/oncepush/oncepush/pushtest"
)

const project = "rustore-project-1"

type bundle struct {
	fake  *pushtest.FakeServer
	clock *pushtest.Clock
	logs  *providertest.Logs
}

// setupOn makes a provider for the fake server; edit may change the
// configuration before New.
func setupOn(t *testing.T, fake *pushtest.FakeServer, edit func(*rustore.Config)) (*rustore.Provider, *bundle) {
	t.Helper()
	b := &bundle{fake: fake, clock: pushtest.NewClock(time.Now()), logs: &providertest.Logs{}}
	cfg := rustore.Config{
		ProjectID:    project,
		ServiceToken: rustore.ServiceToken(fake.RuStoreToken()),
		BaseURL:      fake.URL + "/rustore",
		TLSConfig:    fake.TLSConfig(),
		Clock:        b.clock,
		Logger:       b.logs.Logger(),
	}
	return providertest.Build(t, rustore.New, &cfg, edit), b
}

// submission is a typical notification for the device token, expiring two
// hours from the bundle's clock.
func (b *bundle) submission(token string) *provider.Submission {
	return &provider.Submission{
		NotificationID: "9a8b7c6d5e4f30211203f4e5d6c7b8a9",
		CollapseID:     "9a8b7c6d5e4f30211203f4e5d6c7b8a9",
		DeliveryID:     11,
		DeviceID:       23,
		Token:          provider.Token(token),
		Title:          "Новый заказ",
		Body:           "Заказ A-7 принят.",
		Data:           map[string]string{"oncepush_id": "9a8b7c6d5e4f30211203f4e5d6c7b8a9", "order": "A-7"},
		Link:           "/orders/A-7",
		ExpiresAt:      b.clock.Now().Add(2 * time.Hour),
	}
}

// requestsFor is what the fake recorded for one RuStore device token.
func requestsFor(fake *pushtest.FakeServer, token string) []pushtest.FakeRequest {
	return providertest.RequestsFor(fake, provider.TransportRuStore, token)
}

// wire is the request body as RuStore reads it.
type wire struct {
	Message struct {
		providertest.V1Message
		Android *struct {
			TTL          string `json:"ttl"`
			Notification *struct {
				ChannelID   string `json:"channel_id"`
				ClickAction string `json:"click_action"`
			} `json:"notification"`
		} `json:"android"`
	} `json:"message"`
}

func TestSendMessageShape(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	withChannel := func(c *rustore.Config) { c.ChannelID, c.ClickAction = "orders", "ru.example.OPEN_ORDER" }
	base := map[string]string{"oncepush_id": "9a8b7c6d5e4f30211203f4e5d6c7b8a9", "order": "A-7"}
	with := func(extra map[string]string) map[string]string {
		m := maps.Clone(base)
		maps.Copy(m, extra)
		return m
	}

	tests := []struct {
		name        string
		edit        func(*rustore.Config)
		change      func(s *provider.Submission, now time.Time)
		wantNotif   bool
		wantData    map[string]string
		wantTTL     string
		wantChannel string
		wantAction  string
	}{
		{
			name: "notification with channel and click action", edit: withChannel,
			wantNotif: true, wantTTL: "7200s", wantChannel: "orders", wantAction: "ru.example.OPEN_ORDER",
			wantData: with(map[string]string{"oncepush_link": "/orders/A-7"}),
		},
		{
			name:      "notification without link",
			change:    func(s *provider.Submission, _ time.Time) { s.Link = "" },
			wantNotif: true, wantTTL: "7200s", wantData: base,
		},
		{
			name: "image travels as data only", edit: withChannel,
			change:  func(s *provider.Submission, _ time.Time) { s.Image = "https://img.example.com/a7.png" },
			wantTTL: "7200s",
			wantData: with(map[string]string{
				"oncepush_title": "Новый заказ", "oncepush_body": "Заказ A-7 принят.",
				"oncepush_image": "https://img.example.com/a7.png", "oncepush_link": "/orders/A-7",
			}),
		},
		{
			name:      "expired: ttl 0",
			change:    func(s *provider.Submission, now time.Time) { s.ExpiresAt = now.Add(-time.Second) },
			wantNotif: true, wantTTL: "0s", wantData: with(map[string]string{"oncepush_link": "/orders/A-7"}),
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, b := setupOn(t, fake, tt.edit)
			token := fmt.Sprintf("shape-token-%d", i)
			s := b.submission(token)
			if tt.change != nil {
				tt.change(s, b.clock.Now())
			}
			before := maps.Clone(s.Data)
			if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeAccepted {
				t.Fatalf("Send: %v %q, want accepted", res.Outcome, res.Text)
			}
			if !maps.Equal(s.Data, before) {
				t.Errorf("Send modified Submission.Data: %v, was %v", s.Data, before)
			}
			reqs := requestsFor(fake, token)
			if len(reqs) != 1 {
				t.Fatalf("fake recorded %d requests, want 1", len(reqs))
			}
			if reqs[0].NotificationID != s.NotificationID {
				t.Errorf("recorded notification id %q, want %q", reqs[0].NotificationID, s.NotificationID)
			}
			var w wire
			if err := json.Unmarshal(reqs[0].Payload, &w); err != nil {
				t.Fatal(err)
			}
			m := w.Message
			if m.Token != token {
				t.Errorf("token %q, want %q", m.Token, token)
			}
			if !maps.Equal(m.Data, tt.wantData) {
				t.Errorf("data %v\nwant %v", m.Data, tt.wantData)
			}
			switch n := m.Notification; {
			case tt.wantNotif && (n == nil || n.Title != s.Title || n.Body != s.Body || n.Image != ""):
				t.Errorf("notification %+v, want the title and body (and no image)", n)
			case !tt.wantNotif && n != nil:
				t.Errorf("notification %+v, want none (data only)", n)
			}
			if m.Android == nil || m.Android.TTL != tt.wantTTL {
				t.Fatalf("android %+v, want ttl %q", m.Android, tt.wantTTL)
			}
			channel, action := "", ""
			if an := m.Android.Notification; an != nil {
				channel, action = an.ChannelID, an.ClickAction
			}
			if tt.wantNotif && (channel != tt.wantChannel || action != tt.wantAction) || !tt.wantNotif && (channel != "" || action != "") {
				t.Errorf("android.notification channel %q, click_action %q; want %q, %q (none for data only)",
					channel, action, tt.wantChannel, tt.wantAction)
			}
		})
	}
}

func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	tests := []struct {
		name          string
		answer        pushtest.FakeAnswer
		want          provider.Outcome
		wantText      string
		wantRetry     time.Duration
		wantThrottle  bool
		wantErrorLogs bool
	}{
		{name: "not found: dead token",
			answer: pushtest.RuStoreError(404, "NOT_FOUND", "Requested entity was not found."),
			want:   provider.OutcomeInvalidToken, wantText: "404 NOT_FOUND: Requested entity was not found."},
		{name: "invalid argument about the token",
			answer: pushtest.RuStoreError(400, "INVALID_ARGUMENT", "Invalid push token"),
			want:   provider.OutcomeInvalidToken, wantText: "400 INVALID_ARGUMENT: Invalid push token"},
		{name: "invalid argument about the message",
			answer: pushtest.RuStoreError(400, "INVALID_ARGUMENT", "message.android.ttl: invalid duration"),
			want:   provider.OutcomeRejected, wantText: "400 INVALID_ARGUMENT: message.android.ttl: invalid duration"},
		{name: "unauthenticated is retried and alerted",
			answer: pushtest.RuStoreError(401, "UNAUTHENTICATED", "Invalid service token."),
			want:   provider.OutcomeRetry, wantText: "401 UNAUTHENTICATED: Invalid service token.", wantErrorLogs: true},
		{name: "permission denied is retried and alerted",
			answer: pushtest.RuStoreError(403, "PERMISSION_DENIED", "Permission denied."),
			want:   provider.OutcomeRetry, wantText: "403 PERMISSION_DENIED: Permission denied.", wantErrorLogs: true},
		// RuStore's 429 does not say whose limit it is: it backs off that
		// device, never the whole transport.
		{name: "too many requests backs off the device for Retry-After",
			answer: providertest.WithRetryAfter(pushtest.RuStoreError(429, "TOO_MANY_REQUESTS", "Too many requests."), "40"),
			want:   provider.OutcomeRetry, wantText: "429 TOO_MANY_REQUESTS: Too many requests.", wantRetry: 40 * time.Second},
		{name: "too many requests honours Retry-After of one second",
			answer: providertest.WithRetryAfter(pushtest.RuStoreError(429, "TOO_MANY_REQUESTS", "Too many requests."), "1"),
			want:   provider.OutcomeRetry, wantText: "429 TOO_MANY_REQUESTS: Too many requests.", wantRetry: time.Second},
		{name: "too many requests without Retry-After leaves the wait to the backoff",
			answer: pushtest.RuStoreError(429, "TOO_MANY_REQUESTS", "Too many requests."),
			want:   provider.OutcomeRetry, wantText: "429 TOO_MANY_REQUESTS: Too many requests."},
		{name: "resource exhausted backs off the device",
			answer: providertest.WithRetryAfter(pushtest.RuStoreError(429, "RESOURCE_EXHAUSTED", "Slow down."), "30"),
			want:   provider.OutcomeRetry, wantText: "429 RESOURCE_EXHAUSTED: Slow down.", wantRetry: 30 * time.Second},
		{name: "429 from a proxy backs off the device",
			answer: pushtest.FakeAnswer{Status: 429, Body: "Too Many Requests"},
			want:   provider.OutcomeRetry, wantText: "429 Too Many Requests: Too Many Requests"},
		{name: "internal",
			answer: pushtest.RuStoreError(500, "INTERNAL", "Internal error."),
			want:   provider.OutcomeRetry, wantText: "500 INTERNAL: Internal error."},
		{name: "unavailable honours Retry-After",
			answer: providertest.WithRetryAfter(pushtest.RuStoreError(503, "UNAVAILABLE", "The service is unavailable."), "20"),
			want:   provider.OutcomeRetry, wantText: "503 UNAVAILABLE: The service is unavailable.", wantRetry: 20 * time.Second},
		{name: "502 html page",
			answer: pushtest.FakeAnswer{Status: 502, Body: "<html><body><h1>502 Bad Gateway</h1></body></html>"},
			want:   provider.OutcomeRetry, wantText: "502 Bad Gateway: <html><body><h1>502 Bad Gateway</h1></body></html>"},
		{name: "404 without RuStore's error keeps the token",
			answer: pushtest.FakeAnswer{Status: 404, Body: "404 page not found"},
			want:   provider.OutcomeRejected, wantText: "404 Not Found: 404 page not found"},
		{name: "other 4xx",
			answer: pushtest.RuStoreError(413, "PAYLOAD_TOO_LARGE", "Message too large."),
			want:   provider.OutcomeRejected, wantText: "413 PAYLOAD_TOO_LARGE: Message too large."},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, b := setupOn(t, fake, nil)
			token := fmt.Sprintf("error-token-%d", i)
			fake.Program(provider.TransportRuStore, token, tt.answer)
			res := p.Send(context.Background(), b.submission(token))
			providertest.CheckResult(t, res, provider.Result{Outcome: tt.want, Text: tt.wantText, RetryAfter: tt.wantRetry, Throttle: tt.wantThrottle})
			if n := len(requestsFor(fake, token)); n != 1 {
				t.Errorf("fake recorded %d requests, want 1", n)
			}
			if got := b.logs.Errors() > 0; got != tt.wantErrorLogs {
				t.Errorf("error logged: %v, want %v\n%s", got, tt.wantErrorLogs, b.logs.Text())
			}
		})
	}
}

func TestWrongServiceToken(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	p, b := setupOn(t, fake, func(c *rustore.Config) { c.ServiceToken = "an-old-service-token" })
	res := p.Send(context.Background(), b.submission("wrong-token-device"))
	if res.Outcome != provider.OutcomeRetry || !strings.HasPrefix(res.Text, "401 UNAUTHENTICATED") {
		t.Errorf("Send: %v %q, want retry with RuStore's 401", res.Outcome, res.Text)
	}
	if b.logs.Errors() == 0 {
		t.Error("a refused service token was not logged as an error")
	}
	if strings.Contains(b.logs.Text(), "an-old-service-token") {
		t.Errorf("the service token was logged:\n%s", b.logs.Text())
	}
	if fake.Count() != 0 {
		t.Error("the fake recorded a request it refused")
	}
}

func TestOversizedMessageIsRejectedWithoutRequest(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	p, b := setupOn(t, fake, nil)
	for name, change := range map[string]func(*provider.Submission){
		"data":  func(s *provider.Submission) { s.Data = map[string]string{"blob": strings.Repeat("x", 4100)} },
		"body":  func(s *provider.Submission) { s.Body = strings.Repeat("ж", 2050) },
		"image": func(s *provider.Submission) { s.Image = "https://img.example.com/" + strings.Repeat("a", 4100) },
	} {
		s := b.submission("big-token")
		change(s)
		if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeRejected || res.Text == "" {
			t.Errorf("%s too large: %v %q, want rejected with a reason", name, res.Outcome, res.Text)
		}
	}
	if fake.Count() != 0 {
		t.Errorf("fake recorded %d requests, want 0", fake.Count())
	}
}

func TestTransportFailures(t *testing.T) {
	t.Parallel()
	t.Run("reset after the request was read is maybe-sent", func(t *testing.T) {
		t.Parallel()
		fake := pushtest.NewFakeServer(t)
		p, b := setupOn(t, fake, nil)
		fake.Program(provider.TransportRuStore, "drop-device", pushtest.FakeAnswer{Drop: true})
		if res := p.Send(context.Background(), b.submission("drop-device")); res.Outcome != provider.OutcomeMaybeSent {
			t.Errorf("Send: %v %q, want maybe-sent", res.Outcome, res.Text)
		}
		if n := len(requestsFor(fake, "drop-device")); n != 1 {
			t.Errorf("fake recorded %d requests, want 1", n)
		}
	})
	t.Run("closed port is retry", func(t *testing.T) {
		t.Parallel()
		addr := providertest.ClosedAddr(t)
		fake := pushtest.NewFakeServer(t)
		p, b := setupOn(t, fake, func(c *rustore.Config) { c.BaseURL = "https://" + addr + "/rustore" })
		if res := p.Send(context.Background(), b.submission("closed-device")); res.Outcome != provider.OutcomeRetry {
			t.Errorf("Send: %v %q, want retry", res.Outcome, res.Text)
		}
	})
}

func TestNewRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		cfg    rustore.Config
		naming string
	}{
		"no project":        {rustore.Config{ServiceToken: "t0k3n"}, "ProjectID"},
		"no service token":  {rustore.Config{ProjectID: "p"}, "ServiceToken"},
		"token with spaces": {rustore.Config{ProjectID: "p", ServiceToken: "t0k3n \n"}, "ServiceToken"},
		"plain-http base":   {rustore.Config{ProjectID: "p", ServiceToken: "t0k3n", BaseURL: "http://vkpns.example"}, "BaseURL"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := rustore.New(tt.cfg)
			providertest.CheckConfigError(t, err, tt.naming, "t0k3n")
		})
	}
}

func TestServiceTokenIsRedacted(t *testing.T) {
	t.Parallel()
	tok := rustore.ServiceToken("s3cr3t-service-token")
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("configured", "token", tok, "config", rustore.Config{ServiceToken: tok})
	out := buf.String() + fmt.Sprint(tok) + fmt.Sprintf("%v %+v", tok, rustore.Config{ServiceToken: tok})
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("the service token leaked: %s", out)
	}
}
