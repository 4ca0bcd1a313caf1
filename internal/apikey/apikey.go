// Package apikey makes and checks the server's API keys.
//
// A key is "opk_" + an 8-character id (hex) + "_" + 43 characters of secret
// (32 random bytes, base64url). The database keeps the id (to name the key in
// lists and logs) and the SHA-256 of the whole key; the key itself is shown once,
// when it is created.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// Scopes a key may hold.
const (
	ScopeSend      = "send"      // POST /v1/notifications
	ScopeDevices   = "devices"   // register/unregister devices, revoke sessions, preferences, delete recipients
	ScopeRead      = "read"      // read notifications, deliveries, devices, preferences, campaigns
	ScopeCampaigns = "campaigns" // create, edit, upload to, schedule, start, cancel and resume campaigns
	ScopeAdmin     = "admin"     // everything
)

// AllScopes lists the scopes in a stable order.
var AllScopes = []string{ScopeSend, ScopeDevices, ScopeRead, ScopeCampaigns, ScopeAdmin}

// DefaultScopes are a new key's when none is asked for: campaigns and admin
// must be asked for by name (docs/decisions.md D85).
var DefaultScopes = []string{ScopeSend, ScopeDevices, ScopeRead}

const prefix = "opk_"

// Key is a whole API key. It logs itself redacted.
type Key string

// LogValue implements slog.LogValuer: only the public id.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.ID() + "_[redacted]") }

// String hides the secret from fmt.
func (k Key) String() string { return k.ID() + "_[redacted]" }

// ID is the key's public part ("opk_ab12cd34"), or "" for a malformed key.
func (k Key) ID() string {
	id, _, ok := strings.Cut(strings.TrimPrefix(string(k), prefix), "_")
	if !ok || !strings.HasPrefix(string(k), prefix) || len(id) != 8 {
		return ""
	}
	if _, err := hex.DecodeString(id); err != nil {
		return ""
	}
	return prefix + id
}

// Hash is what the database keeps.
func (k Key) Hash() []byte {
	sum := sha256.Sum256([]byte(k))
	return sum[:]
}

// New makes a key.
func New() (Key, error) {
	var b [36]byte // 4 for the id, 32 for the secret
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	// The id is hex so that it never holds the "_" that ends it.
	return Key(prefix + hex.EncodeToString(b[:4]) + "_" + base64.RawURLEncoding.EncodeToString(b[4:])), nil
}

// ParseScopes checks a list of scopes: known names, no repeats; empty means
// DefaultScopes.
func ParseScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return slices.Clone(DefaultScopes), nil
	}
	var out []string
	for _, s := range scopes {
		s = strings.TrimSpace(s)
		if !slices.Contains(AllScopes, s) {
			return nil, fmt.Errorf("unknown scope %q (known: %s)", s, strings.Join(AllScopes, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// Allows reports whether a key with these scopes may act in scope.
func Allows(have []string, scope string) bool {
	return slices.Contains(have, ScopeAdmin) || slices.Contains(have, scope)
}

// ErrMalformed: the bearer token is not shaped like a key.
var ErrMalformed = errors.New("apikey: malformed key")

// Parse checks a bearer token's shape.
func Parse(s string) (Key, error) {
	k := Key(s)
	if k.ID() == "" || len(s) != len(prefix)+8+1+43 {
		return "", ErrMalformed
	}
	return k, nil
}
