package fcm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/jwt"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/provider/internal/httpsend"
)

// tokenCache holds the OAuth 2.0 access token all sends share. It is
// fetched by one request at a time (single flight) however many sends need
// it, kept until TokenRefreshMargin before it expires on the provider's clock,
// and dropped when FCM answers 401 to it.
type tokenCache struct {
	conf   *jwt.Config
	client *http.Client // for the token endpoint; bounded by tokenFetchTimeout
	clock  oncepush.Clock
	log    *slog.Logger

	mu        sync.Mutex
	token     string
	refreshAt time.Time
	flight    *tokenFlight // the fetch in progress, if any
}

// tokenFlight is one fetch; waiters read token and res after done is closed.
type tokenFlight struct {
	done  chan struct{}
	token string
	res   oncepush.Result // zero when token is set
}

// get returns a valid access token, fetching one if needed. Its Result is
// set (and the token empty) when none could be had: the message was not sent.
func (c *tokenCache) get(ctx context.Context) (string, oncepush.Result) {
	c.mu.Lock()
	if c.token != "" && c.clock.Now().Before(c.refreshAt) {
		tok := c.token
		c.mu.Unlock()
		return tok, oncepush.Result{}
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
		return "", oncepush.Result{Outcome: oncepush.OutcomeRetry, Unsent: true,
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
	token, res := c.request()
	c.mu.Lock()
	defer c.mu.Unlock()
	if res.Outcome == 0 {
		c.token = token.AccessToken
		c.refreshAt = refreshTime(start, tokenLifetime(token))
		f.token = token.AccessToken
	}
	f.res = res
	c.flight = nil
	close(f.done)
}

// request asks the key file's token_uri for an access token with a signed
// JWT assertion (golang.org/x/oauth2/jwt) and classifies a failure.
func (c *tokenCache) request() (*oauth2.Token, oncepush.Result) {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, c.client)
	token, err := c.conf.TokenSource(ctx).Token()
	if err == nil {
		if token.AccessToken == "" {
			return nil, oncepush.Result{Outcome: oncepush.OutcomeRetry, Unsent: true, Text: "request not sent: the token endpoint answered no access_token"}
		}
		return token, oncepush.Result{}
	}
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response == nil {
		// The token endpoint could not be reached: nothing reached FCM either.
		return nil, oncepush.Result{Outcome: oncepush.OutcomeRetry, Unsent: true, Text: "request not sent: access token: " + err.Error()}
	}
	status := re.Response.StatusCode
	var body struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	text := fmt.Sprintf("access token: %d", status)
	if json.Unmarshal(re.Body, &body) == nil && body.Error != "" {
		text += " " + body.Error
		if body.Description != "" {
			text += ": " + body.Description
		}
	} else if snip := httpsend.Snippet(re.Body); snip != "" {
		text += ": " + snip
	}
	// The token endpoint's words could repeat the signed assertion; the JWT
	// shape is redacted.
	text = httpsend.Redact(text)
	if status == http.StatusTooManyRequests || status >= 500 {
		return nil, oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: text,
			RetryAfter: httpsend.RetryAfter(re.Response.Header.Get("Retry-After"), time.Now())}
	}
	// invalid_grant and friends: the key was deleted, the account disabled,
	// or the file is not what it claims. Retrying cannot help.
	c.log.Error("fcm: Google refused the service account's token request; check the key file",
		slog.String("token_uri", c.conf.TokenURL), slog.String("client_email", c.conf.Email), slog.String("answer", text))
	return nil, oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: text}
}

// assumedTokenLifetime is used when the token endpoint does not say how long
// its token lives; Google's access tokens live an hour.
const assumedTokenLifetime = time.Hour

func tokenLifetime(t *oauth2.Token) time.Duration {
	// expires_in rather than t.Expiry: Expiry is on the wall clock, and the
	// cache runs on the provider's clock.
	switch v := t.Extra("expires_in").(type) {
	case float64:
		if v > 0 {
			return time.Duration(v * float64(time.Second))
		}
	case json.Number:
		if f, err := v.Float64(); err == nil && f > 0 {
			return time.Duration(f * float64(time.Second))
		}
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
