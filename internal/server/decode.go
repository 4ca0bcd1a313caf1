package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/oncepush/oncepush/internal/strictjson"
)

// decode reads a JSON body into v (a pointer to a request struct) exactly as
// the OpenAPI document describes the request: Content-Type application/json
// (charset utf-8 at most), no content coding, at most the server's body
// limit, one JSON object that is I-JSON (UTF-8, no lone surrogate, no name
// twice, no number beyond a double), and of the struct's shape
// (strictjson.Check): member names that match its json tags exactly
// (encoding/json alone would take "Title" for "title"), null only where the
// field is tagged api:"nullable", and every field tagged api:"required"
// present. Numbers stay as written (json.Number): data is stored and hashed.
// Errors name the field.
func (s *core) decode(w http.ResponseWriter, r *http.Request, v any) error {
	if err := checkContentHeaders(r); err != nil {
		return err
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return problem(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, fmt.Sprintf("the body is larger than %d bytes", s.maxBody))
		}
		return problem(http.StatusBadRequest, CodeInvalidJSON, "the body could not be read to its end")
	}
	doc, err := strictjson.Parse(raw)
	if err != nil {
		var se *strictjson.Error
		if !errors.As(err, &se) {
			return err
		}
		p := problem(http.StatusBadRequest, CodeInvalidJSON, se.Error())
		p.Field = se.Path
		return p
	}
	if err := strictjson.Check(doc, reflect.TypeOf(v).Elem()); err != nil {
		var se *strictjson.ShapeError
		switch {
		case !errors.As(err, &se):
			return err
		case se.Path == "":
			return problem(http.StatusBadRequest, CodeInvalidJSON, "the body "+se.Reason)
		case se.Fault == strictjson.Unknown:
			return fieldProblem(CodeUnknownField, se.Path, "this field is not part of the API (names are case-sensitive)")
		case se.Fault == strictjson.Missing:
			return fieldProblem(CodeMissingField, se.Path, se.Reason)
		}
		return fieldProblem(CodeInvalidField, se.Path, se.Reason)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		// Check handed every field that decodes itself its value already.
		return fmt.Errorf("decode a checked body: %w", err)
	}
	return nil
}

// noBody refuses a request to an operation that takes no body but carries
// one: 415, the content not being supported by this method on this resource
// (RFC 9110 §15.5.16). The body would be ignored, and a client that sends
// one means something by it that the server would not do.
func noBody(r *http.Request) error {
	var one [1]byte
	if n, _ := io.ReadFull(r.Body, one[:]); n == 0 {
		return nil
	}
	return problem(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
		fmt.Sprintf("%s %s takes no body; send none", r.Method, r.Pattern[strings.IndexByte(r.Pattern, ' ')+1:]))
}

// checkContentHeaders refuses what the body is not: JSON in UTF-8, as is.
func checkContentHeaders(r *http.Request) error {
	for _, ce := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(ce, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				p := problem(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
					fmt.Sprintf("Content-Encoding %q is not supported: send the body uncompressed", c))
				p.header = http.Header{"Accept-Encoding": {"identity"}} // RFC 9110 §12.5.3
				return p
			}
		}
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return problem(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "send the body with Content-Type: application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return problem(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, fmt.Sprintf("Content-Type must be application/json, got %q", ct))
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return problem(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
				fmt.Sprintf("Content-Type %q: JSON is UTF-8, and application/json takes no other parameter", ct))
		}
	}
	return nil
}
