package hms

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/rsakey"
)

// ReadKeyFile reads a service-account key file (the JSON downloaded from
// AppGallery Connect's API Console → Credentials → Service account key) for
// Config.KeyJSON. New checks its contents.
func ReadKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hms: read the service-account key file: %w", err)
	}
	return b, nil
}

// serviceAccount is the part of a key file Push Kit's JWT needs.
type serviceAccount struct {
	ProjectID  string `json:"project_id"`
	KeyID      string `json:"key_id"`
	PrivateKey string `json:"private_key"`
	SubAccount string `json:"sub_account"`
	TokenURI   string `json:"token_uri"`
}

// LogValue implements slog.LogValuer: the account's identity, never its key.
func (a *serviceAccount) LogValue() slog.Value {
	return slog.GroupValue(slog.String("project_id", a.ProjectID), slog.String("key_id", a.KeyID),
		slog.String("sub_account", a.SubAccount), slog.String("private_key", "[redacted]"))
}

// parseServiceAccount checks a key file and returns it with its key. Its
// errors name the file's members and never quote the file, which holds a
// private key.
func parseServiceAccount(b []byte) (*serviceAccount, *rsa.PrivateKey, error) {
	if len(b) == 0 {
		return nil, nil, configError("KeyJSON", "is empty: set it to the contents of the service-account key file (ReadKeyFile reads one)")
	}
	var a serviceAccount
	if err := json.Unmarshal(b, &a); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, nil, configError("KeyJSON", "is not JSON (syntax error at byte %d): use the service-account key file downloaded from the API Console", syn.Offset)
		}
		return nil, nil, configError("KeyJSON", "is not a JSON object of strings: use the service-account key file downloaded from the API Console")
	}
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"project_id", a.ProjectID}, {"key_id", a.KeyID}, {"private_key", a.PrivateKey},
		{"sub_account", a.SubAccount}, {"token_uri", a.TokenURI},
	} {
		if strings.TrimSpace(f.value) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, nil, configError("KeyJSON", "lacks %s: use the service-account key file downloaded from the API Console", strings.Join(missing, ", "))
	}
	if u, err := url.Parse(a.TokenURI); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, nil, configError("KeyJSON", "has a token_uri that is not an https URL")
	}
	key, err := rsakey.Parse(a.PrivateKey)
	if err != nil {
		return nil, nil, configError("KeyJSON", "has a private_key that cannot sign: %v; Push Kit service accounts sign with RSA (PS256)", err)
	}
	return &a, key, nil
}

// JWT bounds. Push Kit suggests an hour's validity and refuses more than a
// day (80300036); the token is replaced JWTRefreshMargin before it expires,
// on the provider's clock, and issued a little in the past so that a clock
// slightly ahead of Huawei's still passes.
const (
	JWTLifetime      = time.Hour
	JWTRefreshMargin = 5 * time.Minute
	jwtBackdate      = 10 * time.Second
)

// jwtSource holds the service account's JWT, which every send shares until
// it is due for renewal, or until Push Kit refuses it.
type jwtSource struct {
	key        *rsa.PrivateKey
	keyID      string // key_id: the header's kid
	subAccount string // sub_account: the iss claim
	audience   string // token_uri: the aud claim
	clock      provider.Clock

	mu      sync.Mutex
	token   string
	renewAt time.Time
}

// current returns the JWT to send with, signing a new one when there is
// none or the current one is due for renewal.
func (j *jwtSource) current() (string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.clock.Now()
	if j.token != "" && now.Before(j.renewAt) {
		return j.token, nil
	}
	token, err := j.sign(now)
	if err != nil {
		return "", err
	}
	j.token, j.renewAt = token, now.Add(JWTLifetime-JWTRefreshMargin)
	return token, nil
}

// drop forgets token after Push Kit refused it, unless another send has
// replaced it already.
func (j *jwtSource) drop(token string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.token == token {
		j.token = ""
	}
}

// sign makes a JWT issued at now: header {"kid","typ":"JWT","alg":"PS256"},
// claims {"aud","iss","exp","iat"}, signed RSASSA-PSS with SHA-256 (the
// salt as long as the hash, as RFC 7518 §3.5 asks).
func (j *jwtSource) sign(now time.Time) (string, error) {
	header, err := json.Marshal(struct {
		Kid string `json:"kid"`
		Typ string `json:"typ"`
		Alg string `json:"alg"`
	}{j.keyID, "JWT", "PS256"})
	if err != nil {
		return "", err
	}
	iat := now.Add(-jwtBackdate)
	claims, err := json.Marshal(struct {
		Aud string `json:"aud"`
		Iss string `json:"iss"`
		Exp int64  `json:"exp"`
		Iat int64  `json:"iat"`
	}{j.audience, j.subAccount, iat.Add(JWTLifetime).Unix(), iat.Unix()})
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPSS(rand.Reader, j.key, crypto.SHA256, digest[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	if err != nil {
		return "", fmt.Errorf("cannot sign the service-account JWT: %w", err)
	}
	return input + "." + enc.EncodeToString(sig), nil
}
