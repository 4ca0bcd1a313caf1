package fakepush

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// fakeAPNs speaks APNs's HTTP/2 provider API with token authentication:
// POST /3/device/{token}, checked the way APNs checks it.
//
//   - HTTP/1.x, a missing, badly signed or mis-addressed provider JWT (403
//     MissingProviderToken / InvalidProviderToken / ExpiredProviderToken) and
//     a missing apns-topic (400 MissingTopic) are refused and not recorded:
//     they are client bugs, not sends.
//   - A token that is not hexadecimal, and malformed apns-id, apns-push-type,
//     apns-priority, apns-expiration or apns-collapse-id headers, an empty or
//     oversized payload are answered as APNs would (400 BadDeviceToken, …)
//     and recorded.
//   - Otherwise the programmed answer, or 200 with the apns-id echoed (or made
//     up when the request had none) and an empty body.
//
// The JWT's iat is checked against the fake's clock (Options.Clock): at most
// an hour old and at most a minute ahead.
type fakeAPNs struct {
	s      *Server
	key    *ecdsa.PrivateKey
	p8     []byte
	keyID  string
	teamID string

	mu     sync.Mutex
	tokens map[string]struct{}
}

// fakeAPNsMaxPayload is APNs's limit for alert and background notifications.
const fakeAPNsMaxPayload = 4096

// apns is the server's APNs state.
func (s *Server) apns() *fakeAPNs { return s.speaks[provider.TransportAPNs].(*fakeAPNs) }

func newFakeAPNs(s *Server) *fakeAPNs {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic("pushtest: generate the fake APNs signing key: " + err.Error())
	}
	p8, err := pkcs8PEM(key)
	if err != nil {
		panic("pushtest: encode the fake APNs signing key: " + err.Error())
	}
	f := &fakeAPNs{
		s:      s,
		key:    key,
		p8:     p8,
		keyID:  appleID(),
		teamID: appleID(),
		tokens: map[string]struct{}{},
	}
	s.mux.HandleFunc("POST /3/device/{token}", f.handle)
	return f
}

// APNsKey returns the signing key the fake APNs accepts provider JWTs from:
// the .p8 file's contents, its key id and the team id. One key per server.
func (s *Server) APNsKey() (p8 []byte, keyID, teamID string) {
	return append([]byte(nil), s.apns().p8...), s.apns().keyID, s.apns().teamID
}

// APNsTokensSeen returns how many distinct, correctly signed provider JWTs
// the fake APNs has received (a client that reuses its JWT shows 1 however
// many notifications it sent).
func (s *Server) APNsTokensSeen() int {
	s.apns().mu.Lock()
	defer s.apns().mu.Unlock()
	return len(s.apns().tokens)
}

// APNsError is an APNs error answer for Program: the status and
// {"reason": reason}, with a "timestamp" (now on the wall clock, in
// milliseconds: the answer is made before any server has it) on 410 as APNs
// sends it.
func APNsError(status int, reason string) Answer {
	body := map[string]any{"reason": reason}
	if status == http.StatusGone {
		body["timestamp"] = time.Now().UnixMilli()
	}
	b, _ := json.Marshal(body)
	return Answer{Status: status, Body: string(b)}
}

func (f *fakeAPNs) handle(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 {
		refuse(w, http.StatusBadRequest, apnsReason("HTTP2Required (the fake, like APNs, speaks only HTTP/2)"))
		return
	}
	if status, reason := f.authorize(r.Header.Get("Authorization")); reason != "" {
		refuse(w, status, apnsReason(reason))
		return
	}
	if r.Header.Get("apns-topic") == "" {
		refuse(w, http.StatusBadRequest, apnsReason("MissingTopic"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return // the client went away
	}
	token := r.PathValue("token")
	apnsID := r.Header.Get("apns-id")
	req := Request{
		Transport:  provider.TransportAPNs,
		Token:      token,
		CollapseID: r.Header.Get("apns-collapse-id"),
		APNsID:     apnsID,
		Payload:    body,
		Header:     r.Header,
	}
	var payload struct {
		ID string `json:"oncepush_id"`
	}
	if json.Unmarshal(body, &payload) == nil {
		req.NotificationID = payload.ID
	}
	if status, reason := checkAPNsRequest(token, r.Header, body); reason != "" {
		f.answerError(w, r, req, status, reason)
		return
	}
	if req.APNsID == "" {
		req.APNsID = newAPNsID()
	}
	f.s.serve(w, r, req, func(w http.ResponseWriter, _ int64) {
		w.Header().Set("apns-id", req.APNsID)
		w.WriteHeader(http.StatusOK)
	})
}

// checkAPNsRequest finds what APNs itself would answer with an error.
func checkAPNsRequest(token string, h http.Header, body []byte) (status int, reason string) {
	if _, err := hex.DecodeString(token); err != nil || token == "" {
		return http.StatusBadRequest, "BadDeviceToken"
	}
	if id := h.Get("apns-id"); id != "" && !isAPNsID(id) {
		return http.StatusBadRequest, "BadMessageId"
	}
	switch h.Get("apns-push-type") {
	case "", "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk", "widgets":
	default:
		return http.StatusBadRequest, "InvalidPushType"
	}
	switch h.Get("apns-priority") {
	case "", "1", "5", "10":
	default:
		return http.StatusBadRequest, "BadPriority"
	}
	if e := h.Get("apns-expiration"); e != "" {
		if _, err := strconv.ParseInt(e, 10, 64); err != nil {
			return http.StatusBadRequest, "BadExpirationDate"
		}
	}
	if len(h.Get("apns-collapse-id")) > 64 {
		return http.StatusBadRequest, "BadCollapseId"
	}
	if len(h.Values("apns-topic")) > 1 || len(h.Values("apns-id")) > 1 {
		return http.StatusBadRequest, "DuplicateHeaders"
	}
	if len(body) == 0 {
		return http.StatusBadRequest, "PayloadEmpty"
	}
	if len(body) > fakeAPNsMaxPayload {
		return http.StatusRequestEntityTooLarge, "PayloadTooLarge"
	}
	return 0, ""
}

// answerError records the request and answers an APNs error that the
// protocol itself calls for (no program consulted).
func (f *fakeAPNs) answerError(w http.ResponseWriter, r *http.Request, req Request, status int, reason string) {
	f.s.answerNow(r, req, status)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(apnsReason(reason))
}

// authorize checks the provider JWT; it returns the refusal, if any.
func (f *fakeAPNs) authorize(auth string) (status int, reason string) {
	const forbidden = http.StatusForbidden
	scheme, jwt, ok := strings.Cut(auth, " ")
	if auth == "" {
		return forbidden, "MissingProviderToken"
	}
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return forbidden, "InvalidProviderToken"
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return forbidden, "InvalidProviderToken"
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	var claims struct {
		Iss string `json:"iss"`
		Iat *int64 `json:"iat"`
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || decodeJWTPart(parts[0], &header) != nil || decodeJWTPart(parts[1], &claims) != nil {
		return forbidden, "InvalidProviderToken"
	}
	if header.Alg != "ES256" || header.Kid != f.keyID || claims.Iss != f.teamID || claims.Iat == nil || len(sig) != 64 {
		return forbidden, "InvalidProviderToken"
	}
	// A token whose signature was verified once is known (APNs, too, validates
	// a token once per connection); its iat is still checked every time.
	f.mu.Lock()
	_, known := f.tokens[jwt]
	f.mu.Unlock()
	if !known {
		if !verifyES256(&f.key.PublicKey, parts, sig) {
			return forbidden, "InvalidProviderToken"
		}
		f.mu.Lock()
		f.tokens[jwt] = struct{}{}
		f.mu.Unlock()
	}
	iat := time.Unix(*claims.Iat, 0)
	switch now := f.s.now(); {
	case now.Sub(iat) > time.Hour:
		return forbidden, "ExpiredProviderToken"
	case iat.Sub(now) > time.Minute:
		return forbidden, "InvalidProviderToken"
	}
	return 0, ""
}

func apnsReason(reason string) map[string]string { return map[string]string{"reason": reason} }

// appleID makes a 10-character id like Apple's key and team ids.
func appleID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// newAPNsID makes a random (version 4) UUID, as APNs does for a request without apns-id.
func newAPNsID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// isAPNsID reports whether s is a UUID in its 8-4-4-4-12 hexadecimal form.
func isAPNsID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}
