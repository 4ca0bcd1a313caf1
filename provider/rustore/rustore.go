// Package rustore sends notifications through RuStore's push API (VK Push,
// vkpns.rustore.ru), authenticated with the project's service token.
//
// RuStore does not show a notification's image, so a message with an image
// travels as data only (oncepush_title, oncepush_body, oncepush_image and
// oncepush_link), for the app to draw it. Answers are classified on the error
// status: NOT_FOUND and an INVALID_ARGUMENT about the token make the token
// invalid; any other INVALID_ARGUMENT is a rejected message;
// UNAUTHENTICATED/PERMISSION_DENIED (logged as a configuration error),
// TOO_MANY_REQUESTS and 5xx are retried, honouring Retry-After. A
// TOO_MANY_REQUESTS backs off that device only: RuStore does not say it is a
// limit of the whole project.
//
// Wiring it to the fake server in a test:
//
//	fake := pushtest.NewFakeServer(t)
//	p, err := rustore.New(rustore.Config{
//		ProjectID:    "my-project",
//		ServiceToken: rustore.ServiceToken(fake.RuStoreToken()),
//		BaseURL:      fake.URL + "/rustore",
//		TLSConfig:    fake.TLSConfig(),
//	})
package rustore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/fcmv1"
	"github.com/oncepush/oncepush/provider/internal/httpsend"
	"github.com/oncepush/oncepush/provider/internal/timesource"
)

// Defaults and limits.
const (
	// BaseURLDefault is RuStore's push API host.
	BaseURLDefault = "https://vkpns.rustore.ru"
	// MaxPayload is the most bytes the notification and data objects may
	// take, JSON-encoded; larger messages are rejected without a request.
	MaxPayload = 4096
	// MaxTTL caps the TTL sent (RuStore documents no maximum; FCM's four
	// weeks is used).
	MaxTTL = 28 * 24 * time.Hour
)

// Data keys that carry a message with an image (sent as data only) and the
// link.
const (
	DataTitleKey = "oncepush_title"
	DataBodyKey  = "oncepush_body"
	DataImageKey = "oncepush_image"
	DataLinkKey  = "oncepush_link"
)

// ServiceToken is a RuStore project's service token (RuStore Console → Push
// notifications → Projects). It logs and prints itself redacted; use
// string(t) for the value.
type ServiceToken string

// LogValue implements slog.LogValuer.
func (ServiceToken) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// String redacts the token, so fmt verbs cannot leak it.
func (ServiceToken) String() string { return "[redacted]" }

// Config configures a Provider.
type Config struct {
	// ProjectID is the RuStore push project's id. Required.
	ProjectID string
	// ServiceToken authenticates the sends. Required.
	ServiceToken ServiceToken
	// BaseURL is the API base URL, https. Default BaseURLDefault; tests use
	// the fake server's URL + "/rustore".
	BaseURL string
	// ChannelID is the Android notification channel (android.notification.
	// channel_id) of messages shown as notifications. Optional.
	ChannelID string
	// ClickAction is the intent action (android.notification.click_action) a
	// tap on the notification starts. Optional.
	ClickAction string
	// TLSConfig is used for the API; nil means the system roots.
	TLSConfig *tls.Config
	// Clock tells the time for TTLs and Retry-After dates; nil means the
	// clock of the oncepush.Client the provider serves (provider.ClockUser),
	// else the wall clock.
	Clock provider.Clock
	// Logger receives configuration alerts (a refused service token); nil
	// means slog.Default().
	Logger *slog.Logger
}

// Provider is the RuStore provider.Provider, safe for concurrent use.
type Provider struct {
	sendURL     string
	auth        ServiceToken
	channelID   string
	clickAction string
	client      *http.Client
	clock       *timesource.Source
	log         *slog.Logger
}

var _ provider.Provider = (*Provider)(nil)

// New checks cfg and returns a provider; its error names the field to fix.
func New(cfg Config) (*Provider, error) {
	if strings.TrimSpace(cfg.ProjectID) == "" {
		return nil, errors.New("rustore: ProjectID is empty: set it to the push project's id from the RuStore Console")
	}
	if strings.TrimSpace(string(cfg.ServiceToken)) == "" {
		return nil, errors.New("rustore: ServiceToken is empty: set it to the push project's service token from the RuStore Console")
	}
	if strings.ContainsAny(string(cfg.ServiceToken), " \t\r\n") {
		return nil, errors.New("rustore: ServiceToken contains white space; copy the token alone")
	}
	base, err := httpsend.BaseURL(cmp.Or(cfg.BaseURL, BaseURLDefault))
	if err != nil {
		return nil, fmt.Errorf("rustore: BaseURL %w", err)
	}
	return &Provider{
		sendURL:     base + "/v1/projects/" + url.PathEscape(cfg.ProjectID) + "/messages:send",
		auth:        cfg.ServiceToken,
		channelID:   cfg.ChannelID,
		clickAction: cfg.ClickAction,
		// No Timeout: the engine's context bounds each send.
		client: httpsend.NewClient(httpsend.NewTransport(cfg.TLSConfig, nil), 0),
		clock:  timesource.New(cfg.Clock),
		log:    cmp.Or(cfg.Logger, slog.Default()),
	}, nil
}

// UseClock implements provider.ClockUser: the client's clock, unless
// Config.Clock was set.
func (p *Provider) UseClock(c provider.Clock) { p.clock.Use(c) }

// Transport implements provider.Provider.
func (p *Provider) Transport() provider.Transport { return provider.TransportRuStore }

// Send implements provider.Provider. What RuStore says comes back without the
// device token or the service token in it (httpsend.Redact).
func (p *Provider) Send(ctx context.Context, s *provider.Submission) provider.Result {
	return httpsend.RedactResult(p.send(ctx, s), string(s.Token), string(p.auth))
}

func (p *Provider) send(ctx context.Context, s *provider.Submission) provider.Result {
	body, res := p.buildMessage(s)
	if res.Outcome != 0 {
		return res
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.sendURL, bytes.NewReader(body))
	if err != nil {
		return provider.Result{Outcome: provider.OutcomeRetry, Unsent: true, Text: "request not sent: " + err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+string(p.auth))
	req.Header.Set("Content-Type", "application/json; charset=UTF-8")
	resp, res := httpsend.Do(p.client, req, string(s.Token))
	if resp == nil {
		return res
	}
	if resp.Status >= 200 && resp.Status < 300 {
		// RuStore answers {} today; keep an id if it ever sends one.
		var ok struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(resp.Body, &ok)
		return provider.Accepted(resp.Text(ok.Name))
	}
	return p.classify(s, resp)
}

// The RuStore request body.
type sendRequest struct {
	Message message `json:"message"`
}

type message struct {
	Token        string            `json:"token"`
	Data         map[string]string `json:"data,omitempty"`
	Notification *notification     `json:"notification,omitempty"`
	Android      *androidConfig    `json:"android,omitempty"`
}

type notification struct {
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
}

type androidConfig struct {
	TTL          string               `json:"ttl,omitempty"`
	Notification *androidNotification `json:"notification,omitempty"`
}

type androidNotification struct {
	ChannelID   string `json:"channel_id,omitempty"`
	ClickAction string `json:"click_action,omitempty"`
}

// buildMessage turns a submission into the request body, or a rejected
// Result for a message too large to send.
func (p *Provider) buildMessage(s *provider.Submission) ([]byte, provider.Result) {
	m := message{Token: string(s.Token)}
	// s.Data is shared by every device of the delivery: copy before adding.
	data := make(map[string]string, len(s.Data)+4)
	for k, v := range s.Data {
		data[k] = v
	}
	if s.Link != "" {
		data[DataLinkKey] = s.Link
	}
	android := &androidConfig{}
	if s.Image != "" {
		// A notification block would be shown without its image: send data
		// only and let the app draw the notification.
		data[DataTitleKey] = s.Title
		data[DataBodyKey] = s.Body
		data[DataImageKey] = s.Image
	} else if s.Title != "" || s.Body != "" {
		m.Notification = &notification{Title: s.Title, Body: s.Body}
		if p.channelID != "" || p.clickAction != "" {
			android.Notification = &androidNotification{ChannelID: p.channelID, ClickAction: p.clickAction}
		}
	}
	if len(data) > 0 {
		m.Data = data
	}
	if n := fcmv1.PayloadSize(m.Notification, m.Data); n > MaxPayload {
		return nil, provider.Result{Outcome: provider.OutcomeRejected,
			Text: fmt.Sprintf("payload too large: notification and data are %d bytes encoded, at most %d are sent", n, MaxPayload)}
	}
	if !s.ExpiresAt.IsZero() {
		android.TTL = strconv.FormatInt(fcmv1.TTLSeconds(p.clock.Now(), s.ExpiresAt, MaxTTL), 10) + "s"
	}
	if android.TTL != "" || android.Notification != nil {
		m.Android = android
	}
	b, err := json.Marshal(sendRequest{Message: m})
	if err != nil { // strings and maps of strings: cannot happen
		return nil, provider.Result{Outcome: provider.OutcomeRejected, Text: "encode the message: " + err.Error()}
	}
	return b, provider.Result{}
}

// apiError is RuStore's error answer {"error": {"code", "message", "status"}}.
type apiError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// classify maps an error answer to an outcome on its status name, falling
// back on the HTTP status when the body is not RuStore's error document. A
// token is declared dead only on RuStore's explicit word for it.
func (p *Provider) classify(s *provider.Submission, resp *httpsend.Response) provider.Result {
	var e apiError
	status, message := "", ""
	if json.Unmarshal(resp.Body, &e) == nil && (e.Error.Status != "" || e.Error.Message != "") {
		status, message = resp.Text(e.Error.Status), resp.Text(e.Error.Message)
	} else {
		message = httpsend.Snippet(resp.Body)
	}
	name := cmp.Or(status, http.StatusText(resp.Status))
	res := provider.Result{Text: fmt.Sprintf("%d %s", resp.Status, name)}
	if message != "" {
		res.Text += ": " + message
	}
	retryAfter := httpsend.RetryAfter(resp.Header.Get("Retry-After"), p.clock.Now())
	if !knownStatus(status) {
		// Not a status RuStore documents (or no error document at all: a
		// proxy answered): the HTTP status decides, and never makes a token
		// invalid.
		status = statusByCode(resp.Status)
	}
	switch status {
	case "NOT_FOUND":
		res.Outcome = provider.OutcomeInvalidToken
	case "INVALID_ARGUMENT":
		res.Outcome = provider.OutcomeRejected
		if strings.Contains(strings.ToLower(message), "token") {
			res.Outcome = provider.OutcomeInvalidToken
		}
	case "UNAUTHENTICATED", "PERMISSION_DENIED":
		p.log.Error("rustore: the service token was refused; check ProjectID and ServiceToken",
			slog.Int64("delivery_id", s.DeliveryID), slog.String("answer", res.Text))
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
	case "TOO_MANY_REQUESTS", "RESOURCE_EXHAUSTED":
		// RuStore does not say whose limit this is, so it backs off this
		// device only (for Retry-After, or the engine's backoff): pausing
		// the whole transport on every 429 would let a few busy devices
		// stop all RuStore sends.
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
	case "INTERNAL", "UNAVAILABLE":
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
	default:
		res.Outcome = provider.OutcomeRejected
	}
	return res
}

// knownStatus reports the error statuses classify acts on by name.
func knownStatus(status string) bool {
	switch status {
	case "NOT_FOUND", "INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED",
		"TOO_MANY_REQUESTS", "RESOURCE_EXHAUSTED", "INTERNAL", "UNAVAILABLE":
		return true
	}
	return false
}

// statusByCode is the status an answer without a known status name is
// classified as. 400 and 404 are not mapped: without RuStore's own word they
// say nothing about the device token.
func statusByCode(code int) string {
	switch {
	case code == http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case code == http.StatusForbidden:
		return "PERMISSION_DENIED"
	case code == http.StatusTooManyRequests:
		return "TOO_MANY_REQUESTS"
	case code >= 500:
		return "UNAVAILABLE"
	}
	return ""
}
