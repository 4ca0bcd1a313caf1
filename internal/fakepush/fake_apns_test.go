package fakepush

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/provider"
)

const apnsToken = "8f1d0e6a1c3b5d7f9e2a4c6e8b0d2f4a6c8e0a2b4d6f8a0c2e4a6b8d0f2a4c6e"

// apnsJWT builds a provider token by hand, so the fake is checked against
// the protocol rather than against oncepush's own client.
type apnsJWT struct {
	key    *ecdsa.PrivateKey
	alg    string
	kid    string
	iss    string
	iat    time.Time
	noIat  bool
	badSig bool
}

func (j apnsJWT) String() string {
	claims := map[string]any{"iss": j.iss}
	if !j.noIat {
		claims["iat"] = j.iat.Unix()
	}
	input, sig := signJWS(j.key, map[string]string{"alg": j.alg, "kid": j.kid}, claims)
	if j.badSig {
		sig[10] ^= 0xff
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// validJWT is a token the fake must accept.
func validJWT(t *testing.T, s *Server) apnsJWT {
	t.Helper()
	p8, keyID, teamID := s.APNsKey()
	k := parsePKCS8PEM(t, "APNsKey", p8)
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Fatalf("APNsKey is %T, want an ECDSA P-256 key", k)
	}
	if len(keyID) != 10 || len(teamID) != 10 {
		t.Fatalf("key id %q, team id %q: want Apple's 10-character ids", keyID, teamID)
	}
	return apnsJWT{key: key, alg: "ES256", kid: keyID, iss: teamID, iat: time.Now()}
}

func h2Client(s *Server) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: s.TLSConfig(), ForceAttemptHTTP2: true}}
}

func h1Client(s *Server) *http.Client {
	tr := &http.Transport{TLSClientConfig: s.TLSConfig(), Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP1(true)
	return &http.Client{Transport: tr}
}

type apnsCall struct {
	client  *http.Client
	token   string
	auth    string
	header  map[string]string
	body    []byte
	noTopic bool
}

type apnsAnswer struct {
	status int
	reason string
	header http.Header
	body   []byte
}

func post(t *testing.T, s *Server, c apnsCall) apnsAnswer {
	t.Helper()
	if c.token == "" {
		c.token = apnsToken
	}
	if c.body == nil {
		c.body = []byte(`{"aps":{"alert":{"title":"Hi"}},"oncepush_id":"0123456789abcdef0123456789abcdef"}`)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/3/device/"+c.token, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.auth != "" {
		req.Header.Set("authorization", c.auth)
	}
	if !c.noTopic {
		req.Header.Set("apns-topic", "com.example.app")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e struct{ Reason string }
	_ = json.Unmarshal(body, &e)
	return apnsAnswer{status: resp.StatusCode, reason: e.Reason, header: resp.Header, body: body}
}

func TestFakeAPNsAccepts(t *testing.T) {
	t.Parallel()
	s := StartForTest(t, nil)
	jwt := validJWT(t, s).String()
	const id = "4e3f2a1b-0c9d-5e8f-a7b6-c5d4e3f2a1b0"
	ans := post(t, s, apnsCall{client: h2Client(s), auth: "bearer " + jwt, header: map[string]string{
		"apns-id": id, "apns-collapse-id": "c0ffee", "apns-push-type": "alert", "apns-priority": "10", "apns-expiration": "1893456000",
	}})
	if ans.status != 200 || len(ans.body) != 0 || ans.header.Get("apns-id") != id {
		t.Fatalf("answer %d %q apns-id %q, want 200, empty body, apns-id echoed", ans.status, ans.body, ans.header.Get("apns-id"))
	}
	reqs := s.RequestsFor(provider.TransportAPNs)
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Token != apnsToken || r.APNsID != id || r.CollapseID != "c0ffee" ||
		r.NotificationID != "0123456789abcdef0123456789abcdef" || r.Status != 200 || r.Header.Get("apns-topic") != "com.example.app" {
		t.Fatalf("recorded %+v", r)
	}
	if r.Header.Get("Authorization") != "" {
		t.Fatal("the recorded request keeps the authorization header")
	}

	// Without apns-id the fake makes one up, answers and records it; the
	// same JWT again is not a new token.
	ans = post(t, s, apnsCall{client: h2Client(s), auth: "bearer " + jwt})
	made := ans.header.Get("apns-id")
	if ans.status != 200 || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(made) {
		t.Fatalf("answer %d apns-id %q, want 200 and a lowercase UUID", ans.status, made)
	}
	if got := s.RequestsFor(provider.TransportAPNs)[1].APNsID; got != made {
		t.Fatalf("recorded apns-id %q, answered %q", got, made)
	}
	if n := s.APNsTokensSeen(); n != 1 {
		t.Fatalf("APNsTokensSeen = %d after one JWT used twice, want 1", n)
	}
	post(t, s, apnsCall{client: h2Client(s), auth: "bearer " + validJWT(t, s).String()})
	if n := s.APNsTokensSeen(); n != 2 {
		t.Fatalf("APNsTokensSeen = %d after a second JWT, want 2", n)
	}
}

func TestFakeAPNsRefusesWithoutRecording(t *testing.T) {
	t.Parallel()
	s := StartForTest(t, nil)
	good := validJWT(t, s)
	otherKey := newES256Key(t)
	with := func(edit func(*apnsJWT)) string {
		j := good
		edit(&j)
		return "bearer " + j.String()
	}
	tests := []struct {
		name   string
		call   apnsCall
		status int
		reason string
	}{
		{"HTTP/1.1", apnsCall{client: h1Client(s), auth: "bearer " + good.String()}, 400, "HTTP2Required (the fake, like APNs, speaks only HTTP/2)"},
		{"no authorization", apnsCall{}, 403, "MissingProviderToken"},
		{"basic scheme", apnsCall{auth: "basic " + good.String()}, 403, "InvalidProviderToken"},
		{"not a JWT", apnsCall{auth: "bearer abc.def"}, 403, "InvalidProviderToken"},
		{"another key", apnsCall{auth: with(func(j *apnsJWT) { j.key = otherKey })}, 403, "InvalidProviderToken"},
		{"bad signature", apnsCall{auth: with(func(j *apnsJWT) { j.badSig = true })}, 403, "InvalidProviderToken"},
		{"wrong kid", apnsCall{auth: with(func(j *apnsJWT) { j.kid = "ZZZZZZZZZZ" })}, 403, "InvalidProviderToken"},
		{"wrong iss", apnsCall{auth: with(func(j *apnsJWT) { j.iss = "ZZZZZZZZZZ" })}, 403, "InvalidProviderToken"},
		{"alg none", apnsCall{auth: with(func(j *apnsJWT) { j.alg = "none" })}, 403, "InvalidProviderToken"},
		{"no iat", apnsCall{auth: with(func(j *apnsJWT) { j.noIat = true })}, 403, "InvalidProviderToken"},
		{"iat over an hour old", apnsCall{auth: with(func(j *apnsJWT) { j.iat = time.Now().Add(-61 * time.Minute) })}, 403, "ExpiredProviderToken"},
		{"iat in the future", apnsCall{auth: with(func(j *apnsJWT) { j.iat = time.Now().Add(10 * time.Minute) })}, 403, "InvalidProviderToken"},
		{"no topic", apnsCall{auth: "bearer " + good.String(), noTopic: true}, 400, "MissingTopic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.call.client == nil {
				tt.call.client = h2Client(s)
			}
			ans := post(t, s, tt.call)
			if ans.status != tt.status || ans.reason != tt.reason {
				t.Fatalf("answer %d %q, want %d %q", ans.status, ans.reason, tt.status, tt.reason)
			}
		})
	}
	if n := s.Count(); n != 0 {
		t.Fatalf("recorded %d refused requests, want none", n)
	}
	// Seen: the good token (HTTP/1.1 is refused before it is read, "no
	// topic" reuses it), the unsigned-by-us ones not at all, and the
	// correctly signed expired and future ones.
	if n := s.APNsTokensSeen(); n != 3 {
		t.Fatalf("APNsTokensSeen = %d, want 3", n)
	}
}

func TestFakeAPNsProtocolErrorsAreRecorded(t *testing.T) {
	t.Parallel()
	s := StartForTest(t, nil)
	auth := "bearer " + validJWT(t, s).String()
	tests := []struct {
		name   string
		call   apnsCall
		status int
		reason string
	}{
		{"token not hex", apnsCall{token: "not-a-device-token"}, 400, "BadDeviceToken"},
		{"apns-id not a UUID", apnsCall{header: map[string]string{"apns-id": "17"}}, 400, "BadMessageId"},
		{"unknown push type", apnsCall{header: map[string]string{"apns-push-type": "banner"}}, 400, "InvalidPushType"},
		{"priority 7", apnsCall{header: map[string]string{"apns-priority": "7"}}, 400, "BadPriority"},
		{"expiration not a number", apnsCall{header: map[string]string{"apns-expiration": "tomorrow"}}, 400, "BadExpirationDate"},
		{"collapse id 65 bytes", apnsCall{header: map[string]string{"apns-collapse-id": strings.Repeat("c", 65)}}, 400, "BadCollapseId"},
		{"empty payload", apnsCall{body: []byte{}}, 400, "PayloadEmpty"},
		{"payload 4097 bytes", apnsCall{body: []byte(`{"x":"` + strings.Repeat("x", 4097-8) + `"}`)}, 413, "PayloadTooLarge"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.call.client, tt.call.auth = h2Client(s), auth
			ans := post(t, s, tt.call)
			if ans.status != tt.status || ans.reason != tt.reason {
				t.Fatalf("answer %d %q, want %d %q", ans.status, ans.reason, tt.status, tt.reason)
			}
			reqs := s.RequestsFor(provider.TransportAPNs)
			if len(reqs) != i+1 || reqs[i].Status != tt.status {
				t.Fatalf("recorded %d requests (last %+v), want %d, the last with status %d", len(reqs), reqs[len(reqs)-1], i+1, tt.status)
			}
		})
	}
}

func TestFakeAPNsProgrammedAnswers(t *testing.T) {
	t.Parallel()
	s := StartForTest(t, nil)
	auth := "bearer " + validJWT(t, s).String()
	before := time.Now().Truncate(time.Millisecond)
	s.Program(provider.TransportAPNs, apnsToken, APNsError(410, "Unregistered"), APNsError(400, "BadTopic"))
	ans := post(t, s, apnsCall{client: h2Client(s), auth: auth})
	var body struct {
		Reason    string
		Timestamp int64
	}
	if err := json.Unmarshal(ans.body, &body); err != nil || ans.status != 410 || body.Reason != "Unregistered" {
		t.Fatalf("answer %d %s, want 410 Unregistered", ans.status, ans.body)
	}
	if ts := time.UnixMilli(body.Timestamp); ts.Before(before) || ts.After(time.Now()) {
		t.Fatalf("410 timestamp %s (%d), want now in milliseconds", ts, body.Timestamp)
	}
	ans = post(t, s, apnsCall{client: h2Client(s), auth: auth})
	if ans.status != 400 || ans.reason != "BadTopic" || strings.Contains(string(ans.body), "timestamp") {
		t.Fatalf("answer %d %s, want 400 BadTopic without a timestamp", ans.status, ans.body)
	}
	if n := s.Count(); n != 2 {
		t.Fatalf("recorded %d requests, want 2", n)
	}
	if got := s.RequestsFor(provider.TransportAPNs)[0].Status; got != 410 {
		t.Fatalf("recorded status %d, want 410", got)
	}
}
