package webpush

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/pushtest"
)

// parseVAPIDHeader checks an Authorization value the way a push service does
// and returns the JWT's header and claims.
func parseVAPIDHeader(t *testing.T, header string) (head, claims map[string]any) {
	t.Helper()
	rest, ok := strings.CutPrefix(header, "vapid ")
	if !ok {
		t.Fatalf("authorization %q is not the vapid scheme", header)
	}
	var jwt, k string
	for _, p := range strings.Split(rest, ", ") {
		name, value, _ := strings.Cut(p, "=")
		switch name {
		case "t":
			jwt = value
		case "k":
			k = value
		default:
			t.Fatalf("unexpected parameter %q", name)
		}
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), b64(t, k))
	if err != nil {
		t.Fatalf("k: %v", err)
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("JWT has %d parts", len(parts))
	}
	sig := b64(t, parts[2])
	if len(sig) != 64 {
		t.Fatalf("signature is %d bytes, want 64 (r ‖ s)", len(sig))
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		t.Fatal("JWT signature does not verify with k")
	}
	if err := json.Unmarshal(b64(t, parts[0]), &head); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b64(t, parts[1]), &claims); err != nil {
		t.Fatal(err)
	}
	return head, claims
}

func TestVAPIDJWT(t *testing.T) {
	t.Parallel()
	pubKey, privKey, err := GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	key, err := parseVAPIDKey(privKey)
	if err != nil {
		t.Fatal(err)
	}
	clock := pushtest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	v := newVAPIDSigner(key, "mailto:ops@example.com", clock.Now)
	if v.publicKey != pubKey {
		t.Fatalf("signer's public key %s, GenerateVAPIDKeys said %s", v.publicKey, pubKey)
	}
	endpoint, _ := url.Parse("https://fcm.googleapis.com/fcm/send/abc:def")
	header, err := v.authorization(origin(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(header, ", k="+pubKey) {
		t.Errorf("authorization %q does not end with k=<public key>", header)
	}
	head, claims := parseVAPIDHeader(t, header)
	if head["typ"] != "JWT" || head["alg"] != "ES256" || len(head) != 2 {
		t.Errorf("JWT header %v, want typ JWT, alg ES256", head)
	}
	if claims["aud"] != "https://fcm.googleapis.com" {
		t.Errorf("aud %v, want the endpoint's origin", claims["aud"])
	}
	if claims["sub"] != "mailto:ops@example.com" {
		t.Errorf("sub %v", claims["sub"])
	}
	exp := time.Unix(int64(claims["exp"].(float64)), 0)
	if ahead := exp.Sub(clock.Now()); ahead <= time.Hour || ahead > 24*time.Hour {
		t.Errorf("exp is %v ahead, want more than an hour and at most 24 h", ahead)
	}
}

func TestVAPIDJWTCachedPerAudience(t *testing.T) {
	t.Parallel()
	_, privKey, _ := GenerateVAPIDKeys()
	key, err := parseVAPIDKey(privKey)
	if err != nil {
		t.Fatal(err)
	}
	clock := pushtest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	v := newVAPIDSigner(key, "https://example.com/contact", clock.Now)
	const google, mozilla = "https://fcm.googleapis.com", "https://updates.push.services.mozilla.com"

	first, _ := v.authorization(google)
	other, _ := v.authorization(mozilla)
	if first == other {
		t.Fatal("two audiences share a JWT")
	}
	clock.Advance(jwtLifetime - jwtRenewBefore - time.Second)
	if again, _ := v.authorization(google); again != first {
		t.Error("JWT was not reused while more than an hour from expiry")
	}
	clock.Advance(time.Second)
	renewed, _ := v.authorization(google)
	if renewed == first {
		t.Fatal("JWT was reused within an hour of its expiry")
	}
	_, claims := parseVAPIDHeader(t, renewed)
	if exp := time.Unix(int64(claims["exp"].(float64)), 0); !exp.After(clock.Now().Add(jwtRenewBefore)) {
		t.Errorf("renewed JWT expires at %v, too soon after now %v", exp, clock.Now())
	}
	v.mu.Lock()
	n := len(v.cache)
	v.mu.Unlock()
	if n != 1 {
		t.Errorf("cache holds %d JWTs after the other audience's was due, want 1", n)
	}
}

func TestOrigin(t *testing.T) {
	t.Parallel()
	for endpoint, want := range map[string]string{
		"https://fcm.googleapis.com/fcm/send/abc":         "https://fcm.googleapis.com",
		"https://Push.Example.com:8443/x/y?z=1":           "https://push.example.com:8443",
		"https://web.push.apple.com:443/QGq":              "https://web.push.apple.com",
		"https://[2001:4860::1]:9000/x":                   "https://[2001:4860::1]:9000",
		"https://wns2-par02p.notify.windows.com/w/?token": "https://wns2-par02p.notify.windows.com",
	} {
		u, err := url.Parse(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if got := origin(u); got != want {
			t.Errorf("origin(%s) = %s, want %s", endpoint, got, want)
		}
	}
}

func TestParseVAPIDKey(t *testing.T) {
	t.Parallel()
	pub, priv, err := GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sec1, _ := x509.MarshalECPrivateKey(k)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(k)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalECPrivateKey(p384)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 1024)
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	for _, tc := range []struct {
		name, key string
		ok        bool
	}{
		{"base64url", priv, true},
		{"base64url padded", priv + "=", true},
		{"standard base64", base64.StdEncoding.EncodeToString(b64(t, priv)), true},
		{"PEM SEC1", pemOf("EC PRIVATE KEY", sec1), true},
		{"PEM PKCS8", "\n" + pemOf("PRIVATE KEY", pkcs8), true},
		{"empty", "", false},
		{"public key instead", pub, false},
		{"not base64", "not a key!", false},
		{"P-384", pemOf("EC PRIVATE KEY", p384DER), false},
		{"RSA", pemOf("PRIVATE KEY", rsaDER), false},
		{"certificate", pemOf("CERTIFICATE", []byte{1, 2, 3}), false},
	} {
		_, err := parseVAPIDKey(tc.key)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && tc.key != "" && strings.Contains(err.Error(), strings.TrimSpace(tc.key)) {
			t.Errorf("%s: the error quotes the key", tc.name)
		}
	}
}
