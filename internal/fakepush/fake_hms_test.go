package fakepush

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// hmsAccount is a key file the fake handed out, read back.
type hmsAccount struct {
	KeyID, SubAccount, TokenURI string
	Key                         *rsa.PrivateKey
}

func readHMSAccount(t *testing.T, file []byte) hmsAccount {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(file, &m); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(m["private_key"]))
	if block == nil {
		t.Fatal("private_key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return hmsAccount{KeyID: m["key_id"], SubAccount: m["sub_account"], TokenURI: m["token_uri"], Key: k.(*rsa.PrivateKey)}
}

// hmsJWT signs header and claims with key, PS256 unless alg says otherwise.
func hmsJWT(t *testing.T, key *rsa.PrivateKey, header, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	var err error
	if header["alg"] == "RS256" {
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	} else {
		sig, err = rsa.SignPSS(rand.Reader, key, crypto.SHA256, digest[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	}
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + enc.EncodeToString(sig)
}

// hmsPost sends a messages:send for project with the JWT and push-type.
func hmsPost(t *testing.T, fake *Server, project, jwt, pushType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, fake.URL+"/hms/v3/"+project+"/messages:send", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if jwt != "" {
		req.Header.Set("Authorization", "Bearer "+jwt)
	}
	if pushType != "" {
		req.Header.Set("push-type", pushType)
	}
	resp, err := fake.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const hmsAlert = `{"payload":{"notification":{"title":"T","body":"B","clickAction":{"actionType":0,"data":{"oncepush_id":"n1"}}}},"target":{"token":["device-1"]}}`

func TestFakeHMSVerifiesTheJWT(t *testing.T) {
	t.Parallel()
	fake := StartForTest(t, nil)
	acct := readHMSAccount(t, fake.HMSServiceAccount("p1"))
	other := readHMSAccount(t, fake.HMSServiceAccount("p2"))
	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	header := func(alg string) map[string]any { return map[string]any{"kid": acct.KeyID, "typ": "JWT", "alg": alg} }
	claims := func(iss string, iat, exp int64) map[string]any {
		return map[string]any{"aud": acct.TokenURI, "iss": iss, "iat": iat, "exp": exp}
	}
	for _, tc := range []struct {
		name, jwt, code string
	}{
		{"no bearer", "", hmsCodeAuthError},
		{"not a JWT", "abc", hmsCodeAuthError},
		{"RS256", hmsJWT(t, acct.Key, header("RS256"), claims(acct.SubAccount, now, now+3600)), hmsCodeAuthError},
		{"another key", hmsJWT(t, stranger, header("PS256"), claims(acct.SubAccount, now, now+3600)), hmsCodeAuthError},
		{"another project's account", hmsJWT(t, acct.Key, header("PS256"), claims(other.SubAccount, now, now+3600)), hmsCodeAuthError},
		{"expired", hmsJWT(t, acct.Key, header("PS256"), claims(acct.SubAccount, now-7200, now-3600)), hmsCodeJWTExpired},
		{"valid for two days", hmsJWT(t, acct.Key, header("PS256"), claims(acct.SubAccount, now, now+2*86400)), hmsCodeJWTTooLong},
	} {
		status, body := hmsPost(t, fake, "p1", tc.jwt, "0", hmsAlert)
		if status != http.StatusUnauthorized || !strings.Contains(body, `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want 401 %s", tc.name, status, body, tc.code)
		}
	}
	if fake.Count() != 0 || fake.HMSRefusedJWTs() != 7 {
		t.Fatalf("recorded %d, refused %d; want 0 and 7", fake.Count(), fake.HMSRefusedJWTs())
	}
	good := hmsJWT(t, acct.Key, header("PS256"), claims(acct.SubAccount, now, now+3600))
	status, body := hmsPost(t, fake, "p1", good, "0", hmsAlert)
	if status != http.StatusOK || !strings.Contains(body, `"code":"80000000"`) || !strings.Contains(body, `"requestId":"fake-request-`) {
		t.Fatalf("valid send: %d %s", status, body)
	}
	reqs := fake.RequestsFor(transportHMS)
	if len(reqs) != 1 || reqs[0].Token != "device-1" || reqs[0].NotificationID != "n1" || reqs[0].Header.Get("push-type") != "0" {
		t.Fatalf("recorded %+v", reqs)
	}
	if reqs[0].Header.Get("Authorization") != "" {
		t.Error("the recorded request kept its Authorization header")
	}
	// Verified once, the JWT is still its project's only.
	if status, body := hmsPost(t, fake, "p2", good, "0", hmsAlert); status != http.StatusUnauthorized || !strings.Contains(body, hmsCodeAuthError) {
		t.Errorf("p1's JWT for p2: %d %s, want 401 %s", status, body, hmsCodeAuthError)
	}
}

// A JWT verified once expires on the fake's clock all the same.
func TestFakeHMSRemembersJWTsUntilTheyExpire(t *testing.T) {
	t.Parallel()
	clock := &handClock{}
	clock.ns.Store(time.Now().UnixNano())
	fake := StartForTest(t, &Options{Clock: clock})
	acct := readHMSAccount(t, fake.HMSServiceAccount("p1"))
	now := clock.Now().Unix()
	jwt := hmsJWT(t, acct.Key, map[string]any{"kid": acct.KeyID, "typ": "JWT", "alg": "PS256"},
		map[string]any{"aud": acct.TokenURI, "iss": acct.SubAccount, "iat": now, "exp": now + 3600})
	if status, body := hmsPost(t, fake, "p1", jwt, "0", hmsAlert); status != http.StatusOK {
		t.Fatalf("first send: %d %s", status, body)
	}
	clock.Advance(time.Hour)
	if status, body := hmsPost(t, fake, "p1", jwt, "0", hmsAlert); status != http.StatusUnauthorized || !strings.Contains(body, hmsCodeJWTExpired) {
		t.Errorf("an hour later: %d %s, want 401 %s", status, body, hmsCodeJWTExpired)
	}
}

func TestFakeHMSRefusesMalformedMessages(t *testing.T) {
	t.Parallel()
	fake := StartForTest(t, nil)
	acct := readHMSAccount(t, fake.HMSServiceAccount("p1"))
	now := time.Now().Unix()
	jwt := hmsJWT(t, acct.Key, map[string]any{"kid": acct.KeyID, "typ": "JWT", "alg": "PS256"},
		map[string]any{"aud": acct.TokenURI, "iss": acct.SubAccount, "iat": now, "exp": now + 3600})
	tokens := func(n int) string {
		ts := make([]string, n)
		for i := range ts {
			ts[i] = fmt.Sprintf("%q", fmt.Sprint("t", i))
		}
		return strings.Join(ts, ",")
	}
	for _, tc := range []struct {
		name, pushType, body, code string
	}{
		{"no push-type", "", hmsAlert, hmsCodeParameterError},
		{"widget push-type", "1", hmsAlert, hmsCodeParameterError},
		{"unknown field", "0", `{"payload":{"notification":{"titel":"T"}},"target":{"token":["d"]}}`, hmsCodeIllegalPayload},
		{"alert without clickAction", "0", `{"payload":{"notification":{"title":"T"}},"target":{"token":["d"]}}`, hmsCodeIllegalPayload},
		{"background with a notification", "6", hmsAlert, hmsCodeIllegalPayload},
		{"no token", "6", `{"payload":{"extraData":"{}"},"target":{"token":[]}}`, hmsCodeTokenCount},
		{"1001 tokens", "6", `{"payload":{"extraData":"{}"},"target":{"token":[` + tokens(1001) + `]}}`, hmsCodeTokenCount},
		{"ttl 0", "6", `{"payload":{"extraData":"{}"},"pushOptions":{"ttl":0},"target":{"token":["d"]}}`, hmsCodeIllegalExpire},
		{"over 4096 bytes", "6", `{"payload":{"extraData":"` + strings.Repeat("x", 4100) + `"},"target":{"token":["d"]}}`, hmsCodeMessageTooLong},
	} {
		status, body := hmsPost(t, fake, "p1", jwt, tc.pushType, tc.body)
		if status != http.StatusBadRequest || !strings.Contains(body, `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want 400 %s", tc.name, status, body, tc.code)
		}
	}
	if fake.Count() != 0 {
		t.Errorf("recorded %d refused requests", fake.Count())
	}
	// A background message carries its notification id in extraData.
	status, body := hmsPost(t, fake, "p1", jwt, "6", `{"payload":{"extraData":"{\"oncepush_id\":\"n6\"}"},"pushOptions":{"ttl":60},"target":{"token":["d6"]}}`)
	if reqs := fake.RequestsFor(transportHMS); status != http.StatusOK || len(reqs) != 1 || reqs[0].NotificationID != "n6" {
		t.Errorf("background send: %d %s, recorded %+v", status, body, reqs)
	}
}
