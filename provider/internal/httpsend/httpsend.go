// Package httpsend makes the providers' HTTP calls and tells the two kinds of
// failure apart that oncepush must never confuse:
//
//   - the request never left (dial refused, TLS failed, the connection closed
//     before the request was completely written): the provider cannot have it,
//     so retrying is safe — provider.OutcomeRetry;
//   - no answer after the request was written (timeout, reset, a connection
//     lost mid-answer): the provider may have it — provider.OutcomeMaybeSent,
//     which the message's ambiguity policy resolves.
//
// "Never left" is proven, not inferred: the request's body is handed to
// net/http by a onceBody, which records whether its last byte was handed out.
// A provider cannot act on a request whose body it never received whole, and
// the last byte cannot reach the network before it was handed out. So a
// failure with part of the body still held is "not sent"; any other failure,
// whatever net/http reports about its writes, is "maybe sent".
package httpsend

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncepush/oncepush/internal/fold"
	"github.com/oncepush/oncepush/provider"
)

// MaxBody is the most bytes of a provider's answer read; providers answer in
// small JSON documents, and a 502 HTML page needs no more to be recognised.
const MaxBody = 64 << 10

// NewTransport returns an HTTP transport for one provider: HTTP/2 when the
// server offers it (connections reused, requests multiplexed), HTTP/1.1
// otherwise, with pings so a dead connection is noticed between sends.
// tlsConfig may be nil (system roots); dial, when set, replaces the dialer
// (Web Push checks addresses as it dials).
func NewTransport(tlsConfig *tls.Config, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if tlsConfig != nil {
		// net/http edits the config (NextProtos for HTTP/2); a config shared by
		// several providers must not be edited by all of them at once.
		tlsConfig = tlsConfig.Clone()
	}
	t := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dial,
		TLSClientConfig:     tlsConfig,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        100,
		MaxIdleConnsPerHost: 100,
		// For HTTP/2 this bounds the connections being dialled at once, not the
		// total: without it, a burst of sends that finds every stream busy dials
		// one connection per waiting request (measured: hundreds of TLS
		// handshakes per second at 1,000 sends in flight).
		MaxConnsPerHost:       4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
	return t
}

// NewClient returns the HTTP client a provider sends with over t: without
// a timeout of its own when timeout is 0 (the engine's context bounds each
// send), and following no redirect. A provider answers; it does not send us
// elsewhere. net/http would follow a 301, 302 or 303 with a GET to wherever
// Location says — a host nobody configured, an internal address included —
// so a 3xx is returned as the answer, which each provider classifies as a
// rejection.
func NewClient(t http.RoundTripper, timeout time.Duration) *http.Client {
	return &http.Client{
		Transport:     t,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// BaseURL checks a provider's configured base URL, which its API paths are
// appended to: https, a host, and no user, query or fragment. It returns raw
// without trailing slashes.
func BaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an https URL without query", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// Response is a provider's answer, read whole (up to MaxBody).
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// forms are the send's secrets in every form Do took out of the answer.
	forms []string
}

// MaxText bounds a text read out of an answer (Response.Text): the ledger
// keeps 1,000 bytes of a delivery's text, with the transport, the device
// and the status before it, and a log line needs no more.
const MaxText = 500

// Text makes a text read out of the answer — a member of its JSON document
// once decoded, a header's value — fit for a Result and the log, as Redact
// does: the send's secrets taken out once more (a JSON string can spell one
// with \u escapes that the raw body did not hold), anything shaped like a
// JWT, made Printable; and cut to MaxText bytes.
func (r *Response) Text(s string) string { return cut(redact(s, r.forms), MaxText) }

// Do sends req and reads the answer. On failure it returns the engine Result
// that says whether the request may have reached the provider; on success the
// Result is zero and the Response is set.
//
// The request is sent at most once. net/http sends a request again by itself
// when it can rewind the body (Request.GetBody, which http.NewRequest sets for
// a bytes.Reader): its HTTP/2 transport after a RST_STREAM with
// PROTOCOL_ERROR or REFUSED_STREAM or a GOAWAY that disowns the stream, its
// HTTP/1 transport for a request with an Idempotency-Key header whose reused
// connection closed, and http.Client on a 307 or 308. Each of those can come
// after the provider read the whole request, and the engine would count one
// submission for two. So Do sends the body as a onceBody, which cannot be
// rewound: every such path then gives up and returns its error (or the
// redirect itself) instead.
//
// A failure is "not sent" only when the body proves it (see onceBody). That
// covers every failure that comes before any byte is written — a refused
// dial, a failed TLS handshake or proxy CONNECT, a connection that became
// unusable before the stream opened, a context that ended while waiting for
// a stream: net/http reads the body only once it has a connection to write it
// to. No rule reads the error itself: a WroteRequest trace can arrive after
// the error (HTTP/2 returns from RoundTrip when the context ends without
// waiting for the goroutine writing the request), and an error string proves
// nothing.
//
// The answer is read with the send's secrets taken out (see Redact): the
// device token and whatever else the provider passes as secrets, and the
// credential of the request's Authorization header, wherever the body or a
// header repeats them. A failure's text is redacted the same way.
func Do(client *http.Client, req *http.Request, secrets ...string) (*Response, provider.Result) {
	if _, cred, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok {
		secrets = append(secrets, cred)
	}
	forms := secretForms(secrets)
	req, res := withOnceBody(req)
	if res.Outcome != 0 {
		return nil, res
	}
	sent := req.Body.(*onceBody)
	resp, err := client.Do(req)
	if err != nil {
		// Closed first: the transport's writer may still be running, and
		// from here on it can take nothing more, so what the body says now
		// is final.
		sent.Close()
		if !sent.handedOutAll() {
			return nil, provider.Result{Outcome: provider.OutcomeRetry, Unsent: true, Text: redact("request not sent: "+cause(err), forms)}
		}
		return nil, provider.Result{Outcome: provider.OutcomeMaybeSent, Text: redact("no answer after the request was written: "+cause(err), forms)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		// The status line arrived, so the provider had the request; the rest of
		// its answer was lost.
		return nil, provider.Result{Outcome: provider.OutcomeMaybeSent,
			Text: redact(fmt.Sprintf("answer %d cut off while reading: %v", resp.StatusCode, cause(err)), forms)}
	}
	header := resp.Header.Clone()
	for _, vs := range header {
		for i, v := range vs {
			vs[i] = redact(v, forms)
		}
	}
	return &Response{Status: resp.StatusCode, Header: header, Body: redactBytes(body, forms), forms: forms}, provider.Result{}
}

// withOnceBody returns a copy of req whose body is a onceBody holding req's
// body, and no GetBody.
func withOnceBody(req *http.Request) (*http.Request, provider.Result) {
	var b []byte
	if req.Body != nil && req.Body != http.NoBody {
		// Providers' bodies are at most a few kilobytes, already in memory.
		var err error
		b, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, provider.Result{Outcome: provider.OutcomeRetry, Unsent: true, Text: "request not sent: read the request body: " + err.Error()}
		}
	}
	out := req.Clone(req.Context())
	// Even an empty body is a onceBody: net/http resends a request with no
	// body (nil or http.NoBody) as freely as one it can rewind.
	ctx := req.Context()
	out.Body = &onceBody{rest: b, mayStart: func() error { return provider.CheckStart(ctx) }}
	out.GetBody = nil
	out.ContentLength = int64(len(b))
	return out, provider.Result{}
}

// errBodyClosed is what a onceBody answers once it is closed: net/http
// closes the body when it gives up a write, and a second pass over it would
// be a resend.
var errBodyClosed = errors.New("httpsend: request body already closed; it is sent at most once")

// onceBody is a request body that can be read through once: it cannot be
// rewound (no Seek, and the request has no GetBody), and once closed it hands
// out nothing more. Read and Close may be called from different goroutines
// of the transport.
//
// It records whether it handed out its last byte (for an empty body: its
// EOF). Until then the provider cannot have the whole request: with a
// Content-Length it waits for the last byte, without one for the end of the
// stream, which net/http sends only after EOF. And none of the providers'
// bodies (a JSON document; Web Push's single encrypted record, authenticated
// by a tag at its end) can be acted on from a prefix.
//
// Its first Read asks the engine whether the send may still start
// (provider.CheckStart): the transport reads the body only once it has a
// connection and is about to write, the last instant before the provider can
// have the request. A refusal is an error before any byte is handed out, so the
// send is "not sent".
type onceBody struct {
	mu       sync.Mutex
	rest     []byte // not handed out yet
	lastOut  bool   // the last byte (or an empty body's EOF) was handed out
	closed   bool
	mayStart func() error // checked once, at the first Read
	checked  bool
}

func (b *onceBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errBodyClosed
	}
	if !b.checked {
		b.checked = true
		if err := b.mayStart(); err != nil {
			b.closed = true
			return 0, err
		}
	}
	if len(b.rest) == 0 {
		b.lastOut = true
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	// Marked before Read returns, so before the transport can write it.
	b.lastOut = len(b.rest) == 0
	return n, nil
}

// handedOutAll reports whether the last byte of the body was handed out.
func (b *onceBody) handedOutAll() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastOut
}

func (b *onceBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// cause gives an error's text without the URL net/http wraps around it (the
// URL can hold a device token).
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout: " + err.Error()
	}
	return withoutRetryAdvice(err.Error())
}

// withoutRetryAdvice drops the text net/http's HTTP/2 transport wraps around
// an error it would have retried with a rewindable body ("… cannot retry err
// [X] after Request.Body was written; define Request.GetBody …"), keeping X:
// not rewinding is the point, and the advice is for Go programmers, not for
// whoever reads a delivery's history.
func withoutRetryAdvice(text string) string {
	const prefix, suffix = "http2: Transport: cannot retry err [", "] after Request.Body was written"
	inner, ok := strings.CutPrefix(text, prefix)
	if !ok {
		return text
	}
	if i := strings.LastIndex(inner, suffix); i >= 0 {
		return inner[:i]
	}
	return text
}

// RetryAfter parses a Retry-After header (delay-seconds or HTTP-date) relative
// to now; zero when absent or unparsable.
func RetryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if secs, err := strconv.Atoi(h); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Snippet returns the start of a body for an error text, printable (see
// Printable): a provider's 502 may be a whole HTML page.
func Snippet(b []byte) string {
	return cut(Printable(strings.Join(strings.Fields(string(b)), " ")), 200)
}

// cut shortens s to at most n bytes and a "…", at a character's start.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Redacted stands for a secret in a provider's words.
const Redacted = "[redacted]"

// minSecretLen is the shortest string treated as a secret: shorter ones
// (an empty credential, a two-letter word) would redact ordinary text, and
// no device token or credential is that short.
const minSecretLen = 8

// jwtShape matches a JSON Web Token (a provider JWT, VAPID's, an OAuth
// assertion): two base64url segments that each begin with `{"` encoded,
// and a signature.
var jwtShape = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)

// Redact makes a provider's words fit for the ledger (which the API shows)
// and the log, whatever the provider put in them:
//
//   - every secret — the send's device token, the credential it carried — is
//     replaced by Redacted, as written and as JSON or a URL would escape it;
//   - so is anything shaped like a JWT;
//   - the text is made Printable.
//
// A provider has no reason to repeat either, but a misconfigured proxy, a
// debugging echo or an error that quotes its request would: they are secrets
// of the device's owner and of the operator.
func Redact(text string, secrets ...string) string {
	return redact(text, secretForms(secrets))
}

// RedactResult redacts a Result's Text and ProviderID (see Redact): what a
// provider's Send returns, for the ledger.
func RedactResult(res provider.Result, secrets ...string) provider.Result {
	forms := secretForms(secrets)
	res.Text = redact(res.Text, forms)
	res.ProviderID = redact(res.ProviderID, forms)
	return res
}

// Printable replaces what would act on a reader rather than be read: line
// breaks and tabs (which would start a forged log line) become spaces;
// other control characters (ANSI escape sequences, C1 controls such as
// CSI), bidirectional formatting characters (which reorder what a reader
// sees) and invalid UTF-8 become U+FFFD.
func Printable(text string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029':
			return ' '
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			return utf8.RuneError
		}
		return r
	}, text)
}

func redact(text string, forms []string) string {
	for _, f := range forms {
		text = fold.Replace(text, f, Redacted)
	}
	return Printable(jwtShape.ReplaceAllString(text, Redacted))
}

// redactBytes takes the secrets out of an answer's body before anyone reads
// it. Replacing text inside a JSON string with Redacted leaves the document
// valid; what the body needs to be printable is done to the text read out of
// it.
func redactBytes(b []byte, forms []string) []byte {
	text := string(b)
	for _, f := range forms {
		text = fold.Replace(text, f, Redacted)
	}
	return jwtShape.ReplaceAll([]byte(text), []byte(Redacted))
}

// secretForms lists each secret as written and as it would be escaped in a
// URL or in JSON (with and without HTML escaping, with "/" escaped too), the
// longest first so that a longer form is not broken up by a shorter one.
func secretForms(secrets []string) []string {
	var forms []string
	add := func(f string) {
		if len(f) >= minSecretLen && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	for _, s := range secrets {
		add(s)
		add(url.PathEscape(s))
		add(url.QueryEscape(s))
		for _, html := range []bool{false, true} {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(html)
			if enc.Encode(s) == nil {
				j := strings.TrimSuffix(strings.TrimSpace(b.String()), `"`)[1:]
				add(j)
				add(strings.ReplaceAll(j, "/", `\/`))
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return forms
}
