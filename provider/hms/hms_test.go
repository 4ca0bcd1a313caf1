package hms_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/hms"
	"github.com/oncepush/oncepush/provider/internal/providertest"
	"github.com/oncepush/oncepush/pushtest"
)

const project = "hms-project-1"

type bundle struct {
	fake  *pushtest.FakeServer
	clock *pushtest.Clock
	logs  *providertest.Logs
}

// setupOn makes a provider for the fake server; edit may change the
// configuration before New.
func setupOn(t *testing.T, fake *pushtest.FakeServer, edit func(*hms.Config)) (*hms.Provider, *bundle) {
	t.Helper()
	b := &bundle{fake: fake, clock: pushtest.NewClock(time.Now()), logs: &providertest.Logs{}}
	cfg := hms.Config{
		KeyJSON:   fake.HMSServiceAccount(project),
		BaseURL:   fake.URL + "/hms",
		TLSConfig: fake.TLSConfig(),
		Clock:     b.clock,
		Logger:    b.logs.Logger(),
	}
	return providertest.Build(t, hms.New, &cfg, edit), b
}

// submission is a typical notification for the device token, expiring two
// hours from the bundle's clock.
func (b *bundle) submission(token string) *provider.Submission {
	return &provider.Submission{
		NotificationID: "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
		CollapseID:     "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
		DeliveryID:     7,
		DeviceID:       31,
		Token:          provider.Token(token),
		Title:          "订单已发货",
		Body:           "Order A-7 shipped.",
		Data:           map[string]string{"oncepush_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0", "order": "A-7"},
		Link:           "/orders/A-7",
		ExpiresAt:      b.clock.Now().Add(2 * time.Hour),
	}
}

func requestsFor(fake *pushtest.FakeServer, token string) []pushtest.FakeRequest {
	return providertest.RequestsFor(fake, hms.Name, token)
}

// sameJSON fails t unless got and want are the same JSON document.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("the body is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("the wanted body is not JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body\n%s\nwant\n%s", got, want)
	}
}

// The exact request the fake received: its headers, and its JSON.
func TestSendWireRequest(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	tests := []struct {
		name     string
		edit     func(*hms.Config)
		change   func(*provider.Submission)
		pushType string
		body     string
	}{
		{
			name: "notification", edit: func(c *hms.Config) { c.Category = "EXPRESS" }, pushType: "0",
			body: `{"payload":{"notification":{"category":"EXPRESS","title":"订单已发货","body":"Order A-7 shipped.",
				"clickAction":{"actionType":0,"data":{"oncepush_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","order":"A-7","oncepush_link":"/orders/A-7"}}}},
				"pushOptions":{"ttl":7200},"target":{"token":["TOKEN"]}}`,
		},
		{
			name: "notification with an image, no category, no expiry",
			change: func(s *provider.Submission) {
				s.Image, s.Link, s.ExpiresAt = "https://img.example.com/a7.png", "", time.Time{}
			},
			pushType: "0",
			body: `{"payload":{"notification":{"title":"订单已发货","body":"Order A-7 shipped.","image":"https://img.example.com/a7.png",
				"clickAction":{"actionType":0,"data":{"oncepush_id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","order":"A-7"}}}},
				"target":{"token":["TOKEN"]}}`,
		},
		{
			name:     "data only is a background message",
			change:   func(s *provider.Submission) { s.Title, s.Body, s.Link = "", "", "" },
			pushType: "6",
			body: `{"payload":{"extraData":"{\"oncepush_id\":\"0f1e2d3c4b5a69788796a5b4c3d2e1f0\",\"order\":\"A-7\"}"},
				"pushOptions":{"ttl":7200},"target":{"token":["TOKEN"]}}`,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, b := setupOn(t, fake, tt.edit)
			token := fmt.Sprintf("MAMzLgWire%dToken", i)
			s := b.submission(token)
			if tt.change != nil {
				tt.change(s)
			}
			before := maps.Clone(s.Data)
			res := p.Send(context.Background(), s)
			if res.Outcome != provider.OutcomeAccepted || !strings.HasPrefix(res.ProviderID, "fake-request-") {
				t.Fatalf("Send: %v %q id %q, want accepted with Push Kit's requestId", res.Outcome, res.Text, res.ProviderID)
			}
			if !maps.Equal(s.Data, before) {
				t.Errorf("Send modified Submission.Data: %v, was %v", s.Data, before)
			}
			reqs := requestsFor(fake, token)
			if len(reqs) != 1 {
				t.Fatalf("fake recorded %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.NotificationID != s.NotificationID {
				t.Errorf("recorded notification id %q, want %q", r.NotificationID, s.NotificationID)
			}
			if got := r.Header.Get("push-type"); got != tt.pushType {
				t.Errorf("push-type %q, want %q", got, tt.pushType)
			}
			if got := r.Header.Get("Content-Type"); got != "application/json; charset=UTF-8" {
				t.Errorf("Content-Type %q", got)
			}
			sameJSON(t, r.Payload, strings.ReplaceAll(tt.body, "TOKEN", token))
		})
	}
}

// Every documented result code, and the HTTP answers without one, mapped to
// the engine's outcomes.
func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	partial := func(tokens ...string) string {
		b, _ := json.Marshal(map[string]any{"success": 0, "failure": len(tokens), "illegal_tokens": tokens})
		return string(b)
	}
	const self = "SELF" // replaced by the device's token
	tests := []struct {
		name          string
		answer        pushtest.FakeAnswer
		want          provider.Outcome
		wantText      string
		wantRetry     time.Duration
		wantThrottle  bool
		wantErrorLogs bool
	}{
		{name: "80300007 all tokens invalid: dead token",
			answer: pushtest.HMSError(400, "80300007", "All the tokens are invalid."),
			want:   provider.OutcomeInvalidToken, wantText: "400 80300007: All the tokens are invalid."},
		{name: "80300007 for a malformed token",
			answer: pushtest.HMSError(400, "80300007", "tokenFormatError"),
			want:   provider.OutcomeInvalidToken, wantText: "400 80300007: tokenFormatError"},
		{name: "80300007 for another project's token",
			answer: pushtest.HMSError(400, "80300007", "noRight"),
			want:   provider.OutcomeInvalidToken, wantText: "400 80300007: noRight"},
		{name: "80300007 for a push-type the app has no right to keeps the token",
			answer: pushtest.HMSError(400, "80300007", "noPushTypeRight"),
			want:   provider.OutcomeRejected, wantText: "400 80300007: noPushTypeRight"},
		{name: "80300007 for a penalised app keeps the token",
			answer: pushtest.HMSError(400, "80300007", "disableSendHuaweiMsgBecauseOfPenalty"),
			want:   provider.OutcomeRejected, wantText: "400 80300007: disableSendHuaweiMsgBecauseOfPenalty"},
		{name: "80100000 partial success naming this token",
			answer: pushtest.HMSError(200, "80100000", partial(self)),
			want:   provider.OutcomeInvalidToken, wantText: "200 80100000: " + partial("[redacted]")},
		{name: "80100000 partial success naming another token",
			answer: pushtest.HMSError(200, "80100000", partial("someone-else")),
			want:   provider.OutcomeAccepted},
		{name: "80100000 partial success for a reason about the app",
			answer: pushtest.HMSError(200, "80100000", "Check Parameter Partial Success. countryNotSupport"),
			want:   provider.OutcomeRejected, wantText: "200 80100000: Check Parameter Partial Success. countryNotSupport"},
		{name: "80100001 parameter error",
			answer: pushtest.HMSError(400, "80100001", "Check Parameter Error."),
			want:   provider.OutcomeRejected, wantText: "400 80100001: Check Parameter Error."},
		{name: "80100003 illegal payload",
			answer: pushtest.HMSError(400, "80100003", "Illegal payload, notification.title is required."),
			want:   provider.OutcomeRejected, wantText: "400 80100003: Illegal payload, notification.title is required."},
		{name: "80100004 illegal expire time",
			answer: pushtest.HMSError(400, "80100004", "Illegal expire time."),
			want:   provider.OutcomeRejected, wantText: "400 80100004: Illegal expire time."},
		{name: "80100022 image not verified",
			answer: pushtest.HMSError(400, "80100022", "Anti-Spam: image not verify."),
			want:   provider.OutcomeRejected, wantText: "400 80100022: Anti-Spam: image not verify."},
		{name: "80300002 no permission is rejected and alerted",
			answer: pushtest.HMSError(403, "80300002", "No permission to send message to these tmIDs."),
			want:   provider.OutcomeRejected, wantText: "403 80300002: No permission to send message to these tmIDs.", wantErrorLogs: true},
		{name: "80300008 message too long",
			answer: pushtest.HMSError(400, "80300008", "Push message size is too long."),
			want:   provider.OutcomeRejected, wantText: "400 80300008: Push message size is too long."},
		{name: "80300010 token count",
			answer: pushtest.HMSError(400, "80300010", "token count should within 1 and 1000"),
			want:   provider.OutcomeRejected, wantText: "400 80300010: token count should within 1 and 1000"},
		{name: "80300029 test-message rate pauses the transport",
			answer: pushtest.HMSError(400, "80300029", "When send test message, the api request exceed limit."),
			want:   provider.OutcomeRetry, wantText: "400 80300029: When send test message, the api request exceed limit.",
			wantRetry: time.Minute, wantThrottle: true},
		{name: "80300030 test token count",
			answer: pushtest.HMSError(400, "80300030", "When send test message, token count exceed limit."),
			want:   provider.OutcomeRejected, wantText: "400 80300030: When send test message, token count exceed limit."},
		{name: "80300036 JWT validity over a day is rejected and alerted",
			answer: pushtest.HMSError(400, "80300036", "JWT expire period over threshold."),
			want:   provider.OutcomeRejected, wantText: "400 80300036: JWT expire period over threshold.", wantErrorLogs: true},
		{name: "80300037 penalty is rejected and alerted",
			answer: pushtest.HMSError(403, "80300037", "Disable send huawei msg because of penalty."),
			want:   provider.OutcomeRejected, wantText: "403 80300037: Disable send huawei msg because of penalty.", wantErrorLogs: true},
		{name: "81000001 inner error is retried with Retry-After",
			answer: providertest.WithRetryAfter(pushtest.HMSError(500, "81000001", "Inner Error."), "15"),
			want:   provider.OutcomeRetry, wantText: "500 81000001: Inner Error.", wantRetry: 15 * time.Second},
		{name: "503 flow control pauses the transport for Retry-After",
			answer: providertest.WithRetryAfter(pushtest.FakeAnswer{Status: 503, Body: "Service Unavailable"}, "30"),
			want:   provider.OutcomeRetry, wantText: "503 Service Unavailable: Service Unavailable", wantRetry: 30 * time.Second, wantThrottle: true},
		{name: "503 flow control without Retry-After pauses a second",
			answer: pushtest.FakeAnswer{Status: 503},
			want:   provider.OutcomeRetry, wantText: "503 Service Unavailable", wantRetry: hms.FlowControlRetryDefault, wantThrottle: true},
		{name: "502 html page is retried",
			answer: pushtest.FakeAnswer{Status: 502, Body: "<html><body>Bad Gateway</body></html>"},
			want:   provider.OutcomeRetry, wantText: "502 Bad Gateway: <html><body>Bad Gateway</body></html>"},
		{name: "429 backs off the device",
			answer: providertest.WithRetryAfter(pushtest.FakeAnswer{Status: 429, Body: "slow down"}, "7"),
			want:   provider.OutcomeRetry, wantText: "429 Too Many Requests: slow down", wantRetry: 7 * time.Second},
		{name: "404 without a code keeps the token",
			answer: pushtest.FakeAnswer{Status: 404, Body: "404 page not found"},
			want:   provider.OutcomeRejected, wantText: "404 Not Found: 404 page not found"},
		{name: "an unknown code is rejected",
			answer: pushtest.HMSError(400, "80999999", "Something new."),
			want:   provider.OutcomeRejected, wantText: "400 80999999: Something new."},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, b := setupOn(t, fake, nil)
			token := fmt.Sprintf("MAMzLgError%dToken", i)
			tt.answer.Body = strings.ReplaceAll(tt.answer.Body, self, token)
			fake.Program(hms.Name, token, tt.answer)
			res := p.Send(context.Background(), b.submission(token))
			if tt.want == provider.OutcomeAccepted {
				if res.Outcome != provider.OutcomeAccepted {
					t.Errorf("Send: %v %q, want accepted", res.Outcome, res.Text)
				}
			} else {
				providertest.CheckResult(t, res, provider.Result{Outcome: tt.want, Text: tt.wantText, RetryAfter: tt.wantRetry, Throttle: tt.wantThrottle})
			}
			if n := len(requestsFor(fake, token)); n != 1 {
				t.Errorf("fake recorded %d requests, want 1", n)
			}
			if got := b.logs.Errors() > 0; got != tt.wantErrorLogs {
				t.Errorf("error logged: %v, want %v\n%s", got, tt.wantErrorLogs, b.logs.Text())
			}
		})
	}
}

// A JWT Push Kit refuses (80200001, 80200005) is replaced, and the message
// sent once more; a second refusal is rejected and alerted.
func TestRefusedJWTIsReplacedOnce(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"80200001", "80200005"} {
		t.Run("once "+code, func(t *testing.T) {
			t.Parallel()
			fake := pushtest.NewFakeServer(t)
			p, b := setupOn(t, fake, nil)
			fake.Program(hms.Name, "MAMzLgRefusedOnce", pushtest.HMSError(401, code, "refused"), pushtest.FakeAnswer{})
			if res := p.Send(context.Background(), b.submission("MAMzLgRefusedOnce")); res.Outcome != provider.OutcomeAccepted {
				t.Fatalf("Send: %v %q, want accepted by the second request", res.Outcome, res.Text)
			}
			if n := len(requestsFor(fake, "MAMzLgRefusedOnce")); n != 2 {
				t.Errorf("fake recorded %d requests, want 2", n)
			}
		})
		t.Run("twice "+code, func(t *testing.T) {
			t.Parallel()
			fake := pushtest.NewFakeServer(t)
			p, b := setupOn(t, fake, nil)
			refused := pushtest.HMSError(401, code, "refused")
			fake.Program(hms.Name, "MAMzLgRefusedTwice", refused, refused)
			res := p.Send(context.Background(), b.submission("MAMzLgRefusedTwice"))
			providertest.CheckResult(t, res, provider.Result{Outcome: provider.OutcomeRejected, Text: "401 " + code + ": refused"})
			if n := len(requestsFor(fake, "MAMzLgRefusedTwice")); n != 2 {
				t.Errorf("fake recorded %d requests, want 2", n)
			}
			if b.logs.Errors() == 0 {
				t.Error("a refused JWT was not logged as an error")
			}
		})
	}
}

// The fake verifies the JWT (PS256 signature, kid, iss, aud, iat, exp) and
// its project: another project's key file is refused and not recorded.
func TestAnotherProjectsKeyIsRefused(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	p, b := setupOn(t, fake, func(c *hms.Config) {
		var m map[string]string
		_ = json.Unmarshal(fake.HMSServiceAccount("other-project"), &m)
		m["project_id"] = project // the URL says project, the JWT's account is other-project's
		c.KeyJSON, _ = json.Marshal(m)
	})
	res := p.Send(context.Background(), b.submission("MAMzLgOtherProject"))
	if res.Outcome != provider.OutcomeRejected || !strings.HasPrefix(res.Text, "401 80200001") {
		t.Errorf("Send: %v %q, want rejected with Push Kit's 80200001", res.Outcome, res.Text)
	}
	if fake.Count() != 0 || fake.HMSRefusedJWTs() != 2 {
		t.Errorf("the fake recorded %d requests and refused %d JWTs, want none and 2 (the first and its replacement)", fake.Count(), fake.HMSRefusedJWTs())
	}
	if b.logs.Errors() == 0 {
		t.Error("a refused key was not logged as an error")
	}
}

// The JWT is renewed before it expires on the provider's clock: hours of
// sends, the clock moved between them, are all accepted by a fake judging
// the JWT on the same clock.
func TestJWTRenewedOnTheProvidersClock(t *testing.T) {
	t.Parallel()
	clock := pushtest.NewClock(time.Now())
	fake := pushtest.NewFakeServerWith(t, &pushtest.FakeOptions{Clock: clock})
	p, b := setupOn(t, fake, func(c *hms.Config) { c.Clock = clock })
	for i := range 6 {
		s := b.submission(fmt.Sprintf("MAMzLgClock%dToken", i))
		if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeAccepted {
			t.Fatalf("send %d at +%d min: %v %q", i, i*30, res.Outcome, res.Text)
		}
		clock.Advance(30 * time.Minute)
	}
	if fake.Count() != 6 || fake.HMSRefusedJWTs() != 0 {
		t.Errorf("fake recorded %d requests and refused %d JWTs, want 6 and none", fake.Count(), fake.HMSRefusedJWTs())
	}
}

func TestOversizedMessageIsRejectedWithoutRequest(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	p, b := setupOn(t, fake, nil)
	for name, change := range map[string]func(*provider.Submission){
		"data": func(s *provider.Submission) { s.Data = map[string]string{"blob": strings.Repeat("x", 4100)} },
		"body": func(s *provider.Submission) { s.Body = strings.Repeat("界", 1400) },
		"background": func(s *provider.Submission) {
			s.Title, s.Body, s.Data = "", "", map[string]string{"blob": strings.Repeat("x", 4100)}
		},
	} {
		s := b.submission("MAMzLgBigToken")
		change(s)
		if res := p.Send(context.Background(), s); res.Outcome != provider.OutcomeRejected || !strings.Contains(res.Text, "too large") {
			t.Errorf("%s too large: %v %q, want rejected with a reason", name, res.Outcome, res.Text)
		}
	}
	if fake.Count() != 0 {
		t.Errorf("fake recorded %d requests, want 0", fake.Count())
	}
}

func TestTransportFailures(t *testing.T) {
	t.Parallel()
	t.Run("reset after the request was read is maybe-sent", func(t *testing.T) {
		t.Parallel()
		fake := pushtest.NewFakeServer(t)
		p, b := setupOn(t, fake, nil)
		fake.Program(hms.Name, "MAMzLgDropToken", pushtest.FakeAnswer{Drop: true})
		if res := p.Send(context.Background(), b.submission("MAMzLgDropToken")); res.Outcome != provider.OutcomeMaybeSent {
			t.Errorf("Send: %v %q, want maybe-sent", res.Outcome, res.Text)
		}
	})
	t.Run("closed port is retry, unsent", func(t *testing.T) {
		t.Parallel()
		fake := pushtest.NewFakeServer(t)
		p, b := setupOn(t, fake, func(c *hms.Config) { c.BaseURL = "https://" + providertest.ClosedAddr(t) + "/hms" })
		if res := p.Send(context.Background(), b.submission("MAMzLgClosedToken")); res.Outcome != provider.OutcomeRetry || !res.Unsent {
			t.Errorf("Send: %+v, want retry, unsent", res)
		}
	})
}

func TestNewRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	good := fake.HMSServiceAccount("p")
	var acct map[string]string
	if err := json.Unmarshal(good, &acct); err != nil {
		t.Fatal(err)
	}
	secret := acct["private_key"][40:80]
	without := func(member string) []byte {
		m := maps.Clone(acct)
		delete(m, member)
		b, _ := json.Marshal(m)
		return b
	}
	with := func(member, value string) []byte {
		m := maps.Clone(acct)
		m[member] = value
		b, _ := json.Marshal(m)
		return b
	}
	for name, tt := range map[string]struct {
		cfg    hms.Config
		naming string
	}{
		"no key":              {hms.Config{}, "KeyJSON is empty"},
		"not JSON":            {hms.Config{KeyJSON: []byte("-----BEGIN PRIVATE KEY-----" + secret)}, "KeyJSON is not JSON"},
		"no sub_account":      {hms.Config{KeyJSON: without("sub_account")}, "lacks sub_account"},
		"no key_id":           {hms.Config{KeyJSON: without("key_id")}, "lacks key_id"},
		"not a key":           {hms.Config{KeyJSON: with("private_key", "MII"+secret)}, "private_key"},
		"http token_uri":      {hms.Config{KeyJSON: with("token_uri", "http://oauth-login.example/token")}, "token_uri"},
		"plain-http base":     {hms.Config{KeyJSON: good, BaseURL: "http://push-api.example"}, "BaseURL"},
		"lower-case category": {hms.Config{KeyJSON: good, Category: "marketing"}, "Category"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := hms.New(tt.cfg)
			providertest.CheckConfigError(t, err, tt.naming, secret)
		})
	}
}

// The key file never reaches a log line or a printed configuration.
func TestKeyIsRedacted(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	key := fake.HMSServiceAccount("p")
	var acct map[string]string
	_ = json.Unmarshal(key, &acct)
	canary := acct["private_key"][40:80]
	cfg := hms.Config{KeyJSON: key, Category: "IM"}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("configured", "config", cfg)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("configured", "config", cfg)
	if out := buf.String(); strings.Contains(out, canary) || !strings.Contains(out, "category") {
		t.Errorf("the configuration logs as %s", out)
	}
}

func TestSpecTokens(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"MAMzLg1234567890abcdefABCDEF+/=", string(hms.Spec.ExampleToken(3))} {
		if c, k, err := hms.Spec.NormalizeToken(ok); err != nil || c != ok || k != ok {
			t.Errorf("NormalizeToken(%q) = %q, %q, %v", ok, c, k, err)
		}
	}
	for _, bad := range []string{"short", "has space in it", strings.Repeat("a", 513), "émoji-token-1"} {
		_, _, err := hms.Spec.NormalizeToken(bad)
		var ve *provider.ValidationError
		if !errorsAs(err, &ve) || ve.Field != "token" {
			t.Errorf("NormalizeToken(%q): %v, want a ValidationError naming token", bad, err)
		}
	}
	if hms.Spec.Name != "hms" || hms.Spec.MaxPayload != 4096 {
		t.Errorf("Spec %+v", hms.Spec)
	}
}

func errorsAs(err error, target **provider.ValidationError) bool {
	ve, ok := err.(*provider.ValidationError)
	if ok {
		*target = ve
	}
	return ok
}
