package fakepush

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// fakeWebPush is a push service as RFC 8030 describes it, for subscriptions
// the fake created (NewWebPushSubscription): it checks the request's headers
// and VAPID authorization (RFC 8292), decrypts the aes128gcm body (RFC 8291)
// with the subscription's own keys, and records the plaintext.
//
// The decryption here is written independently of provider/webpush (HMAC
// steps spelled out rather than crypto/hkdf), so the two check each other.
type fakeWebPush struct {
	s *Server

	mu   sync.Mutex
	subs map[string]*fakeSubscription // by endpoint id
	// vapidOK remembers Authorization headers whose VAPID JWT verified, and
	// when: the same header is trusted for vapidReuse without a new signature
	// check (a push service, too, need not verify a JWT it has just verified).
	vapidOK map[string]time.Time
}

// vapidReuse is how long a verified Authorization header is trusted again.
const vapidReuse = time.Minute

// fakeSubscription is what a browser keeps for one subscription.
type fakeSubscription struct {
	key  *ecdh.PrivateKey
	auth []byte
}

// Limits a push service enforces.
const (
	webPushMaxBody = 4096
	// webPushMaxJWTLifetime is how far ahead a VAPID JWT may expire (RFC
	// 8292 §2), with a minute for clocks that disagree.
	webPushMaxJWTLifetime = 24*time.Hour + time.Minute
)

// webpush is the server's WebPush state.
func (s *Server) webpush() *fakeWebPush { return s.speaks[provider.TransportWebPush].(*fakeWebPush) }

func newFakeWebPush(s *Server) *fakeWebPush {
	f := &fakeWebPush{s: s, subs: map[string]*fakeSubscription{}, vapidOK: map[string]time.Time{}}
	s.mux.HandleFunc("POST /webpush/{id}", f.push)
	// The control endpoint (ControlPrefix) for a new subscription.
	s.mux.HandleFunc("POST /_fake/webpush/subscriptions", func(w http.ResponseWriter, r *http.Request) {
		token := s.NewWebPushSubscription()
		sub, err := provider.ParseWebPushSubscription(string(token))
		if err != nil { // our own subscription always parses
			controlError(w, http.StatusInternalServerError, err.Error())
			return
		}
		if r.URL.Query().Get("as") == "device" {
			// The body of PUT /v1/recipients/{recipient}/devices, for a
			// shell that has curl and no JSON tool.
			controlJSON(w, http.StatusCreated, map[string]string{"transport": string(provider.TransportWebPush), "token": string(token)})
			return
		}
		id := strings.TrimPrefix(sub.Endpoint, s.URL+"/webpush/")
		controlJSON(w, http.StatusCreated, ControlSubscription{Token: string(token), ID: id})
	})
	return f
}

// NewWebPushSubscription creates a subscription on the fake push service, as a
// browser's PushManager.subscribe would: a P-256 key pair and a 16-byte auth
// secret that the fake keeps to decrypt what is sent to it, and the endpoint
// URL+"/webpush/<id>". It returns the subscription as a Web Push device token.
// The <id> is the Request.Token of requests to it, and the token to
// Program answers for.
func (s *Server) NewWebPushSubscription() provider.Token {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		panic("pushtest: generate P-256 key: " + err.Error())
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth) // never fails (crypto/rand since Go 1.24)
	idBytes := make([]byte, 12)
	_, _ = rand.Read(idBytes)
	id := hex.EncodeToString(idBytes)

	s.webpush().mu.Lock()
	s.webpush().subs[id] = &fakeSubscription{key: key, auth: auth}
	s.webpush().mu.Unlock()

	sub := &provider.WebPushSubscription{
		Endpoint: s.URL + "/webpush/" + id,
		P256dh:   key.PublicKey().Bytes(),
		Auth:     auth,
	}
	return sub.Token()
}

// autopushErrors are the errno and message Mozilla's autopush answers a
// status with; any other status gets errno 999, "Unexpected error".
var autopushErrors = map[int]struct {
	errno   int
	message string
}{
	http.StatusBadRequest:            {101, "Request did not validate: missing or invalid headers"},
	http.StatusUnauthorized:          {109, "Request did not validate: missing authorization header"},
	http.StatusForbidden:             {109, "Request did not validate: invalid VAPID authorization"},
	http.StatusNotFound:              {102, "Request did not validate: invalid token"},
	http.StatusGone:                  {106, "Request did not validate: push subscription has unsubscribed or expired."},
	http.StatusRequestEntityTooLarge: {104, "Request did not validate: body too large"},
	http.StatusTooManyRequests:       {999, "Too many requests for this subscription"},
	http.StatusServiceUnavailable:    {201, "Service Unavailable"},
}

// WebPushError returns a push service's error answer for a status, with a
// JSON body in the style of Mozilla's autopush ({"code", "errno", "error",
// "message"}). Add a Retry-After header to the answer's Header for 429/503.
func WebPushError(status int) Answer {
	e, ok := autopushErrors[status]
	if !ok {
		e.errno, e.message = 999, "Unexpected error"
	}
	body, _ := json.Marshal(map[string]any{
		"code": status, "errno": e.errno, "error": http.StatusText(status), "message": e.message,
	})
	return Answer{Status: status, Body: string(body)}
}

func webPushRefusal(status int, message string) map[string]any {
	return map[string]any{"code": status, "error": http.StatusText(status), "message": message}
}

// push handles POST /webpush/{id}. A malformed or unauthorised request is
// refused and not recorded (a client bug must show); a request for a
// subscription the fake does not know is recorded and answered 404, as a
// push service answers for a subscription that is gone.
func (f *fakeWebPush) push(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if msg := checkWebPushHeaders(r.Header); msg != "" {
		refuse(w, http.StatusBadRequest, webPushRefusal(http.StatusBadRequest, msg))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, webPushMaxBody+1))
	if err != nil {
		return // the client went away
	}
	if len(body) > webPushMaxBody {
		refuse(w, http.StatusRequestEntityTooLarge,
			webPushRefusal(http.StatusRequestEntityTooLarge, "body is larger than 4096 bytes"))
		return
	}
	if !f.vapidKnown(r) {
		if status, msg := checkVAPID(r.Header.Get("Authorization"), "https://"+r.Host, f.s.now()); status != 0 {
			refuse(w, status, webPushRefusal(status, msg))
			return
		}
		f.mu.Lock()
		f.vapidOK[r.Host+" "+r.Header.Get("Authorization")] = f.s.now()
		f.mu.Unlock()
	}

	f.mu.Lock()
	sub := f.subs[id]
	f.mu.Unlock()
	req := Request{
		Transport:  provider.TransportWebPush,
		Token:      id,
		CollapseID: r.Header.Get("Topic"),
		Header:     r.Header,
	}
	if sub == nil {
		f.s.serve(w, r, req, func(w http.ResponseWriter, _ int64) {
			a := WebPushError(http.StatusNotFound)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(a.Status)
			_, _ = io.WriteString(w, a.Body)
		})
		return
	}
	plaintext, err := sub.decrypt(body)
	if err != nil {
		refuse(w, http.StatusBadRequest, webPushRefusal(http.StatusBadRequest, "payload does not decrypt: "+err.Error()))
		return
	}
	var payload struct {
		OncepushID string `json:"oncepush_id"`
	}
	_ = json.Unmarshal(plaintext, &payload) // a payload that is not ours records no id
	req.NotificationID = payload.OncepushID
	req.Payload = plaintext
	f.s.serve(w, r, req, func(w http.ResponseWriter, seq int64) {
		w.Header().Set("Location", f.s.URL+"/webpush/msg/"+strconv.FormatInt(seq, 10))
		w.WriteHeader(http.StatusCreated)
	})
}

// vapidKnown reports whether the request's Authorization header verified for
// this host within vapidReuse.
func (f *fakeWebPush) vapidKnown(r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.vapidOK[r.Host+" "+r.Header.Get("Authorization")]
	return ok && f.s.now().Sub(at) < vapidReuse
}

// checkWebPushHeaders returns what is wrong with a push request's headers
// (RFC 8030 §5, RFC 8291 §4), or "".
func checkWebPushHeaders(h http.Header) string {
	if ce := h.Get("Content-Encoding"); !strings.EqualFold(ce, "aes128gcm") {
		return "Content-Encoding must be aes128gcm, got " + strconv.Quote(ce)
	}
	ttl := h.Get("TTL")
	if ttl == "" {
		return "missing TTL header"
	}
	if n, err := strconv.ParseInt(ttl, 10, 64); err != nil || n < 0 {
		return "TTL must be a non-negative number of seconds, got " + strconv.Quote(ttl)
	}
	switch u := h.Get("Urgency"); u {
	case "", "very-low", "low", "normal", "high":
	default:
		return "Urgency must be very-low, low, normal or high, got " + strconv.Quote(u)
	}
	if t := h.Get("Topic"); t != "" && !base64URLTopic(t) {
		return "Topic must be at most 32 characters of the base64url alphabet"
	}
	return ""
}

func base64URLTopic(t string) bool {
	if len(t) > 32 {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// checkVAPID verifies an "Authorization: vapid t=<jwt>, k=<key>" header (RFC
// 8292 §3): an ES256 JWT signed by k, aud the push service's origin, exp in the
// future and at most 24 hours ahead, sub present. It returns 401 when the
// authorization is absent or not the vapid scheme, 403 when it is invalid, and
// 0 when it is good.
func checkVAPID(header, wantAud string, now time.Time) (int, string) {
	scheme, params, _ := strings.Cut(strings.TrimSpace(header), " ")
	if header == "" {
		return http.StatusUnauthorized, "missing Authorization header"
	}
	if !strings.EqualFold(scheme, "vapid") {
		return http.StatusUnauthorized, "Authorization scheme must be vapid (RFC 8292), got " + strconv.Quote(scheme)
	}
	var t, k string
	for _, p := range strings.Split(params, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch strings.ToLower(name) {
		case "t":
			t = value
		case "k":
			k = value
		}
	}
	if t == "" || k == "" {
		return http.StatusUnauthorized, "vapid authorization needs both t and k"
	}
	keyBytes, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(k, "="))
	if err != nil {
		return http.StatusForbidden, "k is not base64url"
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), keyBytes)
	if err != nil {
		return http.StatusForbidden, "k is not an uncompressed P-256 public key"
	}
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return http.StatusForbidden, "t is not a compact JWT"
	}
	var head struct {
		Typ string `json:"typ"`
		Alg string `json:"alg"`
	}
	if err := decodeJWTPart(parts[0], &head); err != nil || head.Alg != "ES256" || (head.Typ != "" && head.Typ != "JWT") {
		return http.StatusForbidden, "JWT header must be {\"typ\":\"JWT\",\"alg\":\"ES256\"}"
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return http.StatusForbidden, "JWT signature must be 64 bytes (r ‖ s), base64url"
	}
	if !verifyES256(pub, parts, sig) {
		return http.StatusForbidden, "JWT signature does not verify with k"
	}
	var claims struct {
		Aud string   `json:"aud"`
		Exp *float64 `json:"exp"`
		Sub string   `json:"sub"`
	}
	if err := decodeJWTPart(parts[1], &claims); err != nil {
		return http.StatusForbidden, "JWT claims are not a JSON object"
	}
	switch {
	case claims.Aud != wantAud:
		return http.StatusForbidden, "JWT aud must be " + strconv.Quote(wantAud) + ", got " + strconv.Quote(claims.Aud)
	case claims.Exp == nil:
		return http.StatusForbidden, "JWT has no exp"
	case !time.Unix(int64(*claims.Exp), 0).After(now):
		return http.StatusForbidden, "JWT has expired"
	case time.Unix(int64(*claims.Exp), 0).After(now.Add(webPushMaxJWTLifetime)):
		return http.StatusForbidden, "JWT exp is more than 24 hours ahead"
	case !strings.HasPrefix(claims.Sub, "mailto:") && !strings.HasPrefix(claims.Sub, "https:"):
		return http.StatusForbidden, "JWT sub must be a mailto: or https: URL"
	}
	return 0, ""
}

// decrypt opens an aes128gcm body (RFC 8188) encrypted for this subscription
// (RFC 8291): one record, header salt ‖ rs ‖ idlen ‖ the sender's public key.
func (sub *fakeSubscription) decrypt(body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("shorter than the aes128gcm header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		return nil, errors.New("keyid must be the sender's 65-byte public key")
	}
	senderKey, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	if err != nil {
		return nil, errors.New("keyid is not a P-256 public key")
	}
	record := body[21+idlen:]
	if rs < 18 || uint64(len(record)) > uint64(rs) {
		return nil, errors.New("a push message must be a single record no longer than rs")
	}
	if len(record) < 17 {
		return nil, errors.New("record is shorter than its authentication tag")
	}
	secret, err := sub.key.ECDH(senderKey)
	if err != nil {
		return nil, err
	}
	// HKDF (RFC 5869) spelled out: every output here fits in one HMAC block,
	// so Expand is HMAC(prk, info ‖ 0x01) cut to length.
	uaPublic := sub.key.PublicKey().Bytes()
	keyInfo := append(append([]byte("WebPush: info\x00"), uaPublic...), senderKey.Bytes()...)
	prkKey := hmacSHA256(sub.auth, secret)
	ikm := hmacSHA256(prkKey, append(keyInfo, 1))
	prk := hmacSHA256(salt, ikm)
	cek := hmacSHA256(prk, []byte("Content-Encoding: aes128gcm\x00\x01"))[:16]
	nonce := hmacSHA256(prk, []byte("Content-Encoding: nonce\x00\x01"))[:12]
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	padded, err := gcm.Open(nil, nonce, record, nil)
	if err != nil {
		return nil, errors.New("authentication failed (wrong keys or a corrupted body)")
	}
	// Plaintext, then the delimiter 0x02 (last record), then zero padding.
	end := len(padded) - 1
	for end >= 0 && padded[end] == 0 {
		end--
	}
	if end < 0 || padded[end] != 0x02 {
		return nil, errors.New("the only record must end with the last-record delimiter 0x02")
	}
	return padded[:end], nil
}

func hmacSHA256(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}
