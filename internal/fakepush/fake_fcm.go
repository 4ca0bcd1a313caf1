package fakepush

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// fakeFCM is the fake FCM HTTP v1 send API (under /fcm, and at FCM's own
// path /v1/…) and Google's OAuth 2.0
// token endpoint (/oauth2/token). The token endpoint verifies the RS256
// assertion of a service account handed out by FCMServiceAccount and issues
// access tokens; the send API accepts only those, for their own project.
type fakeFCM struct {
	s *Server

	// The service-account key is generated on first use: an RSA key takes a
	// noticeable time, and most fake servers never speak FCM.
	keyOnce sync.Once
	key     *rsa.PrivateKey
	keyID   string

	mu            sync.Mutex
	accounts      map[string]string         // client_email handed out → project id
	tokens        map[string]fcmAccessToken // access token → what it allows
	tokenRequests int
}

type fcmAccessToken struct {
	project string
	expires time.Time
}

// The wire facts the fake checks.
const (
	fcmScope           = "https://www.googleapis.com/auth/firebase.messaging"
	fcmCloudScope      = "https://www.googleapis.com/auth/cloud-platform" // the send API takes it too
	fcmJWTBearerGrant  = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	fcmTokenLifetime   = time.Hour
	fcmMaxAssertionAge = time.Hour
	fcmClockSkew       = 5 * time.Minute
	fcmMaxPayload      = 4096
	fcmErrorType       = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
	fcmBadRequestType  = "type.googleapis.com/google.rpc.BadRequest"
	fcmErrorInfoType   = "type.googleapis.com/google.rpc.ErrorInfo"
	fcmHelpType        = "type.googleapis.com/google.rpc.Help"
	fcmProjectNumber   = "100000000001" // the fake's Google project number
	fcmBadTimeframe    = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
	fcmUnauthenticated = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."
)

// fcm is the server's FCM state.
func (s *Server) fcm() *fakeFCM { return s.speaks[provider.TransportFCM].(*fakeFCM) }

func newFakeFCM(s *Server) *fakeFCM {
	f := &fakeFCM{
		s:        s,
		accounts: map[string]string{},
		tokens:   map[string]fcmAccessToken{},
	}
	s.mux.HandleFunc("POST /oauth2/token", f.token)
	s.mux.HandleFunc("POST /fcm/v1/projects/{project}/messages:send", f.send)
	// FCM's own path, for a client that dials fcm.googleapis.com through a
	// tunnel to the fake (Options.CertNames) and cannot be given a base URL.
	s.mux.HandleFunc("POST /v1/projects/{project}/messages:send", f.send)
	return f
}

func (f *fakeFCM) signingKey() (*rsa.PrivateKey, string) {
	f.keyOnce.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(fmt.Sprintf("pushtest: generate the fake FCM service-account key: %v", err))
		}
		f.mu.Lock()
		f.key, f.keyID = key, rand.Text()
		f.mu.Unlock()
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.key, f.keyID
}

// FCMServiceAccount returns a Google service-account key file (JSON) for the
// project, as provider/fcm expects it: its token_uri is this server's OAuth
// token endpoint and its RSA private key is one the server knows, so the
// access tokens it obtains are accepted by the fake FCM send API of the same
// project (and refused, 403 PERMISSION_DENIED, for another project). The key is
// generated once per server.
func (s *Server) FCMServiceAccount(projectID string) []byte {
	key, keyID := s.fcm().signingKey()
	email := "oncepush-fake@" + projectID + ".iam.gserviceaccount.com"
	s.fcm().mu.Lock()
	s.fcm().accounts[email] = projectID
	s.fcm().mu.Unlock()
	privateKey, err := pkcs8PEM(key)
	if err != nil {
		panic(fmt.Sprintf("pushtest: encode the fake FCM key: %v", err))
	}
	b, err := json.MarshalIndent(map[string]string{
		"type":                        "service_account",
		"project_id":                  projectID,
		"private_key_id":              keyID,
		"private_key":                 string(privateKey),
		"client_email":                email,
		"client_id":                   "100000000000000000001",
		"auth_uri":                    s.URL + "/o/oauth2/auth",
		"token_uri":                   s.URL + "/oauth2/token",
		"auth_provider_x509_cert_url": s.URL + "/oauth2/v1/certs",
		"universe_domain":             "googleapis.com",
	}, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("pushtest: encode the fake FCM service account: %v", err))
	}
	return b
}

// FCMTokenRequests returns how many requests the OAuth token endpoint
// received, granted or refused.
func (s *Server) FCMTokenRequests() int {
	s.fcm().mu.Lock()
	defer s.fcm().mu.Unlock()
	return s.fcm().tokenRequests
}

// RevokeFCMAccessTokens invalidates every access token issued so far: the
// next send with one of them is answered 401 UNAUTHENTICATED, as Google
// answers an expired or revoked token, and a client must fetch a new one.
func (s *Server) RevokeFCMAccessTokens() {
	s.fcm().mu.Lock()
	defer s.fcm().mu.Unlock()
	clear(s.fcm().tokens)
}

// FCMError is an FCM HTTP v1 error answer: status is the HTTP status,
// statusName the Google status ("NOT_FOUND"), message its text, and errorCode
// the FcmError detail's errorCode ("UNREGISTERED"); "" sends no FcmError
// detail. For example:
//
//	pushtest.FCMError(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")
func FCMError(status int, statusName, message, errorCode string) Answer {
	var details []any
	if errorCode != "" {
		details = append(details, map[string]string{"@type": fcmErrorType, "errorCode": errorCode})
	}
	return Answer{Status: status, Body: fcmErrorBody(status, statusName, message, details...)}
}

// FCMDeviceRateExceeded is FCM's answer to messages sent too fast to one
// device (or topic): 429 RESOURCE_EXHAUSTED with an FcmError detail, errorCode
// QUOTA_EXCEEDED. Only sends to that target must slow down. Add a Retry-After
// header to the answer's Header to send one.
func FCMDeviceRateExceeded() Answer {
	return FCMError(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Device message rate exceeded.", "QUOTA_EXCEEDED")
}

// FCMProjectQuotaExceeded is FCM's answer once the project's send quota for
// the minute is spent: 429 RESOURCE_EXHAUSTED with a google.rpc.ErrorInfo
// detail (reason RATE_LIMIT_EXCEEDED, quota_limit SendsPerMinutePerProject,
// quota_unit 1/min/{project}) and a google.rpc.Help link, as Google's API
// front end answers it. Every send of the project meets it until the minute
// ends. Add a Retry-After header to the answer's Header to send one.
func FCMProjectQuotaExceeded() Answer {
	return Answer{Status: http.StatusTooManyRequests, Body: fcmErrorBody(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED",
		"Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com' for consumer 'project_number:"+fcmProjectNumber+"'.",
		map[string]any{
			"@type":  fcmErrorInfoType,
			"reason": "RATE_LIMIT_EXCEEDED",
			"domain": "googleapis.com",
			"metadata": map[string]string{
				"service":           "fcm.googleapis.com",
				"consumer":          "projects/" + fcmProjectNumber,
				"quota_metric":      "fcm.googleapis.com/send_requests",
				"quota_limit":       "SendsPerMinutePerProject",
				"quota_limit_value": "600000",
				"quota_unit":        "1/min/{project}",
				"quota_location":    "global",
			},
		},
		map[string]any{
			"@type": fcmHelpType,
			"links": []map[string]string{{"description": "Request a higher quota limit.", "url": "https://cloud.google.com/docs/quotas/help/request_increase"}},
		},
	)}
}

// FCMInvalidTokenArgument is FCM's answer to a registration token that is not
// one: 400 INVALID_ARGUMENT with a BadRequest detail naming message.token.
func FCMInvalidTokenArgument() Answer {
	return Answer{Status: http.StatusBadRequest, Body: fcmErrorBody(http.StatusBadRequest, "INVALID_ARGUMENT",
		"The registration token is not a valid FCM registration token",
		map[string]string{"@type": fcmErrorType, "errorCode": "INVALID_ARGUMENT"},
		fcmBadRequest("message.token", "Invalid registration token"),
	)}
}

func fcmBadRequest(field, description string) any {
	return map[string]any{
		"@type":           fcmBadRequestType,
		"fieldViolations": []map[string]string{{"field": field, "description": description}},
	}
}

// fcmErrorBody is the error document Google's APIs answer with.
func fcmErrorBody(code int, status, message string, details ...any) string {
	e := map[string]any{"code": code, "message": message, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

func fcmRefuse(w http.ResponseWriter, code int, status, message string, details ...any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, fcmErrorBody(code, status, message, details...))
}

// token is the OAuth 2.0 token endpoint for the JWT-bearer grant (RFC 7523).
func (f *fakeFCM) token(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.tokenRequests++
	f.mu.Unlock()
	if err := r.ParseForm(); err != nil {
		refuse(w, http.StatusBadRequest, fcmOAuthError("invalid_request", "the body is not a form"))
		return
	}
	if g := r.PostForm.Get("grant_type"); g != fcmJWTBearerGrant {
		refuse(w, http.StatusBadRequest, fcmOAuthError("unsupported_grant_type", fmt.Sprintf("grant_type %q; this endpoint grants %s", g, fcmJWTBearerGrant)))
		return
	}
	project, problem := f.verifyAssertion(r.PostForm.Get("assertion"))
	if problem != "" {
		refuse(w, http.StatusBadRequest, fcmOAuthError("invalid_grant", problem))
		return
	}
	token := "ya29.fake-" + rand.Text()
	f.mu.Lock()
	f.tokens[token] = fcmAccessToken{project: project, expires: f.s.now().Add(fcmTokenLifetime)}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": token,
		"expires_in":   int(fcmTokenLifetime / time.Second),
		"token_type":   "Bearer",
	})
}

func fcmOAuthError(code, description string) map[string]string {
	return map[string]string{"error": code, "error_description": description}
}

// verifyAssertion checks a service account's signed JWT and returns the
// project it may send for, or what is wrong with it in the words of Google's
// error_description.
func (f *fakeFCM) verifyAssertion(assertion string) (project, problem string) {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return "", "Invalid JWT: the assertion is not a signed JWT"
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if decodeJWTPart(parts[0], &header) != nil {
		return "", "Invalid JWT header: not base64url JSON"
	}
	if header.Alg != "RS256" {
		return "", fmt.Sprintf("Invalid JWT: alg %q, want RS256", header.Alg)
	}
	f.mu.Lock()
	key, keyID := f.key, f.keyID
	f.mu.Unlock()
	if key == nil || header.Kid != keyID {
		return "", "Invalid JWT Signature: unknown key id"
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "", "Invalid JWT Signature: not base64url"
	}
	if !verifyRS256(&key.PublicKey, parts, sig) {
		return "", "Invalid JWT Signature."
	}
	var claims struct {
		Iss   string `json:"iss"`
		Scope string `json:"scope"`
		Aud   string `json:"aud"`
		Iat   int64  `json:"iat"`
		Exp   int64  `json:"exp"`
	}
	if decodeJWTPart(parts[1], &claims) != nil {
		return "", "Invalid JWT claims: not base64url JSON"
	}
	f.mu.Lock()
	project, known := f.accounts[claims.Iss]
	f.mu.Unlock()
	switch now := f.s.now(); {
	case !known:
		return "", fmt.Sprintf("Invalid JWT: iss %q is not a service account of this server", claims.Iss)
	case !slices.Contains(strings.Fields(claims.Scope), fcmScope) && !slices.Contains(strings.Fields(claims.Scope), fcmCloudScope):
		return "", fmt.Sprintf("Invalid JWT: scope %q includes neither %s nor %s", claims.Scope, fcmScope, fcmCloudScope)
	case claims.Aud != f.s.URL+"/oauth2/token":
		return "", fmt.Sprintf("Invalid JWT: aud %q is not this token endpoint", claims.Aud)
	case claims.Iat == 0 || claims.Exp == 0:
		return "", "Invalid JWT: iat and exp are required"
	case time.Unix(claims.Iat, 0).After(now.Add(fcmClockSkew)), time.Unix(claims.Iat, 0).Before(now.Add(-fcmMaxAssertionAge - fcmClockSkew)):
		return "", fcmBadTimeframe
	case claims.Exp <= claims.Iat, claims.Exp-claims.Iat > int64(fcmMaxAssertionAge/time.Second), !time.Unix(claims.Exp, 0).After(now):
		return "", fcmBadTimeframe
	}
	return project, ""
}

// authorize checks the bearer access token; ok is false when it was not
// issued here or has expired (or been revoked).
func (f *fakeFCM) authorize(r *http.Request) (fcmAccessToken, bool) {
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found {
		return fcmAccessToken{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[token]
	if !ok || !f.s.now().Before(t.expires) {
		return fcmAccessToken{}, false
	}
	return t, true
}

// fcmSendRequest is the body of messages:send, as far as the fake checks it.
// Unknown fields are refused, as Google's JSON parser refuses them.
type fcmSendRequest struct {
	ValidateOnly bool        `json:"validate_only"`
	Message      *fcmMessage `json:"message"`
}

type fcmMessage struct {
	Name         string            `json:"name"`
	Token        string            `json:"token"`
	Topic        string            `json:"topic"`
	Condition    string            `json:"condition"`
	Data         map[string]string `json:"data"`
	Notification *v1Notification   `json:"notification"`
	Android      *struct {
		CollapseKey           string            `json:"collapse_key"`
		Priority              string            `json:"priority"`
		TTL                   string            `json:"ttl"`
		RestrictedPackageName string            `json:"restricted_package_name"`
		Data                  map[string]string `json:"data"`
		Notification          json.RawMessage   `json:"notification"`
		FCMOptions            json.RawMessage   `json:"fcm_options"`
		DirectBootOK          bool              `json:"direct_boot_ok"`
	} `json:"android"`
	APNs *struct {
		Headers    map[string]string `json:"headers"`
		Payload    json.RawMessage   `json:"payload"`
		FCMOptions json.RawMessage   `json:"fcm_options"`
	} `json:"apns"`
	Webpush *struct {
		Headers      map[string]string `json:"headers"`
		Data         map[string]string `json:"data"`
		Notification json.RawMessage   `json:"notification"`
		FCMOptions   *struct {
			Link           string `json:"link"`
			AnalyticsLabel string `json:"analytics_label"`
		} `json:"fcm_options"`
	} `json:"webpush"`
	FCMOptions json.RawMessage `json:"fcm_options"`
}

// v1Notification is the message's notification object, in FCM's HTTP v1
// API and in RuStore's, which copies it.
type v1Notification struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	Image string `json:"image"`
}

// readV1Send reads the body of a messages:send, FCM's HTTP v1 or RuStore's
// copy of it, into req, refusing unknown fields as Google's JSON parser
// does. When it cannot, it answers through refuse (a 400 INVALID_ARGUMENT
// with that message; invalidJSON comes before the parser's error) and
// returns ok false.
func readV1Send(w http.ResponseWriter, r *http.Request, req any, refuse func(message string), invalidJSON string) (body []byte, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		refuse("The request body could not be read.")
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		refuse(invalidJSON + err.Error())
		return nil, false
	}
	return body, true
}

// protoDuration is a google.protobuf.Duration in JSON ("3600s", "1.5s"),
// the form of FCM's android.ttl and of RuStore's, which copies it.
var protoDuration = regexp.MustCompile(`^[0-9]+(\.[0-9]{1,9})?s$`)

// send is POST /fcm/v1/projects/{project}/messages:send.
func (f *fakeFCM) send(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("project")
	access, ok := f.authorize(r)
	if !ok {
		fcmRefuse(w, http.StatusUnauthorized, "UNAUTHENTICATED", fcmUnauthenticated)
		return
	}
	if access.project != project {
		fcmRefuse(w, http.StatusForbidden, "PERMISSION_DENIED",
			fmt.Sprintf("Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/%s' (or it may not exist).", project))
		return
	}
	var req fcmSendRequest
	body, ok := readV1Send(w, r, &req, func(message string) {
		fcmRefuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", message)
	}, "Invalid JSON payload received. ")
	if !ok {
		return
	}
	if field, problem := checkFCMMessage(req.Message); problem != "" {
		fcmRefuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Request contains an invalid argument.",
			map[string]string{"@type": fcmErrorType, "errorCode": "INVALID_ARGUMENT"},
			fcmBadRequest(field, problem))
		return
	}
	m := req.Message
	rec := Request{
		Transport:      provider.TransportFCM,
		Token:          m.Token,
		NotificationID: m.Data["oncepush_id"],
		Payload:        body,
		Header:         r.Header,
	}
	if m.Android != nil {
		rec.CollapseID = m.Android.CollapseKey
	}
	f.s.serve(w, r, rec, func(w http.ResponseWriter, seq int64) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_ = json.NewEncoder(w).Encode(map[string]string{"name": fmt.Sprintf("projects/%s/messages/%d", project, seq)})
	})
}

// checkFCMMessage finds what FCM would refuse in a message the fake can
// record, naming the field.
func checkFCMMessage(m *fcmMessage) (field, problem string) {
	if m == nil {
		return "message", "Message is required."
	}
	if m.Token == "" {
		// Topics and conditions are real FCM targets; oncepush sends to tokens only.
		return "message.token", "Recipient of the message is not set (the fake serves token messages only)."
	}
	for k := range m.Data {
		lk := strings.ToLower(k)
		if lk == "from" || lk == "message_type" || strings.HasPrefix(lk, "google") || strings.HasPrefix(lk, "gcm") {
			return "message.data", fmt.Sprintf("Invalid data payload key: %s", k)
		}
	}
	size := len(m.Data) // separators
	for k, v := range m.Data {
		size += len(k) + len(v)
	}
	if m.Notification != nil {
		size += len(m.Notification.Title) + len(m.Notification.Body) + len(m.Notification.Image)
	}
	if size > fcmMaxPayload {
		return "message", "Message is too big."
	}
	if a := m.Android; a != nil {
		if a.TTL != "" && !protoDuration.MatchString(a.TTL) {
			return "message.android.ttl", fmt.Sprintf("Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), Field 'ttl', Illegal duration format %q", a.TTL)
		}
		switch strings.ToUpper(a.Priority) {
		case "", "NORMAL", "HIGH":
		default:
			return "message.android.priority", fmt.Sprintf("Invalid value at 'message.android.priority', %q", a.Priority)
		}
	}
	if wp := m.Webpush; wp != nil && wp.FCMOptions != nil && wp.FCMOptions.Link != "" {
		if u, err := url.Parse(wp.FCMOptions.Link); err != nil || u.Scheme != "https" || u.Host == "" {
			return "message.webpush.fcm_options.link", "The link must be an HTTPS URL."
		}
	}
	return "", ""
}
