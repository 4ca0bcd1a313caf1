// Package fcm sends notifications through the Firebase Cloud Messaging HTTP v1
// API, authenticated as a Google service account (the OAuth 2.0 JWT bearer
// flow, its assertion signed here on the provider's clock; no Firebase SDK).
//
// It maps FCM's answers to oncepush outcomes on the FcmError errorCode, not
// only the HTTP status: UNREGISTERED, SENDER_ID_MISMATCH and an
// INVALID_ARGUMENT about the token make the token invalid; any other
// INVALID_ARGUMENT is a rejected message (a malformed message never deletes a
// live registration); a 429 backs off that device (QUOTA_EXCEEDED is the
// message rate of one device or topic), and only a 429 whose details say the
// project's send quota is spent pauses the whole transport, until Retry-After
// or the next minute; UNAVAILABLE and INTERNAL are retried;
// THIRD_PARTY_AUTH_ERROR is rejected and logged, because Firebase's APNs or
// web credentials are wrong.
//
// Wiring it to the fake server in a test:
//
//	fake := pushtest.NewFakeServer(t)
//	p, err := fcm.New(fcm.Config{
//		ServiceAccountJSON: fake.FCMServiceAccount("my-project"),
//		BaseURL:            fake.URL + "/fcm",
//		TLSConfig:          fake.TLSConfig(),
//	})
package fcm

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/httpsend"
	"github.com/oncepush/oncepush/provider/internal/timesource"
)

// Defaults and limits.
const (
	// BaseURLDefault is FCM's API host.
	BaseURLDefault = "https://fcm.googleapis.com"
	// Scope is the OAuth 2.0 scope FCM sends need.
	Scope = "https://www.googleapis.com/auth/firebase.messaging"
	// MaxPayload is the most bytes the notification and data objects may
	// take, JSON-encoded; larger messages are rejected without a request.
	MaxPayload = 4096
	// MaxTTL is the longest FCM keeps an undelivered message.
	MaxTTL = 28 * 24 * time.Hour
	// TokenRefreshMargin is how long before its expiry an access token is
	// replaced.
	TokenRefreshMargin = 5 * time.Minute
	// RateLimitRetryDefault is how long a device waits after a 429 that is
	// not the project's quota (QUOTA_EXCEEDED: the message rate of one
	// device or topic) and carries no Retry-After. Google asks for at least
	// a minute before sending to that target again.
	RateLimitRetryDefault = time.Minute

	tokenFetchTimeout = 30 * time.Second
)

// Config configures a Provider.
type Config struct {
	// ServiceAccountJSON is the contents of the Google service-account key
	// file of the Firebase project (IAM → Service accounts → Keys); the
	// account needs the "Firebase Cloud Messaging API Admin" role or
	// cloudmessaging.messages.create. LoadServiceAccount reads the file.
	// Required. Its project_id is the project messages are sent for, and its
	// token_uri is where access tokens are fetched.
	ServiceAccountJSON []byte
	// BaseURL is the FCM API base URL, https. Default BaseURLDefault; tests
	// use the fake server's URL + "/fcm".
	BaseURL string
	// WebOrigin is the https origin of the web app ("https://app.example.com").
	// When set, a message with a Link carries webpush.fcm_options.link =
	// WebOrigin + Link, which the browser opens on a click. Optional.
	WebOrigin string
	// TLSConfig is used for FCM and the token endpoint; nil means the system
	// roots.
	TLSConfig *tls.Config
	// Clock tells the time for TTLs, the access-token cache and the OAuth
	// assertion; nil means the clock of the oncepush.Client the provider
	// serves (provider.ClockUser), else the wall clock.
	Clock provider.Clock
	// Logger receives configuration alerts (refused credentials); nil means
	// slog.Default().
	Logger *slog.Logger
}

// LogValue implements slog.LogValuer: the service-account key is never logged.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", c.BaseURL),
		slog.String("web_origin", c.WebOrigin),
		slog.String("service_account_json", "[redacted]"),
	)
}

// Provider is the FCM HTTP v1 provider.Provider. It is safe for concurrent
// use; make one per Firebase project and keep it (it holds the connection and
// the access token).
type Provider struct {
	projectID string
	sendURL   string
	webOrigin string
	client    *http.Client
	tokens    *tokenCache
	clock     *timesource.Source
	log       *slog.Logger
}

var _ provider.Provider = (*Provider)(nil)

// New checks cfg and returns a provider. Its error names what to fix: a key
// file that is not JSON, lacks a field or holds a key that is not RSA, a base
// URL or web origin that is not https.
func New(cfg Config) (*Provider, error) {
	acct, err := parseServiceAccount(cfg.ServiceAccountJSON)
	if err != nil {
		return nil, fmt.Errorf("fcm: %w", err)
	}
	base, err := httpsend.BaseURL(cmp.Or(cfg.BaseURL, BaseURLDefault))
	if err != nil {
		return nil, fmt.Errorf("fcm: BaseURL: %w", err)
	}
	origin, err := checkWebOrigin(cfg.WebOrigin)
	if err != nil {
		return nil, fmt.Errorf("fcm: WebOrigin: %w", err)
	}
	key, err := parseRSAKey(acct.PrivateKey) // checked by parseServiceAccount
	if err != nil {
		return nil, fmt.Errorf("fcm: %w", err)
	}
	clock := timesource.New(cfg.Clock)
	log := cmp.Or(cfg.Logger, slog.Default())
	transport := httpsend.NewTransport(cfg.TLSConfig, nil)
	return &Provider{
		projectID: acct.ProjectID,
		sendURL:   base + "/v1/projects/" + url.PathEscape(acct.ProjectID) + "/messages:send",
		webOrigin: origin,
		// No Timeout: the engine's context bounds each send.
		client: httpsend.NewClient(transport, 0),
		tokens: &tokenCache{
			email:    acct.ClientEmail,
			key:      key,
			keyID:    acct.PrivateKeyID,
			tokenURL: acct.TokenURI,
			// The fetch is shared by many sends and cancelled by none of them,
			// so it is bounded on its own.
			client: httpsend.NewClient(transport, tokenFetchTimeout),
			clock:  clock,
			log:    log,
		},
		clock: clock,
		log:   log,
	}, nil
}

// UseClock implements provider.ClockUser: the client's clock, unless
// Config.Clock was set.
func (p *Provider) UseClock(c provider.Clock) { p.clock.Use(c) }

// Transport implements provider.Provider.
func (p *Provider) Transport() provider.Transport { return provider.TransportFCM }

// ProjectID is the Firebase project the provider sends for (the key file's
// project_id).
func (p *Provider) ProjectID() string { return p.projectID }

// Send implements provider.Provider. A 401 without an FcmError detail means
// FCM refused our access token (expired early, revoked): the token is dropped
// and the message sent once more with a fresh one. What FCM says comes back
// without the device token or the access token in it (httpsend.Redact).
func (p *Provider) Send(ctx context.Context, s *provider.Submission) provider.Result {
	res, token := p.send(ctx, s)
	return httpsend.RedactResult(res, string(s.Token), token)
}

// send sends s and returns the result and the access token it was last sent
// with.
func (p *Provider) send(ctx context.Context, s *provider.Submission) (provider.Result, string) {
	body, res := p.buildMessage(s)
	if res.Outcome != 0 {
		return res, ""
	}
	for refreshed := false; ; refreshed = true {
		token, res := p.tokens.get(ctx)
		if res.Outcome != 0 {
			return res, ""
		}
		resp, res := p.post(ctx, token, body, s.Token)
		if resp == nil {
			return res, token
		}
		if resp.Status >= 200 && resp.Status < 300 {
			var ok struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(resp.Body, &ok)
			return provider.Accepted(resp.Text(ok.Name)), token
		}
		a := readAnswer(resp)
		if resp.Status == http.StatusUnauthorized && a.errorCode == "" && !refreshed {
			p.tokens.drop(token)
			continue
		}
		return p.classify(s, resp, a), token
	}
}

func (p *Provider) post(ctx context.Context, token string, body []byte, device provider.Token) (*httpsend.Response, provider.Result) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.sendURL, bytes.NewReader(body))
	if err != nil {
		return nil, provider.Result{Outcome: provider.OutcomeRetry, Unsent: true, Text: "request not sent: " + err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json; charset=UTF-8")
	return httpsend.Do(p.client, req, string(device))
}

func checkWebOrigin(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		(u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("%q is not an https origin such as https://app.example.com (FCM opens only https links)", raw)
	}
	return "https://" + u.Host, nil
}
