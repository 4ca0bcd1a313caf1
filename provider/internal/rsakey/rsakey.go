// Package rsakey reads the RSA private keys that service-account key files
// carry as PEM text: Google's (provider/fcm, RS256) and Huawei's
// (provider/hms, PS256). Both files hold the key the same way, so both
// providers read it here and refuse a key that cannot sign when they are
// made, not at their first send.
package rsakey

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// NotRSAError is Parse's error for a well-formed private key of another
// kind; Kind names it ("ECDSA").
type NotRSAError struct{ Kind string }

func (e *NotRSAError) Error() string { return fmt.Sprintf("a %s key, not RSA", e.Kind) }

// Parse decodes a PEM private key, PKCS #8 or PKCS #1. Its errors never quote
// the text, which is a secret.
func Parse(pemKey string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(pemKey))
	if block == nil {
		return nil, errors.New("not a PEM block (-----BEGIN PRIVATE KEY-----)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("not a PKCS #8 or PKCS #1 private key")
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, &NotRSAError{Kind: kind(k)}
	}
	return rk, nil
}

func kind(k any) string {
	switch k.(type) {
	case *ecdsa.PrivateKey:
		return "ECDSA"
	case ed25519.PrivateKey:
		return "Ed25519"
	case *ecdh.PrivateKey:
		return "ECDH"
	}
	return "non-RSA"
}
