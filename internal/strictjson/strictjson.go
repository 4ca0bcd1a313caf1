// Package strictjson reads JSON more strictly than encoding/json does: exactly
// one value, UTF-8 throughout, no lone surrogate escapes ("\ud800"), no name
// twice in one object and no number beyond the range of a double (1e400,
// 1e-400) — the I-JSON profile (RFC 7493) — where encoding/json replaces what
// it cannot decode with U+FFFD, keeps the last of two equal names and leaves
// a number's range to whoever reads it. What it refuses is named by its path ("title", "data.note",
// "recipients[2]"), so that an answer can say which field to fix.
//
// Parse keeps what a schema check needs: each value's kind, the exact names of
// an object's members in order, the decoded text of strings and the literal of
// numbers (never a float64). A number's digits are kept beyond a double's
// precision (9007199254740993), which I-JSON only advises against; its range
// is not, because the readers of a document disagree about it: PostgreSQL's
// jsonb refuses 1e131072 and writes 1e300 out as 301 digits, JavaScript
// reads 1e400 as Infinity.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is a JSON value's type.
type Kind uint8

// The kinds of JSON values.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{Null: "null", Bool: "true or false", Number: "a number", String: "a string", Array: "an array", Object: "an object"}

// String names the kind as a sentence would: "a string", "null".
func (k Kind) String() string { return kindNames[k] }

// Value is one parsed JSON value.
type Value struct {
	Kind Kind
	// Text is a string's decoded text, a number's literal, or "true"/"false".
	Text string
	// Members are an object's members, in the order written.
	Members []Member
	// Elems are an array's elements.
	Elems []*Value
}

// Member is one name/value pair of an object.
type Member struct {
	Name  string
	Value *Value
}

// Error is a refused document. Path is empty when the fault is not in one
// field (a syntax error, an empty document, trailing data).
type Error struct {
	Path   string
	Reason string
	// Offset is the byte offset in the document at which the fault was found.
	Offset int64
}

func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s (at byte %d)", e.Reason, e.Offset)
	}
	return fmt.Sprintf("%s: %s (at byte %d)", e.Path, e.Reason, e.Offset)
}

// MaxDepth is how deeply arrays and objects may nest. Nothing oncepush
// reads needs more than a few levels (a request's data is at most 4096 bytes
// encoded); a document of nothing but brackets would otherwise cost a
// recursion per byte.
const MaxDepth = 64

// Parse reads exactly one JSON value from b. Its cost is linear in len(b):
// paths are put together only for an error.
func Parse(b []byte) (*Value, error) {
	p := &parser{raw: b, dec: json.NewDecoder(bytes.NewReader(b))}
	p.dec.UseNumber()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	end := p.dec.InputOffset()
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &Error{Reason: "more than one JSON value", Offset: end}
	}
	return v, nil
}

type parser struct {
	raw []byte
	dec *json.Decoder
	// at is where the parser is: a step per enclosing member or element,
	// turned into a path only when an error names one.
	at []step
	// depth counts the arrays and objects open around the parser.
	depth int
}

// step is a member's name, or an element's index (isIndex).
type step struct {
	name    string
	index   int
	isIndex bool
}

// path is the parser's position as Join and Index spell it.
func (p *parser) path() string {
	path := ""
	for _, s := range p.at {
		if s.isIndex {
			path = Index(path, s.index)
		} else {
			path = Join(path, s.name)
		}
	}
	return path
}

// token reads the next token; a string's raw bytes are checked for what the
// decoder would replace silently.
func (p *parser) token() (json.Token, error) {
	start := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntax(err, start)
	}
	if _, ok := tok.(string); ok {
		if reason := checkString(p.raw[start:p.dec.InputOffset()]); reason != "" {
			return nil, &Error{Path: p.path(), Reason: reason, Offset: start}
		}
	}
	return tok, nil
}

func (p *parser) syntax(err error, at int64) error {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF) && at == 0:
		return &Error{Reason: "the document is empty", Offset: at}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Reason: "the document ends in the middle of a value", Offset: int64(len(p.raw))}
	case errors.As(err, &se):
		return &Error{Reason: se.Error(), Offset: se.Offset}
	}
	return &Error{Reason: err.Error(), Offset: at}
}

func (p *parser) value() (*Value, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &Value{Kind: Null}, nil
	case bool:
		return &Value{Kind: Bool, Text: strconv.FormatBool(t)}, nil
	case json.Number:
		if !inDoubleRange(string(t)) {
			return nil, &Error{Path: p.path(), Reason: "is a number beyond the range of a double (RFC 7493)", Offset: p.dec.InputOffset() - int64(len(t))}
		}
		return &Value{Kind: Number, Text: string(t)}, nil
	case string:
		return &Value{Kind: String, Text: t}, nil
	case json.Delim:
		if p.depth++; p.depth > MaxDepth {
			return nil, &Error{Path: p.path(), Reason: fmt.Sprintf("nests arrays and objects more than %d deep", MaxDepth), Offset: p.dec.InputOffset() - 1}
		}
		defer func() { p.depth-- }()
		if t == '{' {
			return p.object()
		}
		return p.array()
	}
	return nil, &Error{Path: p.path(), Reason: fmt.Sprintf("unexpected token %v", tok), Offset: p.dec.InputOffset()}
}

func (p *parser) object() (*Value, error) {
	v := &Value{Kind: Object}
	seen := map[string]bool{}
	for p.dec.More() {
		at := p.dec.InputOffset()
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		p.at = append(p.at, step{name: name})
		if seen[name] {
			return nil, &Error{Path: p.path(), Reason: "appears twice in the object", Offset: at}
		}
		seen[name] = true
		m, err := p.value()
		if err != nil {
			return nil, err
		}
		p.at = p.at[:len(p.at)-1]
		v.Members = append(v.Members, Member{Name: name, Value: m})
	}
	if _, err := p.token(); err != nil { // '}'
		return nil, err
	}
	return v, nil
}

func (p *parser) array() (*Value, error) {
	v := &Value{Kind: Array}
	for p.dec.More() {
		p.at = append(p.at, step{index: len(v.Elems), isIndex: true})
		e, err := p.value()
		if err != nil {
			return nil, err
		}
		p.at = p.at[:len(p.at)-1]
		v.Elems = append(v.Elems, e)
	}
	if _, err := p.token(); err != nil { // ']'
		return nil, err
	}
	return v, nil
}

// inDoubleRange reports whether a number literal's magnitude is one a double
// can hold: neither so large that it is infinite as a double (1e309) nor so
// small, but not zero, that it is zero as one (1e-400).
func inDoubleRange(n string) bool {
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return false
	}
	if f != 0 {
		return true
	}
	mantissa, _, _ := strings.Cut(strings.ToLower(n), "e")
	return strings.Trim(mantissa, "-0.") == ""
}

// Join is the path of a member: "quietHours" + "timeZone" is
// "quietHours.timeZone"; at the top, the name alone. A name that the dotted
// form would lose or blur — empty, or holding '.', '[', ']' or '"' — is
// written as a JSON string in brackets: data["a.b"], [""].
func Join(path, name string) string {
	if name == "" || strings.ContainsAny(name, `.[]"`) {
		return path + "[" + string(appendString(nil, name)) + "]"
	}
	if path == "" {
		return name
	}
	return path + "." + name
}

// Under is the path, in a document whose value at prefix is the one path
// was found in, of what path names there: Under("data", "a[0]") is
// "data.a[0]", Under("data", `[""]`) is `data[""]`.
func Under(prefix, path string) string {
	switch {
	case prefix == "":
		return path
	case path == "":
		return prefix
	case strings.HasPrefix(path, "["):
		return prefix + path
	}
	return prefix + "." + path
}

// Index is the path of an array element: "recipients[2]".
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// checkString looks at a string token as written (with the separators before
// it, which are ASCII) for what encoding/json would decode to U+FFFD without a
// word: bytes that are not UTF-8, and \u escapes of lone surrogates.
func checkString(raw []byte) string {
	if !utf8.Valid(raw) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue // a one-character escape; the decoder checked it
		}
		r := hex4(raw[i+1:])
		i += 4
		switch {
		case r >= 0xD800 && r < 0xDC00: // a high surrogate needs a low one next
			if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := hex4(raw[i+3:]); lo >= 0xDC00 && lo < 0xE000 {
					i += 6
					continue
				}
			}
			return fmt.Sprintf(`holds a lone surrogate (\u%04x), which is not a character`, r)
		case r >= 0xDC00 && r < 0xE000:
			return fmt.Sprintf(`holds a lone surrogate (\u%04x), which is not a character`, r)
		}
	}
	return ""
}

// hex4 reads four hexadecimal digits (the decoder has checked they are); -1
// if there are not four.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	if err != nil {
		return -1
	}
	return rune(n)
}
