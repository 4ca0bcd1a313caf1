package hms

import (
	"fmt"

	"github.com/oncepush/oncepush/provider"
)

// Push tokens, as HarmonyOS's getToken hands them out: printable ASCII
// (base64 and its URL-safe form), a few hundred characters at most.
const (
	minTokenLen = 8
	maxTokenLen = 512
)

// Spec is what the engine knows of the transport: add it to a client with
// Config.Transports: append(oncepush.BuiltinTransports(), hms.Spec), and a
// Provider to Config.Providers.
var Spec = provider.TransportSpec{
	Name:           Name,
	NormalizeToken: normalizeToken,
	MaxPayload:     MaxPayload,
	ExampleToken:   func(n int) provider.Token { return provider.Token(fmt.Sprintf("hms-example-token-%d", n)) },
}

// normalizeToken checks a push token's shape. A token is its own key: Push
// Kit's tokens are case-sensitive.
func normalizeToken(token string) (canonical, key string, err error) {
	if len(token) < minTokenLen {
		return "", "", badToken("is too short to be a Push Kit token")
	}
	if len(token) > maxTokenLen {
		return "", "", badToken("is longer than a Push Kit token (at most %d characters)", maxTokenLen)
	}
	for _, r := range token {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '/' || r == '=' || r == '-' || r == '_' || r == '.' || r == ':') {
			return "", "", badToken("a Push Kit token holds only letters, digits and + / = - _ . :")
		}
	}
	return token, token, nil
}

func badToken(format string, args ...any) *provider.ValidationError {
	return &provider.ValidationError{Field: "token", Message: fmt.Sprintf(format, args...)}
}
