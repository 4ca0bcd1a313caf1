package provider

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"strings"

	"github.com/oncepush/oncepush/internal/strictjson"
)

// WebPushSubscription is a browser's PushSubscription, as the token of a Web Push
// device.
type WebPushSubscription struct {
	Endpoint string // the push service URL (https)
	P256dh   []byte // the user agent's P-256 public key, uncompressed (65 bytes)
	Auth     []byte // the 16-byte authentication secret
}

// webPushSubscription is the JSON a subscription token is written as.
type webPushSubscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		Auth   string `json:"auth"`
		P256dh string `json:"p256dh"`
	} `json:"keys"`
}

// ParseWebPushSubscription decodes a Web Push device token: the JSON of the
// browser's PushSubscription, {"endpoint", "keys": {"p256dh", "auth"}} and
// optionally "expirationTime" (a number or null, ignored), read as I-JSON
// (RFC 7493, internal/strictjson): one object, UTF-8, no name twice, no lone
// surrogate escape, and the members named exactly so. encoding/json would take
// the last of two endpoints, an "ENDPOINT" for the endpoint, and text after
// the object, and would replace a lone surrogate with U+FFFD: a different
// endpoint from the one written. Its errors are *ValidationError naming
// "token".
func ParseWebPushSubscription(token string) (*WebPushSubscription, error) {
	const shape = `a Web Push token is the subscription JSON {"endpoint", "keys": {"p256dh", "auth"}}`
	doc, err := strictjson.Parse([]byte(token))
	if err != nil {
		return nil, badToken("%s: %v", shape, err)
	}
	if doc.Kind != strictjson.Object {
		return nil, badToken("%s, not %s", shape, doc.Kind)
	}
	endpoint, keys := member(doc, "endpoint"), member(doc, "keys")
	if exp := member(doc, "expirationTime"); exp != nil && exp.Kind != strictjson.Number && exp.Kind != strictjson.Null {
		return nil, badToken("the subscription's expirationTime must be a number or null, not %s", exp.Kind)
	}
	if endpoint == nil || endpoint.Kind != strictjson.String {
		return nil, badToken("the subscription endpoint must be an https URL")
	}
	u, err := url.Parse(endpoint.Text)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, badToken("the subscription endpoint must be an https URL")
	}
	if keys == nil || keys.Kind != strictjson.Object {
		return nil, badToken("%s: keys must be an object", shape)
	}
	p256dh, err := decodeBase64URL(member(keys, "p256dh"))
	if err != nil || len(p256dh) != 65 || p256dh[0] != 4 {
		return nil, badToken("keys.p256dh must be an uncompressed P-256 public key (65 bytes, base64url)")
	}
	auth, err := decodeBase64URL(member(keys, "auth"))
	if err != nil || len(auth) != 16 {
		return nil, badToken("keys.auth must be 16 bytes, base64url")
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

// decodeBase64URL reads a string value in base64url, with or without
// padding, as browsers differ.
func decodeBase64URL(v *strictjson.Value) ([]byte, error) {
	if v == nil || v.Kind != strictjson.String {
		return nil, errors.New("not a string")
	}
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(v.Text, "="))
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
