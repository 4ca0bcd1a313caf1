package fcm

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/httpsend"
)

// tokenCache holds the OAuth 2.0 access token all sends share. It is
// fetched by one request at a time (single flight) however many sends need
// it, kept until TokenRefreshMargin before it expires on the provider's clock,
// and dropped when FCM answers 401 to it.
type tokenCache struct {
	email    string // the service account (client_email)
	key      *rsa.PrivateKey
	keyID    string       // private_key_id
	tokenURL string       // token_uri
	client   *http.Client // for the token endpoint; bounded by tokenFetchTimeout
	clock    provider.Clock
	log      *slog.Logger

	mu        sync.Mutex
	token     string
	refreshAt time.Time
	flight    *tokenFlight // the fetch in progress, if any
}

// tokenFlight is one fetch; waiters read token and res after done is closed.
type tokenFlight struct {
	done  chan struct{}
	token string
	res   provider.Result // zero when token is set
}

// get returns a valid access token, fetching one if needed. Its Result is
// set (and the token empty) when none could be had: the message was not sent.
func (c *tokenCache) get(ctx context.Context) (string, provider.Result) {
	c.mu.Lock()
	if c.token != "" && c.clock.Now().Before(c.refreshAt) {
		tok := c.token
		c.mu.Unlock()
		return tok, provider.Result{}
	}
	f := c.flight
	if f == nil {
		f = &tokenFlight{done: make(chan struct{})}
		c.flight = f
		// The fetch outlives the send that started it: other sends wait for
		// it, and the send's own timeout must not cancel theirs.
		go c.fetch(f)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.res
	case <-ctx.Done():
		return "", provider.Result{Outcome: provider.OutcomeRetry, Unsent: true,
			Text: "request not sent: no access token yet: " + ctx.Err().Error()}
	}
}

// drop forgets token after FCM refused it, unless a newer one replaced it
// already (many sends may hold the refused one).
func (c *tokenCache) drop(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == token {
		c.token = ""
	}
}

func (c *tokenCache) fetch(f *tokenFlight) {
	start := c.clock.Now()
	token, lifetime, res := c.request()
	c.mu.Lock()
	defer c.mu.Unlock()
	if res.Outcome == 0 {
		c.token = token
		c.refreshAt = refreshTime(start, lifetime)
		f.token = token
	}
	f.res = res
	c.flight = nil
	close(f.done)
}

// jwtBearerGrant is the OAuth 2.0 grant of a signed JWT assertion (RFC 7523).
const jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// Bounds of the token endpoint's assertion, as Google's client libraries
// write them: issued a little in the past, so a clock slightly ahead of
// Google's still passes, and valid for an hour, the most Google accepts.
const (
	assertionBackdate = 10 * time.Second
	assertionLifetime = time.Hour
)

// assertion is the service account's signed JWT (RS256) asking for an access
// token with the FCM scope, issued at now on the provider's clock.
func (c *tokenCache) assertion(now time.Time) (string, error) {
	header, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
		Kid string `json:"kid"`
	}{"RS256", "JWT", c.keyID})
	if err != nil {
		return "", err
	}
	iat := now.Add(-assertionBackdate)
	claims, err := json.Marshal(struct {
		Iss   string `json:"iss"`
		Scope string `json:"scope"`
		Aud   string `json:"aud"`
		Exp   int64  `json:"exp"`
		Iat   int64  `json:"iat"`
	}{c.email, Scope, c.tokenURL, iat.Add(assertionLifetime).Unix(), iat.Unix()})
	if err != nil {
		return "", err
	}
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, c.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// request posts a signed assertion to the key file's token_uri and returns
// the access token and how long it lives, or classifies the failure.
func (c *tokenCache) request() (string, time.Duration, provider.Result) {
	notSent := func(text string) (string, time.Duration, provider.Result) {
		// No access token: nothing reached FCM.
		return "", 0, provider.Result{Outcome: provider.OutcomeRetry, Unsent: true, Text: "request not sent: " + text}
	}
	now := c.clock.Now()
	assertion, err := c.assertion(now)
	if err != nil {
		return notSent("access token: sign the assertion: " + err.Error())
	}
	form := url.Values{"grant_type": {jwtBearerGrant}, "assertion": {assertion}}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, c.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return notSent("access token: " + err.Error())
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.client.Do(req)
	if err != nil {
		// The token endpoint could not be reached.
		return notSent("access token: " + err.Error())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, tokenAnswerMax))
	if err != nil {
		return notSent("access token: read the answer: " + err.Error())
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", 0, c.refused(resp, body, now)
	}
	var answer struct {
		AccessToken string      `json:"access_token"`
		ExpiresIn   json.Number `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return notSent("access token: the token endpoint's answer is not JSON: " + err.Error())
	}
	if answer.AccessToken == "" {
		return notSent("the token endpoint answered no access_token")
	}
	return answer.AccessToken, tokenLifetime(answer.ExpiresIn), provider.Result{}
}

// tokenAnswerMax bounds what is read of the token endpoint's answer.
const tokenAnswerMax = 1 << 20

// refused classifies the token endpoint's refusal.
func (c *tokenCache) refused(resp *http.Response, body []byte, now time.Time) provider.Result {
	status := resp.StatusCode
	var answer struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	text := fmt.Sprintf("access token: %d", status)
	if json.Unmarshal(body, &answer) == nil && answer.Error != "" {
		text += " " + answer.Error
		if answer.Description != "" {
			text += ": " + answer.Description
		}
	} else if snip := httpsend.Snippet(body); snip != "" {
		text += ": " + snip
	}
	// The token endpoint's words could repeat the signed assertion; the JWT
	// shape is redacted.
	text = httpsend.Redact(text)
	if status == http.StatusTooManyRequests || status >= 500 {
		return provider.Result{Outcome: provider.OutcomeRetry, Text: text,
			RetryAfter: httpsend.RetryAfter(resp.Header.Get("Retry-After"), now)}
	}
	// invalid_grant and friends: the key was deleted, the account disabled,
	// or the file is not what it claims. Retrying cannot help.
	c.log.Error("fcm: Google refused the service account's token request; check the key file",
		slog.String("token_uri", c.tokenURL), slog.String("client_email", c.email), slog.String("answer", text))
	return provider.Result{Outcome: provider.OutcomeRejected, Text: text}
}

// assumedTokenLifetime is used when the token endpoint does not say how long
// its token lives; Google's access tokens live an hour.
const assumedTokenLifetime = time.Hour

func tokenLifetime(expiresIn json.Number) time.Duration {
	if f, err := expiresIn.Float64(); err == nil && f > 0 {
		return time.Duration(f * float64(time.Second))
	}
	return assumedTokenLifetime
}

// refreshTime is when a token fetched at start stops being used: the margin
// before it expires, or half its life if it lives shorter than the margin.
func refreshTime(start time.Time, lifetime time.Duration) time.Time {
	if lifetime > TokenRefreshMargin {
		return start.Add(lifetime - TokenRefreshMargin)
	}
	return start.Add(lifetime / 2)
}
