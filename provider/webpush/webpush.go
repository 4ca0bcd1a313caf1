// Package webpush is the oncepush provider for the Web Push protocol: RFC 8030
// delivery to the browser's push service, the payload encrypted for the
// subscription with RFC 8291 (aes128gcm), the application server identified
// with RFC 8292 (VAPID). It is built on the standard library's crypto only.
//
// A Web Push device token is the browser's PushSubscription as JSON (see
// provider.WebPushSubscription). Its endpoint is a URL chosen by whoever
// registered the device, so the provider only talks to push-service hosts on an
// allow-list (a host and port: 443 unless the entry names another), never to
// a private, loopback or otherwise non-public address — checked when the
// device is registered (ValidateToken), before each send, and again when
// dialling, for the host and port asked for and the address actually
// dialled, so DNS rebinding cannot reach an internal service either.
//
// Each message is one POST to the subscription's endpoint with the headers
// RFC 8030 defines: TTL (seconds until Submission.ExpiresAt, never negative),
// Urgency (Config.Urgency) and Topic (Submission.CollapseID, so a resend
// replaces a message still waiting at the push service). A Topic must be at
// most 32 characters of the base64url alphabet; a collapse id that is not is
// left out rather than failing the send. The body is the JSON
// {"title", "body", "image", "link", "data", "oncepush_id"}, at most
// MaxPayload bytes, encrypted without padding.
//
// Answers: 200/201/202 accepted (the Location header is the provider id);
// 404 and 410 invalid token; 429 and 5xx retry (Retry-After honoured, not a
// transport-wide throttle: a 429 is one push service's limit); 401 and 403
// rejected and logged as an error (the VAPID key or subject is refused); 400,
// 413 and every other answer rejected. An endpoint refused by the address
// check, before sending or when dialling, is rejected with no request made:
// that endpoint can never be reached under this configuration.
//
// Proxy environment variables are ignored: the address check must see the
// push service's address, not a proxy's.
package webpush

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/httpsend"
	"github.com/oncepush/oncepush/provider/internal/timesource"
)

// Defaults and limits.
const (
	// UrgencyDefault is the Urgency header sent when Config.Urgency is empty:
	// a notification a person is meant to see now.
	UrgencyDefault = "high"
	// TTLDefault is the TTL sent for a submission without ExpiresAt: the
	// default message lifetime.
	TTLDefault = 24 * time.Hour
	// MaxPayload is the most plaintext bytes one Web Push message carries:
	// push services accept 4096 bytes of body, of which the aes128gcm header
	// takes 86, the padding delimiter 1 and the authentication tag 16.
	MaxPayload = maxBody - headerLen - 1 - tagLen
	// maxBody is the body size every push service must accept (RFC 8030 §7.2).
	maxBody = 4096
	// dialTimeout bounds connecting to a push service.
	dialTimeout = 10 * time.Second
)

// Config configures a Provider.
type Config struct {
	// VAPIDPrivateKey is the application server's P-256 private key: the raw
	// 32-byte scalar in base64url (what GenerateVAPIDKeys and the usual web-push
	// tooling hand out), or a PEM "EC PRIVATE KEY" / "PRIVATE KEY" block.
	// Required. The matching public key (VAPIDPublicKey) is the
	// applicationServerKey browsers subscribe with.
	VAPIDPrivateKey string
	// VAPIDSubject is how a push service's operator can reach yours: a
	// "mailto:" or "https:" URL. Required; it travels as the JWT's sub claim.
	VAPIDSubject string
	// AllowedHosts are the push-service hosts an endpoint may name. An entry is
	// a host name ("fcm.googleapis.com"), "*." and a domain for any host under
	// it ("*.notify.windows.com"; not the domain itself), or an IP address,
	// each optionally followed by ":port" ("push.example.com:8443",
	// "[2001:db8::1]:8443"). An entry without a port allows port 443 only.
	// Empty means DefaultAllowedHosts().
	AllowedHosts []string
	// AllowLoopback permits loopback addresses (127.0.0.0/8, ::1) as endpoint
	// hosts and as dialled addresses. Off by default; tests against a local
	// fake push service turn it on.
	AllowLoopback bool
	// AllowPrivate permits private addresses (10/8, 172.16/12, 192.168/16,
	// 100.64/10, fc00::/7), for a push service inside your own network. Off by
	// default. Link-local, unspecified, multicast and reserved addresses are
	// never permitted.
	AllowPrivate bool
	// Urgency is the RFC 8030 Urgency header of every message: "very-low",
	// "low", "normal" or "high". Default UrgencyDefault ("high").
	Urgency string
	// TLSConfig configures TLS to the push services; nil means the system roots.
	TLSConfig *tls.Config
	// Clock tells the time for TTL and the VAPID JWT's expiry; nil means the
	// clock of the oncepush.Client the provider serves (provider.ClockUser),
	// else the wall clock.
	Clock provider.Clock
	// Logger receives the provider's warnings and errors; nil means
	// slog.Default().
	Logger *slog.Logger
}

// LogValue implements slog.LogValuer: the private key is never logged.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("vapid_private_key", "[redacted]"),
		slog.String("vapid_subject", c.VAPIDSubject),
		slog.Any("allowed_hosts", c.AllowedHosts),
		slog.Bool("allow_loopback", c.AllowLoopback),
		slog.Bool("allow_private", c.AllowPrivate),
		slog.String("urgency", c.Urgency),
	)
}

// DefaultAllowedHosts returns the hosts of the browsers' push services:
// Google (Chrome, Edge on Android, most Chromium browsers), Mozilla (Firefox),
// Apple (Safari) and Microsoft (Edge on Windows).
func DefaultAllowedHosts() []string {
	return []string{
		"fcm.googleapis.com",
		"updates.push.services.mozilla.com",
		"*.push.services.mozilla.com",
		"web.push.apple.com",
		"*.push.apple.com",
		"*.notify.windows.com",
	}
}

// Provider sends Web Push messages. It is safe for concurrent use.
type Provider struct {
	urgency string
	clock   *timesource.Source
	log     *slog.Logger
	vapid   *vapidSigner
	guard   *guard
	dialer  *net.Dialer
	client  *http.Client
}

var (
	_ provider.Provider       = (*Provider)(nil)
	_ provider.TokenValidator = (*Provider)(nil)
)

// New checks cfg and returns a Provider. The error names the field to fix.
func New(cfg Config) (*Provider, error) {
	key, err := parseVAPIDKey(cfg.VAPIDPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("webpush: VAPIDPrivateKey: %w", err)
	}
	if err := checkSubject(cfg.VAPIDSubject); err != nil {
		return nil, fmt.Errorf("webpush: VAPIDSubject: %w", err)
	}
	urgency := cmp.Or(cfg.Urgency, UrgencyDefault)
	switch urgency {
	case "very-low", "low", "normal", "high":
	default:
		return nil, fmt.Errorf("webpush: Urgency: %q is not one of very-low, low, normal, high", cfg.Urgency)
	}
	hosts := cfg.AllowedHosts
	if len(hosts) == 0 {
		hosts = DefaultAllowedHosts()
	}
	g, err := newGuard(hosts, cfg.AllowLoopback, cfg.AllowPrivate)
	if err != nil {
		return nil, err
	}
	clock := timesource.New(cfg.Clock)
	p := &Provider{
		urgency: urgency,
		clock:   clock,
		log:     cmp.Or(cfg.Logger, slog.Default()),
		vapid:   newVAPIDSigner(key, cfg.VAPIDSubject, clock.Now),
		guard:   g,
	}
	p.dialer = &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Control: g.control}
	t := httpsend.NewTransport(cfg.TLSConfig, p.dial)
	// A proxy would make the dialled address the proxy's, not the push
	// service's, and the address check meaningless.
	t.Proxy = nil
	// A push service answers; it does not redirect. Following a redirect
	// would send the message to a URL nobody allow-listed.
	p.client = httpsend.NewClient(t, 0)
	return p, nil
}

// UseClock implements provider.ClockUser: the client's clock, unless
// Config.Clock was set.
func (p *Provider) UseClock(c provider.Clock) { p.clock.Use(c) }

// Transport implements provider.Provider.
func (p *Provider) Transport() provider.Transport { return provider.TransportWebPush }

// VAPIDPublicKey returns the application server's public key (uncompressed
// P-256 point, base64url): the applicationServerKey a web page passes to
// PushManager.subscribe.
func (p *Provider) VAPIDPublicKey() string { return p.vapid.publicKey }

// ValidateToken implements provider.TokenValidator: the subscription must be
// well formed, its p256dh a point on P-256, and its endpoint https on an
// allowed host that is not a disallowed address.
func (p *Provider) ValidateToken(token provider.Token) error {
	sub, err := provider.ParseWebPushSubscription(string(token))
	if err != nil {
		return err
	}
	if _, err := ecdh.P256().NewPublicKey(sub.P256dh); err != nil {
		return &provider.ValidationError{Field: "token", Message: "keys.p256dh is not a point on P-256"}
	}
	if _, err := p.guard.checkEndpoint(sub.Endpoint); err != nil {
		return &provider.ValidationError{Field: "token", Message: err.Error()}
	}
	return nil
}

// message is the plaintext a service worker receives (event.data.json()).
type message struct {
	Title      string            `json:"title"`
	Body       string            `json:"body"`
	Image      string            `json:"image,omitempty"`
	Link       string            `json:"link,omitempty"`
	Data       map[string]string `json:"data"`
	OncepushID string            `json:"oncepush_id"`
}

func encodeMessage(s *provider.Submission) ([]byte, error) {
	m := message{Title: s.Title, Body: s.Body, Image: s.Image, Link: s.Link, Data: s.Data, OncepushID: s.NotificationID}
	if m.Data == nil {
		m.Data = map[string]string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // every byte counts against MaxPayload
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// dialRefusalKey marks a request's context with where the dialler reports an
// address it refused, so Send can tell that apart from a network failure.
type dialRefusalKey struct{}

// dial connects to a push service: the host and port it is asked for must be
// on the allow-list (checkDialTarget), and the address they resolve to one
// the provider may reach (the dialer's control hook).
func (p *Provider) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	err := p.guard.checkDialTarget(addr)
	var c net.Conn
	if err == nil {
		c, err = p.dialer.DialContext(ctx, network, addr)
	}
	if err != nil {
		var refused *refusedAddrError
		if errors.As(err, &refused) {
			if slot, ok := ctx.Value(dialRefusalKey{}).(*atomic.Pointer[refusedAddrError]); ok {
				slot.Store(refused)
			}
		}
	}
	return c, err
}

// Send implements provider.Provider. What the push service says comes back
// without the subscription (its endpoint and keys) or the VAPID JWT in it
// (httpsend.Redact).
func (p *Provider) Send(ctx context.Context, s *provider.Submission) provider.Result {
	return httpsend.RedactResult(p.send(ctx, s), subscriptionSecrets(s.Token)...)
}

// subscriptionSecrets are the parts of a subscription a push service's
// answer could repeat: the whole token, the endpoint and its path (the
// subscription's identity at the push service), and the keys.
func subscriptionSecrets(token provider.Token) []string {
	secrets := []string{string(token)}
	if sub, err := provider.ParseWebPushSubscription(string(token)); err == nil {
		secrets = append(secrets, sub.Endpoint,
			base64.RawURLEncoding.EncodeToString(sub.P256dh), base64.RawURLEncoding.EncodeToString(sub.Auth))
		if u, err := url.Parse(sub.Endpoint); err == nil {
			secrets = append(secrets, u.EscapedPath(), u.Path)
		}
	}
	return secrets
}

func (p *Provider) send(ctx context.Context, s *provider.Submission) provider.Result {
	sub, err := provider.ParseWebPushSubscription(string(s.Token))
	if err != nil {
		// Registration refuses such tokens, so this one can never have worked.
		return provider.Result{Outcome: provider.OutcomeInvalidToken, Text: "subscription unusable: " + validationMessage(err)}
	}
	endpoint, err := p.guard.checkEndpoint(sub.Endpoint)
	if err != nil {
		return provider.Result{Outcome: provider.OutcomeRejected, Text: "endpoint refused: " + err.Error()}
	}
	plaintext, err := encodeMessage(s)
	if err != nil {
		return provider.Result{Outcome: provider.OutcomeRejected, Text: "payload could not be encoded: " + err.Error()}
	}
	if len(plaintext) > MaxPayload {
		return provider.Result{Outcome: provider.OutcomeRejected,
			Text: fmt.Sprintf("payload is %d bytes, at most %d fit in a Web Push message", len(plaintext), MaxPayload)}
	}
	body, err := encryptFresh(plaintext, sub.P256dh, sub.Auth)
	if err != nil {
		if errors.Is(err, errBadP256dh) {
			return provider.Result{Outcome: provider.OutcomeInvalidToken, Text: "subscription unusable: keys.p256dh is not a point on P-256"}
		}
		return provider.Result{Outcome: provider.OutcomeRetry, Text: "encryption failed: " + err.Error()}
	}
	authorization, err := p.vapid.authorization(origin(endpoint))
	if err != nil {
		return provider.Result{Outcome: provider.OutcomeRetry, Text: "VAPID signature failed: " + err.Error()}
	}

	var refused atomic.Pointer[refusedAddrError]
	ctx = context.WithValue(ctx, dialRefusalKey{}, &refused)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.Endpoint, bytes.NewReader(body))
	if err != nil {
		return provider.Result{Outcome: provider.OutcomeRejected, Text: "endpoint refused: not a request URL"}
	}
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Content-Encoding", "aes128gcm")
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("TTL", strconv.FormatInt(p.ttlSeconds(s.ExpiresAt), 10))
	req.Header.Set("Urgency", p.urgency)
	if validTopic(s.CollapseID) {
		req.Header.Set("Topic", s.CollapseID)
	} else if s.CollapseID != "" {
		p.log.DebugContext(ctx, "webpush: collapse id is not a valid Topic; sent without one",
			slog.Int64("delivery_id", s.DeliveryID), slog.Int("length", len(s.CollapseID)))
	}

	resp, res := httpsend.Do(p.client, req, subscriptionSecrets(s.Token)...)
	if resp == nil {
		if r := refused.Load(); r != nil {
			return provider.Result{Outcome: provider.OutcomeRejected,
				Text: fmt.Sprintf("endpoint refused when dialling %s: %v", endpoint.Hostname(), r)}
		}
		return res
	}
	return p.classify(ctx, resp, endpoint.Hostname())
}

// classify maps a push service's answer to an outcome (RFC 8030 §5, §8.4).
func (p *Provider) classify(ctx context.Context, resp *httpsend.Response, host string) provider.Result {
	text := strconv.Itoa(resp.Status) + " " + http.StatusText(resp.Status)
	if snippet := httpsend.Snippet(resp.Body); snippet != "" {
		text += ": " + snippet
	}
	switch code := resp.Status; {
	case code == http.StatusOK || code == http.StatusCreated || code == http.StatusAccepted:
		return provider.Accepted(resp.Text(resp.Header.Get("Location")))
	case code == http.StatusNotFound || code == http.StatusGone:
		return provider.Result{Outcome: provider.OutcomeInvalidToken, Text: text}
	case code == http.StatusTooManyRequests || code >= 500:
		// A 429 is one push service's limit for this sender or subscription,
		// not a quota of the whole transport: no Throttle.
		return provider.Result{Outcome: provider.OutcomeRetry, Text: text,
			RetryAfter: httpsend.RetryAfter(resp.Header.Get("Retry-After"), p.clock.Now())}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		p.log.ErrorContext(ctx, "webpush: push service refused our VAPID authorization; check VAPIDPrivateKey and VAPIDSubject",
			slog.String("push_service", host), slog.String("answer", text))
		return provider.Result{Outcome: provider.OutcomeRejected, Text: text}
	default:
		// 400, 413 (body too large), other 4xx, and anything a push service
		// should not answer (a redirect, 204): retrying the same message
		// cannot help.
		return provider.Result{Outcome: provider.OutcomeRejected, Text: text}
	}
}

// ttlSeconds is how long the push service should keep the message: until the
// notification expires, never negative.
func (p *Provider) ttlSeconds(expiresAt time.Time) int64 {
	if expiresAt.IsZero() {
		return int64(TTLDefault / time.Second)
	}
	return max(0, int64(expiresAt.Sub(p.clock.Now())/time.Second))
}

// validTopic reports whether s can be an RFC 8030 Topic: at most 32
// characters of the base64url alphabet.
func validTopic(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// validationMessage returns what a ValidationError says without its package
// prefix, or the error's text.
func validationMessage(err error) string {
	var ve *provider.ValidationError
	if errors.As(err, &ve) {
		return ve.Message
	}
	return err.Error()
}

// encryptFresh encrypts with a new ephemeral key and salt, as every message must.
func encryptFresh(plaintext, uaPublic, authSecret []byte) ([]byte, error) {
	asPrivate, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	return encrypt(plaintext, uaPublic, authSecret, asPrivate, salt)
}
