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
	// Name is, for an Unknown member, its name as written; Known are the
	// names its object does take, in order: what a "did you mean" picks
	// from.
	Name  string
	Known []string
}

func (e *ShapeError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// ShapeErrors are every fault CheckAll found, in the document's order. A
// type's UnmarshalJSON that checks its own members may return them too, so
// that each is named by its path.
type ShapeErrors []*ShapeError

func (es ShapeErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap lets errors.As find the first fault.
func (es ShapeErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
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
	c := &checker{}
	c.check(v, t, "", false)
	if len(c.faults) > 0 {
		return c.faults[0]
	}
	return nil
}

// CheckAll checks as Check does, and returns every fault it finds (nil for
// none): a person fixing a file fixes them all at once. A value of the
// wrong kind is one fault; what it holds is not looked into.
func CheckAll(v *Value, t reflect.Type) ShapeErrors {
	c := &checker{all: true}
	c.check(v, t, "", false)
	return c.faults
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	numberType      = reflect.TypeFor[json.Number]()
)

// checker collects faults: the first only, or all of them.
type checker struct {
	all    bool
	faults ShapeErrors
}

// fault records e and reports whether checking stops.
func (c *checker) fault(e *ShapeError) (stop bool) {
	c.faults = append(c.faults, e)
	return !c.all
}

// check checks v at path and reports whether checking stops.
func (c *checker) check(v *Value, t reflect.Type, path string, nullable bool) (stop bool) {
	want, free := kindOf(t)
	if v.Kind == Null {
		switch {
		case nullable || t.Kind() == reflect.Interface:
			return false // an interface (data): null is a value like any other
		case free:
			return c.fault(&ShapeError{Path: path, Fault: Invalid, Reason: "must not be null"})
		}
		return c.fault(&ShapeError{Path: path, Fault: Invalid, Reason: fmt.Sprintf("must be %s, not null", want)})
	}
	if free {
		return c.unmarshals(v, t, path)
	}
	if v.Kind != want {
		return c.fault(&ShapeError{Path: path, Fault: Invalid, Reason: fmt.Sprintf("must be %s, not %s", want, v.Kind)})
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case want == Number && t != numberType && t.Kind() != reflect.Float32 && t.Kind() != reflect.Float64:
		if _, err := strconv.ParseInt(v.Text, 10, 64); err != nil {
			return c.fault(&ShapeError{Path: path, Fault: Invalid, Reason: "must be a whole number"})
		}
	case want == Array:
		for i, e := range v.Elems {
			if c.check(e, t.Elem(), Index(path, i), false) {
				return true
			}
		}
	case want == Object && t.Kind() == reflect.Map:
		for _, m := range v.Members {
			if c.check(m.Value, t.Elem(), Join(path, m.Name), false) {
				return true
			}
		}
	case want == Object:
		fields := fieldsOf(t)
		seen := map[string]bool{}
		for _, m := range v.Members {
			child := Join(path, m.Name)
			i, ok := fields.index[m.Name]
			if !ok {
				if c.fault(&ShapeError{Path: child, Fault: Unknown, Reason: "is not known (names are case-sensitive)", Name: m.Name, Known: fields.names()}) {
					return true
				}
				continue
			}
			seen[m.Name] = true
			f := fields.list[i]
			if c.check(m.Value, f.Type, child, f.Nullable) {
				return true
			}
		}
		for _, f := range fields.list {
			if f.Required && !seen[f.Name] {
				if c.fault(&ShapeError{Path: Join(path, f.Name), Fault: Missing, Reason: "is required"}) {
					return true
				}
			}
		}
	}
	return false
}

// unmarshals hands v to a new t's UnmarshalJSON, if it has one.
func (c *checker) unmarshals(v *Value, t reflect.Type, path string) (stop bool) {
	p := reflect.New(t)
	u, ok := p.Interface().(json.Unmarshaler)
	if !ok {
		return false // an interface
	}
	err := u.UnmarshalJSON(v.AppendJSON(nil))
	if err == nil {
		return false
	}
	// A type that checks its own members names the ones at fault relative
	// to itself.
	var inner ShapeErrors
	var one *ShapeError
	switch {
	case errors.As(err, &inner):
	case errors.As(err, &one):
		inner = ShapeErrors{one}
	default:
		return c.fault(&ShapeError{Path: path, Fault: Invalid, Reason: err.Error()})
	}
	for _, e := range inner {
		if c.fault(&ShapeError{Path: Under(path, e.Path), Fault: e.Fault, Reason: e.Reason, Name: e.Name, Known: e.Known}) {
			return true
		}
	}
	return false
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

// names are the fields' names, in order.
func (f *structFields) names() []string {
	out := make([]string, len(f.list))
	for i, fl := range f.list {
		out[i] = fl.Name
	}
	return out
}

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
