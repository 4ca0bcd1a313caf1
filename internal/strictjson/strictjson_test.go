package strictjson

import (
	"errors"
	"testing"
)

func TestParseRefusesWhatEncodingJSONLetsThrough(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc, path string
	}{
		{"duplicate name", `{"title": "a", "title": "b"}`, "title"},
		{"duplicate spelled with an escape", `{"a": 1, "\u0061": 2}`, "a"},
		{"duplicate in a nested object", `{"data": {"k": 1, "x": [{"n": 1, "n": 2}]}}`, "data.x[0].n"},
		{"lone high surrogate", `{"title": "\ud800"}`, "title"},
		{"lone low surrogate", `{"title": "x\udc00y"}`, "title"},
		{"high surrogate before a letter", `{"title": "\ud800\u0041"}`, "title"},
		{"lone surrogate in a name", `{"data": {"\udfff": 1}}`, "data"},
		{"lone surrogate in an array", `{"recipients": ["u_1", "\ud83d"]}`, "recipients[1]"},
		{"invalid UTF-8", "{\"title\": \"caf\xe9\"}", "title"},
		{"invalid UTF-8 in a name", "{\"t\xffitle\": 1}", ""},
		{"truncated UTF-8", "{\"title\": \"\xe2\x82\"}", "title"},
		{"syntax error", `{"title": }`, ""},
		{"trailing data", `{} {}`, ""},
		{"empty", ``, ""},
		{"truncated", `{"title": "a"`, ""},
	} {
		_, err := Parse([]byte(tc.doc))
		var e *Error
		if !errors.As(err, &e) || e.Path != tc.path {
			t.Errorf("%s: %s gave %v, want an error at %q", tc.name, tc.doc, err, tc.path)
		}
	}
}

func TestParseKeepsWhatIsValid(t *testing.T) {
	t.Parallel()
	v, err := Parse([]byte(`{"emoji": "\ud83d\ude00 \\ud800", "n": 9007199254740993, "Title": null, "title": [true, {}], "é": "\u00e9"}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind != Object || len(v.Members) != 5 {
		t.Fatalf("parsed %+v", v)
	}
	want := []struct {
		name string
		kind Kind
		text string
	}{{"emoji", String, "😀 \\ud800"}, {"n", Number, "9007199254740993"}, {"Title", Null, ""}, {"title", Array, ""}, {"é", String, "é"}}
	for i, w := range want {
		m := v.Members[i]
		if m.Name != w.name || m.Value.Kind != w.kind || m.Value.Text != w.text {
			t.Errorf("member %d: %q %v %q, want %q %v %q", i, m.Name, m.Value.Kind, m.Value.Text, w.name, w.kind, w.text)
		}
	}
	if arr := v.Members[3].Value; len(arr.Elems) != 2 || arr.Elems[0].Text != "true" || arr.Elems[1].Kind != Object {
		t.Errorf("array parsed as %+v", arr)
	}
}
