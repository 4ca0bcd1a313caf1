package httpsend

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/providertest"
)

func TestRefusedConnectionIsNotSent(t *testing.T) {
	t.Parallel()
	addr := providertest.ClosedAddr(t)
	req, _ := http.NewRequest("POST", "http://"+addr+"/send", bytes.NewReader([]byte("{}")))
	_, res := Do(&http.Client{Transport: NewTransport(nil, nil)}, req)
	if res.Outcome != provider.OutcomeRetry {
		t.Fatalf("refused dial: %v %q, want retry (never sent)", res.Outcome, res.Text)
	}
}

func TestClosedBeforeWritingIsNotSent(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetLinger(0)
			c.Close() // reset before reading anything
		}
	}()
	// A body larger than socket buffers cannot be written completely into a
	// connection that was reset.
	req, _ := http.NewRequest("POST", "http://"+l.Addr().String()+"/send", bytes.NewReader(make([]byte, 8<<20)))
	_, res := Do(&http.Client{Transport: NewTransport(nil, nil)}, req)
	if res.Outcome != provider.OutcomeRetry {
		t.Fatalf("connection closed before the request was written: %v %q, want retry", res.Outcome, res.Text)
	}
}

func TestTimeoutAfterWritingIsMaybeSent(t *testing.T) {
	t.Parallel()
	read := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read the request, never answer
		close(read)
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-read
		cancel() // the send timeout, once the provider has the request
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/send", bytes.NewReader([]byte("{}")))
	_, res := Do(&http.Client{Transport: NewTransport(nil, nil)}, req)
	if res.Outcome != provider.OutcomeMaybeSent {
		t.Fatalf("timeout after writing: %v %q, want maybe-sent", res.Outcome, res.Text)
	}
}

func TestResetAfterWritingIsMaybeSent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the whole request first: a handler runs when the headers
		// arrive, and a reset sent before the body can overtake it, making
		// a request that was never complete (then "not sent" is true).
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		panic(http.ErrAbortHandler) // the stream is reset with no answer
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/send", bytes.NewReader([]byte("{}")))
	client := srv.Client()
	_, res := Do(client, req)
	if res.Outcome != provider.OutcomeMaybeSent {
		t.Fatalf("reset after writing: %v %q, want maybe-sent", res.Outcome, res.Text)
	}
}

// TestResetBeforeTheBodyWasSentIsNotSent is the other side of the rule: a
// provider that resets the stream when the headers arrive, before the client
// could send the body (the server grants no flow-control window beyond the
// first 64 KiB of 1 MiB), never had a request it could act on.
func TestResetBeforeTheBodyWasSentIsNotSent(t *testing.T) {
	t.Parallel()
	srv := newH2Server(t, func(int64) h2Answer { return h2OK })
	srv.onHeaders = h2Reset(http2.ErrCodeInternal)
	transport := NewTransport(srv.client, nil)
	defer transport.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, "https://"+srv.addr+"/send", bytes.NewReader(make([]byte, 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	_, res := Do(&http.Client{Transport: transport}, req)
	if res.Outcome != provider.OutcomeRetry {
		t.Errorf("%v %q, want retry: the body never left", res.Outcome, res.Text)
	}
	if n := srv.complete.Load(); n != 0 {
		t.Errorf("the server read %d complete requests, want 0", n)
	}
}

// TestCancelWhileTheLastFrameIsWrittenIsMaybeSent attacks a "not sent"
// inferred from the transport's report that it wrote the request
// (httptrace's WroteRequest): when the send's context ends, net/http's
// HTTP/2 RoundTrip returns at once, without waiting for the goroutine that
// writes the request, so the report can come after Do has answered. Here the
// last frame (DATA with END_STREAM) is held on its way to the network while
// the context is cancelled, then let through: the provider gets the whole
// request, and Do must not have said it was never sent.
func TestCancelWhileTheLastFrameIsWrittenIsMaybeSent(t *testing.T) {
	t.Parallel()
	complete := make(chan struct{})
	srv := newH2CServer(t, func(int64) h2Answer {
		return func(*http2.Framer, uint32) error { close(complete); return nil } // read, never answered
	})
	gate := &endGate{held: make(chan struct{}), open: make(chan struct{})}
	defer gate.release()
	transport := NewTransport(nil, func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		gate.mu.Lock()
		gate.Conn = c
		gate.mu.Unlock()
		return gate, nil
	})
	transport.Protocols = new(http.Protocols)
	transport.Protocols.SetUnencryptedHTTP2(true)
	defer transport.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.addr+"/send", bytes.NewReader([]byte(`{"message":{"token":"t"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan provider.Result)
	go func() {
		_, res := Do(&http.Client{Transport: transport}, req)
		done <- res
	}()
	<-gate.held // the whole request is the transport's; its end is not on the wire yet
	cancel()    // the send timeout
	res := <-done
	gate.release() // the network delivers the last frame after all
	<-complete     // and the provider has the whole request
	if res.Outcome != provider.OutcomeMaybeSent {
		t.Errorf("%v %q, want maybe-sent: the provider got the whole request", res.Outcome, res.Text)
	}
}

// endGate is a client connection that holds the write carrying the end of a
// request (an HTTP/2 DATA frame with END_STREAM) until release. It reads the
// frame headers of what the client writes: the preface, then frames.
type endGate struct {
	mu sync.Mutex
	net.Conn

	held     chan struct{} // closed when the write carrying END_STREAM is held
	open     chan struct{} // closed by release
	heldOnce sync.Once
	openOnce sync.Once

	seen   int    // bytes of the stream parsed
	header []byte // the frame header being read
	skip   int    // payload bytes of the current frame still to come
}

func (g *endGate) release() { g.openOnce.Do(func() { close(g.open) }) }

func (g *endGate) Write(p []byte) (int, error) {
	g.mu.Lock()
	end := g.carriesEnd(p)
	c := g.Conn
	g.mu.Unlock()
	if end {
		g.heldOnce.Do(func() { close(g.held) })
		<-g.open
	}
	return c.Write(p)
}

// carriesEnd parses p as the next bytes of the client's stream and reports
// whether a DATA frame with END_STREAM starts in it.
func (g *endGate) carriesEnd(p []byte) bool {
	end := false
	for len(p) > 0 {
		switch {
		case g.seen < len(http2.ClientPreface):
			n := min(len(p), len(http2.ClientPreface)-g.seen)
			g.seen, p = g.seen+n, p[n:]
		case g.skip > 0:
			n := min(len(p), g.skip)
			g.skip, p = g.skip-n, p[n:]
		default:
			n := min(len(p), 9-len(g.header))
			g.header, p = append(g.header, p[:n]...), p[n:]
			if len(g.header) == 9 {
				length := int(g.header[0])<<16 | int(g.header[1])<<8 | int(g.header[2])
				typ, flags := http2.FrameType(g.header[3]), http2.Flags(g.header[4])
				end = end || typ == http2.FrameData && flags.Has(http2.FlagDataEndStream)
				g.skip, g.header = length, g.header[:0]
			}
		}
	}
	return end
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"":                              0,
		"120":                           2 * time.Minute,
		"-5":                            0,
		"soon":                          0,
		"Thu, 01 Jan 2026 12:01:30 GMT": 90 * time.Second,
		"Thu, 01 Jan 2026 11:00:00 GMT": 0,
	} {
		if got := RetryAfter(h, now); got != want {
			t.Errorf("RetryAfter(%q) = %s, want %s", h, got, want)
		}
	}
}

// TestLateStartIsRefusedBeforeTheBody: the engine's start check, asked when
// the transport first reads the body (it has a connection and is about to
// write), refuses a send whose run is past its budget or lease. The provider
// must get no complete request, and the answer must say "never left".
func TestLateStartIsRefusedBeforeTheBody(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err == nil {
			mu.Lock()
			got++
			mu.Unlock()
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	client := srv.Client()
	for _, proto := range []string{"HTTP/2", "HTTP/1.1"} {
		tr := client.Transport.(*http.Transport).Clone()
		if proto == "HTTP/1.1" {
			tr.ForceAttemptHTTP2 = false
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		checked := 0
		ctx := provider.WithStartCheck(t.Context(), func() error {
			checked++
			return provider.ErrLateStart
		})
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/send", bytes.NewReader([]byte(`{"message":{}}`)))
		_, res := Do(&http.Client{Transport: tr}, req)
		if res.Outcome != provider.OutcomeRetry || !res.Unsent || checked != 1 {
			t.Fatalf("%s: late start answered %v unsent=%v %q after %d checks; want a retry that never left, checked once",
				proto, res.Outcome, res.Unsent, res.Text, checked)
		}
		// A send that may start goes out, once.
		ok := provider.WithStartCheck(t.Context(), func() error { return nil })
		req, _ = http.NewRequestWithContext(ok, "POST", srv.URL+"/send", bytes.NewReader([]byte(`{"message":{}}`)))
		if resp, res := Do(&http.Client{Transport: tr}, req); resp == nil || resp.Status != 200 {
			t.Fatalf("%s: allowed send: %+v %v %q", proto, resp, res.Outcome, res.Text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got != 2 {
		t.Fatalf("the server read %d complete requests, want the 2 allowed ones", got)
	}
}
