package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzParse checks Parse against an oracle built another way: a document is
// accepted exactly when it is JSON, UTF-8, nests at most MaxDepth deep and
// holds no name twice in an object, no lone surrogate escape and no number
// beyond a double's range (RFC 7493). What it accepts reads as encoding/json
// reads it, and survives being written out and parsed again; what it refuses
// is an *Error whose offset lies in the document.
func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Parse(b)
		wantOK, why := judge(b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) failed with %T %v, want an *Error", b, err, err)
			}
			if e.Offset < 0 || e.Offset > int64(len(b)) || e.Reason == "" {
				t.Fatalf("Parse(%q): error %+v has no reason or an offset outside the document", b, e)
			}
			if wantOK {
				t.Fatalf("Parse(%q) refused a document RFC 7493 allows: %v", b, err)
			}
			return
		}
		if !wantOK {
			t.Fatalf("Parse(%q) accepted a document it must refuse (%s)", b, why)
		}
		var std any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&std); err != nil {
			t.Fatalf("encoding/json cannot read what Parse accepted, %q: %v", b, err)
		}
		if got := plain(v); !reflect.DeepEqual(got, std) {
			t.Fatalf("Parse(%q) = %#v, encoding/json reads %#v", b, got, std)
		}
		again, err := Parse(v.AppendJSON(nil))
		if err != nil {
			t.Fatalf("Parse(%q) written out as %q does not parse again: %v", b, v.AppendJSON(nil), err)
		}
		if !reflect.DeepEqual(again, v) {
			t.Fatalf("Parse(%q) written out and parsed again is %#v, was %#v", b, again, v)
		}
	})
}

// parseSeeds are the shapes worth starting from: hostile bytes, NUL,
// invalid UTF-8, huge numbers, deep nesting, duplicate names, and escapes
// of all of those.
var parseSeeds = []string{
	`{}`, `[]`, `null`, `true`, `0`, `-0.0e-0`, `""`, ` {"a" : [1, 2.5e3, "x", null, false, {}] } `,
	`{"recipients": ["u_1"], "title": "Hello", "data": {"order": 9007199254740993}}`,
	`{"a": 1, "a": 2}`, `{"a": 1, "\u0061": 2}`, `{"a": {"b": 1, "b": 1}}`, `[{"k": 1}, {"k": 1}]`,
	`"\ud800"`, `"\udc00"`, `"\ud83d\ude00"`, `"\ud83d\u0041"`, `"\\ud800"`, `"\ud800\\udc00"`, `"\ud800\u005cudc00"`,
	`{"\ud800": 1}`, `"\u0000"`, "\"\x00\"", `"a\u0000b"`, "\"\xff\"", "\"\xc3\"", "\xef\xbb\xbf{}", "{\"\xed\xa0\x80\": 1}",
	`1e308`, `1e309`, `-1e400`, `1e-400`, `4.9e-324`, `2e-324`, `0e999999999`, `123456789012345678901234567890`,
	`1E+2`, `[1e131072]`, `{"n": 1.7976931348623157e308}`, `{"n": 1.7976931348623159e308}`,
	strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	strings.Repeat(`{"a":`, MaxDepth) + `1` + strings.Repeat("}", MaxDepth),
	`{} {}`, `{}]`, `{`, `"\u12"`, `"\x"`, `[1,]`, `{"a" 1}`, `01`, `+1`, `.5`, `NaN`, `Infinity`, `"\u2028\u2029"`,
}

// judge says whether RFC 7493 and MaxDepth allow b, and if not why, reading
// b with encoding/json's tokenizer and UTF-16 code units rather than as
// Parse does.
func judge(b []byte) (ok bool, why string) {
	if !json.Valid(b) {
		return false, "not JSON"
	}
	if !utf8.Valid(b) {
		return false, "not UTF-8"
	}
	if depthOf(b) > MaxDepth {
		return false, "too deep"
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		object, wantName bool
		names            map[string]bool
	}
	var stack []*frame
	top := func() *frame {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1]
	}
	// valueDone: the value of an object's member has ended, a name is next.
	valueDone := func() {
		if f := top(); f != nil && f.object {
			f.wantName = true
		}
	}
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true, ""
		}
		if err != nil {
			return false, "not JSON"
		}
		if f := top(); f != nil && f.object && f.wantName {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				valueDone()
				continue
			}
			name := tok.(string)
			raw := b[start:dec.InputOffset()]
			if loneSurrogate(raw[bytes.IndexByte(raw, '"'):]) {
				return false, "lone surrogate"
			}
			if f.names[name] {
				return false, "a name twice"
			}
			f.names[name] = true
			f.wantName = false
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				stack = append(stack, &frame{object: t == '{', wantName: true, names: map[string]bool{}})
				continue
			}
			stack = stack[:len(stack)-1]
		case string:
			raw := b[start:dec.InputOffset()]
			if loneSurrogate(raw[bytes.IndexByte(raw, '"'):]) {
				return false, "lone surrogate"
			}
		case json.Number:
			if f, err := strconv.ParseFloat(string(t), 64); err != nil || f == 0 && strings.ContainsAny(mantissa(string(t)), "123456789") {
				return false, "a number beyond a double"
			}
		}
		valueDone()
	}
}

func mantissa(n string) string {
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		return n[:i]
	}
	return n
}

// depthOf is the deepest nesting of arrays and objects in b.
func depthOf(b []byte) int {
	depth, most, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return most
}

// loneSurrogate reads a string token (from its opening quote) as UTF-16
// code units and reports a surrogate without its partner.
func loneSurrogate(raw []byte) bool {
	var units []uint16
	s := string(raw[1 : len(raw)-1])
	for len(s) > 0 {
		if s[0] != '\\' {
			r, size := utf8.DecodeRuneInString(s)
			units = utf16.AppendRune(units, r)
			s = s[size:]
			continue
		}
		if s[1] == 'u' {
			n, _ := strconv.ParseUint(s[2:6], 16, 16)
			units = append(units, uint16(n))
			s = s[6:]
			continue
		}
		units = append(units, uint16(s[1]))
		s = s[2:]
	}
	for i := 0; i < len(units); i++ {
		switch u := rune(units[i]); {
		case u >= 0xD800 && u < 0xDC00:
			if i+1 == len(units) || units[i+1] < 0xDC00 || units[i+1] >= 0xE000 {
				return true
			}
			i++
		case u >= 0xDC00 && u < 0xE000:
			return true
		}
	}
	return false
}

// plain is v as encoding/json decodes into an any with UseNumber.
func plain(v *Value) any {
	switch v.Kind {
	case Null:
		return nil
	case Bool:
		return v.Text == "true"
	case Number:
		return json.Number(v.Text)
	case String:
		return v.Text
	case Array:
		out := make([]any, 0, len(v.Elems))
		for _, e := range v.Elems {
			out = append(out, plain(e))
		}
		return out
	}
	out := make(map[string]any, len(v.Members))
	for _, m := range v.Members {
		out[m.Name] = plain(m.Value)
	}
	return out
}
