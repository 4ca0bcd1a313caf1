package fakepush

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// RFC 8291 Appendix A, base64url.
const (
	wpVectorPlaintext = "V2hlbiBJIGdyb3cgdXAsIEkgd2FudCB0byBiZSBhIHdhdGVybWVsb24"
	wpVectorUAPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
	wpVectorAuth      = "BTBZMqHH6r4Tts7J_aSIgg"
	wpVectorMessage   = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
)

func wpB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wpVectorSubscription is the user agent of RFC 8291's example.
func wpVectorSubscription(t *testing.T) *fakeSubscription {
	t.Helper()
	key, err := ecdh.P256().NewPrivateKey(wpB64(t, wpVectorUAPrivate))
	if err != nil {
		t.Fatal(err)
	}
	return &fakeSubscription{key: key, auth: wpB64(t, wpVectorAuth)}
}

func TestFakeWebPushDecryptsRFC8291Vector(t *testing.T) {
	t.Parallel()
	sub := wpVectorSubscription(t)
	body := wpB64(t, wpVectorMessage)
	got, err := sub.decrypt(body)
	if err != nil {
		t.Fatal(err)
	}
	if want := wpB64(t, wpVectorPlaintext); !bytes.Equal(got, want) {
		t.Fatalf("plaintext %q, want %q", got, want)
	}
	for name, mutate := range map[string]func([]byte) []byte{
		"ciphertext flipped": func(b []byte) []byte { b[100] ^= 1; return b },
		"salt flipped":       func(b []byte) []byte { b[0] ^= 1; return b },
		"rs too small":       func(b []byte) []byte { b[18], b[19] = 0, 20; return b },
		"idlen not 65":       func(b []byte) []byte { b[20] = 64; return b },
		"truncated":          func(b []byte) []byte { return b[:90] },
	} {
		if _, err := sub.decrypt(mutate(bytes.Clone(body))); err == nil {
			t.Errorf("%s: decrypted", name)
		}
	}
	other, _ := ecdh.P256().GenerateKey(rand.Reader)
	if _, err := (&fakeSubscription{key: other, auth: sub.auth}).decrypt(body); err == nil {
		t.Error("decrypted with another subscription's key")
	}
}

// wpVAPID builds a vapid Authorization header by hand, so the fake is checked
// against the protocol rather than against oncepush's own client.
type wpVAPID struct {
	key       *ecdsa.PrivateKey
	signer    *ecdsa.PrivateKey // signs instead of key when set
	alg       string
	claims    map[string]any
	rawScheme string // replaces the whole header when set
}

func (v wpVAPID) String() string {
	if v.rawScheme != "" {
		return v.rawScheme
	}
	signer := v.key
	if v.signer != nil {
		signer = v.signer
	}
	input, sig := signJWS(signer, map[string]string{"typ": "JWT", "alg": v.alg}, v.claims)
	enc := base64.RawURLEncoding
	pub, _ := v.key.PublicKey.Bytes()
	return "vapid t=" + input + "." + enc.EncodeToString(sig) + ", k=" + enc.EncodeToString(pub)
}

func TestFakeWebPushProtocol(t *testing.T) {
	t.Parallel()
	s := StartForTest(t, nil)
	// A subscription holding RFC 8291's keys, so its example body is a valid push.
	const vectorID = "rfc8291"
	s.webpush().mu.Lock()
	s.webpush().subs[vectorID] = wpVectorSubscription(t)
	s.webpush().mu.Unlock()

	key := newES256Key(t)
	other := newES256Key(t)
	now := time.Now()
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"aud": s.URL, "exp": now.Add(12 * time.Hour).Unix(), "sub": "mailto:ops@example.com"}
		if edit != nil {
			edit(c)
		}
		return c
	}
	good := wpVAPID{key: key, alg: "ES256", claims: claims(nil)}
	goodHeaders := func() http.Header {
		return http.Header{
			"Content-Encoding": {"aes128gcm"},
			"Ttl":              {"60"},
			"Urgency":          {"high"},
			"Topic":            {"order-A1001"},
			"Authorization":    {good.String()},
		}
	}
	post := func(t *testing.T, id string, h http.Header, body []byte) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/webpush/"+id, bytes.NewReader(body))
		req.Header = h
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	body := wpB64(t, wpVectorMessage)

	for _, tc := range []struct {
		name   string
		edit   func(http.Header)
		body   []byte
		status int
	}{
		{"no Content-Encoding", func(h http.Header) { h.Del("Content-Encoding") }, body, 400},
		{"old aesgcm encoding", func(h http.Header) { h.Set("Content-Encoding", "aesgcm") }, body, 400},
		{"no TTL", func(h http.Header) { h.Del("TTL") }, body, 400},
		{"negative TTL", func(h http.Header) { h.Set("TTL", "-1") }, body, 400},
		{"unknown Urgency", func(h http.Header) { h.Set("Urgency", "urgent") }, body, 400},
		{"Topic too long", func(h http.Header) { h.Set("Topic", strings.Repeat("a", 33)) }, body, 400},
		{"Topic outside base64url", func(h http.Header) { h.Set("Topic", "a=b") }, body, 400},
		{"body over 4096", nil, make([]byte, 4097), 413},
		{"no Authorization", func(h http.Header) { h.Del("Authorization") }, body, 401},
		{"old WebPush scheme", func(h http.Header) {
			h.Set("Authorization", "WebPush "+strings.TrimPrefix(strings.Split(good.String(), ",")[0], "vapid t="))
			h.Set("Crypto-Key", "p256ecdsa=xyz")
		}, body, 401},
		{"vapid without k", func(h http.Header) {
			h.Set("Authorization", wpVAPID{rawScheme: strings.Split(good.String(), ",")[0]}.String())
		}, body, 401},
		{"signed by another key", func(h http.Header) {
			h.Set("Authorization", wpVAPID{key: key, signer: other, alg: "ES256", claims: claims(nil)}.String())
		}, body, 403},
		{"alg not ES256", func(h http.Header) {
			h.Set("Authorization", wpVAPID{key: key, alg: "ES384", claims: claims(nil)}.String())
		}, body, 403},
		{"aud with trailing slash", func(h http.Header) {
			h.Set("Authorization", wpVAPID{key: key, alg: "ES256", claims: claims(func(c map[string]any) { c["aud"] = s.URL + "/" })}.String())
		}, body, 403},
		{"aud of another origin", func(h http.Header) {
			h.Set("Authorization", wpVAPID{key: key, alg: "ES256", claims: claims(func(c map[string]any) { c["aud"] = "https://fcm.googleapis.com" })}.String())
		}, body, 403},
		{"expired", func(h http.Header) {
			h.Set("Authorization", wpVAPID{key: key, alg: "ES256", claims: claims(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })}.String())
		}, body, 403},
		{"exp more than 24 h ahead", func(h http.Header) {
			h.Set("Authorization", wpVAPID{key: key, alg: "ES256", claims: claims(func(c map[string]any) { c["exp"] = now.Add(25 * time.Hour).Unix() })}.String())
		}, body, 403},
		{"no exp", func(h http.Header) {
			h.Set("Authorization", wpVAPID{key: key, alg: "ES256", claims: claims(func(c map[string]any) { delete(c, "exp") })}.String())
		}, body, 403},
		{"no sub", func(h http.Header) {
			h.Set("Authorization", wpVAPID{key: key, alg: "ES256", claims: claims(func(c map[string]any) { delete(c, "sub") })}.String())
		}, body, 403},
		{"body that does not decrypt", nil, append(bytes.Clone(body[:100]), 0xff), 400},
	} {
		h := goodHeaders()
		if tc.edit != nil {
			tc.edit(h)
		}
		if resp := post(t, vectorID, h, tc.body); resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
	if n := s.Count(); n != 0 {
		t.Fatalf("refused requests were recorded: %d", n)
	}

	// A good push is decrypted, recorded and answered 201 with a Location.
	resp := post(t, vectorID, goodHeaders(), body)
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(resp.Header.Get("Location"), s.URL+"/webpush/msg/") {
		t.Fatalf("good push: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	reqs := s.RequestsFor(provider.TransportWebPush)
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Token != vectorID || r.CollapseID != "order-A1001" || r.Status != 201 ||
		!bytes.Equal(r.Payload, wpB64(t, wpVectorPlaintext)) || r.Header.Get("Authorization") != "" {
		t.Errorf("recorded %+v", r)
	}

	// A subscription the fake does not know: the push service's 404, recorded.
	if resp := post(t, "unknown", goodHeaders(), body); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown subscription: status %d, want 404", resp.StatusCode)
	}
	if reqs := s.Requests(); len(reqs) != 2 || reqs[1].Token != "unknown" || reqs[1].Status != 404 {
		t.Errorf("unknown subscription recorded as %+v", reqs[len(reqs)-1])
	}
}

func TestNewWebPushSubscription(t *testing.T) {
	t.Parallel()
	s := StartForTest(t, nil)
	a, b := s.NewWebPushSubscription(), s.NewWebPushSubscription()
	if a == b {
		t.Fatal("two subscriptions are equal")
	}
	sub, err := provider.ParseWebPushSubscription(string(a))
	if err != nil {
		t.Fatalf("the token does not parse as a Web Push subscription: %v", err)
	}
	if !strings.HasPrefix(sub.Endpoint, s.URL+"/webpush/") {
		t.Errorf("endpoint %q is not on the fake", sub.Endpoint)
	}
	if _, err := ecdh.P256().NewPublicKey(sub.P256dh); err != nil || len(sub.Auth) != 16 {
		t.Errorf("keys: p256dh %v, auth %d bytes", err, len(sub.Auth))
	}
}

func TestWebPushErrorIsProgrammable(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 401, 403, 404, 410, 413, 429, 500, 503} {
		a := WebPushError(status)
		var body struct {
			Code    int    `json:"code"`
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		if a.Status != status || json.Unmarshal([]byte(a.Body), &body) != nil || body.Code != status || body.Message == "" {
			t.Errorf("WebPushError(%d) = %+v", status, a)
		}
	}
}
