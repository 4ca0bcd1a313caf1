// Package fakepush is the fake push providers: one local HTTPS server that
// speaks FCM (with Google's OAuth token endpoint), APNs, Web Push, RuStore
// and Huawei Push Kit, records what it was sent and answers what a test
// programs. Tests reach it through pushtest (FakeServer and the rest are
// aliases of this package's types), and `oncepush fake-providers` serves it as a process.
// It imports no test code, so the command's binary does not link the testing
// package; its error texts say "pushtest", the name its users know it by.
//
// Each transport's protocol is a file of its own (fake_<transport>.go) and an
// entry in protocols.
package fakepush

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// Server is one local HTTPS server (HTTP/2, with a certificate of its own)
// that speaks the push providers' wire protocols, so that the real provider
// clients of oncepush (provider/fcm, provider/apns, provider/webpush,
// provider/rustore, provider/hms) can be tested end to end with no
// credentials and no network:
//
//   - FCM HTTP v1 send, under /fcm (and Google's OAuth token endpoint under
//     /oauth2/token, verifying the RS256 assertion against a key it generated);
//   - APNs under /3/device/{token}, verifying the ES256 provider JWT;
//   - Web Push endpoints under /webpush/{id}, decrypting the aes128gcm payload
//     with the subscription's private key and checking the VAPID header;
//   - RuStore under /rustore;
//   - Huawei Push Kit (v3, HarmonyOS NEXT) under /hms, verifying the PS256
//     service-account JWT.
//
// It records every request (transport, token, collapse id, notification id,
// payload) the moment it has read it whole, and then what became of it
// (Fate): answered, dropped, or abandoned by a client that went away
// while the answer was held. It answers what the test programs (Program, Mix):
// a status and body per token or for the whole transport, Retry-After,
// latency, or accepting the request and dropping the connection. Helpers hand
// out matching credential files (FCMServiceAccount, APNsKey,
// NewWebPushSubscription, RuStoreToken, HMSServiceAccount).
type Server struct {
	// URL is the server's base URL, https://127.0.0.1:port.
	URL string
	// ConnectURL is the CONNECT proxy's URL, http://127.0.0.1:port, when
	// Options.ConnectAddr asked for one.
	ConnectURL string
	proxy      *http.Server

	srv  *httptest.Server
	mux  *http.ServeMux
	seq  atomic.Int64
	cert *x509.Certificate

	mu sync.Mutex
	// reqs holds every request received since the last Reset, in arrival
	// order; reqs[i].Seq == firstSeq+i. held indexes those not yet settled.
	reqs     []Request
	firstSeq int64
	lastSeq  int64
	held     map[int64]struct{}
	settled  int // requests answered or dropped (what Count counts)
	stats    Stats
	programs map[programKey][]Answer
	mixes    map[provider.Transport]*fakeMix
	latency  map[provider.Transport]time.Duration
	notify   chan struct{}

	clock provider.Clock // nil: the wall clock

	// speaks holds each protocol's state (fake_<transport>.go), by transport.
	speaks map[provider.Transport]any
	// list names the transports spoken, for errors: "fcm, apns, webpush, rustore, hms".
	list string
}

// protocols are the transports the fake speaks, in their documented order:
// start serves a protocol's routes on the server's mux and returns its
// state, which its file reads back with a typed accessor (s.fcm(), …);
// deadToken is the provider's own answer for a token that is no longer
// valid (DeadTokenAnswer).
var protocols = []struct {
	transport provider.Transport
	start     func(*Server) any
	deadToken Answer
}{
	{provider.TransportFCM, func(s *Server) any { return newFakeFCM(s) },
		FCMError(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")},
	{provider.TransportAPNs, func(s *Server) any { return newFakeAPNs(s) }, APNsError(410, "Unregistered")},
	{provider.TransportWebPush, func(s *Server) any { return newFakeWebPush(s) }, WebPushError(410)},
	{provider.TransportRuStore, func(s *Server) any { return newFakeRuStore(s) },
		RuStoreError(404, "NOT_FOUND", "Requested entity was not found.")},
	{transportHMS, func(s *Server) any { return newFakeHMS(s) }, HMSError(400, hmsCodeAllTokensInvalid, "All the tokens are invalid.")},
}

// DeadTokenAnswer is what t's provider answers for a device token that is no
// longer valid (the app uninstalled, the subscription gone): the answer that
// makes the engine delete the device. It panics for a transport the fake
// does not speak.
func DeadTokenAnswer(t provider.Transport) Answer {
	for _, p := range protocols {
		if p.transport == t {
			return p.deadToken
		}
	}
	panic("fakepush: no protocol " + string(t))
}

type programKey struct {
	transport provider.Transport
	token     string
}

// Fate is what became of a request the fake received.
type Fate string

// The fates of a request. Every request is recorded as FateHeld the moment
// its body has been read whole, and settles into one of the others.
const (
	// FateHeld: received, its answer not written yet (programmed latency).
	FateHeld Fate = "held"
	// FateAnswered: answered with Status.
	FateAnswered Fate = "answered"
	// FateDropped: read whole, then the stream was reset without an answer
	// (Answer.Drop): a provider that accepted it and whose answer was lost.
	FateDropped Fate = "dropped"
	// FateAbandoned: the client went away (its context ended, its connection
	// closed) while the fake held the answer. The fake had the whole request.
	FateAbandoned Fate = "abandoned"
)

// Request is one request the fake server received.
type Request struct {
	// Seq numbers the requests in arrival order, from 1, for the server's
	// whole life (Reset does not start it again).
	Seq       int64
	Transport provider.Transport
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
	// Status is the HTTP status the fake answered (0 when it dropped the
	// connection, or did not answer).
	Status int
	// Fate is what became of the request.
	Fate Fate
	// ReceivedAt is when the fake had read the whole request; At is when it
	// settled (answered, dropped, or noticed the client was gone), zero while
	// held.
	ReceivedAt time.Time
	At         time.Time
	// RemoteAddr is the client's address (host:port of its connection).
	RemoteAddr string
}

// Stats counts the requests received since the last Reset.
type Stats struct {
	Received  int `json:"received"`
	Held      int `json:"held"`
	Answered  int `json:"answered"`
	Dropped   int `json:"dropped"`
	Abandoned int `json:"abandoned"`
}

// Answer is a programmed answer.
type Answer struct {
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

// Options configure Start.
type Options struct {
	// Addr is the address to listen on; default 127.0.0.1:0 (a free port).
	Addr string
	// Clock is the fake's time: the access tokens it issues expire, and the
	// JWTs it is sent (FCM's OAuth assertion, APNs provider tokens, VAPID)
	// are judged, on it, and its record's times are read from it. Give it
	// the clock of the client under test (oncepush.Config.Clock), which the
	// providers also tell time by. Nil: the wall clock. Programmed latency is
	// real time whatever the clock.
	Clock provider.Clock
	// CertNames are host names the server's certificate names besides
	// 127.0.0.1, ::1 and localhost: for a client that cannot be pointed at
	// the fake and dials a provider's real host through a tunnel to it
	// (fcm.googleapis.com for the Firebase Admin SDK). Empty: the
	// certificate of net/http/httptest.
	CertNames []string
	// ConnectAddr, when set, is a loopback address for an HTTP CONNECT
	// proxy (Server.ConnectURL) that hands every tunnel, whatever host it
	// names, to the fake's TLS server: for a client that dials a provider's
	// real host (with CertNames naming it) and honours HTTPS_PROXY.
	ConnectAddr string
}

// TB is the part of testing.TB that StartForTest uses; the package does
// not import testing, so that the fake-providers binary does not link it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// StartForTest starts a fake server with opts for the test t and closes it
// when the test ends, failing t if it cannot start: pushtest's
// NewFakeServerWith, and the package's own tests.
func StartForTest(t TB, opts *Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("pushtest: start fake server: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake server; Close stops it.
func Start(opts *Options) (*Server, error) {
	if opts == nil {
		opts = &Options{}
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pushtest: listen on %s: %w", addr, err)
	}
	s := &Server{
		mux:      http.NewServeMux(),
		held:     map[int64]struct{}{},
		firstSeq: 1,
		programs: map[programKey][]Answer{},
		mixes:    map[provider.Transport]*fakeMix{},
		latency:  map[provider.Transport]time.Duration{},
		notify:   make(chan struct{}),
		clock:    opts.Clock,
		speaks:   map[provider.Transport]any{},
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "pushtest: no fake provider serves "+r.URL.Path, http.StatusNotFound)
	})
	// Every route is in place before the first request can arrive.
	names := make([]string, len(protocols))
	for i, p := range protocols {
		s.speaks[p.transport] = p.start(s)
		names[i] = string(p.transport)
	}
	s.list = strings.Join(names, ", ")
	s.registerControl()

	s.srv = httptest.NewUnstartedServer(s.mux)
	s.srv.Listener.Close()
	s.srv.Listener = l
	if opts.ConnectAddr != "" {
		tl := newTunnelListener(l)
		proxy, pl, err := startConnectProxy(opts.ConnectAddr, tl)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("pushtest: listen on %s: %w", opts.ConnectAddr, err)
		}
		s.srv.Listener, s.proxy, s.ConnectURL = tl, proxy, "http://"+pl.Addr().String()
	}
	s.srv.EnableHTTP2 = true
	s.srv.Config.ErrorLog = nil
	if len(opts.CertNames) > 0 {
		cert, err := selfSigned(opts.CertNames)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("pushtest: certificate for %v: %w", opts.CertNames, err)
		}
		s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	s.srv.StartTLS()
	s.URL = s.srv.URL
	s.cert = s.srv.Certificate()
	return s, nil
}

// selfSigned makes a certificate of its own for the loopback addresses and
// names, valid for a day: the fake lives for one test run.
func selfSigned(names []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"oncepush fake providers"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              append([]string{"localhost"}, names...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// Transports are the transports the fake speaks, in their documented order.
func (s *Server) Transports() []provider.Transport {
	out := make([]provider.Transport, len(protocols))
	for i, p := range protocols {
		out[i] = p.transport
	}
	return out
}

// now is the fake's time (Options.Clock).
func (s *Server) now() time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	return time.Now()
}

// Close stops the server.
func (s *Server) Close() {
	if s.proxy != nil {
		s.proxy.Close()
	}
	s.srv.Close()
}

// TLSConfig trusts the server's certificate (and only it).
func (s *Server) TLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(s.cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// CertificatePEM is the server's certificate, for clients in other processes.
func (s *Server) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.cert.Raw})
}

// pkcs8PEM encodes a private key the way Apple's .p8 files and Google's
// service-account files carry one: PKCS #8 in a PEM "PRIVATE KEY" block.
func pkcs8PEM(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Client returns an HTTP client that trusts the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Program sets the answers for a transport's token (token "" = every token of
// the transport without a program of its own). Answers are used in order; the
// last one keeps answering. No answers clears the program.
func (s *Server) Program(t provider.Transport, token string, answers ...Answer) {
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
func (s *Server) SetLatency(t provider.Transport, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency[t] = d
}

// Requests returns the requests received that have been answered or dropped,
// in arrival order: what a client that got an answer (or a reset) sent.
// Received also lists those held and abandoned.
func (s *Server) Requests() []Request {
	return s.requestsWhere(func(r *Request) bool { return r.Fate == FateAnswered || r.Fate == FateDropped })
}

// RequestsFor returns the requests of one transport, as Requests does.
func (s *Server) RequestsFor(t provider.Transport) []Request {
	return s.requestsWhere(func(r *Request) bool {
		return r.Transport == t && (r.Fate == FateAnswered || r.Fate == FateDropped)
	})
}

// Received returns every request received since the last Reset, in arrival
// order, whatever its fate: held (still waiting for its answer), answered,
// dropped, or abandoned by its client.
func (s *Server) Received() []Request {
	return s.requestsWhere(func(*Request) bool { return true })
}

// ReceivedAfter returns up to limit requests with a Seq above seq, in
// arrival order, without payloads and headers: for reading a long record in
// pages.
func (s *Server) ReceivedAfter(seq int64, limit int) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := max(seq+1-s.firstSeq, 0)
	var out []Request
	for ; i < int64(len(s.reqs)) && len(out) < limit; i++ {
		r := s.reqs[i]
		r.Payload, r.Header = nil, nil
		out = append(out, r)
	}
	return out
}

// Held returns the requests the fake is holding now (received, not yet
// answered), in arrival order, without payloads and headers.
func (s *Server) Held() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, 0, len(s.held))
	for seq := range s.held {
		r := s.reqs[seq-s.firstSeq]
		r.Payload, r.Header = nil, nil
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Request) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// Stats counts the requests received since the last Reset, by fate.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Held = len(s.held)
	return st
}

func (s *Server) requestsWhere(keep func(*Request) bool) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for i := range s.reqs {
		if keep(&s.reqs[i]) {
			out = append(out, s.reqs[i])
		}
	}
	return out
}

// Count returns how many requests were answered or dropped (as Requests lists them).
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settled
}

// WaitCount blocks until at least n requests were answered or dropped, or
// ctx ends, and reports whether it got there.
func (s *Server) WaitCount(ctx context.Context, n int) bool {
	return WaitCount(ctx, n, func() (int, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.settled, s.notify
	})
}

// WaitReceived blocks until at least n requests were received (whatever
// became of them), or ctx ends, and reports whether it got there.
func (s *Server) WaitReceived(ctx context.Context, n int) bool {
	return WaitCount(ctx, n, func() (int, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.reqs), s.notify
	})
}

// Reset forgets recorded requests, programs, mixes and latencies. A request
// held across a Reset is not recorded again when it settles.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = nil
	s.firstSeq = s.lastSeq + 1
	s.held = map[int64]struct{}{}
	s.settled = 0
	s.stats = Stats{}
	s.programs = map[programKey][]Answer{}
	s.mixes = map[provider.Transport]*fakeMix{}
	s.latency = map[provider.Transport]time.Duration{}
}

// next pops the programmed answer for (transport, token), if any: the
// token's own program, else the transport's, else a draw from its mix.
func (s *Server) next(t provider.Transport, token string) (Answer, time.Duration, bool) {
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
	if m := s.mixes[t]; m != nil {
		return m.draw(), lat, true
	}
	return Answer{}, lat, false
}

// arrive records a request read whole, as held, and returns its Seq.
func (s *Server) arrive(req Request) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastSeq++
	req.Seq = s.lastSeq
	req.Fate = FateHeld
	req.ReceivedAt = s.now()
	if req.Header != nil {
		req.Header = req.Header.Clone()
		req.Header.Del("Authorization")
	}
	s.reqs = append(s.reqs, req)
	s.held[req.Seq] = struct{}{}
	s.stats.Received++
	s.changed()
	return req.Seq
}

// settle records what became of a held request.
func (s *Server) settle(seq int64, fate Fate, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[seq]; !ok {
		return // forgotten by a Reset meanwhile
	}
	delete(s.held, seq)
	r := &s.reqs[seq-s.firstSeq]
	r.Fate, r.Status, r.At = fate, status, s.now()
	switch fate {
	case FateAnswered:
		s.stats.Answered++
		s.settled++
	case FateDropped:
		s.stats.Dropped++
		s.settled++
	case FateAbandoned:
		s.stats.Abandoned++
	}
	s.changed()
}

func (s *Server) changed() {
	close(s.notify)
	s.notify = make(chan struct{})
}

// serve finishes a protocol handler's work, once it has read the whole
// request: it records req at once, then writes the programmed answer, or
// calls success (with a fresh sequence number) to write the protocol's own
// success answer, and records what became of it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, req Request, success func(w http.ResponseWriter, seq int64)) {
	ans, lat, programmed := s.next(req.Transport, req.Token)
	req.RemoteAddr = r.RemoteAddr
	seq := s.arrive(req)
	if d := lat + ans.Latency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			s.settle(seq, FateAbandoned, 0)
			return
		}
	}
	if ans.Drop {
		s.settle(seq, FateDropped, 0)
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
		s.settle(seq, FateAnswered, rec.status)
		return
	}
	if strings.HasPrefix(ans.Body, "{") {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	}
	w.WriteHeader(ans.Status)
	_, _ = w.Write([]byte(ans.Body))
	s.settle(seq, FateAnswered, ans.Status)
}

// answerNow records a request and its answer, written by the caller at once
// (an error the protocol itself calls for; no program consulted).
func (s *Server) answerNow(r *http.Request, req Request, status int) {
	req.RemoteAddr = r.RemoteAddr
	s.settle(s.arrive(req), FateAnswered, status)
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
