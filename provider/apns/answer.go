package apns

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/httpsend"
)

// apnsError is the body of an APNs error answer. Timestamp (milliseconds
// since the epoch) comes only with 410: when the token stopped being valid.
type apnsError struct {
	Reason    string `json:"reason"`
	Timestamp int64  `json:"timestamp"`
}

// classify maps an APNs answer to an outcome. expired reports 403
// ExpiredProviderToken, which Send answers by renewing the JWT once.
func (p *Provider) classify(resp *httpsend.Response, sentID string, s *provider.Submission) (res provider.Result, expired bool) {
	if resp.Status >= 200 && resp.Status < 300 {
		p.observe(false, s)
		return provider.Accepted(cmp.Or(resp.Text(resp.Header.Get("apns-id")), sentID)), false
	}
	var e apnsError
	_ = json.Unmarshal(resp.Body, &e) // a body that is not APNs JSON still has a status
	e.Reason = resp.Text(e.Reason)
	res.Text = answerText(resp.Status, e, resp.Body)
	retryAfter := httpsend.RetryAfter(resp.Header.Get("Retry-After"), p.clock.Now())

	switch e.Reason {
	case "Unregistered", "ExpiredToken", "DeviceTokenNotForTopic":
		p.observe(false, s)
		res.Outcome = provider.OutcomeInvalidToken
		return res, false
	case "BadDeviceToken":
		if p.observe(true, s) {
			res.Outcome = provider.OutcomeRejected
			res.Text += " (not deleting: most tokens fail this way; check sandbox/production)"
		} else {
			res.Outcome = provider.OutcomeInvalidToken
		}
		return res, false
	case "ExpiredProviderToken":
		res.Outcome = provider.OutcomeRetry
		return res, true
	case "TooManyRequests":
		// Too many notifications to this one device: only its retry waits.
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
		return res, false
	case "TooManyProviderTokenUpdates":
		// About our key, so about every send.
		res.Outcome, res.RetryAfter, res.Throttle = provider.OutcomeRetry, retryAfter, true
		return res, false
	case "InternalServerError", "ServiceUnavailable", "Shutdown", "IdleTimeout":
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
		return res, false
	}
	switch {
	case resp.Status == http.StatusGone:
		p.observe(false, s)
		res.Outcome = provider.OutcomeInvalidToken
	case resp.Status == http.StatusForbidden:
		// InvalidProviderToken, MissingProviderToken, BadCertificate,
		// BadCertificateEnvironment, Forbidden: our credentials. Every send
		// will fail the same way until someone fixes the configuration.
		res.Outcome = provider.OutcomeRejected
		p.alertCredentials(resp.Status, e.Reason)
	case resp.Status == http.StatusTooManyRequests:
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
	case resp.Status >= 500:
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
	default:
		// The other 4xx (BadCollapseId, BadExpirationDate, BadMessageId,
		// BadPriority, BadTopic, DuplicateHeaders, InvalidPushType,
		// MissingTopic, PayloadEmpty, TopicDisallowed, 413 PayloadTooLarge…)
		// are about this message, and anything else APNs never sends.
		res.Outcome = provider.OutcomeRejected
	}
	return res, false
}

// answerText gives an answer in APNs's words: "400 BadCollapseId",
// "410 Unregistered (since 2026-01-05T09:00:00Z)", or the HTTP status and a
// snippet when the body is not APNs JSON.
func answerText(status int, e apnsError, body []byte) string {
	if e.Reason == "" {
		text := fmt.Sprintf("%d %s", status, http.StatusText(status))
		if snip := httpsend.Snippet(body); snip != "" {
			text += ": " + snip
		}
		return text
	}
	text := fmt.Sprintf("%d %s", status, e.Reason)
	if e.Timestamp > 0 {
		text += " (since " + time.UnixMilli(e.Timestamp).UTC().Format(time.RFC3339) + ")"
	}
	return text
}

// observe feeds one answer about a device token into the safeguard and
// reports whether BadDeviceToken answers dominate the window, logging when
// that starts, every window while it lasts, and when it ends.
func (p *Provider) observe(badDeviceToken bool, s *provider.Submission) (tripped bool) {
	v := p.guard.observe(badDeviceToken)
	if v.alert {
		p.log.Error("most APNs device tokens come back BadDeviceToken: keeping them instead of deleting; "+
			"check that Environment (sandbox or production) matches the app builds that registered them",
			slog.String("environment", p.env),
			slog.Int("bad_device_token", v.bad),
			slog.Int("answers", v.seen),
			slog.Int64("device_id", s.DeviceID))
	}
	if v.recovered {
		p.log.Warn("APNs BadDeviceToken answers are a minority again: invalid tokens are deleted again",
			slog.String("environment", p.env))
	}
	return v.tripped
}

// alertCredentials logs a refusal of our credentials, at most once a minute
// per reason: every send fails the same way until the configuration changes.
func (p *Provider) alertCredentials(status int, reason string) {
	if !p.alerts.allow(reason, p.clock.Now()) {
		return
	}
	p.log.Error("APNs refused our credentials: check the signing key, KeyID, TeamID and Topic",
		slog.Int("status", status),
		slog.String("reason", reason),
		slog.String("key_id", p.jwt.keyID),
		slog.String("team_id", p.jwt.teamID),
		slog.String("topic", p.topic),
		slog.String("environment", p.env))
}

// safeguard weighs the last answers about device tokens (accepted or a token
// error; not throttling or server errors, which say nothing about tokens).
type safeguard struct {
	minAnswers int

	mu         sync.Mutex
	ring       []bool // true = BadDeviceToken
	next, seen int
	bad        int
	tripped    bool
	sinceAlert int
}

func newSafeguard(window, minAnswers int) *safeguard {
	return &safeguard{minAnswers: minAnswers, ring: make([]bool, window)}
}

// verdict is the safeguard's state after one answer. tripped: BadDeviceToken
// answers dominate the window; alert: log it (first answer of a tripped
// spell, then once per window); recovered: a tripped spell just ended.
type verdict struct {
	tripped, alert, recovered bool
	bad, seen                 int
}

// observe records one answer.
func (g *safeguard) observe(bad bool) (v verdict) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == len(g.ring) {
		if g.ring[g.next] {
			g.bad--
		}
	} else {
		g.seen++
	}
	g.ring[g.next] = bad
	if bad {
		g.bad++
	}
	g.next = (g.next + 1) % len(g.ring)

	v.tripped = g.seen >= g.minAnswers && 2*g.bad > g.seen
	v.bad, v.seen = g.bad, g.seen
	g.sinceAlert++
	switch {
	case v.tripped && (!g.tripped || g.sinceAlert >= len(g.ring)):
		v.alert = true
		g.sinceAlert = 0
	case !v.tripped && g.tripped:
		v.recovered = true
	}
	g.tripped = v.tripped
	return v
}

// alertLimiter lets one log line per key through per minute.
type alertLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (l *alertLimiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < time.Minute && now.Sub(t) >= 0 {
		return false
	}
	l.last[key] = now
	return true
}
