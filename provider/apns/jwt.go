package apns

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"sync"
	"time"

	"github.com/oncepush/oncepush"
)

// parseKey reads a .p8 signing key: PEM, PKCS #8, ECDSA on P-256.
func parseKey(p8 []byte) (*ecdsa.PrivateKey, error) {
	if len(p8) == 0 {
		return nil, configError("Key", "is empty: set it to the contents of the .p8 signing key file (see ReadKeyFile)")
	}
	block, _ := pem.Decode(p8)
	if block == nil {
		return nil, configError("Key", "is not PEM; expected the contents of Apple's .p8 file, starting with -----BEGIN PRIVATE KEY-----")
	}
	if block.Type != "PRIVATE KEY" {
		return nil, configError("Key", "holds a PEM %q block; expected \"PRIVATE KEY\" (PKCS #8), as in Apple's .p8 file", block.Type)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, configError("Key", "is not a PKCS #8 private key: %v", err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		kind := "a non-ECDSA"
		switch parsed.(type) {
		case *rsa.PrivateKey:
			kind = "an RSA"
		case ed25519.PrivateKey:
			kind = "an Ed25519"
		}
		return nil, configError("Key", "is %s key; APNs token authentication needs an ECDSA P-256 key", kind)
	}
	if key.Curve != elliptic.P256() {
		return nil, configError("Key", "is an ECDSA key on %s; APNs needs P-256", key.Curve.Params().Name)
	}
	return key, nil
}

// tokenSource holds the provider JWT of one signing key. Every send shares
// the current token; it is replaced when it reaches the refresh age, or when
// APNs calls it expired.
type tokenSource struct {
	key     *ecdsa.PrivateKey
	keyID   string
	teamID  string
	refresh time.Duration
	clock   oncepush.Clock

	mu     sync.Mutex
	token  string
	issued time.Time
}

// current returns the token to send, making a new one when there is none or
// the current one has reached the refresh age.
func (ts *tokenSource) current() (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	now := ts.clock.Now()
	if ts.token != "" && now.Sub(ts.issued) < ts.refresh {
		return ts.token, nil
	}
	return ts.make(now)
}

// renew replaces the token APNs refused as expired. Sends that were refused
// with the same token share one replacement: only the first one makes it.
func (ts *tokenSource) renew(refused string) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.token != refused && ts.token != "" {
		return ts.token, nil
	}
	return ts.make(ts.clock.Now())
}

func (ts *tokenSource) make(now time.Time) (string, error) {
	header, _ := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}{"ES256", ts.keyID})
	claims, _ := json.Marshal(struct {
		Iss string `json:"iss"`
		Iat int64  `json:"iat"`
	}{ts.teamID, now.Unix()})
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, ts.key, digest[:])
	if err != nil {
		return "", fmt.Errorf("cannot sign the provider token: %w", err)
	}
	// JWS wants the raw 64-byte r‖s, not ASN.1.
	var sig [64]byte
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	ts.token = input + "." + enc.EncodeToString(sig[:])
	ts.issued = now
	return ts.token, nil
}
