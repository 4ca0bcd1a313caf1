package webpush

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// The aes128gcm layout (RFC 8188 §2, RFC 8291 §4).
const (
	saltLen      = 16
	publicKeyLen = 65 // uncompressed P-256 point
	headerLen    = saltLen + 4 + 1 + publicKeyLen
	tagLen       = 16
	// recordSize is the rs header field. The message is one record, so any
	// value at least as large as the record works; 4096 is what RFC 8291's
	// example and the browsers use.
	recordSize = 4096
	// lastRecord is the padding delimiter of the final (here: only) record.
	lastRecord = 0x02
)

// errBadP256dh: the subscription's public key is not a point on P-256.
var errBadP256dh = errors.New("keys.p256dh is not a point on P-256")

// encrypt seals plaintext for one subscription as RFC 8291 describes: ECDH
// between the application server's ephemeral key asPrivate and the user
// agent's key uaPublic, keys derived with HKDF-SHA-256 from the shared secret,
// the subscription's authSecret and salt, and a single AES-128-GCM record of
// plaintext and the last-record delimiter (no padding). The body starts with
// the aes128gcm header: salt, rs, idlen and the ephemeral public key.
//
// asPrivate and salt must be fresh for every message; they are parameters so
// the RFC's example can be reproduced.
func encrypt(plaintext, uaPublic, authSecret []byte, asPrivate *ecdh.PrivateKey, salt []byte) ([]byte, error) {
	if len(salt) != saltLen {
		return nil, fmt.Errorf("salt is %d bytes, want %d", len(salt), saltLen)
	}
	ua, err := ecdh.P256().NewPublicKey(uaPublic)
	if err != nil {
		return nil, errBadP256dh
	}
	secret, err := asPrivate.ECDH(ua)
	if err != nil {
		return nil, err
	}
	asPublic := asPrivate.PublicKey().Bytes()

	// key_info = "WebPush: info" 0x00 ‖ ua_public ‖ as_public
	keyInfo := make([]byte, 0, 14+2*publicKeyLen)
	keyInfo = append(keyInfo, "WebPush: info\x00"...)
	keyInfo = append(keyInfo, uaPublic...)
	keyInfo = append(keyInfo, asPublic...)
	// PRK_key = HMAC-SHA-256(auth_secret, ecdh_secret); IKM = HKDF-Expand(PRK_key, key_info, 32)
	ikm, err := hkdf.Key(sha256.New, secret, authSecret, string(keyInfo), 32)
	if err != nil {
		return nil, err
	}
	// PRK = HMAC-SHA-256(salt, IKM)
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}

	record := make([]byte, len(plaintext)+1)
	copy(record, plaintext)
	record[len(plaintext)] = lastRecord

	body := make([]byte, headerLen, headerLen+len(record)+tagLen)
	copy(body, salt)
	binary.BigEndian.PutUint32(body[saltLen:], recordSize)
	body[saltLen+4] = publicKeyLen
	copy(body[saltLen+5:], asPublic)
	return gcm.Seal(body, nonce, record, nil), nil
}
