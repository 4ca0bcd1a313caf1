//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/pushtest"
)

// fake is an 'oncepush fake-providers' process and a client of its control
// endpoints (pushtest.ControlPrefix): the only view the harness has of what
// reached the providers.
type fake struct {
	proc   *proc
	url    string         // https://127.0.0.1:port
	config map[string]any // the configuration it printed: its providers
	client *http.Client   // trusts the fake's certificate
}

// startFake starts fake providers writing their credentials into dir and
// reads the configuration they print.
func startFake(ctx context.Context, ps *procs, bin, dir string) (*fake, error) {
	p, err := ps.start("fake-providers", bin, []string{"fake-providers", "--listen", "127.0.0.1:0", "--dir", dir}, nil)
	if err != nil {
		return nil, err
	}
	raw, err := p.waitFor(ctx, p.Stdout, "its configuration", 30*time.Second, func(s string) (string, bool) {
		s = strings.TrimSpace(s)
		return s, s != "" && json.Valid([]byte(s))
	})
	if err != nil {
		return nil, err
	}
	f := &fake{proc: p}
	if err := json.Unmarshal([]byte(raw), &f.config); err != nil {
		return nil, fmt.Errorf("fake-providers printed %q: %w", raw, err)
	}
	var file struct {
		Providers struct {
			APNs struct{ Host, CAFile string }
		}
	}
	if err := json.Unmarshal([]byte(raw), &file); err != nil || file.Providers.APNs.Host == "" {
		return nil, fmt.Errorf("fake-providers printed a configuration without APNs: %s", raw)
	}
	f.url = file.Providers.APNs.Host
	pem, err := os.ReadFile(file.Providers.APNs.CAFile)
	if err != nil {
		return nil, fmt.Errorf("the fake's CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the fake's CA file %s holds no certificate", file.Providers.APNs.CAFile)
	}
	f.client = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true},
	}
	return f, nil
}

// control calls a control endpoint and decodes its JSON answer into out.
func (f *fake) control(ctx context.Context, method, path string, body, out any, want int) error {
	return fakepush.Call(ctx, f.client, f.url, method, path, body, out, want)
}

// received reads the fake's whole record, in pages.
func (f *fake) received(ctx context.Context) ([]Receipt, error) {
	var all []Receipt
	for after := int64(0); ; {
		page, err := f.receivedAfter(ctx, after)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return all, nil
		}
		all = append(all, page...)
		after = page[len(page)-1].Seq
	}
}

// receivedAfter reads one page of the record: the requests after seq.
func (f *fake) receivedAfter(ctx context.Context, seq int64) ([]Receipt, error) {
	var page []pushtest.ControlReceipt
	if err := f.control(ctx, http.MethodGet, fmt.Sprintf("/_fake/received?after=%d&limit=10000", seq), nil, &page, http.StatusOK); err != nil {
		return nil, err
	}
	out := make([]Receipt, 0, len(page))
	for _, c := range page {
		out = append(out, receiptOf(c))
	}
	return out, nil
}

// held lists the requests the fake is holding now (read whole, no answer yet).
func (f *fake) held(ctx context.Context) ([]Receipt, error) {
	var page []pushtest.ControlReceipt
	if err := f.control(ctx, http.MethodGet, "/_fake/received?fate=held&limit=10000", nil, &page, http.StatusOK); err != nil {
		return nil, err
	}
	out := make([]Receipt, 0, len(page))
	for _, c := range page {
		out = append(out, receiptOf(c))
	}
	return out, nil
}

func receiptOf(c pushtest.ControlReceipt) Receipt {
	return Receipt{
		Seq: c.Seq, Transport: string(c.Transport), Token: c.Token, CollapseID: c.CollapseID,
		NotificationID: c.NotificationID, APNsID: c.APNsID, Status: c.Status, Fate: string(c.Fate),
		ReceivedAt: c.ReceivedAt, At: c.At, RemoteAddr: c.RemoteAddr,
	}
}

func (f *fake) stats(ctx context.Context) (pushtest.FakeStats, error) {
	var st pushtest.FakeStats
	err := f.control(ctx, http.MethodGet, "/_fake/stats", nil, &st, http.StatusOK)
	return st, err
}

func (f *fake) program(ctx context.Context, transport, token string, answers ...pushtest.FakeAnswer) error {
	p := pushtest.ControlProgram{Transport: transportOf(transport), Token: token, Answers: []pushtest.ControlAnswer{}}
	for _, a := range answers {
		p.Answers = append(p.Answers, pushtest.ControlAnswerOf(a))
	}
	return f.control(ctx, http.MethodPost, "/_fake/program", p, nil, http.StatusNoContent)
}

func (f *fake) mix(ctx context.Context, transport string, seed uint64, choices []pushtest.FakeChoice) error {
	m := pushtest.ControlMix{Transport: transportOf(transport), Seed: seed, Choices: []pushtest.ControlChoice{}}
	for _, c := range choices {
		m.Choices = append(m.Choices, pushtest.ControlChoice{Weight: c.Weight, Answer: pushtest.ControlAnswerOf(c.Answer)})
	}
	return f.control(ctx, http.MethodPost, "/_fake/mix", m, nil, http.StatusNoContent)
}

func (f *fake) latency(ctx context.Context, transport string, d time.Duration) error {
	return f.control(ctx, http.MethodPost, "/_fake/latency",
		pushtest.ControlLatency{Transport: transportOf(transport), LatencyMs: d.Milliseconds()}, nil, http.StatusNoContent)
}

// subscription creates a Web Push subscription on the fake: the token to
// register, and the endpoint id the fake records its requests under.
func (f *fake) subscription(ctx context.Context) (pushtest.ControlSubscription, error) {
	var s pushtest.ControlSubscription
	err := f.control(ctx, http.MethodPost, "/_fake/webpush/subscriptions", nil, &s, http.StatusCreated)
	if err == nil && (s.Token == "" || s.ID == "") {
		err = errors.New("the fake answered an empty subscription")
	}
	return s, err
}

func transportOf(s string) oncepush.Transport { return oncepush.Transport(s) }
