package fakepush

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// fcmAccount is the part of a service-account file a token request needs.
type fcmAccount struct {
	ProjectID    string `json:"project_id"`
	PrivateKeyID string `json:"private_key_id"`
	PrivateKey   string `json:"private_key"`
	ClientEmail  string `json:"client_email"`
	TokenURI     string `json:"token_uri"`
	key          *rsa.PrivateKey
}

func fcmAccountOf(t *testing.T, fake *Server, project string) *fcmAccount {
	t.Helper()
	var a fcmAccount
	if err := json.Unmarshal(fake.FCMServiceAccount(project), &a); err != nil {
		t.Fatalf("FCMServiceAccount is not JSON: %v", err)
	}
	k := parsePKCS8PEM(t, "private_key", []byte(a.PrivateKey))
	key, ok := k.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("private_key is %T, want an RSA key", k)
	}
	a.key = key
	return &a
}

// assertion builds a signed JWT; edit may change header and claims first.
func (a *fcmAccount) assertion(t *testing.T, key *rsa.PrivateKey, edit func(h, c map[string]any)) string {
	t.Helper()
	now := time.Now()
	h := map[string]any{"alg": "RS256", "typ": "JWT", "kid": a.PrivateKeyID}
	c := map[string]any{
		"iss":   a.ClientEmail,
		"scope": "https://www.googleapis.com/auth/firebase.messaging",
		"aud":   a.TokenURI,
		"iat":   now.Unix(),
		"exp":   now.Add(time.Hour).Unix(),
	}
	if edit != nil {
		edit(h, c)
	}
	input, sig := signJWS(key, h, c)
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// accessToken is the access token the fake grants for an assertion signed
// with the account's key (edit as in assertion); t fails without one.
func (a *fcmAccount) accessToken(t *testing.T, fake *Server, edit func(h, c map[string]any)) string {
	t.Helper()
	_, grant := postToken(t, fake, a.TokenURI, a.assertion(t, a.key, edit))
	access, _ := grant["access_token"].(string)
	if access == "" {
		t.Fatalf("no access token: %v", grant)
	}
	return access
}

func postToken(t *testing.T, fake *Server, tokenURI, assertion string) (int, map[string]any) {
	t.Helper()
	resp, err := fake.Client().PostForm(tokenURI, url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {assertion},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestFakeOAuthVerifiesAssertions(t *testing.T) {
	t.Parallel()
	fake := StartForTest(t, nil)
	acct := fcmAccountOf(t, fake, "proj-a")
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  *rsa.PrivateKey
		edit func(h, c map[string]any)
		ok   bool
	}{
		{name: "valid", ok: true},
		{name: "signed by another key", key: other},
		{name: "unknown kid", edit: func(h, c map[string]any) { h["kid"] = "0000" }},
		{name: "not RS256", edit: func(h, c map[string]any) { h["alg"] = "none" }},
		{name: "unknown issuer", edit: func(h, c map[string]any) { c["iss"] = "someone@else.iam.gserviceaccount.com" }},
		{name: "scope without FCM", edit: func(h, c map[string]any) { c["scope"] = "https://www.googleapis.com/auth/datastore" }},
		// The send API takes either scope; the Firebase Admin SDK asks for
		// cloud-platform (and others), never firebase.messaging.
		{name: "cloud-platform scope", ok: true, edit: func(h, c map[string]any) {
			c["scope"] = "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/firebase"
		}},
		{name: "wrong audience", edit: func(h, c map[string]any) { c["aud"] = "https://oauth2.googleapis.com/token" }},
		{name: "lives longer than an hour", edit: func(h, c map[string]any) {
			c["exp"] = time.Now().Add(2 * time.Hour).Unix()
		}},
		{name: "expired", edit: func(h, c map[string]any) {
			c["iat"] = time.Now().Add(-2 * time.Hour).Unix()
			c["exp"] = time.Now().Add(-time.Hour).Unix()
		}},
		{name: "issued in the future", edit: func(h, c map[string]any) {
			c["iat"] = time.Now().Add(30 * time.Minute).Unix()
			c["exp"] = time.Now().Add(80 * time.Minute).Unix()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := acct.key
			if tt.key != nil {
				key = tt.key
			}
			status, body := postToken(t, fake, acct.TokenURI, acct.assertion(t, key, tt.edit))
			if tt.ok {
				if status != http.StatusOK || body["access_token"] == nil || body["expires_in"] != 3600.0 || body["token_type"] != "Bearer" {
					t.Fatalf("valid assertion: %d %v", status, body)
				}
				return
			}
			if status != http.StatusBadRequest || body["error"] != "invalid_grant" {
				t.Errorf("got %d %v, want 400 invalid_grant", status, body)
			}
		})
	}
	t.Cleanup(func() {
		if got := fake.FCMTokenRequests(); got != len(tests) {
			t.Errorf("FCMTokenRequests = %d, want %d (granted and refused)", got, len(tests))
		}
	})
}

func TestFakeFCMRequiresItsAccessToken(t *testing.T) {
	t.Parallel()
	fake := StartForTest(t, nil)
	access := fcmAccountOf(t, fake, "proj-a").accessToken(t, fake, nil)
	send := func(project, bearer string) (int, string) {
		t.Helper()
		return postBearer(t, fake, "/fcm/v1/projects/"+project+"/messages:send", bearer,
			`{"message":{"token":"device-1","data":{"oncepush_id":"n1"},"android":{"collapse_key":"c1","ttl":"60s"}}}`)
	}

	if status, body := send("proj-a", ""); status != http.StatusUnauthorized || !strings.Contains(body, "UNAUTHENTICATED") {
		t.Errorf("no bearer: %d %s, want 401 UNAUTHENTICATED", status, body)
	}
	if status, _ := send("proj-a", "ya29.made-up"); status != http.StatusUnauthorized {
		t.Errorf("unknown bearer: %d, want 401", status)
	}
	if status, body := send("proj-b", access); status != http.StatusForbidden || !strings.Contains(body, "PERMISSION_DENIED") {
		t.Errorf("another project's token: %d %s, want 403 PERMISSION_DENIED", status, body)
	}
	if n := fake.Count(); n != 0 {
		t.Fatalf("refused requests were recorded: %d", n)
	}
	status, body := send("proj-a", access)
	if status != http.StatusOK || !strings.Contains(body, `"name":"projects/proj-a/messages/`) {
		t.Fatalf("valid send: %d %s", status, body)
	}
	reqs := fake.RequestsFor(provider.TransportFCM)
	if len(reqs) != 1 || reqs[0].Token != "device-1" || reqs[0].CollapseID != "c1" || reqs[0].NotificationID != "n1" {
		t.Fatalf("recorded %+v", reqs)
	}
	if reqs[0].Header.Get("Authorization") != "" {
		t.Error("the recorded request kept the access token")
	}

	fake.RevokeFCMAccessTokens()
	if status, _ := send("proj-a", access); status != http.StatusUnauthorized {
		t.Errorf("revoked token: %d, want 401", status)
	}
	if n := fake.Count(); n != 1 {
		t.Errorf("a send with a revoked token was recorded")
	}
}

func TestFakeFCMRefusesMalformedMessages(t *testing.T) {
	t.Parallel()
	fake := StartForTest(t, nil)
	access := fcmAccountOf(t, fake, "proj-a").accessToken(t, fake, nil)
	for name, body := range map[string]string{
		"not JSON":        `{"message":`,
		"unknown field":   `{"message":{"token":"d","andriod":{}}}`,
		"no token":        `{"message":{"data":{"a":"b"}}}`,
		"bad ttl":         `{"message":{"token":"d","android":{"ttl":"60"}}}`,
		"reserved key":    `{"message":{"token":"d","data":{"from":"x"}}}`,
		"http link":       `{"message":{"token":"d","webpush":{"fcm_options":{"link":"http://x.example/"}}}}`,
		"data not string": `{"message":{"token":"d","data":{"n":1}}}`,
	} {
		status, b := postBearer(t, fake, "/fcm/v1/projects/proj-a/messages:send", access, body)
		if status != http.StatusBadRequest || !strings.Contains(b, "INVALID_ARGUMENT") {
			t.Errorf("%s: %d %s, want 400 INVALID_ARGUMENT", name, status, b)
		}
	}
	if n := fake.Count(); n != 0 {
		t.Errorf("malformed messages were recorded: %d", n)
	}
}

// A client that cannot be pointed at the fake (the Firebase Admin SDK, which
// gorush uses) dials fcm.googleapis.com through an HTTPS proxy: the fake
// serves one (Options.ConnectAddr) that hands each tunnel to its own TLS
// server, its certificate names the host, and it serves FCM's own path.
func TestFakeFCMAnswersAsGoogleThroughItsConnectProxy(t *testing.T) {
	t.Parallel()
	fake := StartForTest(t, &Options{CertNames: []string{"fcm.googleapis.com"}, ConnectAddr: "127.0.0.1:0"})
	if fake.ConnectURL == "" {
		t.Fatal("no ConnectURL")
	}
	proxy, err := url.Parse(fake.ConnectURL)
	if err != nil {
		t.Fatal(err)
	}
	tlsConf := fake.TLSConfig()
	tunnel := &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(proxy),
		TLSClientConfig:   tlsConf,
		ForceAttemptHTTP2: true,
	}}
	t.Cleanup(tunnel.CloseIdleConnections)
	access := fcmAccountOf(t, fake, "proj-a").accessToken(t, fake, nil)
	for i := range 2 { // the second on the same tunnel
		req, err := http.NewRequest("POST", "https://fcm.googleapis.com/v1/projects/proj-a/messages:send",
			strings.NewReader(`{"message":{"token":"device-1","data":{"oncepush_id":"n1"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+access)
		resp, err := tunnel.Do(req)
		if err != nil {
			t.Fatalf("send %d through the fake's proxy as fcm.googleapis.com: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || !strings.Contains(string(body), `"name":"projects/proj-a/messages/`) {
			t.Fatalf("FCM's own path: %s %d %s", resp.Proto, resp.StatusCode, body)
		}
	}
	reqs := fake.RequestsFor(provider.TransportFCM)
	if len(reqs) != 2 || reqs[0].NotificationID != "n1" || reqs[0].RemoteAddr != reqs[1].RemoteAddr {
		t.Fatalf("recorded %+v; want two requests on one connection", reqs)
	}
	// The loopback address stays valid, and the proxy refuses anything but CONNECT.
	if status, _ := postBearer(t, fake, "/fcm/v1/projects/proj-a/messages:send", access,
		`{"message":{"token":"device-2"}}`); status != http.StatusOK {
		t.Fatalf("through 127.0.0.1: %d", status)
	}
	resp, err := http.Get(fake.ConnectURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET on the proxy: %d, want 405", resp.StatusCode)
	}
}
