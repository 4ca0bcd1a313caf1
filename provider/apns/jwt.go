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

	"github.com/oncepush/oncepush/provider"
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
// APNs calls it expired — at most once per renewEvery (D123).
type tokenSource struct {
	key     *ecdsa.PrivateKey
	keyID   string
	teamID  string
	refresh time.Duration
	clock   provider.Clock

	mu     sync.Mutex
	token  string
	issued time.Time
	// renewed is when APNs's expired answer last replaced the token (zero:
	// never), and refused whether APNs called the current token expired too.
	renewed time.Time
	refused bool
}

// renewEvery bounds renewals on an expired answer per key. APNs answers 429
// TooManyProviderTokenUpdates to a key whose token changes more often than
// every 20 minutes; and a replacement refused as expired again says the
// clock is wrong, which another token signed on that clock cannot mend.
const renewEvery = TokenRefreshMin

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

// renew answers APNs's refusal of the token refused as expired. A send
// refused with a token already replaced retries with the replacement, unless
// that was refused too; the first send refused with the current token
// replaces it, unless a renewal happened less than renewEvery ago. ok false
// means: send nothing more now; wait is then how long until the key may
// renew again, when a retry could succeed.
func (ts *tokenSource) renew(refused string) (token string, ok bool, wait time.Duration, err error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	now := ts.clock.Now()
	if ts.token == refused {
		ts.refused = true
	}
	if ts.token != "" && !ts.refused {
		return ts.token, true, 0, nil // another send's replacement, not refused yet
	}
	if !ts.renewed.IsZero() {
		if wait = ts.renewed.Add(renewEvery).Sub(now); wait > 0 {
			return "", false, wait, nil
		}
	}
	if token, err = ts.make(now); err != nil {
		return "", false, 0, err
	}
	ts.renewed = now
	return token, true, 0, nil
}

// refusedAgain notes that APNs refused the replacement token as expired
// too, and returns how long until the key may renew again.
func (ts *tokenSource) refusedAgain(token string) time.Duration {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.token == token {
		ts.refused = true
	}
	return max(ts.renewed.Add(renewEvery).Sub(ts.clock.Now()), 0)
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
	ts.issued, ts.refused = now, false
	return ts.token, nil
}
