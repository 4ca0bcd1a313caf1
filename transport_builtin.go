package oncepush

import (
	"encoding/hex"
	"fmt"
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

// normalizeSubscription re-encodes a Web Push subscription and keys it by
// its endpoint.
func normalizeSubscription(token string) (string, string, error) {
	s, err := ParseWebPushSubscription(token)
	if err != nil {
		return "", "", err
	}
	return string(s.Token()), s.Endpoint, nil
}
