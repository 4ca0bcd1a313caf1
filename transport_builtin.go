package oncepush

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
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
			Name:           TransportAPNs,
			NormalizeToken: apnsToken,
			MaxPayload:     4096,
			ExampleToken:   func(n int) Token { return Token(fmt.Sprintf("%064x", n)) },
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

// fcmReservedDataKey reports the data keys FCM reserves for itself.
func fcmReservedDataKey(k string) bool {
	return k == "from" || k == "gcm" || k == "message_type" ||
		strings.HasPrefix(k, "google") || strings.HasPrefix(k, "collapse_key")
}

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

// ParseWebPushSubscription decodes a Web Push device token.
func ParseWebPushSubscription(token string) (*WebPushSubscription, error) {
	var s webPushSubscription
	dec := json.NewDecoder(bytes.NewReader([]byte(token)))
	if err := dec.Decode(&s); err != nil {
		return nil, invalid("token", "a Web Push token is the subscription JSON {\"endpoint\", \"keys\": {\"p256dh\", \"auth\"}}: %v", err)
	}
	u, err := url.Parse(s.Endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, invalid("token", "the subscription endpoint must be an https URL")
	}
	p256dh, err := decodeBase64URL(s.Keys.P256dh)
	if err != nil || len(p256dh) != 65 || p256dh[0] != 4 {
		return nil, invalid("token", "keys.p256dh must be an uncompressed P-256 public key (65 bytes, base64url)")
	}
	auth, err := decodeBase64URL(s.Keys.Auth)
	if err != nil || len(auth) != 16 {
		return nil, invalid("token", "keys.auth must be 16 bytes, base64url")
	}
	return &WebPushSubscription{Endpoint: s.Endpoint, P256dh: p256dh, Auth: auth}, nil
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

// decodeBase64URL accepts base64url with or without padding, as browsers differ.
func decodeBase64URL(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
