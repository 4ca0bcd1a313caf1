package httpsend

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
)

func TestRefusedConnectionIsNotSent(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	req, _ := http.NewRequest("POST", "http://"+addr+"/send", bytes.NewReader([]byte("{}")))
	_, res := Do(&http.Client{Transport: NewTransport(nil, nil)}, req)
	if res.Outcome != oncepush.OutcomeRetry {
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
	if res.Outcome != oncepush.OutcomeRetry {
		t.Fatalf("connection closed before the request was written: %v %q, want retry", res.Outcome, res.Text)
	}
}

func TestTimeoutAfterWritingIsMaybeSent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read the request, never answer
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/send", bytes.NewReader([]byte("{}")))
	_, res := Do(&http.Client{Transport: NewTransport(nil, nil)}, req)
	if res.Outcome != oncepush.OutcomeMaybeSent {
		t.Fatalf("timeout after writing: %v %q, want maybe-sent", res.Outcome, res.Text)
	}
}

func TestResetAfterWritingIsMaybeSent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler) // the request was read; the stream is reset
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/send", bytes.NewReader([]byte("{}")))
	client := srv.Client()
	_, res := Do(client, req)
	if res.Outcome != oncepush.OutcomeMaybeSent {
		t.Fatalf("reset after writing: %v %q, want maybe-sent", res.Outcome, res.Text)
	}
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
