package sqlfile

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestParse(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"q.sql": {Data: []byte(`-- header comment
-- name: One :one
SELECT 1;

-- name: Two :many
SELECT 2
FROM t;
`)}}
	q, err := Parse(fsys, "q.sql")
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Get("One"); got != "SELECT 1;" {
		t.Errorf("One = %q", got)
	}
	if got := q.Get("Two"); got != "SELECT 2\nFROM t;" {
		t.Errorf("Two = %q", got)
	}
	if len(q) != 2 {
		t.Errorf("len = %d, want 2", len(q))
	}
}

func TestParseRefusesDuplicatesAndEmpty(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"duplicate": "-- name: A\nSELECT 1;\n-- name: A\nSELECT 2;\n",
		"empty":     "-- name: A\n\n-- name: B\nSELECT 1;\n",
	} {
		if _, err := Parse(fstest.MapFS{"q.sql": {Data: []byte(src)}}, "q.sql"); err == nil {
			t.Errorf("%s: Parse succeeded, want error", name)
		}
	}
}

// TestParseGlob: the files a pattern matches are one set, so a statement
// moved from one file to another keeps its name, and a name defined in two
// of them is refused like a name defined twice in one.
func TestParseGlob(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"queries.sql":        {Data: []byte("-- name: A\nSELECT 1;\n")},
		"queries_claim.sql":  {Data: []byte("-- name: B\nSELECT 2;\n")},
		"server_queries.sql": {Data: []byte("-- name: C\nSELECT 3;\n")},
	}
	q, err := ParseGlob(fsys, "queries*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 2 || q.Get("A") != "SELECT 1;" || q.Get("B") != "SELECT 2;" {
		t.Errorf("ParseGlob = %v, want A and B", q)
	}
	fsys["queries_record.sql"] = &fstest.MapFile{Data: []byte("-- name: A\nSELECT 4;\n")}
	if _, err := ParseGlob(fsys, "queries*.sql"); err == nil {
		t.Error("a name in two files: no error")
	}
	if _, err := ParseGlob(fsys, "nothing*.sql"); err == nil {
		t.Error("a pattern matching no file: no error")
	}
}

func TestGetPanicsOnUnknownName(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Get of an unknown name did not panic")
		}
	}()
	Queries{}.Get("Nope")
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	ok := fstest.MapFS{
		"m/002_more.sql":    {Data: []byte("ALTER x;")},
		"m/001_initial.sql": {Data: []byte("CREATE x;")},
	}
	ms, err := Migrations(ok, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[0].Name != "001_initial" || ms[1].SQL != "ALTER x;" {
		t.Fatalf("Migrations = %+v", ms)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":      {"m/001_a.sql": {}, "m/003_c.sql": {}},
		"bad name": {"m/initial.sql": {}},
		"not sql":  {"m/001_a.txt": {}},
	} {
		if _, err := Migrations(fsys, "m"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPositional(t *testing.T) {
	t.Parallel()
	sql, names := Positional(`SELECT @a, @b::int, 'x@notaparam', "col@x", @a -- @comment
/* @block */ FROM t WHERE id = @id_2 AND v = 'it''s @q'`)
	want := `SELECT $1, $2::int, 'x@notaparam', "col@x", $1 -- @comment
/* @block */ FROM t WHERE id = $3 AND v = 'it''s @q'`
	if sql != want {
		t.Fatalf("sql:\n%s\nwant:\n%s", sql, want)
	}
	if len(names) != 3 || names[0] != "a" || names[1] != "b" || names[2] != "id_2" {
		t.Fatalf("names %v", names)
	}
	many := ""
	for i := range 12 {
		many += " @p" + itoa(i)
	}
	if sql, _ := Positional(many); !strings.HasSuffix(sql, "$12") {
		t.Fatalf("12 params: %s", sql)
	}
}
