// Package apns sends notifications through the Apple Push Notification service
// with token-based authentication: HTTP/2 over TLS to /3/device/<token>, one
// ES256 provider JWT per signing key shared by every concurrent send and
// replaced every TokenRefresh (40 minutes by default), and when APNs answers
// ExpiredProviderToken — at most once per TokenRefreshMin, since APNs
// throttles a key whose token changes more often; meanwhile that answer is a
// retry, due when the key may renew again.
//
// Every APNs answer is mapped to an oncepush outcome in APNs's own words
// ("410 Unregistered (since 2026-01-05T09:00:00Z)", "400 BadCollapseId"). One
// answer is not taken at face value: BadDeviceToken also comes back for every
// token when the app's builds and Config.Environment disagree (sandbox versus
// production). When most recent answers are BadDeviceToken the provider stops
// reporting invalid tokens, so a configuration mistake cannot wipe the device
// fleet, and logs an error instead.
package apns

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/httpsend"
	"github.com/oncepush/oncepush/provider/internal/timesource"
)

// APNs hosts.
const (
	HostProduction = "https://api.push.apple.com"
	HostSandbox    = "https://api.sandbox.push.apple.com"
)

// Environments (Config.Environment).
const (
	EnvironmentProduction = "production"
	EnvironmentSandbox    = "sandbox"
)

// Push types (Config.PushType), sent as apns-push-type.
const (
	// PushTypeAlert shows a banner: aps.alert with title and body, priority 10.
	PushTypeAlert = "alert"
	// PushTypeBackground wakes the app without showing anything:
	// aps.content-available, priority 5.
	PushTypeBackground = "background"
)

// Defaults and limits.
const (
	// EnvironmentDefault is the environment used when Config.Environment is empty.
	EnvironmentDefault = EnvironmentProduction
	// PushTypeDefault is the push type used when Config.PushType is empty.
	PushTypeDefault = PushTypeAlert
	// TokenRefreshDefault is the age at which the provider JWT is replaced.
	TokenRefreshDefault = 40 * time.Minute
	// TokenRefreshMin and TokenRefreshMax bound Config.TokenRefresh: APNs
	// answers 429 TooManyProviderTokenUpdates to a key whose token changes
	// more often than every 20 minutes, and refuses tokens older than an hour.
	TokenRefreshMin = 20 * time.Minute
	TokenRefreshMax = 59 * time.Minute
	// SafeguardWindowDefault is how many recent answers about device tokens
	// the sandbox/production safeguard weighs.
	SafeguardWindowDefault = 100
	// SafeguardMinAnswersDefault is how many of them it needs before it can trip.
	SafeguardMinAnswersDefault = 20
	// MaxPayloadBytes is the largest payload APNs accepts for alert and
	// background notifications.
	MaxPayloadBytes = 4096
	// MaxCollapseIDBytes is the longest apns-collapse-id APNs accepts.
	MaxCollapseIDBytes = 64
)

// Config configures a Provider. Key, KeyID, TeamID and Topic are required.
type Config struct {
	// Key is the contents of the signing key file (.p8) from the Apple
	// developer account: a PEM "PRIVATE KEY" block holding a PKCS #8 ECDSA
	// P-256 key. ReadKeyFile reads one from disk.
	Key []byte
	// KeyID is the key's 10-character identifier, shown next to it in the
	// developer account; it is the JWT's "kid".
	KeyID string
	// TeamID is the 10-character developer team id; it is the JWT's "iss".
	TeamID string
	// Topic is the app's bundle id (letters, digits, hyphens and periods), sent
	// as apns-topic.
	Topic string
	// Environment is EnvironmentProduction (default) or EnvironmentSandbox.
	// Development builds of an app have sandbox tokens, which production
	// answers with BadDeviceToken (and the other way round).
	Environment string
	// Host, when set, replaces the environment's host: an https URL with no
	// path, e.g. pushtest.FakeServer.URL in tests.
	Host string
	// PushType is PushTypeAlert (default) or PushTypeBackground.
	PushType string
	// TokenRefresh is the age at which the provider JWT is replaced by a new
	// one. Default TokenRefreshDefault (40 min); between 20 and 59 minutes.
	TokenRefresh time.Duration
	// SafeguardWindow is how many recent answers about device tokens
	// (accepted, or a token error) the sandbox/production safeguard weighs.
	// When the window holds at least SafeguardMinAnswers answers and more
	// than half are BadDeviceToken, BadDeviceToken no longer deletes tokens.
	// Default SafeguardWindowDefault (100 answers).
	SafeguardWindow int
	// SafeguardMinAnswers is how many answers the window must hold before
	// the safeguard can trip. Default SafeguardMinAnswersDefault (20); at
	// most SafeguardWindow.
	SafeguardMinAnswers int
	// TLSConfig is used for the connection to APNs; nil uses the system's roots.
	TLSConfig *tls.Config
	// Clock gives the time for the JWT's "iat", its refresh and Retry-After
	// dates; nil means the clock of the oncepush.Client the provider serves
	// (provider.ClockUser), else the wall clock.
	Clock provider.Clock
	// Logger receives configuration alerts; nil means slog.Default().
	Logger *slog.Logger
}

// LogValue implements slog.LogValuer: the key never appears in logs.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("key", "[redacted]"),
		slog.String("key_id", c.KeyID),
		slog.String("team_id", c.TeamID),
		slog.String("topic", c.Topic),
		slog.String("environment", c.Environment),
		slog.String("host", c.Host),
		slog.String("push_type", c.PushType),
	)
}

// ConfigError is the error New returns for a Config it refuses; Field names
// the Config field to fix.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string { return "apns: Config." + e.Field + " " + e.Problem }

func configError(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// ReadKeyFile reads a .p8 signing key file for Config.Key.
func ReadKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("apns: read signing key file: %w", err)
	}
	return b, nil
}

// Provider sends notifications to APNs. It is safe for concurrent use; one
// Provider holds one HTTP/2 connection pool and one provider JWT.
type Provider struct {
	deviceURL string // "https://host/3/device/"
	topic     string
	pushType  string
	priority  string
	env       string

	client    *http.Client
	transport *http.Transport
	clock     *timesource.Source
	log       *slog.Logger
	jwt       *tokenSource
	guard     *safeguard
	alerts    *alertLimiter
}

var _ provider.Provider = (*Provider)(nil)

// New checks cfg and returns a Provider. The error, a *ConfigError, names the
// field to fix.
func New(cfg Config) (*Provider, error) {
	key, err := parseKey(cfg.Key)
	if err != nil {
		return nil, err
	}
	if err := checkAppleID("KeyID", cfg.KeyID, "the key id shown next to the key in the Apple developer account"); err != nil {
		return nil, err
	}
	if err := checkAppleID("TeamID", cfg.TeamID, "the team id of the Apple developer account"); err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Topic) == "" {
		return nil, configError("Topic", "must not be empty: set it to the app's bundle id")
	}
	if !bundleID(cfg.Topic) {
		// It is sent as the apns-topic header.
		return nil, configError("Topic", "holds characters a bundle id cannot (letters, digits, hyphens and periods; \".voip\" and other suffixes included)")
	}
	env := cmp.Or(cfg.Environment, EnvironmentDefault)
	var host string
	switch env {
	case EnvironmentProduction:
		host = HostProduction
	case EnvironmentSandbox:
		host = HostSandbox
	default:
		return nil, configError("Environment", "is %q; use %q or %q", env, EnvironmentProduction, EnvironmentSandbox)
	}
	if cfg.Host != "" {
		u, err := url.Parse(cfg.Host)
		if err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			return nil, configError("Host", "is %q; it must be an https URL with no path, like %q", cfg.Host, HostProduction)
		}
		host = "https://" + u.Host
	}
	pushType := cmp.Or(cfg.PushType, PushTypeDefault)
	priority := "10"
	switch pushType {
	case PushTypeAlert:
	case PushTypeBackground:
		priority = "5"
	default:
		return nil, configError("PushType", "is %q; use %q or %q", pushType, PushTypeAlert, PushTypeBackground)
	}
	refresh := cmp.Or(cfg.TokenRefresh, TokenRefreshDefault)
	if refresh < TokenRefreshMin || refresh > TokenRefreshMax {
		return nil, configError("TokenRefresh", "is %s; it must be between %s and %s", refresh, TokenRefreshMin, TokenRefreshMax)
	}
	window := cmp.Or(cfg.SafeguardWindow, SafeguardWindowDefault)
	minAnswers := cmp.Or(cfg.SafeguardMinAnswers, SafeguardMinAnswersDefault)
	if window < 1 {
		return nil, configError("SafeguardWindow", "is %d; it must be at least 1", window)
	}
	if minAnswers < 1 || minAnswers > window {
		return nil, configError("SafeguardMinAnswers", "is %d; it must be between 1 and SafeguardWindow (%d)", minAnswers, window)
	}

	clock := timesource.New(cfg.Clock)
	logger := cmp.Or(cfg.Logger, slog.Default()).With(slog.String("transport", string(provider.TransportAPNs)))
	transport := httpsend.NewTransport(cfg.TLSConfig, nil)
	return &Provider{
		deviceURL: host + "/3/device/",
		topic:     cfg.Topic,
		pushType:  pushType,
		priority:  priority,
		env:       env,
		client:    httpsend.NewClient(transport, 0),
		transport: transport,
		clock:     clock,
		log:       logger,
		jwt:       &tokenSource{key: key, keyID: cfg.KeyID, teamID: cfg.TeamID, refresh: refresh, clock: clock},
		guard:     newSafeguard(window, minAnswers),
		alerts:    &alertLimiter{last: map[string]time.Time{}},
	}, nil
}

// UseClock implements provider.ClockUser: the client's clock, unless
// Config.Clock was set.
func (p *Provider) UseClock(c provider.Clock) { p.clock.Use(c) }

// Transport implements provider.Provider.
func (p *Provider) Transport() provider.Transport { return provider.TransportAPNs }

// Close closes the provider's idle connections. Sends still in flight finish.
func (p *Provider) Close() error {
	p.transport.CloseIdleConnections()
	return nil
}

// Send implements provider.Provider: one POST to /3/device/<token>, and one
// more if APNs answers that the provider JWT expired. What APNs says comes
// back without the device token or a JWT in it (httpsend.Redact).
func (p *Provider) Send(ctx context.Context, s *provider.Submission) provider.Result {
	return httpsend.RedactResult(p.send(ctx, s), string(s.Token), strings.ToLower(string(s.Token)))
}

func (p *Provider) send(ctx context.Context, s *provider.Submission) provider.Result {
	token := strings.ToLower(string(s.Token))
	if !isHex(token) {
		// Registration only accepts hexadecimal tokens, so this one can
		// never be delivered; APNs would answer BadDeviceToken.
		return provider.Result{Outcome: provider.OutcomeInvalidToken, Text: "device token is not hexadecimal"}
	}
	if len(s.CollapseID) > MaxCollapseIDBytes {
		return rejected("apns-collapse-id is %d bytes; APNs allows %d", len(s.CollapseID), MaxCollapseIDBytes)
	}
	// Both travel as headers: net/http would refuse a control character
	// only once the send had started, as a failure to retry.
	if !headerSafe(s.CollapseID) {
		return rejected("apns-collapse-id holds a character other than printable ASCII")
	}
	if !headerSafe(s.SubmissionID) {
		return rejected("apns-id holds a character other than printable ASCII")
	}
	body, err := p.payload(s)
	if err != nil {
		return rejected("%v", err)
	}
	if len(body) > MaxPayloadBytes {
		return rejected("payload is %d bytes; APNs allows %d", len(body), MaxPayloadBytes)
	}
	jwt, err := p.jwt.current()
	if err != nil {
		return provider.Result{Outcome: provider.OutcomeRetry, Unsent: true, Text: "request not sent: " + err.Error()}
	}
	res, expired := p.post(ctx, token, s, body, jwt)
	if !expired || ctx.Err() != nil {
		return res
	}
	// APNs refused the JWT as too old (a clock that jumped, a host that
	// slept): try once more with a new one, made by the first send refused
	// and shared by the others. Renewals are bounded per key (renewEvery):
	// a refusal meanwhile, or a second one, is left to the engine's backoff,
	// due when the key may renew again.
	jwt, ok, wait, err := p.jwt.renew(jwt)
	if !ok || err != nil {
		res.RetryAfter = max(res.RetryAfter, wait)
		return res
	}
	res, expired = p.post(ctx, token, s, body, jwt)
	if expired {
		res.RetryAfter = max(res.RetryAfter, p.jwt.refusedAgain(jwt))
	}
	return res
}

// post makes one request and classifies its answer; expired reports a 403
// ExpiredProviderToken.
func (p *Provider) post(ctx context.Context, token string, s *provider.Submission, body []byte, jwt string) (res provider.Result, expired bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.deviceURL+token, bytes.NewReader(body))
	if err != nil {
		return provider.Result{Outcome: provider.OutcomeRetry, Unsent: true, Text: "request not sent: cannot build the request"}, false
	}
	h := req.Header
	h.Set("authorization", "bearer "+jwt)
	h.Set("apns-topic", p.topic)
	h.Set("apns-push-type", p.pushType)
	h.Set("apns-priority", p.priority)
	if !s.ExpiresAt.IsZero() {
		h.Set("apns-expiration", strconv.FormatInt(max(s.ExpiresAt.Unix(), 0), 10))
	}
	if s.CollapseID != "" {
		h.Set("apns-collapse-id", s.CollapseID)
	}
	apnsID := strings.ToLower(s.SubmissionID)
	if apnsID != "" {
		h.Set("apns-id", apnsID)
	}
	h.Set("content-type", "application/json")
	resp, failed := httpsend.Do(p.client, req, token)
	if resp == nil {
		return failed, false
	}
	return p.classify(resp, apnsID, s)
}

func rejected(format string, args ...any) provider.Result {
	return provider.Result{Outcome: provider.OutcomeRejected, Text: fmt.Sprintf(format, args...)}
}

func checkAppleID(field, v, what string) error {
	if v == "" {
		return configError(field, "must not be empty: set it to %s", what)
	}
	if len(v) != 10 {
		return configError(field, "is %d characters; Apple's ids are 10 letters and digits (%s)", len(v), what)
	}
	for _, r := range v {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return configError(field, "holds characters other than letters and digits (%s)", what)
		}
	}
	return nil
}

// headerSafe reports whether s is printable ASCII, which any header value
// may hold.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// bundleID reports whether s can be an app's bundle id (and so an
// apns-topic): letters, digits, hyphens and periods.
func bundleID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	if s == "" || len(s)%2 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
