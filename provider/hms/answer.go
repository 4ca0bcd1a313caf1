package hms

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/internal/httpsend"
)

// Push Kit's result codes (the answer body's "code"), as its REST API
// reference for scenario-based messages lists them.
const (
	CodeSuccess           = "80000000" // Success.
	CodePartialSuccess    = "80100000" // some tokens succeeded; the others are named
	CodeParameterError    = "80100001" // a request parameter is wrong
	CodeIllegalPayload    = "80100003" // the message structure is wrong
	CodeIllegalExpireTime = "80100004" // the message would expire before now
	CodeImageNotVerified  = "80100022" // the image did not pass the anti-spam check
	CodeAuthError         = "80200001" // the Authorization header was refused
	CodeJWTExpired        = "80200005" // the JWT has expired
	CodeNoPermission      = "80300002" // Push Kit not enabled, or another project's id
	CodeAllTokensInvalid  = "80300007" // every token of the request is invalid
	CodeMessageTooLong    = "80300008" // the body without tokens is over 4096 bytes
	CodeTokenCount        = "80300010" // too many (or no) tokens
	CodeTestMessageRate   = "80300029" // test messages sent too fast
	CodeTestTokenCount    = "80300030" // too many tokens in a test message
	CodeJWTTooLong        = "80300036" // the JWT's validity is over a day
	CodePenalty           = "80300037" // the app is penalised and may not send
	CodeInternalError     = "81000001" // Push Kit's internal error
)

// codeNone stands for an answer without Push Kit's body.
const codeNone = ""

// The reasons Push Kit gives for a token it did not send to (80100000,
// 80300007) that say the token itself is dead: malformed, another project's
// (or made before the device moved to HarmonyOS NEXT), or a third party's.
// Its other reasons (no right to the push-type, a penalised app, a country
// it does not serve, …) are about the app or the message: the token is kept.
var tokenReasons = []string{"tokenFormatError", "noRight", "tokenPlatformNotSupport"}

// answer is Push Kit's answer body, {"code", "msg", "requestId"}.
type answer struct {
	Code      json.RawMessage `json:"code"` // a string; a number is read too
	Msg       string          `json:"msg"`
	RequestID string          `json:"requestId"`
}

// code is the answer's result code, "" when the body is not Push Kit's.
func (a answer) code() string {
	return strings.Trim(string(bytes.TrimSpace(a.Code)), `"`)
}

// tokenFailures is what the msg of a partial or total failure may hold: the
// failed tokens, and the reasons they failed.
type tokenFailures struct {
	Success       int      `json:"success"`
	Failure       int      `json:"failure"`
	IllegalTokens []string `json:"illegal_tokens"`
}

// readAnswer decodes an answer; ok is false when the body is not Push Kit's
// document (a proxy's page, an empty body).
func readAnswer(resp *httpsend.Response) (a answer, code string, ok bool) {
	if json.Unmarshal(resp.Body, &a) != nil {
		return answer{}, "", false
	}
	code = a.code()
	return a, code, code != ""
}

// tokenDead reports whether the msg of a failure says this device's token is
// dead: it names the token among the illegal tokens, or gives a reason that
// is about the token. With only reasons about the app or the message it is
// not; with no reason at all, all says whether Push Kit called every token
// of the request invalid (80300007), which for a one-token request is its
// word on this one.
func tokenDead(msg, token string, all bool) (dead, saysWhy bool) {
	var f tokenFailures
	// The answer was read with the device token redacted (httpsend.Do):
	// the token named is this device's whichever way it reads.
	if json.Unmarshal([]byte(msg), &f) == nil &&
		(slices.Contains(f.IllegalTokens, token) || slices.Contains(f.IllegalTokens, httpsend.Redacted)) {
		return true, true
	}
	for _, r := range tokenReasons {
		if strings.Contains(msg, r) {
			return true, true
		}
	}
	for _, r := range appReasons {
		if strings.Contains(msg, r) {
			return false, true
		}
	}
	return all, false
}

// appReasons are the failure reasons about the app or the message.
var appReasons = []string{"noPushTypeRight", "atomicUnableSendUnsubscribedMsg", "countryNotSupport",
	"disableSendHuaweiMsgBecauseOfPenalty", "differentImgVerifyPolicy", "appinfoError", "notSupportPlayVoice",
	"noRightToSendThisLiveNotificationEvent"}

// authRefused reports an answer that refuses our JWT: it is dropped and the
// message sent once more with a new one.
func authRefused(resp *httpsend.Response, code string, ok bool) bool {
	if ok {
		return code == CodeAuthError || code == CodeJWTExpired
	}
	return resp.Status == http.StatusUnauthorized
}

// text is the answer in Push Kit's words: "400 80300007: All the tokens are
// invalid."
func text(resp *httpsend.Response, a answer, code string, ok bool) string {
	if !ok {
		t := fmt.Sprintf("%d %s", resp.Status, http.StatusText(resp.Status))
		if snip := httpsend.Snippet(resp.Body); snip != "" {
			t += ": " + snip
		}
		return t
	}
	t := fmt.Sprintf("%d %s", resp.Status, resp.Text(code))
	if a.Msg != "" {
		t += ": " + resp.Text(a.Msg)
	}
	return t
}

// classify maps an answer to an outcome: on Push Kit's result code when the
// body has one, on the HTTP status otherwise. A token is declared dead only
// on Push Kit's word about it.
func (p *Provider) classify(s *provider.Submission, resp *httpsend.Response) provider.Result {
	a, code, ok := readAnswer(resp)
	res := provider.Result{Text: text(resp, a, code, ok)}
	now := p.clock.Now()
	retryAfter := httpsend.RetryAfter(resp.Header.Get("Retry-After"), now)
	if !ok {
		code = codeNone
	}
	switch code {
	case CodeSuccess:
		return provider.Accepted(resp.Text(a.RequestID))
	case CodePartialSuccess:
		// One token a request: a failure named is this device's.
		if dead, why := tokenDead(a.Msg, string(s.Token), false); dead {
			res.Outcome = provider.OutcomeInvalidToken
		} else if why {
			res.Outcome = provider.OutcomeRejected
		} else {
			return provider.Accepted(resp.Text(a.RequestID))
		}
		return res
	case CodeAllTokensInvalid:
		res.Outcome = provider.OutcomeRejected
		if dead, _ := tokenDead(a.Msg, string(s.Token), true); dead {
			res.Outcome = provider.OutcomeInvalidToken
		}
		return res
	case CodeParameterError, CodeIllegalPayload, CodeIllegalExpireTime, CodeImageNotVerified,
		CodeMessageTooLong, CodeTokenCount, CodeTestTokenCount:
		res.Outcome = provider.OutcomeRejected
		return res
	case CodeAuthError, CodeJWTExpired, CodeJWTTooLong:
		p.log.Error("hms: Push Kit refused the service account's JWT; check the key file and that its project_id is the app's project",
			slog.String("project_id", p.projectID), slog.Int64("delivery_id", s.DeliveryID), slog.String("answer", res.Text))
		res.Outcome = provider.OutcomeRejected
		return res
	case CodeNoPermission, CodePenalty:
		p.log.Error("hms: Push Kit will not send for this project; check in AppGallery Connect that Push Kit is enabled and the app is not penalised",
			slog.String("project_id", p.projectID), slog.Int64("delivery_id", s.DeliveryID), slog.String("answer", res.Text))
		res.Outcome = provider.OutcomeRejected
		return res
	case CodeTestMessageRate:
		// The project's test-message rate: every send meets it.
		res.Outcome, res.RetryAfter, res.Throttle = provider.OutcomeRetry, cmp.Or(retryAfter, time.Minute), true
		return res
	case CodeInternalError:
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
		return res
	}
	switch st := resp.Status; {
	case st == http.StatusServiceUnavailable:
		// Flow control: the app's sends per second are over its threshold,
		// or Push Kit limits every app. Every send of the app meets it.
		res.Outcome, res.RetryAfter, res.Throttle = provider.OutcomeRetry, cmp.Or(retryAfter, FlowControlRetryDefault), true
	case st == http.StatusTooManyRequests, st >= 500:
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
	case st == http.StatusUnauthorized, st == http.StatusForbidden:
		p.log.Error("hms: Push Kit refused our credentials; check the service-account key file",
			slog.String("project_id", p.projectID), slog.Int64("delivery_id", s.DeliveryID), slog.String("answer", res.Text))
		res.Outcome = provider.OutcomeRejected
	case st >= 200 && st < 300 && !ok:
		// A 2xx without Push Kit's code: it took the request, but says
		// nothing of the result. Taking it for a success is what a lost
		// answer would be; the engine's record of it is the same.
		return provider.Accepted("")
	default:
		// 400 without a code, 404 (a wrong URL): never the token's fault.
		res.Outcome = provider.OutcomeRejected
	}
	return res
}
