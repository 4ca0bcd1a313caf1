package fakepush

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
)

// The signed tokens the fake verifies are compact JWS (RFC 7515 §7.1): APNs
// provider tokens and VAPID JWTs are ES256, FCM service-account assertions
// RS256. Each protocol checks its own header and claims and words its own
// refusals; what they share is here.

// decodeJWTPart decodes a base64url (unpadded) JSON part of a JWT into v.
func decodeJWTPart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// jwsDigest is the SHA-256 of a JWT's signing input, header "." claims.
func jwsDigest(parts []string) []byte {
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	return digest[:]
}

// verifyES256 reports whether sig, r ‖ s of 32 bytes each (RFC 7518 §3.4),
// signs the JWT of parts with pub.
func verifyES256(pub *ecdsa.PublicKey, parts []string, sig []byte) bool {
	if len(sig) != 64 {
		return false
	}
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	return ecdsa.Verify(pub, jwsDigest(parts), r, s)
}

// verifyRS256 reports whether sig, RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518
// §3.3), signs the JWT of parts with pub.
func verifyRS256(pub *rsa.PublicKey, parts []string, sig []byte) bool {
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, jwsDigest(parts), sig) == nil
}
