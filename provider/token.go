package provider

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
)

// Token is a device token (for Web Push: the subscription JSON). It is a secret
// of the device's owner: it logs itself masked.
type Token string

// LogValue implements slog.LogValuer.
func (t Token) LogValue() slog.Value { return slog.StringValue(MaskToken(string(t))) }

// String masks the token, so fmt verbs cannot leak it either. Use string(t) for
// the value itself.
func (t Token) String() string { return MaskToken(string(t)) }

// MaskToken shortens a token to something a human can match against a device
// without being able to use it: the first 6 and last 4 characters, or, for a Web
// Push subscription, the push service's host and the endpoint's last 6 characters.
func MaskToken(token string) string {
	if strings.HasPrefix(token, "{") {
		if sub, err := ParseWebPushSubscription(token); err == nil && len(sub.Endpoint) > 6 {
			if u, err := url.Parse(sub.Endpoint); err == nil {
				return u.Host + "/…" + sub.Endpoint[len(sub.Endpoint)-6:]
			}
		}
		return "{…}"
	}
	if len(token) <= 12 {
		return "…"
	}
	return token[:6] + "…" + token[len(token)-4:]
}

// ValidationError reports input that oncepush refuses before writing anything.
// Field names the offending input the way the HTTP API spells it ("title",
// "recipients[3]", "data", "token").
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("oncepush: invalid %s: %s", e.Field, e.Message)
}

// badToken is a *ValidationError naming "token".
func badToken(format string, args ...any) *ValidationError {
	return &ValidationError{Field: "token", Message: fmt.Sprintf(format, args...)}
}
