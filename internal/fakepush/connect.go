package fakepush

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// The fake's HTTP CONNECT proxy (Options.ConnectAddr): for a client that
// dials a provider's real host and cannot be given the fake's address (the
// Firebase Admin SDK dials fcm.googleapis.com), with HTTPS_PROXY pointing
// here. Whatever host a CONNECT names, the connection is handed to the
// fake's own TLS server: no second socket and no copying, so a tunnel costs
// what a direct connection costs.

// tunnelListener is the listener the fake's TLS server accepts from: its
// own TCP listener's connections, and those the CONNECT proxy hands over.
type tunnelListener struct {
	net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newTunnelListener(l net.Listener) *tunnelListener {
	t := &tunnelListener{Listener: l, conns: make(chan net.Conn), done: make(chan struct{})}
	go t.acceptDirect()
	return t
}

// acceptDirect hands over the TCP listener's connections until it closes.
func (t *tunnelListener) acceptDirect() {
	for {
		c, err := t.Listener.Accept()
		var temp interface{ Temporary() bool }
		switch {
		case err == nil:
			if !t.hand(c) {
				return
			}
		case errors.As(err, &temp) && temp.Temporary(): // out of descriptors: as http.Server does
			time.Sleep(5 * time.Millisecond)
		default:
			t.Close()
			return
		}
	}
}

func (t *tunnelListener) Accept() (net.Conn, error) {
	select {
	case c := <-t.conns:
		return c, nil
	case <-t.done:
		return nil, net.ErrClosed
	}
}

// hand gives the TLS server a connection; false once the fake is closed.
func (t *tunnelListener) hand(c net.Conn) bool {
	select {
	case t.conns <- c:
		return true
	case <-t.done:
		c.Close()
		return false
	}
}

func (t *tunnelListener) Close() error {
	t.once.Do(func() { close(t.done) })
	return t.Listener.Close()
}

// bufferedConn reads what the proxy's reader had buffered first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// startConnectProxy serves CONNECT on addr, handing every tunnel to tl.
func startConnectProxy(addr string, tl *tunnelListener) (*http.Server, net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "pushtest: the fake's proxy serves CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			http.Error(w, "pushtest: cannot take the connection over", http.StatusInternalServerError)
			return
		}
		c, rw, err := hj.Hijack()
		if err != nil {
			return
		}
		if _, err := c.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
			c.Close()
			return
		}
		tl.hand(&bufferedConn{Conn: c, r: rw.Reader})
	})}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.Close()
		}
	}()
	return srv, l, nil
}
