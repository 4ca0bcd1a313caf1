package hostile

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush/internal/testlog"
	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/apns"
	"github.com/oncepush/oncepush/provider/fcm"
	"github.com/oncepush/oncepush/provider/hms"
	"github.com/oncepush/oncepush/provider/rustore"
	"github.com/oncepush/oncepush/provider/webpush"
)

// Credentials and tokens the providers are configured with or send: none may
// come back out of a Result or a log line.
const (
	accessToken  = "ya29.c.CANARY-fcm-access-token-6f1e2d3c4b5a"
	serviceToken = "CANARY-rustore-service-token-0a9b8c7d6e5f"
	fcmToken     = "dCANARYfcm:APA91b-fcm-device-token-1a2b3c4d5e6f7g8h"
	rustoreToken = "CANARY-rustore-device-token-9z8y7x6w5v4u3t2s"
	apnsToken    = "ca11ab1eca11ab1eca11ab1eca11ab1eca11ab1eca11ab1eca11ab1eca11ab1e"
	hmsToken     = "MAMzLgCANARY-hms-push-token-3e4d5c6b7a8f9e0d"
	webPushPath  = "/push/CANARY-webpush-subscription-5d4c3b2a1f0e"
)

// request is what the push service received.
type request struct {
	method, path string
	header       http.Header
	body         []byte
}

// world is a push service on loopback TLS serving every transport's API
// (and FCM's token endpoint), answering as the test says, an internal
// service that nothing may reach, and the five providers configured against
// them, logging to one buffer.
type world struct {
	t        testing.TB
	svc      *httptest.Server
	internal *httptest.Server
	// internalHits counts requests that reached the internal service.
	internalHits atomic.Int64
	// answer is how the push service answers its transport's request
	// (not the token endpoint's, see token).
	answer atomic.Pointer[func(tr provider.Transport, w http.ResponseWriter, r *request)]
	// token, when set, answers FCM's token endpoint instead of a token.
	token atomic.Pointer[http.HandlerFunc]

	mu       sync.Mutex
	received []request

	logs      *testlog.Buffer
	providers map[provider.Transport]provider.Provider
	tokens    map[provider.Transport]provider.Token
	// secrets are the strings no Result and no log may hold; the
	// credentials the providers sign themselves (JWTs) are added as they
	// are seen.
	secrets []string
}

// transports are the transports the world has a provider for, in the order
// the tests go through them.
var transports = []provider.Transport{provider.TransportFCM, provider.TransportAPNs, provider.TransportWebPush, provider.TransportRuStore, hms.Name}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{t: t, logs: &testlog.Buffer{}}
	w.internal = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.internalHits.Add(1)
		rw.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(w.internal.Close)
	w.svc = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	w.svc.EnableHTTP2 = true
	w.svc.StartTLS()
	t.Cleanup(w.svc.Close)
	tlsConfig := w.svc.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	log := slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	f, err := fcm.New(fcm.Config{ServiceAccountJSON: serviceAccount(t, w.svc.URL+"/token"), BaseURL: w.svc.URL + "/fcm", TLSConfig: tlsConfig, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	a, err := apns.New(apns.Config{Key: p8(t), KeyID: "KEYID12345", TeamID: "TEAMID1234", Topic: "dev.oncepush.hostile",
		Host: w.svc.URL, TLSConfig: tlsConfig, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	_, vapid, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(w.svc.URL)
	wp, err := webpush.New(webpush.Config{VAPIDPrivateKey: vapid, VAPIDSubject: "mailto:ops@oncepush.invalid",
		AllowedHosts: []string{u.Host}, AllowLoopback: true, TLSConfig: tlsConfig, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rustore.New(rustore.Config{ProjectID: "hostile", ServiceToken: serviceToken, BaseURL: w.svc.URL + "/rustore",
		TLSConfig: tlsConfig, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hms.New(hms.Config{KeyJSON: hmsKeyFile(t, w.svc.URL+"/hms-token"), BaseURL: w.svc.URL + "/hms", TLSConfig: tlsConfig, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	w.providers = map[provider.Transport]provider.Provider{
		provider.TransportFCM: f, provider.TransportAPNs: a, provider.TransportWebPush: wp, provider.TransportRuStore: r, hms.Name: h,
	}

	ua, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sub := provider.WebPushSubscription{Endpoint: w.svc.URL + webPushPath, P256dh: ua.PublicKey().Bytes(), Auth: []byte("CANARY-auth-16by")}
	w.tokens = map[provider.Transport]provider.Token{
		provider.TransportFCM: fcmToken, provider.TransportAPNs: apnsToken,
		provider.TransportWebPush: sub.Token(), provider.TransportRuStore: rustoreToken, hms.Name: hmsToken,
	}
	w.secrets = []string{accessToken, serviceToken, fcmToken, rustoreToken, apnsToken, hmsToken, webPushPath, string(sub.Token()),
		base64.RawURLEncoding.EncodeToString(sub.P256dh), base64.RawURLEncoding.EncodeToString(sub.Auth)}
	w.answerWith(func(tr provider.Transport, rw http.ResponseWriter, _ *request) { accept(tr, rw) })
	return w
}

// answerWith sets how the push service answers.
func (w *world) answerWith(fn func(tr provider.Transport, rw http.ResponseWriter, r *request)) {
	w.answer.Store(&fn)
}

func (w *world) serve(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/token" {
		if h := w.token.Load(); h != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			(*h)(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(rw, `{"access_token": "`+accessToken+`", "token_type": "Bearer", "expires_in": 3600}`)
		return
	}
	req := request{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body}
	w.mu.Lock()
	w.received = append(w.received, req)
	// The JWTs the providers sign are credentials too.
	if _, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok {
		w.secrets = append(w.secrets, cred)
		if jwt, _, ok := strings.Cut(strings.TrimPrefix(cred, "t="), ","); ok {
			w.secrets = append(w.secrets, jwt)
		}
	}
	w.mu.Unlock()
	var tr provider.Transport
	switch {
	case strings.HasPrefix(r.URL.Path, "/fcm/"):
		tr = provider.TransportFCM
	case strings.HasPrefix(r.URL.Path, "/3/device/"):
		tr = provider.TransportAPNs
	case strings.HasPrefix(r.URL.Path, "/push/"):
		tr = provider.TransportWebPush
	case strings.HasPrefix(r.URL.Path, "/rustore/"):
		tr = provider.TransportRuStore
	case strings.HasPrefix(r.URL.Path, "/hms/"):
		tr = hms.Name
	default:
		http.NotFound(rw, r)
		return
	}
	(*w.answer.Load())(tr, rw, &req)
}

// accept answers as each push service does when it takes a message.
func accept(tr provider.Transport, rw http.ResponseWriter) {
	switch tr {
	case provider.TransportFCM:
		_, _ = io.WriteString(rw, `{"name": "projects/hostile/messages/1"}`)
	case provider.TransportAPNs:
		rw.Header().Set("apns-id", "11111111-2222-3333-4444-555555555555")
	case provider.TransportWebPush:
		rw.Header().Set("Location", "/m/1")
		rw.WriteHeader(http.StatusCreated)
	case provider.TransportRuStore:
		_, _ = io.WriteString(rw, `{}`)
	case hms.Name:
		_, _ = io.WriteString(rw, `{"code": "80000000", "msg": "Success", "requestId": "hostile-1"}`)
	}
}

// requests returns what the push service received so far.
func (w *world) requests() []request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]request(nil), w.received...)
}

// submission is a notification for the transport's canary device.
func (w *world) submission(tr provider.Transport) *provider.Submission {
	return &provider.Submission{
		NotificationID: "0123456789abcdef0123456789abcdef", CollapseID: "0123456789abcdef0123456789abcdef",
		SubmissionID: "9b2f4c1e-6a3d-5f80-9c7b-1e2d3f4a5b6c", DeliveryID: 7,
		DeviceID: 17, Token: w.tokens[tr],
		Title: "Hello", Body: "World", Data: map[string]string{"oncepush_id": "0123456789abcdef0123456789abcdef"},
		ExpiresAt: time.Now().Add(time.Hour),
	}
}

// send sends s through its transport's provider.
func (w *world) send(s *provider.Submission) provider.Result { return w.sendIn(w.t.Context(), s) }

// sendIn is send under ctx (a fuzz target's, whose world outlives it).
func (w *world) sendIn(ctx context.Context, s *provider.Submission) provider.Result {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return w.providers[w.transportOf(s)].Send(ctx, s)
}

// transportOf is the transport of the canary device s is for: the one whose
// token it carries.
func (w *world) transportOf(s *provider.Submission) provider.Transport {
	for tr, tok := range w.tokens {
		if tok == s.Token {
			return tr
		}
	}
	panic("hostile: a submission for none of the canary devices")
}

// leaked returns the first secret text holds, or "".
func (w *world) leaked(text string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.secrets {
		if s != "" && strings.Contains(text, s) {
			return s
		}
	}
	return ""
}

func serviceAccount(t testing.TB, tokenURI string) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "hostile", "private_key_id": "kid-hostile",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "push@hostile.iam.gserviceaccount.com", "token_uri": tokenURI,
	})
	return b
}

// hmsKeyFile is a Push Kit service-account key file of a new RSA key.
func hmsKeyFile(t testing.TB, tokenURI string) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"project_id": "hostile", "key_id": "kid-hostile-hms", "sub_account": "hostile-sub-account",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": tokenURI,
	})
	return b
}

func p8(t testing.TB) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
