package fakepush

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// fakeHMS is the fake Huawei Push Kit send API for HarmonyOS NEXT under
// /hms (POST /hms/v3/{projectId}/messages:send). It verifies the PS256 JWT
// of a service account handed out by HMSServiceAccount, which is the bearer
// token itself (Push Kit v3 has no token endpoint), and refuses a JWT of
// another project, as Push Kit does.
type fakeHMS struct {
	s *Server

	// The key is generated on first use, as FCM's is.
	keyOnce sync.Once
	key     *rsa.PrivateKey
	keyID   string

	mu       sync.Mutex
	accounts map[string]string // sub_account handed out → project id
	refused  int               // JWTs refused
	// verified remembers the JWTs whose signature checked out, with their
	// project and expiry: a client sends one JWT for an hour, and verifying
	// it on every request would make the fake, not the client, the
	// bottleneck of a benchmark.
	verified map[string]hmsVerified
}

type hmsVerified struct {
	project string
	expires time.Time
}

// The wire facts the fake checks. The fake does not import provider/hms,
// whose client it tests (and whose tests import the fake): the names and
// codes are Push Kit's, written here again.
const (
	transportHMS          provider.Transport = "hms"
	hmsPushTypeAlert                         = "0"
	hmsPushTypeBackground                    = "6"
	hmsMaxPayload                            = 4096

	hmsCodeSuccess          = "80000000"
	hmsCodeParameterError   = "80100001"
	hmsCodeIllegalPayload   = "80100003"
	hmsCodeIllegalExpire    = "80100004"
	hmsCodeAuthError        = "80200001"
	hmsCodeJWTExpired       = "80200005"
	hmsCodeAllTokensInvalid = "80300007"
	hmsCodeMessageTooLong   = "80300008"
	hmsCodeTokenCount       = "80300010"
	hmsCodeJWTTooLong       = "80300036"

	hmsMaxTokens      = 1000
	hmsMaxJWTValidity = 24 * time.Hour
	hmsClockSkew      = 5 * time.Minute
	hmsTokenPath      = "/hms/oauth2/v3/token" // the key file's token_uri: the JWT's aud
)

// hms is the server's Push Kit state.
func (s *Server) hms() *fakeHMS { return s.speaks[transportHMS].(*fakeHMS) }

func newFakeHMS(s *Server) *fakeHMS {
	f := &fakeHMS{s: s, accounts: map[string]string{}, verified: map[string]hmsVerified{}}
	s.mux.HandleFunc("POST /hms/v3/{project}/messages:send", f.send)
	return f
}

func (f *fakeHMS) signingKey() (*rsa.PrivateKey, string) {
	f.keyOnce.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(fmt.Sprintf("pushtest: generate the fake Push Kit service-account key: %v", err))
		}
		f.mu.Lock()
		f.key, f.keyID = key, rand.Text()
		f.mu.Unlock()
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.key, f.keyID
}

// HMSServiceAccount returns a Push Kit service-account key file (JSON) for
// the project, as provider/hms expects it: its RSA private key is one the
// server knows, so the JWTs signed with it are accepted by the fake send API
// of the same project (and refused, 401 80200001, for another project). The
// key is generated once per server.
func (s *Server) HMSServiceAccount(projectID string) []byte {
	f := s.hms()
	key, keyID := f.signingKey()
	sub := "fake-sub-account-" + projectID
	f.mu.Lock()
	f.accounts[sub] = projectID
	f.mu.Unlock()
	privateKey, err := pkcs8PEM(key)
	if err != nil {
		panic(fmt.Sprintf("pushtest: encode the fake Push Kit key: %v", err))
	}
	b, err := json.MarshalIndent(map[string]string{
		"project_id":             projectID,
		"key_id":                 keyID,
		"private_key":            string(privateKey),
		"sub_account":            sub,
		"auth_uri":               s.URL + "/hms/oauth2/v3/authorize",
		"token_uri":              s.URL + hmsTokenPath,
		"auth_provider_cert_uri": s.URL + "/hms/oauth2/v3/certs",
		"client_cert_uri":        s.URL + "/hms/oauth2/v3/x509?client_id=",
	}, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("pushtest: encode the fake Push Kit service account: %v", err))
	}
	return b
}

// HMSRefusedJWTs returns how many requests the fake Push Kit refused for
// their JWT (expired, of another project, badly signed). They are not
// recorded as requests.
func (s *Server) HMSRefusedJWTs() int {
	f := s.hms()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// HMSError is a Push Kit answer {"code", "msg", "requestId"}: status is the
// HTTP status, code Push Kit's result code. For example:
//
//	pushtest.HMSError(400, "80300007", "All the tokens are invalid.")
func HMSError(status int, code, msg string) Answer {
	return Answer{Status: status, Body: hmsBody(code, msg, "fake-request-error")}
}

func hmsBody(code, msg, requestID string) string {
	b, _ := json.Marshal(map[string]string{"code": code, "msg": msg, "requestId": requestID})
	return string(b)
}

func hmsRefuse(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, hmsBody(code, msg, "fake-request-refused"))
}

// hmsSendRequest is the body of messages:send for push-types 0 and 6, as far
// as the fake checks it; unknown fields are refused so a misspelt field
// shows in tests.
type hmsSendRequest struct {
	Payload *struct {
		Notification *struct {
			Category    string `json:"category"`
			Title       string `json:"title"`
			Body        string `json:"body"`
			Image       string `json:"image"`
			Style       *int   `json:"style"`
			ClickAction *struct {
				ActionType *int              `json:"actionType"`
				Action     string            `json:"action"`
				URI        string            `json:"uri"`
				Data       map[string]string `json:"data"`
			} `json:"clickAction"`
			ForegroundShow *bool `json:"foregroundShow"`
		} `json:"notification"`
		ExtraData string `json:"extraData"`
	} `json:"payload"`
	PushOptions *struct {
		TTL         *int64 `json:"ttl"`
		TestMessage bool   `json:"testMessage"`
		BiTag       string `json:"biTag"`
	} `json:"pushOptions"`
	Target *struct {
		Token []string `json:"token"`
	} `json:"target"`
}

// send is POST /hms/v3/{project}/messages:send.
func (f *fakeHMS) send(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("project")
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if code, problem := f.verifyJWT(bearer, project); code != "" {
		f.mu.Lock()
		f.refused++
		f.mu.Unlock()
		hmsRefuse(w, http.StatusUnauthorized, code, problem)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		hmsRefuse(w, http.StatusBadRequest, hmsCodeParameterError, "Check Parameter Error: the body could not be read.")
		return
	}
	var req hmsSendRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		hmsRefuse(w, http.StatusBadRequest, hmsCodeIllegalPayload, "Illegal payload, "+err.Error())
		return
	}
	if code, problem := checkHMSRequest(r.Header.Get("push-type"), &req, body); code != "" {
		hmsRefuse(w, http.StatusBadRequest, code, problem)
		return
	}
	var notificationID string
	if n := req.Payload.Notification; n != nil {
		notificationID = n.ClickAction.Data["oncepush_id"]
	} else {
		var data map[string]string
		_ = json.Unmarshal([]byte(req.Payload.ExtraData), &data)
		notificationID = data["oncepush_id"]
	}
	// oncepush sends one token a request; a request for several is recorded
	// under its first.
	f.s.serve(w, r, Request{
		Transport:      transportHMS,
		Token:          req.Target.Token[0],
		NotificationID: notificationID,
		Payload:        body,
		Header:         r.Header,
	}, func(w http.ResponseWriter, seq int64) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, hmsBody(hmsCodeSuccess, "Success", fmt.Sprintf("fake-request-%d", seq)))
	})
}

// checkHMSRequest checks what Push Kit checks of a push-type 0 or 6 request
// and returns its result code and words for the first fault.
func checkHMSRequest(pushType string, req *hmsSendRequest, body []byte) (code, problem string) {
	switch {
	case req.Target == nil || len(req.Target.Token) == 0 || len(req.Target.Token) > hmsMaxTokens:
		return hmsCodeTokenCount, fmt.Sprintf("token count should within 1 and %d", hmsMaxTokens)
	case req.Payload == nil:
		return hmsCodeIllegalPayload, "Illegal payload, payload is required."
	case req.PushOptions != nil && req.PushOptions.TTL != nil && *req.PushOptions.TTL <= 0:
		return hmsCodeIllegalExpire, "Illegal expire time."
	}
	for _, tok := range req.Target.Token {
		if tok == "" {
			return hmsCodeAllTokensInvalid, "All the tokens are invalid."
		}
	}
	n := req.Payload.Notification
	switch pushType {
	case hmsPushTypeAlert:
		if n == nil || n.ClickAction == nil || n.ClickAction.ActionType == nil {
			return hmsCodeIllegalPayload, "Illegal payload, notification with clickAction.actionType is required for push-type 0."
		}
		if n.Title == "" && n.Body == "" {
			return hmsCodeIllegalPayload, "Illegal payload, notification title or body is required."
		}
	case hmsPushTypeBackground:
		if n != nil {
			return hmsCodeIllegalPayload, "Illegal payload, push-type 6 carries extraData, not a notification."
		}
	default:
		return hmsCodeParameterError, fmt.Sprintf("Check Parameter Error: push-type %q (the fake speaks 0 and 6).", pushType)
	}
	// The limit counts the body without the tokens.
	size := len(body)
	for _, tok := range req.Target.Token {
		size -= len(tok)
	}
	if size > hmsMaxPayload {
		return hmsCodeMessageTooLong, "Push message size is too long."
	}
	return "", ""
}

// verifyJWT checks a service account's JWT for project and returns Push
// Kit's result code and words when it refuses it.
func (f *fakeHMS) verifyJWT(jwt, project string) (code, problem string) {
	f.mu.Lock()
	v, seen := f.verified[jwt]
	f.mu.Unlock()
	if seen {
		switch {
		case v.project != project:
			return hmsCodeAuthError, "Authentication Error."
		case !v.expires.After(f.s.now()):
			return hmsCodeJWTExpired, "Jwt token expired."
		}
		return "", ""
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return hmsCodeAuthError, "Authentication Error: not a JWT."
	}
	var header struct {
		Kid string `json:"kid"`
		Typ string `json:"typ"`
		Alg string `json:"alg"`
	}
	if decodeJWTPart(parts[0], &header) != nil || header.Alg != "PS256" || header.Typ != "JWT" {
		return hmsCodeAuthError, "Authentication Error: the JWT header is not {kid, typ JWT, alg PS256}."
	}
	f.mu.Lock()
	key, keyID := f.key, f.keyID
	f.mu.Unlock()
	if key == nil || header.Kid != keyID {
		return hmsCodeAuthError, "Authentication Error: unknown kid."
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || rsa.VerifyPSS(&key.PublicKey, crypto.SHA256, jwsDigest(parts), sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) != nil {
		return hmsCodeAuthError, "Authentication Error: bad signature."
	}
	var claims struct {
		Aud string `json:"aud"`
		Iss string `json:"iss"`
		Exp int64  `json:"exp"`
		Iat int64  `json:"iat"`
	}
	if decodeJWTPart(parts[1], &claims) != nil {
		return hmsCodeAuthError, "Authentication Error: the claims are not JSON."
	}
	f.mu.Lock()
	owner, known := f.accounts[claims.Iss]
	f.mu.Unlock()
	now := f.s.now()
	switch {
	case !known || owner != project:
		return hmsCodeAuthError, "Authentication Error."
	case claims.Aud != f.s.URL+hmsTokenPath:
		return hmsCodeAuthError, "Authentication Error: aud is not the key file's token_uri."
	case claims.Iat == 0 || claims.Exp <= claims.Iat:
		return hmsCodeAuthError, "Authentication Error: iat and exp are required, exp after iat."
	case time.Duration(claims.Exp-claims.Iat)*time.Second > hmsMaxJWTValidity:
		return hmsCodeJWTTooLong, "JWT expire period over threshold."
	case time.Unix(claims.Iat, 0).After(now.Add(hmsClockSkew)):
		return hmsCodeAuthError, "Authentication Error: iat is in the future."
	case !time.Unix(claims.Exp, 0).After(now):
		return hmsCodeJWTExpired, "Jwt token expired."
	}
	f.mu.Lock()
	if len(f.verified) >= 1024 { // a bound for a long-running fake
		clear(f.verified)
	}
	f.verified[jwt] = hmsVerified{project: project, expires: time.Unix(claims.Exp, 0)}
	f.mu.Unlock()
	return "", ""
}
