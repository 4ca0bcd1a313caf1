package fcm

import (
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

// The detail types of an FCM error answer that classification reads.
const (
	fcmErrorType   = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
	badRequestType = "type.googleapis.com/google.rpc.BadRequest"
	errorInfoType  = "type.googleapis.com/google.rpc.ErrorInfo"
)

// apiError is FCM's error answer:
//
//	{"error": {"code": 404, "message": "…", "status": "NOT_FOUND",
//	  "details": [{"@type": "…FcmError", "errorCode": "UNREGISTERED"}]}}
type apiError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type            string            `json:"@type"`
			ErrorCode       string            `json:"errorCode"`       // FcmError
			FieldViolations []fieldViolation  `json:"fieldViolations"` // BadRequest
			Reason          string            `json:"reason"`          // ErrorInfo
			Metadata        map[string]string `json:"metadata"`        // ErrorInfo
		} `json:"details"`
	} `json:"error"`
}

type fieldViolation struct {
	Field string `json:"field"`
}

// answer is an FCM answer that was not a success, read once.
type answer struct {
	status    int
	errorCode string // the FcmError detail's errorCode; "" when there is none
	name      string // errorCode, else the Google status, else the HTTP status text
	message   string
	aboutTok  bool // a BadRequest detail names message.token
	// projectQuota: an ErrorInfo detail says the project's send quota is
	// spent (a 429 that concerns every send of the project).
	projectQuota bool
}

func readAnswer(resp *httpsend.Response) answer {
	a := answer{status: resp.Status}
	var e apiError
	if json.Unmarshal(resp.Body, &e) == nil && (e.Error.Status != "" || e.Error.Message != "") {
		a.message = resp.Text(e.Error.Message)
		a.name = resp.Text(e.Error.Status)
		for _, d := range e.Error.Details {
			switch d.Type {
			case fcmErrorType:
				if a.errorCode == "" {
					a.errorCode = d.ErrorCode
				}
			case badRequestType:
				a.aboutTok = a.aboutTok || slices.ContainsFunc(d.FieldViolations, func(v fieldViolation) bool {
					return v.Field == "message.token"
				})
			case errorInfoType:
				// Google's API front end names the quota it enforced. Only the
				// project's own per-minute send quota (quota_limit
				// SendsPerMinutePerProject, quota_unit 1/min/{project}) is
				// shared by every send; a quota counted per anything finer
				// ("…/{project}/{user}") is not.
				a.projectQuota = a.projectQuota || d.Reason == "RATE_LIMIT_EXCEEDED" &&
					(d.Metadata["quota_limit"] == "SendsPerMinutePerProject" || strings.HasSuffix(d.Metadata["quota_unit"], "/{project}"))
			}
		}
		if a.errorCode != "" {
			a.name = resp.Text(a.errorCode)
		}
	} else {
		a.message = httpsend.Snippet(resp.Body)
	}
	if a.name == "" {
		a.name = http.StatusText(resp.Status)
	}
	return a
}

// text is the answer in FCM's words: "404 UNREGISTERED: Requested entity was
// not found."
func (a answer) text() string {
	t := fmt.Sprintf("%d %s", a.status, a.name)
	if a.message != "" {
		t += ": " + a.message
	}
	return t
}

// classify maps a non-success answer to an outcome: on the FcmError
// errorCode when FCM gave one, on the HTTP status otherwise. A token is
// declared dead only on FCM's explicit word for it.
func (p *Provider) classify(s *provider.Submission, resp *httpsend.Response, a answer) provider.Result {
	res := provider.Result{Text: a.text()}
	now := p.clock.Now()
	retryAfter := httpsend.RetryAfter(resp.Header.Get("Retry-After"), now)
	if a.projectQuota {
		return projectQuotaExceeded(res, retryAfter, now)
	}
	switch a.errorCode {
	case "UNREGISTERED", "SENDER_ID_MISMATCH":
		res.Outcome = provider.OutcomeInvalidToken
		return res
	case "INVALID_ARGUMENT":
		// Only a malformed token makes the token invalid; a malformed message
		// must never delete a live registration.
		res.Outcome = provider.OutcomeRejected
		if a.aboutTok {
			res.Outcome = provider.OutcomeInvalidToken
		}
		return res
	case "QUOTA_EXCEEDED":
		return rateLimited(res, retryAfter)
	case "UNAVAILABLE", "INTERNAL":
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
		return res
	case "THIRD_PARTY_AUTH_ERROR":
		p.log.Error("fcm: the APNs certificate/key or web push credentials configured in Firebase were refused; fix them in the Firebase console",
			slog.Int64("delivery_id", s.DeliveryID), slog.Int64("device_id", s.DeviceID), slog.String("answer", res.Text))
		res.Outcome = provider.OutcomeRejected
		return res
	}
	switch {
	case a.status == http.StatusBadRequest && a.aboutTok:
		res.Outcome = provider.OutcomeInvalidToken
	case a.status == http.StatusTooManyRequests:
		// Nothing says it is the project's quota: treated as the device's,
		// so a 429 nobody can place never stops the whole transport.
		return rateLimited(res, retryAfter)
	case a.status >= 500:
		res.Outcome, res.RetryAfter = provider.OutcomeRetry, retryAfter
	case a.status == http.StatusUnauthorized, a.status == http.StatusForbidden:
		p.log.Error("fcm: our credentials were refused; check the service account and that it may send for the project",
			slog.String("project_id", p.projectID), slog.Int64("delivery_id", s.DeliveryID), slog.String("answer", res.Text))
		res.Outcome = provider.OutcomeRejected
	default:
		res.Outcome = provider.OutcomeRejected
	}
	return res
}

// rateLimited backs off this device only: FCM's QUOTA_EXCEEDED is the
// message rate of one device or topic, which the project's other sends do not
// meet. The wait is Retry-After when FCM gives one, else
// RateLimitRetryDefault.
func rateLimited(res provider.Result, retryAfter time.Duration) provider.Result {
	res.Outcome = provider.OutcomeRetry
	res.RetryAfter = cmp.Or(retryAfter, RateLimitRetryDefault)
	return res
}

// projectQuotaExceeded pauses the whole transport: the project's send quota
// is spent, so every send would meet it. The quota counts per minute, so
// without Retry-After the pause lasts until the next minute begins.
func projectQuotaExceeded(res provider.Result, retryAfter time.Duration, now time.Time) provider.Result {
	res.Outcome = provider.OutcomeRetry
	res.RetryAfter = retryAfter
	if res.RetryAfter == 0 {
		res.RetryAfter = now.Truncate(time.Minute).Add(time.Minute).Sub(now)
	}
	res.Throttle = true
	return res
}
