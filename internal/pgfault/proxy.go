// Package pgfault is a TCP proxy in front of PostgreSQL that injects faults
// on the connections it carries: resets in the middle of a statement, a
// COMMIT whose answer never arrives, latency, bandwidth limits, and
// connections that go silent for good. The chaos harness puts it between
// the workers and the database; tests use it to show what the driver does
// with a connection that stops answering.
//
// It reads PostgreSQL's wire protocol as it forwards it, whole messages at
// a time, to know which connection is inside a statement and which message
// is a COMMIT. Its silence is the application's kind: the proxy's kernel
// still acknowledges every segment, so what frees a silent connection is
// the client's own deadlines, not TCP keepalives.
package pgfault

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections to one server, with the faults in force.
//
// An in-process proxy rather than toxiproxy (D170): the fault that matters
// most, a COMMIT whose answer never arrives, needs the protocol read message
// by message, which toxiproxy's byte-stream toxics cannot do; the others
// are a few lines each here.
type Proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	conns map[*proxyConn]struct{}
	wg    sync.WaitGroup

	latency   atomic.Int64 // added before forwarding each message, in ns; 0: none
	rate      atomic.Int64 // bytes per second per connection and direction; 0: no limit
	blackhole atomic.Bool  // connections opened now go silent at once
	// trap, when set, is taken by the next COMMIT a client sends: the
	// COMMIT is forwarded, its answer never is.
	trap atomic.Pointer[CommitTrap]
}

// CommitTrap is one armed COMMIT fault.
type CommitTrap struct {
	hold  bool          // true: the connection goes silent; false: reset once the server answered
	fired chan struct{} // closed when a COMMIT took it
	at    time.Time
}

// Fired is closed when a COMMIT took the trap.
func (t *CommitTrap) Fired() <-chan struct{} { return t.fired }

// At is when the COMMIT that took the trap was forwarded (once Fired).
func (t *CommitTrap) At() time.Time { return t.at }

// ArmCommit arms a trap for the next COMMIT any client sends (the simple
// query, or an extended exchange parsing it): the COMMIT reaches the
// server, its answer never reaches the client. hold false resets the
// client's connection once the server answered; hold true leaves it open
// and silent. Committed or not, the client cannot know.
func (p *Proxy) ArmCommit(hold bool) *CommitTrap {
	t := &CommitTrap{hold: hold, fired: make(chan struct{})}
	p.trap.Store(t)
	return t
}

// Disarm takes t back unless a COMMIT took it; it reports whether it did.
func (p *Proxy) Disarm(t *CommitTrap) bool { return p.trap.CompareAndSwap(t, nil) }

// SetLatency delays every message forwarded from now on by d (0: none).
// A connection forwards one message after another, so a burst of messages
// waits d each.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// SetRate limits every connection to bytesPerSecond each way (0: no limit).
func (p *Proxy) SetRate(bytesPerSecond int64) { p.rate.Store(bytesPerSecond) }

// SetSilent makes every connection opened from now on silent at once
// (true), or not (false); SilenceAll silences those open.
func (p *Proxy) SetSilent(on bool) { p.blackhole.Store(on) }

// proxyConn is one client connection and its connection to the server.
type proxyConn struct {
	p              *Proxy
	client, server *net.TCPConn
	// pending counts statements sent (a simple Query, or an extended
	// exchange's Sync) whose ReadyForQuery has not come back.
	pending atomic.Int32
	holed   atomic.Bool  // nothing is forwarded either way, nothing closed
	holedAt atomic.Int64 // when it was black-holed, in Unix ns
	// released: its server side was closed, its client told nothing.
	released atomic.Bool
	// askedAt: when the client first sent something after the connection
	// went silent, in Unix ns (0: not yet); it waits for an answer from
	// then on, unless it gives up.
	askedAt atomic.Int64
	swallow atomic.Bool // the server's answers are dropped (a trapped COMMIT)
	// trapped is the trap a COMMIT of this connection took; its answer is
	// awaited to reset the client (trap.hold false).
	trapped atomic.Pointer[CommitTrap]
	// parseCommit: the extended exchange under way parses a COMMIT; its
	// Sync takes the trap.
	parseCommit bool
	closeOnce   sync.Once
}

// Start listens on a free loopback port and forwards to target (host:port).
func Start(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 10*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		pc := &proxyConn{p: p, client: c.(*net.TCPConn), server: s.(*net.TCPConn)}
		pc.pending.Store(1) // the start-up, until its ReadyForQuery
		if p.blackhole.Load() {
			pc.hole()
		}
		p.mu.Lock()
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go pc.fromClient()
		go pc.fromServer()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	_ = p.l.Close()
	for _, pc := range p.all() {
		pc.close(false)
	}
	p.wg.Wait()
}

func (p *Proxy) all() []*proxyConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		out = append(out, pc)
	}
	return out
}

// ResetMidStatement resets (RST) every connection inside a statement, or
// every connection if none is; it returns how many it reset.
func (p *Proxy) ResetMidStatement() int {
	var busy, open []*proxyConn
	for _, pc := range p.all() {
		if pc.holed.Load() || pc.swallow.Load() {
			continue
		}
		open = append(open, pc)
		if pc.pending.Load() > 0 {
			busy = append(busy, pc)
		}
	}
	if len(busy) == 0 {
		busy = open
	}
	for _, pc := range busy {
		pc.close(true)
	}
	return len(busy)
}

// SilenceAll makes every connection open now silent for good: nothing is
// forwarded either way, nothing closed. It returns how many it silenced.
func (p *Proxy) SilenceAll() int {
	n := 0
	for _, pc := range p.all() {
		if pc.hole() {
			n++
		}
	}
	return n
}

// hole black-holes pc; it reports whether pc was not already.
func (pc *proxyConn) hole() bool {
	if pc.holed.Swap(true) {
		return false
	}
	pc.holedAt.Store(time.Now().UnixNano())
	return true
}

// close closes both sides; rst sends the client a reset (SO_LINGER 0)
// rather than a FIN.
func (pc *proxyConn) close(rst bool) {
	pc.closeOnce.Do(func() {
		if rst {
			_ = pc.client.SetLinger(0)
		}
		_ = pc.client.Close()
		_ = pc.server.Close()
		pc.p.mu.Lock()
		delete(pc.p.conns, pc)
		pc.p.mu.Unlock()
	})
}

// Startup codes of the messages a client may send first without a type byte.
const (
	codeSSLRequest    = 80877103
	codeGSSENCRequest = 80877104
	codeCancelRequest = 80877102
)

// fromClient forwards the client's messages to the server.
func (pc *proxyConn) fromClient() {
	defer pc.p.wg.Done()
	defer pc.close(false)
	r := bufio.NewReaderSize(pc.client, 64<<10)
	// The first message has no type byte: a startup message, or a request
	// for TLS or a cancel, after which the bytes are forwarded unread.
	first, err := readUntyped(r)
	if err != nil {
		return
	}
	if !pc.forward(pc.server, first) {
		return
	}
	if code := binary.BigEndian.Uint32(first[4:8]); code == codeSSLRequest || code == codeGSSENCRequest || code == codeCancelRequest {
		_, _ = io.Copy(pc.server, r)
		return
	}
	for {
		msg, err := readTyped(r)
		if err != nil {
			return
		}
		var trap *CommitTrap
		switch msg[0] {
		case 'Q':
			pc.pending.Add(1)
			if isCommit(msg[5:]) {
				trap = pc.p.trap.Swap(nil)
			}
		case 'P': // Parse: name, query, …
			if _, rest, ok := bytes.Cut(msg[5:], []byte{0}); ok {
				pc.parseCommit = isCommit(rest)
			}
		case 'S': // Sync ends an extended exchange
			pc.pending.Add(1)
			if pc.parseCommit {
				trap = pc.p.trap.Swap(nil)
			}
			pc.parseCommit = false
		}
		if trap != nil { // the answer is dropped from now on
			pc.trapped.Store(trap)
			pc.swallow.Store(true)
		}
		ok := pc.forward(pc.server, msg)
		if trap != nil {
			if trap.hold { // and nothing more is forwarded
				pc.hole()
			}
			trap.at = time.Now()
			close(trap.fired)
		}
		if !ok {
			return
		}
	}
}

// fromServer forwards the server's messages to the client, counting the
// ReadyForQuery that end statements.
func (pc *proxyConn) fromServer() {
	defer pc.p.wg.Done()
	defer func() {
		// A silent connection hides the server's close from its client too.
		if pc.holed.Load() || pc.released.Load() {
			pc.released.Store(true)
			_ = pc.server.Close()
			return
		}
		pc.close(false)
	}()
	r := bufio.NewReaderSize(pc.server, 64<<10)
	for {
		msg, err := readTyped(r)
		if err != nil {
			return
		}
		if msg[0] == 'Z' {
			pc.pending.Add(-1)
		}
		if pc.swallow.Load() {
			// A trapped COMMIT: its answer is dropped. Once the server
			// said it is ready again (committed or not, the client cannot
			// know), the client is reset, unless the trap holds it.
			if t := pc.trapped.Load(); msg[0] == 'Z' && t != nil && !t.hold {
				pc.close(true)
				return
			}
			continue
		}
		if !pc.forward(pc.client, msg) {
			return
		}
	}
}

// forward writes one message to w, after the latency and within the rate in
// force; a black-holed connection drops it. It reports whether the
// connection is still usable.
func (pc *proxyConn) forward(w *net.TCPConn, msg []byte) bool {
	if pc.holed.Load() {
		if w == pc.server {
			pc.askedAt.CompareAndSwap(0, time.Now().UnixNano())
		}
		return true
	}
	if d := time.Duration(pc.p.latency.Load()); d > 0 {
		time.Sleep(d)
	}
	if rate := pc.p.rate.Load(); rate > 0 {
		time.Sleep(time.Duration(int64(len(msg)) * int64(time.Second) / rate))
	}
	if pc.holed.Load() { // black-holed while it waited
		return true
	}
	_, err := w.Write(msg)
	return err == nil
}

// maxMessage bounds a message the proxy reads (PostgreSQL's own limit for
// most messages is 1 GB; the engine's are far smaller).
const maxMessage = 64 << 20

// readUntyped reads a message without a type byte: int32 length (itself
// included), then the body.
func readUntyped(r *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 8 || n > maxMessage {
		return nil, fmt.Errorf("startup message of %d bytes", n)
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readTyped reads a message with a type byte: the byte, int32 length
// (itself included, not the type), then the body.
func readTyped(r *bufio.Reader) ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > maxMessage {
		return nil, errors.New("bad message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}

// isCommit reports whether a query text (NUL-terminated) is a COMMIT
// (or its synonym END, or COMMIT's longer forms).
func isCommit(query []byte) bool {
	q, _, _ := bytes.Cut(query, []byte{0})
	s := strings.ToLower(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(q)), ";")))
	return s == "commit" || s == "end" || strings.HasPrefix(s, "commit ") || s == "commit transaction" || s == "commit work"
}

// Busy reports whether some connection is inside a statement.
func (p *Proxy) Busy() bool {
	for _, pc := range p.all() {
		if pc.pending.Load() > 0 && !pc.holed.Load() {
			return true
		}
	}
	return false
}

// SilencedSince counts the connections still open that went silent at or
// after t.
func (p *Proxy) SilencedSince(t time.Time) int {
	n := 0
	for _, pc := range p.all() {
		if pc.holed.Load() && pc.holedAt.Load() >= t.UnixNano() {
			n++
		}
	}
	return n
}

// Release closes the server side of every connection silent for at least d
// (its client is told nothing), so that the server's backends do not pile
// up.
func (p *Proxy) Release(d time.Duration) {
	for _, pc := range p.all() {
		if pc.holed.Load() && time.Since(time.Unix(0, pc.holedAt.Load())) >= d && !pc.released.Swap(true) {
			_ = pc.server.Close()
		}
	}
}

// HeldLonger lists the silent connections their client still holds: waiting,
// by the client's address, those it sent something on at least d ago and
// still waits on (a client that waits that long hangs on it); idle, how
// many went silent at least d ago and were not used since (say, idle in a
// pool, to be found out at their next use).
func (p *Proxy) HeldLonger(d time.Duration) (waiting []string, idle int) {
	for _, pc := range p.all() {
		if !pc.holed.Load() {
			continue
		}
		switch asked := pc.askedAt.Load(); {
		case asked != 0 && time.Since(time.Unix(0, asked)) >= d:
			waiting = append(waiting, pc.client.RemoteAddr().String())
		case asked == 0 && time.Since(time.Unix(0, pc.holedAt.Load())) >= d:
			idle++
		}
	}
	return waiting, idle
}
