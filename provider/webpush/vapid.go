package webpush

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// VAPID JWT lifetimes (RFC 8292 §2: exp at most 24 hours ahead).
const (
	// jwtLifetime is how far ahead a new JWT expires: half the allowed
	// maximum, so a clock that runs ahead of the push service's still passes.
	jwtLifetime = 12 * time.Hour
	// jwtRenewBefore is how long before its expiry a cached JWT is replaced,
	// so none is sent that could expire in flight.
	jwtRenewBefore = time.Hour
)

// jwtHeader is the base64url JOSE header of every VAPID JWT.
var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))

// GenerateVAPIDKeys makes a new VAPID key pair: the public key is the
// uncompressed P-256 point and the private key the 32-byte scalar, both
// base64url without padding — the forms browsers (applicationServerKey) and
// Config.VAPIDPrivateKey take. Keep the private key secret; changing it
// invalidates every existing subscription.
func GenerateVAPIDKeys() (publicKey, privateKey string, err error) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("webpush: generate VAPID key: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()),
		base64.RawURLEncoding.EncodeToString(k.Bytes()), nil
}

// parseVAPIDKey reads a P-256 private key in either accepted form. Its errors
// never quote the key.
func parseVAPIDKey(s string) (*ecdsa.PrivateKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("is required (base64url of the 32-byte P-256 private key, as GenerateVAPIDKeys returns, or PEM)")
	}
	if strings.HasPrefix(s, "-----BEGIN") {
		return parseVAPIDKeyPEM(s)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		// Some tools print standard base64.
		raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	if err != nil {
		return nil, errors.New("is neither base64url nor PEM")
	}
	if len(raw) != 32 {
		return nil, fmt.Errorf("decodes to %d bytes; a P-256 private key is 32 (is this the public key?)", len(raw))
	}
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), raw)
	if err != nil {
		return nil, errors.New("is not a valid P-256 private key")
	}
	return k, nil
}

func parseVAPIDKeyPEM(s string) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, errors.New("is not a valid PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("is a PEM %q block; want \"EC PRIVATE KEY\" or \"PRIVATE KEY\"", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("PEM %q block does not parse: %w", block.Type, err)
	}
	k, ok := key.(*ecdsa.PrivateKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, errors.New("is not a P-256 (prime256v1) EC key")
	}
	return k, nil
}

// checkSubject accepts a mailto: or https: URL (RFC 8292 §2.1).
func checkSubject(sub string) error {
	switch {
	case sub == "":
		return errors.New(`is required: a "mailto:" address or "https:" URL where the push service can reach you`)
	case strings.HasPrefix(sub, "mailto:"):
		if !strings.Contains(sub, "@") {
			return fmt.Errorf("%q is not a mailto: address", sub)
		}
		return nil
	case strings.HasPrefix(sub, "https:"):
		if u, err := url.Parse(sub); err != nil || u.Host == "" {
			return fmt.Errorf("%q is not an https URL", sub)
		}
		return nil
	}
	return fmt.Errorf(`%q must start with "mailto:" or "https:"`, sub)
}

// vapidSigner makes the Authorization header for each push service (RFC 8292
// §3), one JWT per audience, reused until shortly before it expires.
type vapidSigner struct {
	key       *ecdsa.PrivateKey
	publicKey string // base64url uncompressed point, the k parameter
	subject   string
	now       func() time.Time

	mu    sync.Mutex
	cache map[string]signedJWT // by audience
}

type signedJWT struct {
	header string // the whole Authorization value
	exp    time.Time
}

func newVAPIDSigner(key *ecdsa.PrivateKey, subject string, now func() time.Time) *vapidSigner {
	pub, err := key.PublicKey.Bytes()
	if err != nil {
		// A key parsed as P-256 always has an encodable public key.
		panic("webpush: VAPID public key: " + err.Error())
	}
	return &vapidSigner{
		key:       key,
		publicKey: base64.RawURLEncoding.EncodeToString(pub),
		subject:   subject,
		now:       now,
		cache:     map[string]signedJWT{},
	}
}

// authorization returns "vapid t=<jwt>, k=<public key>" for an audience (the
// origin of the endpoint).
func (v *vapidSigner) authorization(aud string) (string, error) {
	now := v.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.cache[aud]; ok && now.Before(c.exp.Add(-jwtRenewBefore)) {
		return c.header, nil
	}
	exp := now.Add(jwtLifetime).Truncate(time.Second)
	jwt, err := v.sign(aud, exp)
	if err != nil {
		return "", err
	}
	// Forget tokens due for renewal, so audiences seen once do not pile up.
	for a, c := range v.cache {
		if !now.Before(c.exp.Add(-jwtRenewBefore)) {
			delete(v.cache, a)
		}
	}
	h := "vapid t=" + jwt + ", k=" + v.publicKey
	v.cache[aud] = signedJWT{header: h, exp: exp}
	return h, nil
}

// sign makes an ES256 JWT (RFC 7515 compact form, signature r ‖ s).
func (v *vapidSigner) sign(aud string, exp time.Time) (string, error) {
	claims, err := json.Marshal(struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}{aud, exp.Unix(), v.subject})
	if err != nil {
		return "", err
	}
	signingInput := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signingInput))
	r, s, err := ecdsa.Sign(rand.Reader, v.key, digest[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// origin is the JWT audience for an endpoint: scheme://host[:port], the
// default port left out, no path and no trailing slash.
func origin(u *url.URL) string {
	host := strings.ToLower(u.Host)
	if u.Port() == "443" {
		host = strings.TrimSuffix(host, ":443")
	}
	return "https://" + host
}
