package fakepush

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
)

// The tests build the fake's signed tokens by hand (APNs provider JWTs,
// VAPID JWTs, FCM service-account assertions), so the fake is checked against
// the protocols rather than against oncepush's own clients. This is the
// signing they share.

// signJWS signs the JWT of header and claims with key: ES256 (r ‖ s, RFC 7518
// §3.4) for an ECDSA key, RS256 for an RSA key. It returns the signing input,
// header "." claims in base64url, and the signature, for the caller to join
// (or to spoil first).
func signJWS(key crypto.Signer, header, claims any) (input string, sig []byte) {
	enc := base64.RawURLEncoding
	h, err := json.Marshal(header)
	if err != nil {
		panic(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	input = enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	digest := sha256.Sum256([]byte(input))
	switch key := key.(type) {
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
		if err != nil {
			panic(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	case *rsa.PrivateKey:
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
		if err != nil {
			panic(err)
		}
	default:
		panic(fmt.Sprintf("signJWS: no JWS algorithm for a %T", key))
	}
	return input, sig
}

// newES256Key makes a P-256 key, the kind an APNs .p8 file and a VAPID key
// pair hold.
func newES256Key(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
