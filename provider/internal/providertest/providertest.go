// Package providertest holds what the provider packages' tests share: a log
// recorder, the fake server's requests for one device, the checks of an
// answer's Result and of a refused configuration's error, the part of an FCM
// HTTP v1 message RuStore copies, and an address nothing listens on. Only tests import it;
// no provider does.
package providertest

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/pushtest"
)

// Logs is a slog.Handler that keeps every record as a line of text, for
// tests that check an alert was logged or a secret was not. Attributes added
// with WithAttrs or WithGroup are not kept.
type Logs struct {
	mu   sync.Mutex
	recs []string
	errs int
}

// Logger returns a logger that writes to l.
func (l *Logs) Logger() *slog.Logger { return slog.New(l) }

// Enabled implements slog.Handler: every level is kept.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs implements slog.Handler.
func (l *Logs) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup implements slog.Handler.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Handle implements slog.Handler: the record as "LEVEL message key=value …".
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		sb.WriteString(" " + a.Key + "=" + a.Value.Resolve().String())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, sb.String())
	if r.Level >= slog.LevelError {
		l.errs++
	}
	return nil
}

// Errors counts the records at level Error or above.
func (l *Logs) Errors() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errs
}

// Text is every record, one a line.
func (l *Logs) Text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.recs, "\n")
}

// RequestsFor is what the fake recorded for one device token of transport tr.
func RequestsFor(fake *pushtest.FakeServer, tr provider.Transport, token string) []pushtest.FakeRequest {
	var out []pushtest.FakeRequest
	for _, r := range fake.RequestsFor(tr) {
		if r.Token == token {
			out = append(out, r)
		}
	}
	return out
}

// WithRetryAfter is the answer a with a Retry-After header of v.
func WithRetryAfter(a pushtest.FakeAnswer, v string) pushtest.FakeAnswer {
	a.Header = http.Header{"Retry-After": {v}}
	return a
}

// CheckResult fails t unless got has want's outcome and text, and its
// retry delay and throttle.
func CheckResult(t testing.TB, got, want provider.Result) {
	t.Helper()
	if got.Outcome != want.Outcome || got.Text != want.Text {
		t.Errorf("Send: %v %q\nwant       %v %q", got.Outcome, got.Text, want.Outcome, want.Text)
	}
	if got.RetryAfter != want.RetryAfter || got.Throttle != want.Throttle {
		t.Errorf("RetryAfter %s, Throttle %v; want %s, %v", got.RetryAfter, got.Throttle, want.RetryAfter, want.Throttle)
	}
}

// SendAll makes n sends at once, send(i) the i-th, and returns their results
// in order. They start together, so they race for what the provider shares
// (an access token, a provider JWT, a connection).
func SendAll(n int, send func(i int) provider.Result) []provider.Result {
	results := make([]provider.Result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = send(i)
		})
	}
	close(start)
	wg.Wait()
	return results
}

// AllAccepted fails t unless every result is accepted.
func AllAccepted(t testing.TB, results []provider.Result) {
	t.Helper()
	for i, res := range results {
		if res.Outcome != provider.OutcomeAccepted {
			t.Fatalf("send %d: %v %q, want accepted", i, res.Outcome, res.Text)
		}
	}
}

// CheckConfigError fails t unless err, what New answered for a bad
// configuration, refuses it, names what is wrong (naming: a field or the
// problem) and does not quote secret, the credential's material.
func CheckConfigError(t testing.TB, err error, naming, secret string) {
	t.Helper()
	if err == nil {
		t.Fatal("New accepted the configuration")
	}
	// The error is what the operator reads to fix the configuration.
	if !strings.Contains(err.Error(), naming) {
		t.Errorf("error %q does not name %q", err, naming)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error quotes the credential (%q): %q", secret, err)
	}
}

// V1Message is what an FCM HTTP v1 message and RuStore's copy of it carry
// alike, as the tests decode a recorded body: the device token, the data and
// the notification. Each provider's test embeds it beside the platform
// blocks, which differ.
type V1Message struct {
	Token        string            `json:"token"`
	Data         map[string]string `json:"data"`
	Notification *struct {
		Title string `json:"title"`
		Body  string `json:"body"`
		Image string `json:"image"`
	} `json:"notification"`
}

// ClosedAddr returns a local address ("127.0.0.1:port") nothing listens on:
// a dial to it is refused, so a request to it is never sent.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Build applies the edits to *cfg, then makes the provider from it with
// newProvider (the package's New), failing t if it refuses the
// configuration. A nil edit is skipped.
func Build[C, P any](t testing.TB, newProvider func(C) (P, error), cfg *C, edits ...func(*C)) P {
	t.Helper()
	for _, edit := range edits {
		if edit != nil {
			edit(cfg)
		}
	}
	p, err := newProvider(*cfg)
	if err != nil {
		t.Fatalf("New refused the test configuration: %v", err)
	}
	return p
}
