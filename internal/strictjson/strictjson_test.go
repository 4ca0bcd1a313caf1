package strictjson

import (
	"errors"
	"runtime"
	"strings"
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
		{"number too large for a double", `{"data": {"n": 1e400}}`, "data.n"},
		{"number just too large for a double", `{"n": [1.7976931348623159e308]}`, "n[0]"},
		{"negative number too large", `{"n": -2e308}`, "n"},
		{"number too small for a double", `{"n": 1e-400}`, "n"},
		{"number jsonb cannot hold", `{"data": {"n": 1e131072}}`, "data.n"},
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

// Numbers a double can hold keep their digits, however many: the range is
// I-JSON's rule, the precision is the caller's.
func TestParseKeepsNumbersADoubleCanHold(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"0", "-0.0", "0e999999999", "0.000e-999999", "1E+2", "1.7976931348623157e308",
		"-1.7976931348623157e308", "4.9e-324", "9007199254740993", "123456789012345678901234567890.0000000000000000001"} {
		v, err := Parse([]byte(n))
		if err != nil || v.Kind != Number || v.Text != n {
			t.Errorf("Parse(%s) = %+v, %v; want the number as written", n, v, err)
		}
	}
}

func TestParseRefusesDeepNesting(t *testing.T) {
	t.Parallel()
	deep := func(n int) []byte {
		return []byte(`{"data": ` + strings.Repeat(`{"k": [`, n) + `1` + strings.Repeat(`]}`, n) + `}`)
	}
	// MaxDepth containers, counting the outer object: accepted.
	if _, err := Parse(deep((MaxDepth - 1) / 2)); err != nil {
		t.Errorf("%d levels: %v", MaxDepth-1, err)
	}
	_, err := Parse(deep(MaxDepth))
	var e *Error
	if !errors.As(err, &e) || !strings.HasPrefix(e.Path, "data.k[0].k[0]") || !strings.Contains(e.Reason, "deep") {
		t.Errorf("%d levels: %v, want an error naming the path where it is too deep", 2*MaxDepth+1, err)
	}
	// A document of brackets only, as a request body can be.
	if _, err := Parse([]byte(strings.Repeat("[", 20000) + strings.Repeat("]", 20000))); !errors.As(err, &e) {
		t.Errorf("20,000 nested arrays: %v, want an error", err)
	}
}

// TestParseCostIsLinear: what Parse allocates grows with the document, not
// with its square. Paths used to be built for every value, so an array of
// n elements under a member named with m bytes cost n·m bytes (a 300 kB
// body allocated 10 GB). Not parallel: it reads the process's allocation
// counter.
func TestParseCostIsLinear(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  []byte
	}{
		{"long name, many elements", []byte(`{"` + strings.Repeat("n", 50000) + `": [` + strings.Repeat("0,", 50000) + `0]}`)},
		{"long names, nested", []byte(strings.Repeat(`{"`+strings.Repeat("n", 2000)+`": `, MaxDepth-1) + `0` + strings.Repeat("}", MaxDepth-1))},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := Parse(tc.doc); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		runtime.ReadMemStats(&after)
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(len(tc.doc))*1000; got > limit {
			t.Errorf("%s: parsing %d bytes allocated %d MB, over %d MB", tc.name, len(tc.doc), got>>20, limit>>20)
		}
	}
}

// Every member has a path of its own: a name the dotted form would lose
// (empty) or blur ("a.b" is not a → b) is written as a JSON string.
func TestJoinShowsEveryName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ path, name, want string }{
		{"", "title", "title"},
		{"quietHours", "timeZone", "quietHours.timeZone"},
		{"", "", `[""]`},
		{"quietHours", "", `quietHours[""]`},
		{"data", "a.b", `data["a.b"]`},
		{"data", "x[0]", `data["x[0]"]`},
		{"data", `say "hi"`, `data["say \"hi\""]`},
		{"data", "<&>", "data.<&>"},
		{Index("recipients", 2), "k", "recipients[2].k"},
	} {
		if got := Join(tc.path, tc.name); got != tc.want {
			t.Errorf("Join(%q, %q) = %s, want %s", tc.path, tc.name, got, tc.want)
		}
		// The same member, found in a document that is itself data's value.
		if got, want := Under("data", Join(tc.path, tc.name)), Join(Under("data", tc.path), tc.name); got != want {
			t.Errorf("Under(data, %s) = %s, want %s", Join(tc.path, tc.name), got, want)
		}
	}
}
