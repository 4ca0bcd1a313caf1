package webpush

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"testing"
)

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return b
}

// TestEncryptRFC8291AppendixA reproduces the RFC's worked example byte for byte.
func TestEncryptRFC8291AppendixA(t *testing.T) {
	t.Parallel()
	var (
		plaintext = b64(t, "V2hlbiBJIGdyb3cgdXAsIEkgd2FudCB0byBiZSBhIHdhdGVybWVsb24")
		asPublic  = b64(t, "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8")
		asPrivate = b64(t, "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")
		uaPublic  = b64(t, "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4")
		salt      = b64(t, "DGv6ra1nlYgDCS1FRnbzlw")
		auth      = b64(t, "BTBZMqHH6r4Tts7J_aSIgg")
		want      = b64(t, "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
	)
	key, err := ecdh.P256().NewPrivateKey(asPrivate)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key.PublicKey().Bytes(), asPublic) {
		t.Fatal("as_private does not match as_public: the vector was mistyped")
	}
	got, err := encrypt(plaintext, uaPublic, auth, key, salt)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 144 {
		t.Errorf("body is %d bytes, want 144", len(got))
	}
	if !bytes.Equal(got, want) {
		t.Errorf("body differs from RFC 8291 Appendix A\n got %s\nwant %s",
			base64.RawURLEncoding.EncodeToString(got), base64.RawURLEncoding.EncodeToString(want))
	}
}

func TestEncryptSizesAndFreshness(t *testing.T) {
	t.Parallel()
	ua, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	plaintext := bytes.Repeat([]byte{'x'}, MaxPayload)
	a, err := encryptFresh(plaintext, ua.PublicKey().Bytes(), auth)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != maxBody {
		t.Errorf("a %d-byte plaintext makes a %d-byte body, want exactly %d", MaxPayload, len(a), maxBody)
	}
	b, err := encryptFresh(plaintext, ua.PublicKey().Bytes(), auth)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a[:headerLen], b[:headerLen]) {
		t.Error("two messages share salt and ephemeral key")
	}
	if _, err := encryptFresh([]byte("x"), append([]byte{4}, make([]byte, 64)...), auth); err != errBadP256dh {
		t.Errorf("a p256dh off the curve: err %v, want errBadP256dh", err)
	}
}
