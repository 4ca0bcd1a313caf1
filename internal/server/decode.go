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
	"strconv"
	"strings"
	"sync"

	"github.com/oncepush/oncepush/internal/strictjson"
)

// decode reads a JSON body into v (a pointer to a request struct) exactly as
// the OpenAPI document describes the request: Content-Type application/json
// (charset utf-8 at most), no content coding, at most the server's body
// limit, one JSON object that is I-JSON (UTF-8, no lone surrogate, no name
// twice), member names that match the struct's json tags exactly (encoding/json
// alone would take "Title" for "title"), null only where the field is tagged
// api:"nullable", and every field tagged api:"required" present. Numbers stay
// as written (json.Number): data is stored and hashed. Errors name the field.
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
	if err := checkShape(doc, reflect.TypeOf(v).Elem(), "", false); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		// The shape was checked; what is left are the fields that decode
		// themselves (tokenField).
		var fe *fieldError
		if errors.As(err, &fe) {
			return fieldProblem(CodeInvalidField, fe.field, fe.msg)
		}
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

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	numberType      = reflect.TypeFor[json.Number]()
)

// checkShape checks v against the Go type t that it will be decoded into:
// kinds, exact member names, nulls and required members. A type that
// decodes itself (json.Unmarshaler) and an interface take any value.
func checkShape(v *strictjson.Value, t reflect.Type, path string, nullable bool) error {
	want, free := kindOf(t)
	if v.Kind == strictjson.Null {
		switch {
		case nullable:
			return nil
		case path == "":
			return problem(http.StatusBadRequest, CodeInvalidJSON, "the body must be a JSON object, not null")
		case t.Kind() == reflect.Interface:
			return nil // free-form (data): null is a value like any other
		case free:
			return fieldProblem(CodeInvalidField, path, "must not be null")
		}
		return fieldProblem(CodeInvalidField, path, fmt.Sprintf("must be %s, not null", want))
	}
	if free {
		return nil
	}
	if v.Kind != want {
		if path == "" {
			return problem(http.StatusBadRequest, CodeInvalidJSON, fmt.Sprintf("the body must be a JSON object, not %s", v.Kind))
		}
		return fieldProblem(CodeInvalidField, path, fmt.Sprintf("must be %s, not %s", want, v.Kind))
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case want == strictjson.Number && t != numberType && t.Kind() != reflect.Float32 && t.Kind() != reflect.Float64:
		if _, err := strconv.ParseInt(v.Text, 10, 64); err != nil {
			return fieldProblem(CodeInvalidField, path, "must be a whole number")
		}
	case want == strictjson.Array:
		for i, e := range v.Elems {
			if err := checkShape(e, t.Elem(), strictjson.Index(path, i), false); err != nil {
				return err
			}
		}
	case want == strictjson.Object && t.Kind() == reflect.Map:
		for _, m := range v.Members {
			if err := checkShape(m.Value, t.Elem(), strictjson.Join(path, m.Name), false); err != nil {
				return err
			}
		}
	case want == strictjson.Object:
		fields := apiFieldsOf(t)
		seen := map[string]bool{}
		for _, m := range v.Members {
			child := strictjson.Join(path, m.Name)
			i, ok := fields.index[m.Name]
			if !ok {
				return fieldProblem(CodeUnknownField, child, "this field is not part of the API (names are case-sensitive)")
			}
			seen[m.Name] = true
			f := fields.list[i]
			if err := checkShape(m.Value, f.typ, child, f.nullable); err != nil {
				return err
			}
		}
		for _, f := range fields.list {
			if f.required && !seen[f.name] {
				return fieldProblem(CodeMissingField, strictjson.Join(path, f.name), "is required")
			}
		}
	}
	return nil
}

// kindOf is the JSON kind a Go type decodes from; free is true for a type
// that takes any value.
func kindOf(t reflect.Type) (k strictjson.Kind, free bool) {
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return 0, true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == numberType {
		return strictjson.Number, false
	}
	switch t.Kind() {
	case reflect.String:
		return strictjson.String, false
	case reflect.Bool:
		return strictjson.Bool, false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return strictjson.Number, false
	case reflect.Slice, reflect.Array:
		return strictjson.Array, false
	case reflect.Map, reflect.Struct:
		return strictjson.Object, false
	}
	return 0, true
}

// apiField is a request struct's field as the document names it.
type apiField struct {
	name               string
	typ                reflect.Type
	nullable, required bool
}

// structFields are a struct's apiFields in declaration order, and by name.
type structFields struct {
	list  []apiField
	index map[string]int
}

var apiFields sync.Map // reflect.Type → *structFields

// apiFieldsOf reads a request struct's fields: the json tag's name, and the
// api tag's "nullable" (null is a value) and "required" (absence is an
// error). They mirror the schema's type lists and required arrays.
func apiFieldsOf(t reflect.Type) *structFields {
	if f, ok := apiFields.Load(t); ok {
		return f.(*structFields)
	}
	fields := &structFields{index: map[string]int{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := apiField{name: name, typ: sf.Type}
		for opt := range strings.SplitSeq(sf.Tag.Get("api"), ",") {
			switch opt {
			case "nullable":
				f.nullable = true
			case "required":
				f.required = true
			}
		}
		fields.index[name] = len(fields.list)
		fields.list = append(fields.list, f)
	}
	apiFields.Store(t, fields)
	return fields
}

// fieldError is returned by custom UnmarshalJSON methods to name their field.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }
