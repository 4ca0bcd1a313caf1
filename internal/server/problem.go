package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/oncepush/oncepush"
)

// Problem is an RFC 9457 problem detail with a stable code. Handlers return it
// (or any error, which becomes a 500 with the detail only in the log).
type Problem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail,omitempty"`
	// Field names the request field at fault, as the API spells it
	// ("recipients[3]", "data", "quietHours.timeZone").
	Field string `json:"field,omitempty"`
	// Type is a URI naming the problem; it is derived from Code.
	Type string `json:"type"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`

	cause  error       // for the log only
	header http.Header // set on the answer (Accept-Encoding, Retry-After)
}

func (p *Problem) Error() string {
	if p.Field != "" {
		return fmt.Sprintf("%s (%s): %s", p.Code, p.Field, p.Detail)
	}
	return p.Code + ": " + p.Detail
}

// Problem codes. They are part of the API: never rename one.
const (
	CodeInvalidJSON          = "invalid_json"           // 400: the body is not JSON, or has trailing data
	CodeInvalidField         = "invalid_field"          // 400: a field has a wrong type or value
	CodeUnknownField         = "unknown_field"          // 400: a field the API does not know
	CodeMissingField         = "missing_field"          // 400: a required field is absent
	CodeBodyTooLarge         = "body_too_large"         // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: not application/json, or a body where none is taken
	CodeUnauthorized         = "unauthorized"           // 401: no, malformed, unknown or revoked key
	CodeForbidden            = "forbidden"              // 403: the key lacks the scope
	CodeNotFound             = "not_found"              // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeIdempotencyConflict  = "idempotency_conflict"   // 409: the key was used with a different request
	CodeSessionRevoked       = "session_revoked"        // 409: registering under a revoked session
	CodeTokenRegistered      = "token_registered"       // 409: a direct send names a token registered to a recipient
	CodeCampaignState        = "campaign_state"         // 409: the campaign's status (or audience) does not allow the operation
	CodeCampaignPageConflict = "campaign_page_conflict" // 409: the page number was uploaded with other recipients
	CodeCampaignMessage      = "campaign_message"       // 409: a notification cancel names a campaign's notification
	CodeOverloaded           = "overloaded"             // 429: sends are refused while the oldest due one waits too long
	CodeUnavailable          = "unavailable"            // 503: the database cannot be reached
	CodeInternal             = "internal"               // 500
)

var titles = map[string]string{
	CodeInvalidJSON:          "Request body is not valid JSON",
	CodeInvalidField:         "Invalid field",
	CodeUnknownField:         "Unknown field",
	CodeMissingField:         "Missing field",
	CodeBodyTooLarge:         "Request body too large",
	CodeUnsupportedMediaType: "Unsupported media type",
	CodeUnauthorized:         "Unauthorized",
	CodeForbidden:            "Forbidden",
	CodeNotFound:             "Not found",
	CodeMethodNotAllowed:     "Method not allowed",
	CodeIdempotencyConflict:  "Idempotency key reused with a different request",
	CodeSessionRevoked:       "Session revoked",
	CodeTokenRegistered:      "Device token registered to a recipient",
	CodeCampaignState:        "Campaign status does not allow this",
	CodeCampaignPageConflict: "Campaign page already holds other recipients",
	CodeCampaignMessage:      "The notification is a campaign's",
	CodeOverloaded:           "Too many due notifications",
	CodeUnavailable:          "Service unavailable",
	CodeInternal:             "Internal error",
}

// retryAfterUnavailable is the Retry-After of a 503, in seconds: about as long
// as a PostgreSQL restart takes.
const retryAfterUnavailable = "5"

// ProblemTypeBase prefixes every problem type URI.
const ProblemTypeBase = "https://oncepush.dev/problems/"

func problem(status int, code, detail string) *Problem {
	return &Problem{Status: status, Code: code, Title: titles[code], Detail: detail}
}

func fieldProblem(code, field, detail string) *Problem {
	p := problem(http.StatusBadRequest, code, detail)
	p.Field = field
	return p
}

// asProblem turns any error into the problem the client sees; down says
// whether an error means the database cannot be reached.
func asProblem(err error, down func(error) bool) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var ve *oncepush.ValidationError
	if errors.As(err, &ve) {
		return fieldProblem(CodeInvalidField, ve.Field, ve.Message)
	}
	if errors.Is(err, oncepush.ErrSessionRevoked) {
		return problem(http.StatusConflict, CodeSessionRevoked, "the device's session was revoked")
	}
	var registered *oncepush.TokenRegisteredError
	if errors.As(err, &registered) {
		p := problem(http.StatusConflict, CodeTokenRegistered,
			"this device token is registered to a recipient; send to the recipient, or unregister the token first")
		p.Field = registered.Field
		return p
	}
	if errors.Is(err, oncepush.ErrNotFound) {
		return problem(http.StatusNotFound, CodeNotFound, "no such resource")
	}
	if down(err) {
		return unavailable(err)
	}
	p = problem(http.StatusInternalServerError, CodeInternal, "the server failed; the error is in its log")
	p.cause = err
	return p
}

func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	out := *p
	out.Type = ProblemTypeBase + out.Code
	out.Instance = r.URL.Path
	if out.Title == "" {
		out.Title = titles[out.Code]
	}
	for k, v := range out.header {
		w.Header()[k] = v
	}
	if out.Status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", retryAfterUnavailable)
	}
	if out.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="oncepush"`) // RFC 9110 §11.6.1
	}
	// A problem is strings and a number: it always encodes.
	body, _ := encodeJSON(out)
	writeBody(w, "application/problem+json", out.Status, body)
}

// replyJSON answers v as JSON with status. The body is encoded before
// anything is written, so a value that does not encode (a time past year
// 9999) is an error for the handler to answer with a 500 and log, never a
// status already sent over an empty body.
func replyJSON(w http.ResponseWriter, status int, v any) error {
	body, err := encodeJSON(v)
	if err != nil {
		return fmt.Errorf("encode the answer: %w", err)
	}
	writeBody(w, "application/json", status, body)
	return nil
}

// encodeJSON encodes v with <, > and & escaped (\u003c…): the answers carry
// text anyone may have sent (titles, data, provider errors, campaign
// names), and escaped it stays inert even where a page or a sniffing
// client would read the answer as HTML. Decoded, it is the same text.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeBody(w http.ResponseWriter, contentType string, status int, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client gone mid-answer is nothing to tell
}
