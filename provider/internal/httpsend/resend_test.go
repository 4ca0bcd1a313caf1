package httpsend

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/oncepush/oncepush/provider"
)

// The tests in this file attack one promise: a request that reached the
// provider is never sent again by the HTTP client below the ledger. Each
// server counts the complete requests it read (headers and the whole body)
// and then answers what makes net/http's transport, or its client, send the
// same request once more if the body can be rewound. One Do must cost
// exactly one complete request.

// h2Answer is what the raw HTTP/2 server does with a request it has read
// completely.
type h2Answer func(fr *http2.Framer, streamID uint32) error

func h2OK(fr *http2.Framer, streamID uint32) error {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	if err := enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"}); err != nil {
		return err
	}
	return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: streamID, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
}

func h2Reset(code http2.ErrCode) h2Answer {
	return func(fr *http2.Framer, streamID uint32) error { return fr.WriteRSTStream(streamID, code) }
}

// h2GoAway disowns the stream: a GOAWAY whose last stream id is below it
// tells the client that the server did not process it, although it did read
// it.
func h2GoAway(code http2.ErrCode) h2Answer {
	return func(fr *http2.Framer, streamID uint32) error {
		last := uint32(0) // client streams are odd: the one before streamID, if any
		if streamID > 2 {
			last = streamID - 2
		}
		return fr.WriteGoAway(last, code, nil)
	}
}

// h2Server is an HTTP/2 server on loopback that speaks frames itself, so it
// can send what net/http's own server never chooses to: a stream reset with
// PROTOCOL_ERROR or REFUSED_STREAM, or a GOAWAY that disowns a stream, right
// after reading the whole request.
type h2Server struct {
	addr   string
	client *tls.Config // trusts the server's certificate
	// answer is called with the number (from 1) of each complete request.
	answer func(n int64) h2Answer
	// onHeaders, when set, answers the headers of a request that has a body
	// still to come.
	onHeaders h2Answer

	complete atomic.Int64

	mu    sync.Mutex
	conns []net.Conn
}

// newH2Server starts an HTTP/2 server over TLS (ALPN h2), as providers are.
func newH2Server(t *testing.T, answer func(n int64) h2Answer) *h2Server {
	t.Helper()
	cert, pool := selfSigned(t)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &h2Server{addr: l.Addr().String(), client: &tls.Config{RootCAs: pool}, answer: answer}
	s.start(t, l)
	return s
}

// newH2CServer starts an HTTP/2 server without TLS (prior knowledge), for
// tests that look at the frames the client writes.
func newH2CServer(t *testing.T, answer func(n int64) h2Answer) *h2Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h2Server{addr: l.Addr().String(), answer: answer}
	s.start(t, l)
	return s
}

func (s *h2Server) start(t *testing.T, l net.Listener) {
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			wg.Go(func() { s.serve(t, c) })
		}
	})
}

func (s *h2Server) serve(t *testing.T, c net.Conn) {
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		return
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		ended := false
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = fr.WritePing(true, f.Data)
			}
		case *http2.HeadersFrame:
			ended = f.StreamEnded()
			if !ended && s.onHeaders != nil {
				err = s.onHeaders(fr, f.StreamID)
			}
		case *http2.DataFrame:
			ended = f.StreamEnded()
		}
		if ended {
			err = s.answer(s.complete.Add(1))(fr, f.Header().StreamID)
		}
		if err != nil {
			t.Logf("h2 server: %v", err)
			return
		}
	}
}

// selfSigned makes a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// post is a provider's request: a JSON body in a bytes.Reader, for which
// http.NewRequest sets GetBody, so the body could be rewound.
func post(t *testing.T, url string, header http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"message":{"token":"t"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	return req
}

// TestHTTP2NeverResendsAWrittenRequest covers the answers for which Go's
// HTTP/2 transport retries a request (h2_bundle.go, shouldRetryRequest and
// canRetryError) after the server read it completely.
func TestHTTP2NeverResendsAWrittenRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// before is how many requests are answered normally first, so the
		// attacked one is not the connection's first stream.
		before int64
		attack h2Answer
	}{
		{name: "RST_STREAM PROTOCOL_ERROR", attack: h2Reset(http2.ErrCodeProtocol)},
		{name: "RST_STREAM REFUSED_STREAM", attack: h2Reset(http2.ErrCodeRefusedStream)},
		{name: "GOAWAY NO_ERROR disowning the first stream", attack: h2GoAway(http2.ErrCodeNo)},
		{name: "GOAWAY PROTOCOL_ERROR disowning a later stream", before: 1, attack: h2GoAway(http2.ErrCodeProtocol)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newH2Server(t, func(n int64) h2Answer {
				if n == tt.before+1 {
					return tt.attack
				}
				return h2OK // what a retry would get: it would look like a success
			})
			transport := NewTransport(srv.client, nil)
			defer transport.CloseIdleConnections()
			client := &http.Client{Transport: transport}
			for i := range tt.before {
				if resp, res := Do(client, post(t, "https://"+srv.addr+"/send", nil)); resp == nil {
					t.Fatalf("request %d, answered normally: %v %q", i+1, res.Outcome, res.Text)
				}
			}

			resp, res := Do(client, post(t, "https://"+srv.addr+"/send", nil))
			if n := srv.complete.Load(); n != tt.before+1 {
				t.Errorf("the server read %d complete requests, want %d: the transport sent the request again (Do: %v %q)", n, tt.before+1, res.Outcome, res.Text)
			}
			if resp != nil {
				t.Fatalf("Do returned the answer %d, want a failure (the only answer to the request was %s)", resp.Status, tt.name)
			}
			if res.Outcome != provider.OutcomeMaybeSent {
				t.Errorf("%v %q, want maybe-sent: the server had read the whole request", res.Outcome, res.Text)
			}
			if strings.Contains(res.Text, "GetBody") {
				t.Errorf("text %q passes on net/http's advice to Go programmers", res.Text)
			}
		})
	}
}

// TestHTTP1NeverResendsAWrittenRequest covers HTTP/1.1's retry of a
// "replayable" request (transport.go, persistConn.shouldRetryRequest): one
// that carries an Idempotency-Key header and can rewind its body is sent
// again on a new connection when a reused connection closes before the
// answer. POST with that header is what a provider could ask for.
func TestHTTP1NeverResendsAWrittenRequest(t *testing.T) {
	t.Parallel()
	for _, header := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		t.Run(header, func(t *testing.T) {
			t.Parallel()
			var complete atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil || int64(len(b)) != r.ContentLength {
					return
				}
				if complete.Add(1) == 2 {
					// The second request, on the reused connection: read,
					// then the connection closes with no answer.
					c, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						c.Close()
					}
					return
				}
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			transport := NewTransport(nil, nil)
			defer transport.CloseIdleConnections()
			client := &http.Client{Transport: transport}
			h := http.Header{header: {"5f2b9c0e1d7a4b3c8e6f0a1b2c3d4e5f"}}

			if resp, res := Do(client, post(t, srv.URL+"/send", h)); resp == nil {
				t.Fatalf("first request: %v %q", res.Outcome, res.Text)
			}
			resp, res := Do(client, post(t, srv.URL+"/send", h))
			if n := complete.Load(); n != 2 {
				t.Errorf("the server read %d complete requests for two sends, want 2: the transport sent one again (Do: %v %q)", n, res.Outcome, res.Text)
			}
			if resp != nil {
				t.Fatalf("Do returned the answer %d, want a failure", resp.Status)
			}
			if res.Outcome != provider.OutcomeMaybeSent {
				t.Errorf("%v %q, want maybe-sent: the server had read the whole request", res.Outcome, res.Text)
			}
		})
	}
}

// TestRedirectDoesNotResendTheBody covers http.Client's own resend: it
// follows a 307 or 308 by sending the body again, when it can rewind it.
func TestRedirectDoesNotResendTheBody(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			var complete atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil || int64(len(b)) != r.ContentLength || len(b) == 0 {
					return
				}
				if complete.Add(1) == 1 {
					w.Header().Set("Location", "/elsewhere")
					w.WriteHeader(status)
					return
				}
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			transport := NewTransport(nil, nil)
			defer transport.CloseIdleConnections()

			resp, res := Do(&http.Client{Transport: transport}, post(t, srv.URL+"/send", nil))
			if n := complete.Load(); n != 1 {
				t.Errorf("the server read %d complete requests, want 1: the client followed the redirect with the body", n)
			}
			if resp == nil || resp.Status != status {
				t.Fatalf("Do: %+v %v %q, want the %d answer itself", resp, res.Outcome, res.Text, status)
			}
		})
	}
}
