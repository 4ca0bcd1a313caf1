package oncepush

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/oncepush/oncepush/internal/strictjson"
)

// Transport names a push service.
type Transport string

// The transports oncepush speaks.
const (
	TransportFCM     Transport = "fcm"
	TransportAPNs    Transport = "apns"
	TransportWebPush Transport = "webpush"
	TransportRuStore Transport = "rustore"
)

// Transports lists the known transports.
var Transports = []Transport{TransportFCM, TransportAPNs, TransportWebPush, TransportRuStore}

func (t Transport) known() bool {
	switch t {
	case TransportFCM, TransportAPNs, TransportWebPush, TransportRuStore:
		return true
	}
	return false
}

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

// Device is a registration of a device token to a recipient.
type Device struct {
	// ID identifies the registration. A token that moves to another recipient
	// gets a new ID.
	ID int64
	// Recipient is the caller's id for the person or account owning the device.
	Recipient string
	// Transport is the push service the token belongs to.
	Transport Transport
	// Token is the provider's device token; for Web Push, the subscription as JSON:
	// {"endpoint": "https://…", "keys": {"p256dh": "…", "auth": "…"}}.
	Token Token
	// Platform is free-form: "ios", "android", "web", … (≤ 32 bytes).
	Platform string
	// Session optionally binds the device to a login session; revoking the
	// session stops the device's pushes at once.
	Session string
	// Locale is a BCP 47 tag ("de-CH"), optional.
	Locale string
	// TimeZone is an IANA zone ("Europe/Zurich"), optional.
	TimeZone string
	// CreatedAt is when this registration was first made.
	CreatedAt time.Time
	// RegisteredAt is when it was last registered (renewed).
	RegisteredAt time.Time
}

// LogValue implements slog.LogValuer: the token is masked.
func (d Device) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("id", d.ID),
		slog.String("recipient", d.Recipient),
		slog.String("transport", string(d.Transport)),
		slog.Any("token", d.Token),
	)
}

// Limits on registration fields.
const (
	maxRecipientLen = 200
	maxTokenLen     = 4096
	maxSmallField   = 200
)

// ValidateRecipient reports whether r is a recipient id oncepush accepts: 1
// to 200 bytes of UTF-8 without a NUL character. The error is a
// *ValidationError naming "recipient". Send, RegisterDevice and the other
// calls that take a recipient check it themselves; a caller that takes
// recipient ids from outside (the server's paths) checks them the same way.
func ValidateRecipient(r string) error { return validateRecipient("recipient", r) }

func validateRecipient(field, r string) error {
	switch {
	case r == "":
		return invalid(field, "must not be empty")
	case len(r) > maxRecipientLen:
		return invalid(field, "is %d bytes, at most %d allowed", len(r), maxRecipientLen)
	}
	return checkText(field, r)
}

// validateSession checks a session id given to revoke.
func validateSession(s string) error {
	if s == "" || len(s) > maxSmallField {
		return invalid("session", "must be 1 to %d bytes", maxSmallField)
	}
	return checkText("session", s)
}

// normalizeDevice checks a registration and returns the token in its canonical
// form and the key that makes it unique within its transport.
func normalizeDevice(d *Device) (token, tokenKey string, err error) {
	if err := validateRecipient("recipient", d.Recipient); err != nil {
		return "", "", err
	}
	if !d.Transport.known() {
		return "", "", invalid("transport", "%q is not one of fcm, apns, webpush, rustore", d.Transport)
	}
	token, tokenKey, err = normalizeToken(d.Transport, string(d.Token))
	if err != nil {
		return "", "", err
	}
	for _, f := range []struct{ name, text string }{
		{"platform", d.Platform}, {"session", d.Session}, {"locale", d.Locale}, {"timeZone", d.TimeZone},
	} {
		if err := checkText(f.name, f.text); err != nil {
			return "", "", err
		}
	}
	if len(d.Platform) > 32 {
		return "", "", invalid("platform", "is longer than 32 bytes")
	}
	if len(d.Session) > maxSmallField {
		return "", "", invalid("session", "must be at most %d bytes", maxSmallField)
	}
	if len(d.Locale) > 35 || strings.ContainsAny(d.Locale, " \t\n/") {
		return "", "", invalid("locale", "%q is not a BCP 47 language tag", d.Locale)
	}
	if d.TimeZone != "" {
		if _, err := time.LoadLocation(d.TimeZone); err != nil || d.TimeZone == "Local" {
			return "", "", invalid("timeZone", "%q is not an IANA time zone", d.TimeZone)
		}
	}
	return token, tokenKey, nil
}

// normalizeToken checks a token's shape for its transport.
func normalizeToken(t Transport, token string) (canonical, key string, err error) {
	if token == "" {
		return "", "", invalid("token", "must not be empty")
	}
	if err := checkText("token", token); err != nil {
		return "", "", err
	}
	if len(token) > maxTokenLen {
		return "", "", invalid("token", "is %d bytes, at most %d allowed", len(token), maxTokenLen)
	}
	switch t {
	case TransportAPNs:
		// 32 bytes today; Apple reserves the right to make tokens longer.
		lower := strings.ToLower(token)
		if b, err := hex.DecodeString(lower); err != nil || len(b) < 32 || len(b) > 100 {
			return "", "", invalid("token", "an APNs device token is 64 to 200 hexadecimal characters")
		}
		return lower, lower, nil
	case TransportFCM, TransportRuStore:
		if len(token) < 8 {
			return "", "", invalid("token", "is too short to be a %s registration token", t)
		}
		for _, r := range token {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_:.", r)) {
				return "", "", invalid("token", "a %s registration token holds only letters, digits and - _ : .", t)
			}
		}
		return token, token, nil
	case TransportWebPush:
		return normalizeSubscription(token)
	}
	return "", "", invalid("transport", "%q is not one of fcm, apns, webpush, rustore", t)
}

type webPushSubscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		Auth   string `json:"auth"`
		P256dh string `json:"p256dh"`
	} `json:"keys"`
}

// WebPushSubscription is a browser's PushSubscription, as the token of a Web Push
// device.
type WebPushSubscription struct {
	Endpoint string // the push service URL (https)
	P256dh   []byte // the user agent's P-256 public key, uncompressed (65 bytes)
	Auth     []byte // the 16-byte authentication secret
}

// ParseWebPushSubscription decodes a Web Push device token: the JSON of the
// browser's PushSubscription, {"endpoint", "keys": {"p256dh", "auth"}} and
// optionally "expirationTime" (a number or null, ignored), read as I-JSON
// (RFC 7493, internal/strictjson): one object, UTF-8, no name twice, no lone
// surrogate escape, and the members named exactly so. encoding/json would take
// the last of two endpoints, an "ENDPOINT" for the endpoint, and text after
// the object, and would replace a lone surrogate with U+FFFD: a different
// endpoint from the one written.
func ParseWebPushSubscription(token string) (*WebPushSubscription, error) {
	const shape = `a Web Push token is the subscription JSON {"endpoint", "keys": {"p256dh", "auth"}}`
	doc, err := strictjson.Parse([]byte(token))
	if err != nil {
		return nil, invalid("token", "%s: %v", shape, err)
	}
	if doc.Kind != strictjson.Object {
		return nil, invalid("token", "%s, not %s", shape, doc.Kind)
	}
	endpoint, keys := member(doc, "endpoint"), member(doc, "keys")
	if exp := member(doc, "expirationTime"); exp != nil && exp.Kind != strictjson.Number && exp.Kind != strictjson.Null {
		return nil, invalid("token", "the subscription's expirationTime must be a number or null, not %s", exp.Kind)
	}
	if endpoint == nil || endpoint.Kind != strictjson.String {
		return nil, invalid("token", "the subscription endpoint must be an https URL")
	}
	u, err := url.Parse(endpoint.Text)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, invalid("token", "the subscription endpoint must be an https URL")
	}
	if keys == nil || keys.Kind != strictjson.Object {
		return nil, invalid("token", "%s: keys must be an object", shape)
	}
	p256dh, err := decodeBase64URL(member(keys, "p256dh"))
	if err != nil || len(p256dh) != 65 || p256dh[0] != 4 {
		return nil, invalid("token", "keys.p256dh must be an uncompressed P-256 public key (65 bytes, base64url)")
	}
	auth, err := decodeBase64URL(member(keys, "auth"))
	if err != nil || len(auth) != 16 {
		return nil, invalid("token", "keys.auth must be 16 bytes, base64url")
	}
	return &WebPushSubscription{Endpoint: endpoint.Text, P256dh: p256dh, Auth: auth}, nil
}

// member is the value of an object's member with exactly this name, or nil.
func member(obj *strictjson.Value, name string) *strictjson.Value {
	for _, m := range obj.Members {
		if m.Name == name {
			return m.Value
		}
	}
	return nil
}

// Token encodes the subscription as a Web Push device token.
func (s WebPushSubscription) Token() Token {
	var w webPushSubscription
	w.Endpoint = s.Endpoint
	w.Keys.P256dh = base64.RawURLEncoding.EncodeToString(s.P256dh)
	w.Keys.Auth = base64.RawURLEncoding.EncodeToString(s.Auth)
	b, _ := json.Marshal(w)
	return Token(b)
}

func normalizeSubscription(token string) (string, string, error) {
	s, err := ParseWebPushSubscription(token)
	if err != nil {
		return "", "", err
	}
	return string(s.Token()), s.Endpoint, nil
}

// decodeBase64URL reads a string value in base64url, with or without
// padding, as browsers differ.
func decodeBase64URL(v *strictjson.Value) ([]byte, error) {
	if v == nil || v.Kind != strictjson.String {
		return nil, errors.New("not a string")
	}
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(v.Text, "="))
}
