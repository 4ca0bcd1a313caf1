package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Fault says what is wrong with a value Check refuses.
type Fault uint8

// The faults Check finds.
const (
	// Invalid: a value of the wrong kind, null where none is taken, a
	// number that is not whole for an integer, or a value the type's own
	// UnmarshalJSON refuses.
	Invalid Fault = iota + 1
	// Unknown: a member whose name is no field's, case included.
	Unknown
	// Missing: a required member is absent.
	Missing
)

// ShapeError is a value Check refuses, at Path ("" for the document
// itself).
type ShapeError struct {
	Path   string
	Fault  Fault
	Reason string
}

func (e *ShapeError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Check checks a parsed document against the Go type t it is to be decoded
// into, as strictly as a schema would and no more leniently than
// encoding/json: kinds, member names exactly as the fields' json tags spell
// them (encoding/json would take "Title" for "title"), null only for a field
// tagged api:"nullable", every field tagged api:"required" present, whole
// numbers for integers. A type that decodes itself (json.Unmarshaler) is
// handed its value, so that its refusal is named by the value's path too;
// an interface takes any value. The first fault found is returned.
func Check(v *Value, t reflect.Type) error {
	return check(v, t, "", false)
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	numberType      = reflect.TypeFor[json.Number]()
)

func check(v *Value, t reflect.Type, path string, nullable bool) error {
	want, free := kindOf(t)
	if v.Kind == Null {
		switch {
		case nullable || t.Kind() == reflect.Interface:
			return nil // an interface (data): null is a value like any other
		case free:
			return &ShapeError{Path: path, Fault: Invalid, Reason: "must not be null"}
		}
		return &ShapeError{Path: path, Fault: Invalid, Reason: fmt.Sprintf("must be %s, not null", want)}
	}
	if free {
		return unmarshals(v, t, path)
	}
	if v.Kind != want {
		return &ShapeError{Path: path, Fault: Invalid, Reason: fmt.Sprintf("must be %s, not %s", want, v.Kind)}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case want == Number && t != numberType && t.Kind() != reflect.Float32 && t.Kind() != reflect.Float64:
		if _, err := strconv.ParseInt(v.Text, 10, 64); err != nil {
			return &ShapeError{Path: path, Fault: Invalid, Reason: "must be a whole number"}
		}
	case want == Array:
		for i, e := range v.Elems {
			if err := check(e, t.Elem(), Index(path, i), false); err != nil {
				return err
			}
		}
	case want == Object && t.Kind() == reflect.Map:
		for _, m := range v.Members {
			if err := check(m.Value, t.Elem(), Join(path, m.Name), false); err != nil {
				return err
			}
		}
	case want == Object:
		fields := fieldsOf(t)
		seen := map[string]bool{}
		for _, m := range v.Members {
			child := Join(path, m.Name)
			i, ok := fields.index[m.Name]
			if !ok {
				return &ShapeError{Path: child, Fault: Unknown, Reason: "is not known (names are case-sensitive)"}
			}
			seen[m.Name] = true
			f := fields.list[i]
			if err := check(m.Value, f.Type, child, f.Nullable); err != nil {
				return err
			}
		}
		for _, f := range fields.list {
			if f.Required && !seen[f.Name] {
				return &ShapeError{Path: Join(path, f.Name), Fault: Missing, Reason: "is required"}
			}
		}
	}
	return nil
}

// unmarshals hands v to a new t's UnmarshalJSON, if it has one.
func unmarshals(v *Value, t reflect.Type, path string) error {
	p := reflect.New(t)
	u, ok := p.Interface().(json.Unmarshaler)
	if !ok {
		return nil // an interface
	}
	if err := u.UnmarshalJSON(v.AppendJSON(nil)); err != nil {
		// A type that checks its own members names the one at fault
		// relative to itself.
		var inner *ShapeError
		if errors.As(err, &inner) {
			return &ShapeError{Path: Under(path, inner.Path), Fault: inner.Fault, Reason: inner.Reason}
		}
		return &ShapeError{Path: path, Fault: Invalid, Reason: err.Error()}
	}
	return nil
}

// kindOf is the JSON kind a Go type decodes from; free is true for a type
// that takes any value.
func kindOf(t reflect.Type) (k Kind, free bool) {
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return 0, true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == numberType {
		return Number, false
	}
	switch t.Kind() {
	case reflect.String:
		return String, false
	case reflect.Bool:
		return Bool, false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return Number, false
	case reflect.Slice, reflect.Array:
		return Array, false
	case reflect.Map, reflect.Struct:
		return Object, false
	}
	return 0, true
}

// Field is a struct field as Check reads it: the json tag's name, and the
// api tag's "nullable" (null is a value) and "required" (absence is a
// fault).
type Field struct {
	Name               string
	Type               reflect.Type
	Nullable, Required bool
}

// structFields are a struct's Fields in declaration order, and by name.
type structFields struct {
	list  []Field
	index map[string]int
}

var fieldCache sync.Map // reflect.Type → *structFields

// Fields lists the fields of struct type t that Check reads, in order.
func Fields(t reflect.Type) []Field { return fieldsOf(t).list }

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
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
		f := Field{Name: name, Type: sf.Type}
		for opt := range strings.SplitSeq(sf.Tag.Get("api"), ",") {
			switch opt {
			case "nullable":
				f.Nullable = true
			case "required":
				f.Required = true
			}
		}
		fields.index[name] = len(fields.list)
		fields.list = append(fields.list, f)
	}
	fieldCache.Store(t, fields)
	return fields
}

// AppendJSON appends v written as JSON, members in their order: a string
// escaped as encoding/json escapes it (HTML characters left as they are), a
// number as its literal.
func (v *Value) AppendJSON(b []byte) []byte {
	switch v.Kind {
	case Null:
		return append(b, "null"...)
	case Bool, Number:
		return append(b, v.Text...)
	case String:
		return appendString(b, v.Text)
	case Array:
		b = append(b, '[')
		for i, e := range v.Elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.AppendJSON(b)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i, m := range v.Members {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendString(b, m.Name), ':')
		b = m.Value.AppendJSON(b)
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
