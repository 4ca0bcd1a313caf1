package pushtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
)

// FakeServer is one local HTTPS server (HTTP/2, with a certificate of its own)
// that speaks the push providers' wire protocols, so that the real provider
// clients of oncepush (provider/fcm, provider/apns, provider/webpush,
// provider/rustore) can be tested end to end with no credentials and no
// network:
//
//   - FCM HTTP v1 send, under /fcm (and Google's OAuth token endpoint under
//     /oauth2/token, verifying the RS256 assertion against a key it generated);
//   - APNs under /3/device/{token}, verifying the ES256 provider JWT;
//   - Web Push endpoints under /webpush/{id}, decrypting the aes128gcm payload
//     with the subscription's private key and checking the VAPID header;
//   - RuStore under /rustore.
//
// It records every request (transport, token, collapse id, notification id,
// payload) and answers what the test programs (Program): a status and body per
// token or for the whole transport, Retry-After, latency, or accepting the
// request and dropping the connection. Helpers hand out matching credential
// files (FCMServiceAccount, APNsKey, NewWebPushSubscription, RuStoreToken).
type FakeServer struct {
	// URL is the server's base URL, https://127.0.0.1:port.
	URL string

	srv  *httptest.Server
	mux  *http.ServeMux
	seq  atomic.Int64
	cert *x509.Certificate

	mu       sync.Mutex
	reqs     []FakeRequest
	programs map[programKey][]FakeAnswer
	latency  map[oncepush.Transport]time.Duration
	notify   chan struct{}

	// Protocol state, one per file (fake_<transport>.go).
	fcm     *fakeFCM
	apns    *fakeAPNs
	webpush *fakeWebPush
	rustore *fakeRuStore
}

type programKey struct {
	transport oncepush.Transport
	token     string
}

// FakeRequest is one request the fake server received.
type FakeRequest struct {
	Transport oncepush.Transport
	// Token is the device token the request was for (for Web Push: the
	// subscription endpoint's id under /webpush/).
	Token string
	// CollapseID is the provider-side collapse identity the request carried:
	// apns-collapse-id, android.collapse_key, the Web Push Topic.
	CollapseID string
	// NotificationID is the "oncepush_id" the payload carried.
	NotificationID string
	// APNsID is the apns-id header (APNs only).
	APNsID string
	// Payload is the request body (for Web Push: the decrypted plaintext).
	Payload []byte
	// Header holds the request's headers (authorization removed).
	Header http.Header
	// Status is the HTTP status the fake answered (0 when it dropped the connection).
	Status int
	At     time.Time
}

// FakeAnswer is a programmed answer.
type FakeAnswer struct {
	// Status is the HTTP status; 0 means the protocol's success answer.
	Status int
	// Body is sent as is (JSON when it starts with "{").
	Body string
	// Header is added to the answer (e.g. "Retry-After").
	Header http.Header
	// Latency delays the answer (after the request was read).
	Latency time.Duration
	// Drop reads the request, then resets the stream without answering: the
	// client cannot know whether it was accepted.
	Drop bool
}

// FakeOptions configure StartFakeServer.
type FakeOptions struct {
	// Addr is the address to listen on; default 127.0.0.1:0 (a free port).
	Addr string
}

// NewFakeServer starts a fake server for the test and closes it when the test ends.
func NewFakeServer(t testing.TB) *FakeServer {
	t.Helper()
	s, err := StartFakeServer(nil)
	if err != nil {
		t.Fatalf("pushtest: start fake server: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// StartFakeServer starts a fake server; Close stops it.
func StartFakeServer(opts *FakeOptions) (*FakeServer, error) {
	if opts == nil {
		opts = &FakeOptions{}
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pushtest: listen on %s: %w", addr, err)
	}
	s := &FakeServer{
		mux:      http.NewServeMux(),
		programs: map[programKey][]FakeAnswer{},
		latency:  map[oncepush.Transport]time.Duration{},
		notify:   make(chan struct{}),
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "pushtest: no fake provider serves "+r.URL.Path, http.StatusNotFound)
	})
	s.srv = httptest.NewUnstartedServer(s.mux)
	s.srv.Listener.Close()
	s.srv.Listener = l
	s.srv.EnableHTTP2 = true
	s.srv.Config.ErrorLog = nil
	s.srv.StartTLS()
	s.URL = s.srv.URL
	s.cert = s.srv.Certificate()

	s.fcm = newFakeFCM(s)
	s.apns = newFakeAPNs(s)
	s.webpush = newFakeWebPush(s)
	s.rustore = newFakeRuStore(s)
	s.registerControl()
	return s, nil
}

// Close stops the server.
func (s *FakeServer) Close() { s.srv.Close() }

// TLSConfig trusts the server's certificate (and only it).
func (s *FakeServer) TLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(s.cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// CertificatePEM is the server's certificate, for clients in other processes.
func (s *FakeServer) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.cert.Raw})
}

// Client returns an HTTP client that trusts the server.
func (s *FakeServer) Client() *http.Client { return s.srv.Client() }

// Program sets the answers for a transport's token (token "" = every token of
// the transport without a program of its own). Answers are used in order; the
// last one keeps answering. No answers clears the program.
func (s *FakeServer) Program(t oncepush.Transport, token string, answers ...FakeAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := programKey{t, token}
	if len(answers) == 0 {
		delete(s.programs, k)
		return
	}
	s.programs[k] = slices.Clone(answers)
}

// SetLatency delays every answer of the transport by d (programmed latency adds to it).
func (s *FakeServer) SetLatency(t oncepush.Transport, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency[t] = d
}

// Requests returns every request received, in arrival order.
func (s *FakeServer) Requests() []FakeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// RequestsFor returns the requests of one transport.
func (s *FakeServer) RequestsFor(t oncepush.Transport) []FakeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []FakeRequest
	for _, r := range s.reqs {
		if r.Transport == t {
			out = append(out, r)
		}
	}
	return out
}

// Count returns how many requests the server recorded.
func (s *FakeServer) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// WaitCount blocks until the server has recorded at least n requests or ctx
// ends, and reports whether it got there.
func (s *FakeServer) WaitCount(ctx context.Context, n int) bool {
	return waitCount(ctx, n, func() (int, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.reqs), s.notify
	})
}

// Reset forgets recorded requests and programs.
func (s *FakeServer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = nil
	s.programs = map[programKey][]FakeAnswer{}
	s.latency = map[oncepush.Transport]time.Duration{}
}

// next pops the programmed answer for (transport, token), if any.
func (s *FakeServer) next(t oncepush.Transport, token string) (FakeAnswer, time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lat := s.latency[t]
	for _, k := range []programKey{{t, token}, {t, ""}} {
		q := s.programs[k]
		if len(q) == 0 {
			continue
		}
		a := q[0]
		if len(q) > 1 {
			s.programs[k] = q[1:]
		}
		return a, lat, true
	}
	return FakeAnswer{}, lat, false
}

func (s *FakeServer) record(req FakeRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	close(s.notify)
	s.notify = make(chan struct{})
}

// serve finishes a protocol handler's work: it records req and writes the
// programmed answer, or calls success (with a fresh sequence number) to write
// the protocol's own success answer.
func (s *FakeServer) serve(w http.ResponseWriter, r *http.Request, req FakeRequest, success func(w http.ResponseWriter, seq int64)) {
	ans, lat, programmed := s.next(req.Transport, req.Token)
	if d := lat + ans.Latency; d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	req.At = time.Now()
	if req.Header != nil {
		req.Header = req.Header.Clone()
		req.Header.Del("Authorization")
	}
	if ans.Drop {
		s.record(req)
		panic(http.ErrAbortHandler) // resets the stream / closes the connection
	}
	for k, vs := range ans.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if !programmed || ans.Status == 0 {
		rec := &statusRecorder{ResponseWriter: w}
		success(rec, s.seq.Add(1))
		req.Status = rec.status
		s.record(req)
		return
	}
	if strings.HasPrefix(ans.Body, "{") {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	}
	w.WriteHeader(ans.Status)
	_, _ = w.Write([]byte(ans.Body))
	req.Status = ans.Status
	s.record(req)
}

// refuse answers a request the fake could not accept (bad auth, malformed
// request) and records nothing: a client bug must show, not be counted as a send.
func refuse(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}
