package oncepush

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/oncepush/oncepush/internal/strictjson"
)

// builtinTransports is the one table of the built-in transports' rules.
func builtinTransports() []TransportSpec {
	return []TransportSpec{
		{
			Name:            TransportFCM,
			NormalizeToken:  registrationToken(TransportFCM),
			MaxPayload:      4096,
			ReservedDataKey: fcmReservedDataKey,
			ExampleToken:    func(n int) Token { return Token(fmt.Sprintf("fcm-example-token-%d", n)) },
		},
		{
			Name:            TransportAPNs,
			NormalizeToken:  apnsToken,
			MaxPayload:      4096,
			ReservedDataKey: apnsReservedDataKey,
			ExampleToken:    func(n int) Token { return Token(fmt.Sprintf("%064x", n)) },
		},
		{
			Name:           TransportWebPush,
			NormalizeToken: normalizeSubscription,
			MaxPayload:     4096,
			ExampleToken: func(n int) Token {
				return WebPushSubscription{
					Endpoint: fmt.Sprintf("https://push.example.net/sub/%d", n),
					P256dh:   append([]byte{4}, make([]byte, 64)...),
					Auth:     make([]byte, 16),
				}.Token()
			},
		},
		{
			Name:           TransportRuStore,
			NormalizeToken: registrationToken(TransportRuStore),
			MaxPayload:     4096,
			ExampleToken:   func(n int) Token { return Token(fmt.Sprintf("rustore-example-token-%d", n)) },
		},
	}
}

// fcmReservedDataKey reports the data keys FCM refuses or writes itself: its
// reserved words in any case (from, message_type, names beginning google or
// gcm) and its legacy collapse_key.
func fcmReservedDataKey(k string) bool {
	lower := strings.ToLower(k)
	return lower == "from" || lower == "message_type" || strings.HasPrefix(lower, "google") ||
		strings.HasPrefix(lower, "gcm") || strings.HasPrefix(k, "collapse_key")
}

// apnsReservedDataKey reports the data key APNs writes itself: "aps".
func apnsReservedDataKey(k string) bool { return k == "aps" }

// apnsToken checks an APNs device token: hexadecimal, 32 bytes today (Apple
// reserves the right to make tokens longer), stored in lower case.
func apnsToken(token string) (string, string, error) {
	lower := strings.ToLower(token)
	if b, err := hex.DecodeString(lower); err != nil || len(b) < 32 || len(b) > 100 {
		return "", "", invalid("token", "an APNs device token is 64 to 200 hexadecimal characters")
	}
	return lower, lower, nil
}

// registrationToken checks an FCM or RuStore registration token: letters,
// digits and - _ : . only.
func registrationToken(t Transport) func(string) (string, string, error) {
	return func(token string) (string, string, error) {
		if len(token) < 8 {
			return "", "", invalid("token", "is too short to be a %s registration token", t)
		}
		for _, r := range token {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_:.", r)) {
				return "", "", invalid("token", "a %s registration token holds only letters, digits and - _ : .", t)
			}
		}
		return token, token, nil
	}
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

// normalizeSubscription re-encodes a Web Push subscription and keys it by
// its endpoint.
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
