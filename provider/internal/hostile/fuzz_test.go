package hostile

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/hms"
	"github.com/oncepush/oncepush/provider/internal/httpsend"
)

// FuzzProviderAnswer fuzzes each provider's answer handling end to end: its
// real Send against a push service answering with the fuzzer's status,
// headers and body. In those, $T stands for the device token as the provider sent it,
// $U for the same with every character a JSON \u escape, $C for the
// credential of the request's Authorization header, $P for the request's
// path and $E for the whole request echoed, so that the fuzzer can place the
// send's secrets anywhere in an answer. Whatever the answer, Send returns a
// Result whose text and provider id are storable (UTF-8, no NUL), printable
// (httpsend.Printable leaves them as they are), at most maxWords bytes, and
// hold no secret; and no log line holds a secret or a control character.

// maxWords bounds a Result's text and provider id: the ledger keeps 1,000
// bytes of a text, and a log line should not carry more.
const maxWords = 1000

// The seeds, per transport: the provider's real answers, and hostile ones.
var fcmAnswers = []answerSeed{
	{200, "", `{"name": "projects/hostile/messages/0:1"}`},
	{200, "", `{"name": "$E"}`},
	{404, "", `{"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND", "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}]}}`},
	{400, "", `{"error": {"code": 400, "message": "The registration token is not a valid FCM registration token: $T", "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "message.token"}]}]}}`},
	{401, "", `{"error": {"code": 401, "message": "Request had invalid authentication credentials: Bearer $U", "status": "UNAUTHENTICATED"}}`},
	{403, "", `{"error": {"code": 403, "message": "$U was refused", "status": "PERMISSION_DENIED"}}`},
	{401, "", `{"error": {"code": 401, "message": "THIRD_PARTY_AUTH_ERROR $U", "status": "UNAUTHENTICATED", "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "THIRD_PARTY_AUTH_ERROR"}]}}`},
	{429, "Retry-After: 99999999999999999999", `{"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED", "metadata": {"quota_limit": "SendsPerMinutePerProject"}}]}}`},
	{429, "Retry-After: Wed, 21 Oct 2099 07:28:00 GMT", `{"error": {"status": "RESOURCE_EXHAUSTED", "message": "x", "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "QUOTA_EXCEEDED"}]}}`},
	{500, "", `{"error": {"code": 500, "message": "` + strings.Repeat("x", 70000) + `", "status": "INTERNAL"}}`},
	{502, "Content-Type: text/html", `<html><body>$E</body></html>`},
	{503, "", "\x1b[2J\u009b31m\u202e\r\nlevel=ERROR\x00\xff\xfe"},
	{400, "", `{"error": {"message": "\u001b[31m\u202e\ud800\u0000 $T", "status": "\u0000INVALID_ARGUMENT"}}`},
	{400, "", `{"error": {"message": 5, "status": ["x"]}}`},
	{400, "", `{"error": {"message": "` + strings.Repeat(`\\`, 2000) + `"}}`},
}

var apnsAnswers = []answerSeed{
	{200, "apns-id: 11111111-2222-3333-4444-555555555555", ``},
	{200, "apns-id: $P $T", ``},
	{410, "", `{"reason": "Unregistered", "timestamp": 1767225600000}`},
	{410, "", `{"reason": "Unregistered", "timestamp": 9223372036854775807}`},
	{410, "", `{"reason": "Unregistered", "timestamp": -9223372036854775808}`},
	{400, "", `{"reason": "BadDeviceToken $U"}`},
	{403, "", `{"reason": "InvalidProviderToken: $U"}`},
	{403, "", `{"reason": "ExpiredProviderToken"}`},
	{429, "Retry-After: 1", `{"reason": "TooManyProviderTokenUpdates"}`},
	{500, "", `{"reason": "` + strings.Repeat("y", 70000) + `"}`},
	{502, "", `$E`},
	{400, "", `{"reason": "\u001b[2J\u202e\u0000\ud800"}`},
	{400, "", `{"reason": 5}`},
}

var webPushAnswers = []answerSeed{
	{201, "Location: https://push.example/m/1", ``},
	{201, "Location: $P?$T", ``},
	{410, "", `push subscription has unsubscribed or expired. $P`},
	{413, "", `$E`},
	{429, "Retry-After: 120", `slow down`},
	{401, "", `VAPID $C refused: $U`},
	{403, "", "\x1b[2J\u202e\r\nlevel=ERROR\x00\xff"},
	{500, "", strings.Repeat("z", 70000)},
	{301, "Location: http://169.254.169.254/", ``},
	{204, "", ``},
}

var ruStoreAnswers = []answerSeed{
	{200, "", `{}`},
	{200, "", `{"name": "$E"}`},
	{404, "", `{"error": {"code": 404, "message": "wrong push token $T", "status": "NOT_FOUND"}}`},
	{400, "", `{"error": {"code": 400, "message": "invalid token $U", "status": "INVALID_ARGUMENT"}}`},
	{401, "", `{"error": {"code": 401, "message": "service token $U expired", "status": "UNAUTHENTICATED"}}`},
	{403, "", `{"error": {"code": 403, "message": "$C", "status": "PERMISSION_DENIED"}}`},
	{429, "Retry-After: -5", `{"error": {"status": "TOO_MANY_REQUESTS", "message": "x"}}`},
	{500, "", `{"error": {"code": 500, "message": "` + strings.Repeat("w", 70000) + `", "status": "INTERNAL"}}`},
	{502, "", `$E`},
	{400, "", `{"error": {"message": "\u001b[2J\u202e\u0000\ud800", "status": "\u202eNOT_FOUND"}}`},
}

var hmsAnswers = []answerSeed{
	{200, "", `{"code": "80000000", "msg": "Success", "requestId": "$E"}`},
	{200, "", `{"code": 80100000, "msg": "{\"success\":0,\"failure\":1,\"illegal_tokens\":[\"$T\"]}"}`},
	{400, "", `{"code": "80300007", "msg": "All the tokens are invalid. $U"}`},
	{401, "", `{"code": "80200005", "msg": "Jwt token expired. $C"}`},
	{403, "", `{"code": "80300002", "msg": "$C"}`},
	{503, "Retry-After: -5", `flow control`},
	{500, "", `{"code": "81000001", "msg": "` + strings.Repeat("w", 70000) + `"}`},
	{400, "", `{"code": "\u202e80300007", "msg": "\u001b[2J\u202e\u0000\ud800"}`},
}

// answerTransports are the transports FuzzProviderAnswer picks from, and
// answerSeeds their seeds.
var (
	answerTransports = []provider.Transport{provider.TransportFCM, provider.TransportAPNs, provider.TransportWebPush, provider.TransportRuStore, hms.Name}
	answerSeeds      = map[provider.Transport][]answerSeed{
		provider.TransportFCM: fcmAnswers, provider.TransportAPNs: apnsAnswers,
		provider.TransportWebPush: webPushAnswers, provider.TransportRuStore: ruStoreAnswers, hms.Name: hmsAnswers,
	}
)

// answerSeed is a push service's answer: status, header lines ("Name:
// value", one a line) and body.
type answerSeed struct {
	status int
	header string
	body   string
}

// FuzzProviderAnswer: the fuzzer's transport picks the provider, so that
// one run of go test -fuzz fuzzes all five.
func FuzzProviderAnswer(f *testing.F) {
	for i, tr := range answerTransports {
		for _, s := range answerSeeds[tr] {
			f.Add(uint8(i), s.status, s.header, []byte(s.body))
		}
	}
	w := newWorld(f)
	f.Fuzz(func(t *testing.T, transport uint8, status int, header string, body []byte) {
		tr := answerTransports[int(transport)%len(answerTransports)]
		// net/http writes only three-digit statuses, and a 1xx is not an
		// answer.
		status = 200 + ((status-200)%400+400)%400
		w.answerWith(func(_ provider.Transport, rw http.ResponseWriter, r *request) {
			expand := w.markers(tr, r)
			for line := range strings.SplitSeq(header, "\n") {
				name, value, ok := strings.Cut(line, ":")
				value = expand.Replace(strings.TrimSpace(value))
				if ok && httpguts.ValidHeaderFieldName(name) && httpguts.ValidHeaderFieldValue(value) {
					rw.Header().Add(name, value)
				}
			}
			rw.WriteHeader(status)
			_, _ = rw.Write([]byte(expand.Replace(string(body))))
		})
		w.logs.Reset()
		res := w.sendIn(t.Context(), w.submission(tr))
		if res.Outcome < provider.OutcomeAccepted || res.Outcome > provider.OutcomeMaybeSent || res.RetryAfter < 0 {
			t.Fatalf("%d %q: outcome %v, retry after %v", status, body, res.Outcome, res.RetryAfter)
		}
		for what, text := range map[string]string{"text": res.Text, "provider id": res.ProviderID} {
			switch {
			case !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0:
				t.Fatalf("%d %q: the result's %s is not storable: %q", status, body, what, text)
			case httpsend.Printable(text) != text:
				t.Fatalf("%d %q: the result's %s is not printable: %q", status, body, what, text)
			case len(text) > maxWords:
				t.Fatalf("%d %q: the result's %s is %d bytes", status, body, what, len(text))
			}
			if s := w.leaked(text); s != "" {
				t.Fatalf("%d %q: the result's %s holds a secret (%.12s…): %q", status, body, what, s, text)
			}
		}
		w.checkLogs(t)
	})
}

// markers replaces the markers of an answer with the send's secrets.
func (w *world) markers(tr provider.Transport, r *request) *strings.Replacer {
	tok := string(w.tokens[tr])
	cred := ""
	if _, c, ok := strings.Cut(r.header.Get("Authorization"), " "); ok {
		cred = c
	}
	var escaped strings.Builder
	for _, c := range tok {
		fmt.Fprintf(&escaped, `\u%04x`, c)
	}
	return strings.NewReplacer("$T", tok, "$U", escaped.String(), "$C", cred, "$P", r.path, "$E", echo(r))
}
