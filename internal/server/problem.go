package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"

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

	cause error // for the log only
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
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: not application/json
	CodeUnauthorized         = "unauthorized"           // 401: no, malformed, unknown or revoked key
	CodeForbidden            = "forbidden"              // 403: the key lacks the scope
	CodeNotFound             = "not_found"              // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeIdempotencyConflict  = "idempotency_conflict"   // 409: the key was used with a different request
	CodeSessionRevoked       = "session_revoked"        // 409: registering under a revoked session
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
	CodeUnavailable:          "Service unavailable",
	CodeInternal:             "Internal error",
}

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

// asProblem turns any error into the problem the client sees.
func asProblem(err error) *Problem {
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
	if errors.Is(err, oncepush.ErrNotFound) {
		return problem(http.StatusNotFound, CodeNotFound, "no such resource")
	}
	var netErr *net.OpError
	if errors.As(err, &netErr) {
		return unavailable(err) // the database cannot be reached
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
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	if out.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="oncepush"`) // RFC 9110 §11.6.1
	}
	w.WriteHeader(out.Status)
	_ = json.NewEncoder(w).Encode(out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads a JSON body into v strictly: only application/json, at most the
// server's body limit, no unknown fields, no trailing data. Errors name the field.
func (s *core) decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := strings.Cut(ct, ";")
		if !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
			return problem(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
				fmt.Sprintf("Content-Type must be application/json, got %q", ct))
		}
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		return decodeProblem(err, s.maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	// Numbers stay as written (json.Number): data is stored and hashed, and a
	// float64 would round 9007199254740993 to …992.
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		p := decodeProblem(err, s.maxBody)
		if p.Code == CodeUnknownField {
			// encoding/json names only the last key; find its whole path.
			if path := unknownFieldPath(raw, reflect.TypeOf(v)); path != "" {
				p.Field = path
			}
		}
		return p
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return decodeProblem(err, s.maxBody)
		}
		return problem(http.StatusBadRequest, CodeInvalidJSON, "the body holds more than one JSON value")
	}
	return nil
}

func decodeProblem(err error, limit int64) *Problem {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return problem(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, fmt.Sprintf("the body is larger than %d bytes", limit))
	case errors.As(err, &syntax):
		return problem(http.StatusBadRequest, CodeInvalidJSON, fmt.Sprintf("%v (at byte %d)", syntax, syntax.Offset))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return problem(http.StatusBadRequest, CodeInvalidJSON, "the body must be a JSON object")
		}
		return fieldProblem(CodeInvalidField, field, fmt.Sprintf("must be %s, not a JSON %s", jsonKind(typ.Type.String()), typ.Value))
	case errors.Is(err, io.EOF):
		return problem(http.StatusBadRequest, CodeInvalidJSON, "the body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return problem(http.StatusBadRequest, CodeInvalidJSON, "the body ends in the middle of a JSON value")
	}
	// encoding/json reports unknown fields only in its message.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return fieldProblem(CodeUnknownField, name, "this field is not part of the API")
	}
	var field *fieldError
	if errors.As(err, &field) {
		return fieldProblem(CodeInvalidField, field.field, field.msg)
	}
	return problem(http.StatusBadRequest, CodeInvalidJSON, err.Error())
}

// unknownFieldPath returns the path ("quietHours.colour", "devices[2].x") of
// the first object key in body that t has no field for, or "".
func unknownFieldPath(body []byte, t reflect.Type) string {
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	return walkUnknown(doc, t, "")
}

func walkUnknown(v any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return "" // maps and custom types take any key
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			fields[strings.ToLower(name)] = f.Type
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[strings.ToLower(k)]
			child := k
			if path != "" {
				child = path + "." + k
			}
			if !ok {
				return child
			}
			if p := walkUnknown(x[k], ft, child); p != "" {
				return p
			}
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return ""
		}
		for i, e := range x {
			if p := walkUnknown(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// fieldError is returned by custom UnmarshalJSON methods to name their field.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		return "an object"
	case goType == "string", goType == "*string":
		return "a string"
	case goType == "bool", goType == "*bool":
		return "true or false"
	case strings.Contains(goType, "int"), strings.Contains(goType, "float"):
		return "a number"
	}
	return goType
}
