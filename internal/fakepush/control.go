package fakepush

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// ControlPrefix is where a Server serves its control endpoints: HTTP
// access to what Program, Mix, SetLatency, Requests, ReceivedAfter, Held,
// Stats, Reset and NewWebPushSubscription do in Go, for tests that run the
// fake in another process (`oncepush fake-providers`) or are written in
// another language. Bodies are JSON; the shapes are the Control… types of
// this package.
//
//	GET  /_fake/requests[?transport=T]  → 200 [ControlRequest, …] answered or dropped, in arrival order
//	GET  /_fake/received[?after=SEQ&limit=N&fate=held]
//	                                    → 200 [ControlReceipt, …] every request received, in arrival order
//	GET  /_fake/stats                   → 200 Stats
//	POST /_fake/program                 ControlProgram → 204
//	POST /_fake/mix                     ControlMix → 204
//	POST /_fake/latency                 ControlLatency → 204
//	POST /_fake/reset                   → 204 (forgets requests, programs, mixes and latencies)
//	POST /_fake/webpush/subscriptions   → 201 ControlSubscription
//	POST /_fake/webpush/subscriptions?as=device
//	                                    → 201 {"transport": "webpush", "token": …}, a device to register
//
// A malformed request is answered 400 {"error": "…"} naming the field. The
// endpoints have no authentication: they are test tooling, and the fake is
// meant to listen on a loopback address only. They are served over the fake's
// own TLS certificate, like the providers (trust CertificatePEM).
const ControlPrefix = "/_fake/"

// ControlRequest is a Request as GET /_fake/requests returns it.
type ControlRequest struct {
	Transport      provider.Transport `json:"transport"`
	Token          string             `json:"token"`
	CollapseID     string             `json:"collapseId"`
	NotificationID string             `json:"notificationId"`
	APNsID         string             `json:"apnsId"`
	// Payload is the request body as text (for Web Push: the decrypted
	// plaintext); every provider's payload is JSON.
	Payload string      `json:"payload"`
	Header  http.Header `json:"header"`
	// Status is the HTTP status the fake answered (0: it dropped the connection).
	Status int       `json:"status"`
	At     time.Time `json:"at"`
	// Seq, Fate, ReceivedAt and RemoteAddr are as in Request.
	Seq        int64     `json:"seq"`
	Fate       Fate      `json:"fate"`
	ReceivedAt time.Time `json:"receivedAt"`
	RemoteAddr string    `json:"remoteAddr"`
}

// ControlReceipt is a Request as GET /_fake/received returns it: without
// payload and headers, so that a record of many thousands of requests can be
// read in pages (after = the last Seq read).
type ControlReceipt struct {
	Seq            int64              `json:"seq"`
	Transport      provider.Transport `json:"transport"`
	Token          string             `json:"token"`
	CollapseID     string             `json:"collapseId"`
	NotificationID string             `json:"notificationId"`
	APNsID         string             `json:"apnsId"`
	Status         int                `json:"status"`
	Fate           Fate               `json:"fate"`
	ReceivedAt     time.Time          `json:"receivedAt"`
	// At is when the request settled; absent while it is held.
	At         time.Time `json:"at,omitzero"`
	RemoteAddr string    `json:"remoteAddr"`
}

// ControlMix is the body of POST /_fake/mix: the weighted answers that the
// transport's requests without a program of their own draw from, as
// Server.Mix takes them. No choices clears the mix.
type ControlMix struct {
	Transport provider.Transport `json:"transport"`
	Seed      uint64             `json:"seed"`
	Choices   []ControlChoice    `json:"choices"`
}

// ControlChoice is a Choice in JSON.
type ControlChoice struct {
	Weight int           `json:"weight"`
	Answer ControlAnswer `json:"answer"`
}

// ControlProgram is the body of POST /_fake/program: the answers for a
// transport's token, as Server.Program takes them (token "" = every token
// of the transport without a program of its own; no answers clears the
// program). For Web Push the token is the subscription's endpoint id (the
// "id" of ControlSubscription).
type ControlProgram struct {
	Transport provider.Transport `json:"transport"`
	Token     string             `json:"token"`
	Answers   []ControlAnswer    `json:"answers"`
}

// ControlAnswer is a Answer in JSON.
type ControlAnswer struct {
	// Status is the HTTP status; 0 means the protocol's success answer.
	Status int `json:"status,omitempty"`
	// Body is the answer's body: a JSON string is sent as its text, a JSON
	// object as itself (so a provider's error document can be written inline).
	Body json.RawMessage `json:"body,omitempty"`
	// Header is added to the answer; a value is a string or an array of strings.
	Header map[string]ControlHeaderValues `json:"header,omitempty"`
	// LatencyMs delays the answer by that many milliseconds.
	LatencyMs int64 `json:"latencyMs,omitempty"`
	// Drop reads the request, then resets the stream without answering.
	Drop bool `json:"drop,omitempty"`
}

// ControlLatency is the body of POST /_fake/latency: every answer of the
// transport is delayed by LatencyMs (0 removes the delay).
type ControlLatency struct {
	Transport provider.Transport `json:"transport"`
	LatencyMs int64              `json:"latencyMs"`
}

// ControlSubscription is the answer of POST /_fake/webpush/subscriptions: a
// new subscription on the fake push service.
type ControlSubscription struct {
	// Token is the Web Push device token (the PushSubscription JSON) to
	// register with oncepush.
	Token string `json:"token"`
	// ID is the endpoint id: the Token of the fake's recorded requests to this
	// subscription, and the token to program answers for.
	ID string `json:"id"`
}

// ControlHeaderValues are one header's values: in JSON a string or an array
// of strings.
type ControlHeaderValues []string

// UnmarshalJSON implements json.Unmarshaler.
func (h *ControlHeaderValues) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*h = ControlHeaderValues{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("a header value is a string or an array of strings")
	}
	*h = many
	return nil
}

// ControlAnswerOf returns a in the JSON form POST /_fake/program takes, so a
// Go test can program a fake in another process with this package's answer
// helpers (FCMError, FCMDeviceRateExceeded, FCMProjectQuotaExceeded, APNsError,
// WebPushError, RuStoreError).
func ControlAnswerOf(a Answer) ControlAnswer {
	c := ControlAnswer{Status: a.Status, LatencyMs: a.Latency.Milliseconds(), Drop: a.Drop}
	if a.Body != "" {
		c.Body, _ = json.Marshal(a.Body) // a string always encodes
	}
	if len(a.Header) > 0 {
		c.Header = map[string]ControlHeaderValues{}
		for k, vs := range a.Header {
			c.Header[k] = slices.Clone(vs)
		}
	}
	return c
}

// answer converts c back; it names the field at fault.
func (c ControlAnswer) answer() (Answer, error) {
	a := Answer{Status: c.Status, Latency: time.Duration(c.LatencyMs) * time.Millisecond, Drop: c.Drop}
	if c.Status != 0 && (c.Status < 100 || c.Status > 599) {
		return a, fmt.Errorf("status: %d is not an HTTP status", c.Status)
	}
	if c.LatencyMs < 0 {
		return a, errors.New("latencyMs: must not be negative")
	}
	if body := bytes.TrimSpace(c.Body); len(body) > 0 && !bytes.Equal(body, []byte("null")) {
		switch body[0] {
		case '"':
			if err := json.Unmarshal(body, &a.Body); err != nil {
				return a, fmt.Errorf("body: %v", err)
			}
		case '{':
			var buf bytes.Buffer
			if err := json.Compact(&buf, body); err != nil {
				return a, fmt.Errorf("body: %v", err)
			}
			a.Body = buf.String()
		default:
			return a, errors.New("body: must be a string or a JSON object")
		}
	}
	if len(c.Header) > 0 {
		a.Header = http.Header{}
		for k, vs := range c.Header {
			for _, v := range vs {
				a.Header.Add(k, v)
			}
		}
	}
	return a, nil
}

// controlMaxBody bounds a control request's body.
const controlMaxBody = 1 << 20

// registerControl serves the control endpoints (ControlPrefix) on the fake's
// mux; a protocol serves its own (POST /_fake/webpush/subscriptions).
func (s *Server) registerControl() {
	s.mux.HandleFunc("GET /_fake/requests", s.controlRequests)
	s.mux.HandleFunc("GET /_fake/received", s.controlReceived)
	s.mux.HandleFunc("GET /_fake/stats", func(w http.ResponseWriter, r *http.Request) {
		controlJSON(w, http.StatusOK, s.Stats())
	})
	s.mux.HandleFunc("POST /_fake/program", s.controlProgram)
	s.mux.HandleFunc("POST /_fake/mix", s.controlMix)
	s.mux.HandleFunc("POST /_fake/latency", s.controlLatency)
	s.mux.HandleFunc("POST /_fake/reset", func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Server) controlRequests(w http.ResponseWriter, r *http.Request) {
	var reqs []Request
	if t := r.URL.Query().Get("transport"); t != "" {
		tr, err := s.controlTransport("transport", provider.Transport(t))
		if err != nil {
			controlError(w, http.StatusBadRequest, err.Error())
			return
		}
		reqs = s.RequestsFor(tr)
	} else {
		reqs = s.Requests()
	}
	out := make([]ControlRequest, 0, len(reqs))
	for _, q := range reqs {
		out = append(out, ControlRequest{
			Transport: q.Transport, Token: q.Token, CollapseID: q.CollapseID, NotificationID: q.NotificationID,
			APNsID: q.APNsID, Payload: string(q.Payload), Header: q.Header, Status: q.Status, At: q.At,
			Seq: q.Seq, Fate: q.Fate, ReceivedAt: q.ReceivedAt, RemoteAddr: q.RemoteAddr,
		})
	}
	controlJSON(w, http.StatusOK, out)
}

// Bounds of a page of GET /_fake/received.
const (
	controlReceivedLimitDefault = 1000
	controlReceivedLimitMax     = 10000
)

func (s *Server) controlReceived(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			controlError(w, http.StatusBadRequest, fmt.Sprintf("after: %q is not a sequence number", v))
			return
		}
		after = n
	}
	limit := controlReceivedLimitDefault
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > controlReceivedLimitMax {
			controlError(w, http.StatusBadRequest, fmt.Sprintf("limit: %q is not a number from 1 to %d", v, controlReceivedLimitMax))
			return
		}
		limit = n
	}
	var reqs []Request
	switch fate := Fate(q.Get("fate")); fate {
	case "":
		reqs = s.ReceivedAfter(after, limit)
	case FateHeld:
		for _, h := range s.Held() {
			if h.Seq > after && len(reqs) < limit {
				reqs = append(reqs, h)
			}
		}
	default:
		controlError(w, http.StatusBadRequest, fmt.Sprintf("fate: %q; only %q can be asked for", fate, FateHeld))
		return
	}
	out := make([]ControlReceipt, 0, len(reqs))
	for _, q := range reqs {
		out = append(out, ControlReceipt{
			Seq: q.Seq, Transport: q.Transport, Token: q.Token, CollapseID: q.CollapseID, NotificationID: q.NotificationID,
			APNsID: q.APNsID, Status: q.Status, Fate: q.Fate, ReceivedAt: q.ReceivedAt, At: q.At, RemoteAddr: q.RemoteAddr,
		})
	}
	controlJSON(w, http.StatusOK, out)
}

func (s *Server) controlMix(w http.ResponseWriter, r *http.Request) {
	var m ControlMix
	tr, ok := s.controlDecodeFor(w, r, &m)
	if !ok {
		return
	}
	choices := make([]Choice, 0, len(m.Choices))
	for i, c := range m.Choices {
		if c.Weight <= 0 {
			controlError(w, http.StatusBadRequest, fmt.Sprintf("choices[%d].weight: must be positive", i))
			return
		}
		a, err := c.Answer.answer()
		if err != nil {
			controlError(w, http.StatusBadRequest, fmt.Sprintf("choices[%d].answer.%v", i, err))
			return
		}
		choices = append(choices, Choice{Weight: c.Weight, Answer: a})
	}
	if err := s.Mix(tr, m.Seed, choices...); err != nil { // weights checked above
		controlError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) controlProgram(w http.ResponseWriter, r *http.Request) {
	var p ControlProgram
	tr, ok := s.controlDecodeFor(w, r, &p)
	if !ok {
		return
	}
	answers := make([]Answer, 0, len(p.Answers))
	for i, c := range p.Answers {
		a, err := c.answer()
		if err != nil {
			controlError(w, http.StatusBadRequest, fmt.Sprintf("answers[%d].%v", i, err))
			return
		}
		answers = append(answers, a)
	}
	s.Program(tr, p.Token, answers...)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) controlLatency(w http.ResponseWriter, r *http.Request) {
	var l ControlLatency
	tr, ok := s.controlDecodeFor(w, r, &l)
	if !ok {
		return
	}
	if l.LatencyMs < 0 {
		controlError(w, http.StatusBadRequest, "latencyMs: must not be negative")
		return
	}
	s.SetLatency(tr, time.Duration(l.LatencyMs)*time.Millisecond)
	w.WriteHeader(http.StatusNoContent)
}

// controlTransport checks that the fake speaks t.
func (s *Server) controlTransport(field string, t provider.Transport) (provider.Transport, error) {
	if _, ok := s.speaks[t]; !ok {
		return "", fmt.Errorf("%s: %q is not one of %s", field, t, s.list)
	}
	return t, nil
}

// controlBody is a control request's body that names a transport.
type controlBody interface{ transport() provider.Transport }

func (m *ControlMix) transport() provider.Transport     { return m.Transport }
func (p *ControlProgram) transport() provider.Transport { return p.Transport }
func (l *ControlLatency) transport() provider.Transport { return l.Transport }

// controlDecodeFor decodes a body that names a transport (controlDecode)
// and checks that the fake speaks it. Not ok: the client has been answered
// 400 naming what is wrong.
func (s *Server) controlDecodeFor(w http.ResponseWriter, r *http.Request, v controlBody) (tr provider.Transport, ok bool) {
	if err := controlDecode(w, r, v); err != nil {
		controlError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	tr, err := s.controlTransport("transport", v.transport())
	if err != nil {
		controlError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return tr, true
}

// controlDecode reads one JSON value strictly: unknown fields and trailing
// data are errors, so a misspelt field shows instead of being ignored.
func controlDecode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, controlMaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return fmt.Errorf("%s: must be a JSON %s", typ.Field, typ.Type)
		}
		return fmt.Errorf("body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("body: more than one JSON value")
	}
	return nil
}

func controlJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func controlError(w http.ResponseWriter, status int, msg string) {
	controlJSON(w, status, map[string]string{"error": msg})
}

// Call makes one request to a fake's control endpoint at base+path, for a
// harness driving the fake from another process: body (if not nil) as JSON,
// and the answer's JSON decoded into out (if not nil). want is the status
// expected; 0 takes any 2xx.
func Call(ctx context.Context, hc *http.Client, base, method, path string, body, out any, want int) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fake %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("fake %s %s: %w", method, path, err)
	}
	if want == 0 && resp.StatusCode/100 != 2 || want != 0 && resp.StatusCode != want {
		return fmt.Errorf("fake %s %s: %d: %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("fake %s %s: %w", method, path, err)
		}
	}
	return nil
}
