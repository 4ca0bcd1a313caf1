// Package hms sends notifications through Huawei Push Kit's REST API for
// HarmonyOS NEXT (HarmonyOS 5 and later): POST /v3/{projectId}/messages:send,
// authenticated with a JWT the project's service account signs itself
// (PS256, header kid = the key file's key_id, iss = its sub_account, aud =
// its token_uri). There is no OAuth exchange: the JWT is the bearer token,
// signed on the provider's clock, shared by every send for an hour less
// JWTRefreshMargin, and replaced at once when Push Kit refuses it.
//
// A message with a title, body or image is a notification (push-type 0):
// the app opens on a tap and receives the data, with the link as
// DataLinkKey. A message with neither is a background message (push-type 6)
// whose extraData is the data as a JSON object. The transport's name is
// "hms" (Name); Spec is what the engine knows of it.
//
// Answers are classified on Push Kit's result code (the body's "code"):
// 80000000 is accepted; 80300007 (all tokens invalid), and 80100000 (partial
// success) naming this device's token or a reason about the token, make the
// token invalid, while a reason about the app (no right to the push-type, a
// penalised app) rejects the message and keeps the token; message errors
// (8010000x, 80300008, 80300010) are rejected; a refused JWT (80200001,
// 80200005) is replaced and the message sent once more, and a second
// refusal is rejected and logged, as are 80300002 and 80300037 (Push Kit
// will not send for the project); 81000001 and 5xx are retried; a 503 is
// flow control of the whole app, which pauses the transport for Retry-After
// or FlowControlRetryDefault.
//
// Wiring it to the fake server in a test:
//
//	fake := pushtest.NewFakeServer(t)
//	p, err := hms.New(hms.Config{
//		KeyJSON:   fake.HMSServiceAccount("my-project"),
//		BaseURL:   fake.URL + "/hms",
//		TLSConfig: fake.TLSConfig(),
//	})
package hms

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
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
	// Name is the transport's name in devices, the ledger and the API.
	Name provider.Transport = "hms"
	// BaseURLDefault is Push Kit's API host.
	BaseURLDefault = "https://push-api.cloud.huawei.com"
	// MaxPayload is the most bytes a request body may take without its
	// device token (Push Kit answers 80300008 beyond it); larger messages
	// are rejected without a request.
	MaxPayload = 4096
	// MaxTTL caps the time to live sent: Push Kit keeps a message for an
	// offline device at most 15 days.
	MaxTTL = 15 * 24 * time.Hour
	// FlowControlRetryDefault is how long the transport pauses after a 503
	// without Retry-After: Push Kit's flow control counts sends per second.
	FlowControlRetryDefault = time.Second
)

// Config configures a Provider.
type Config struct {
	// KeyJSON is the contents of the project's service-account key file
	// (AppGallery Connect → API Console → Credentials → Service account
	// key); ReadKeyFile reads it. Required. Its project_id is the project
	// messages are sent for.
	KeyJSON []byte
	// BaseURL is the API base URL, https. Default BaseURLDefault; tests use
	// the fake server's URL + "/hms".
	BaseURL string
	// Category is the notification category (payload.notification.category)
	// of every notification: "MARKETING", or a category the app holds the
	// right to, such as "IM" or "ACCOUNT". Empty sends none, which Push Kit
	// treats as marketing (with its daily quota per device). Optional.
	Category string
	// TLSConfig is used for the API; nil means the system roots.
	TLSConfig *tls.Config
	// Clock tells the time for the JWT, TTLs and Retry-After dates; nil
	// means the clock of the oncepush.Client the provider serves
	// (provider.ClockUser), else the wall clock.
	Clock provider.Clock
	// Logger receives configuration alerts (a refused JWT, a project Push
	// Kit will not send for); nil means slog.Default().
	Logger *slog.Logger
}

// LogValue implements slog.LogValuer: the key file is never logged.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", c.BaseURL), slog.String("category", c.Category),
		slog.String("key_json", "[redacted]"))
}

// ConfigError is the error New returns for a Config it refuses; Field names
// the Config field to fix.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string { return "hms: Config." + e.Field + " " + e.Problem }

func configError(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Provider is the Push Kit provider.Provider, safe for concurrent use; make
// one per project and keep it (it holds the connection and the JWT).
type Provider struct {
	projectID string
	sendURL   string
	category  string
	client    *http.Client
	jwt       *jwtSource
	clock     *timesource.Source
	log       *slog.Logger
}

var _ provider.Provider = (*Provider)(nil)

// New checks cfg and returns a provider. Its error, a *ConfigError, names
// the field to fix: a key file that is not JSON, lacks a member or holds a
// key that is not RSA, a base URL that is not https, a category that is not
// one.
func New(cfg Config) (*Provider, error) {
	acct, key, err := parseServiceAccount(cfg.KeyJSON)
	if err != nil {
		return nil, err
	}
	base, err := httpsend.BaseURL(cmp.Or(cfg.BaseURL, BaseURLDefault))
	if err != nil {
		return nil, configError("BaseURL", "%v", err)
	}
	if !validCategory(cfg.Category) {
		return nil, configError("Category", "%q is not a Push Kit category: upper-case letters and underscores, such as MARKETING or IM", cfg.Category)
	}
	clock := timesource.New(cfg.Clock)
	return &Provider{
		projectID: acct.ProjectID,
		sendURL:   base + "/v3/" + url.PathEscape(acct.ProjectID) + "/messages:send",
		category:  cfg.Category,
		// No Timeout: the engine's context bounds each send.
		client: httpsend.NewClient(httpsend.NewTransport(cfg.TLSConfig, nil), 0),
		jwt: &jwtSource{key: key, keyID: acct.KeyID, subAccount: acct.SubAccount, audience: acct.TokenURI,
			clock: clock},
		clock: clock,
		log:   cmp.Or(cfg.Logger, slog.Default()),
	}, nil
}

func validCategory(c string) bool {
	if len(c) > 64 {
		return false
	}
	for _, r := range c {
		if !(r >= 'A' && r <= 'Z' || r == '_') {
			return false
		}
	}
	return true
}

// UseClock implements provider.ClockUser: the client's clock, unless
// Config.Clock was set.
func (p *Provider) UseClock(c provider.Clock) { p.clock.Use(c) }

// Transport implements provider.Provider.
func (p *Provider) Transport() provider.Transport { return Name }

// ProjectID is the project the provider sends for (the key file's
// project_id).
func (p *Provider) ProjectID() string { return p.projectID }

// Send implements provider.Provider: one POST, and one more with a new JWT
// if Push Kit refuses the JWT. What Push Kit says comes back without the
// device token or a JWT in it (httpsend.Redact).
func (p *Provider) Send(ctx context.Context, s *provider.Submission) provider.Result {
	res, jwt := p.send(ctx, s)
	return httpsend.RedactResult(res, string(s.Token), jwt)
}

// send sends s and returns the result and the JWT it was last sent with.
func (p *Provider) send(ctx context.Context, s *provider.Submission) (provider.Result, string) {
	body, pushType, res := p.buildMessage(s)
	if res.Outcome != 0 {
		return res, ""
	}
	for renewed := false; ; renewed = true {
		jwt, err := p.jwt.current()
		if err != nil {
			return provider.Result{Outcome: provider.OutcomeRetry, Unsent: true, Text: "request not sent: " + err.Error()}, ""
		}
		resp, res := p.post(ctx, jwt, pushType, body, s.Token)
		if resp == nil {
			return res, jwt
		}
		// A refused JWT means nothing was sent: a new one may try again,
		// once (a second refusal is the key's or the clock's fault, which
		// another JWT cannot mend).
		if _, code, ok := readAnswer(resp); !renewed && ctx.Err() == nil && authRefused(resp, code, ok) {
			p.jwt.drop(jwt)
			continue
		}
		return p.classify(s, resp), jwt
	}
}

func (p *Provider) post(ctx context.Context, jwt, pushType string, body []byte, device provider.Token) (*httpsend.Response, provider.Result) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.sendURL, bytes.NewReader(body))
	if err != nil {
		return nil, provider.Result{Outcome: provider.OutcomeRetry, Unsent: true, Text: "request not sent: " + err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	req.Header.Set("Content-Type", "application/json; charset=UTF-8")
	req.Header.Set("push-type", pushType)
	return httpsend.Do(p.client, req, string(device))
}
