// Package sqlfile reads named queries from .sql files. A file holds sections that
// each start with a line "-- name: QueryName"; the section's text up to the next
// such line is the query. Drivers keep their SQL in such files and look queries
// up by name. A test (driver/queries_test.go) reads each driver's code and
// checks that every name it looks up is defined and every query is used, so a
// misspelled name fails the suite, not one code path at run time.
package sqlfile

import (
	"bufio"
	"fmt"
	"io/fs"
	"strings"
)

// Queries maps query names to their SQL.
type Queries map[string]string

// Parse reads the named queries of one file.
func Parse(fsys fs.FS, path string) (Queries, error) {
	b, err := fs.ReadFile(fsys, path)
	if err != nil {
		return nil, err
	}
	q := Queries{}
	var name string
	var body strings.Builder
	flush := func() error {
		if name == "" {
			return nil
		}
		text := strings.TrimSpace(body.String())
		if text == "" {
			return fmt.Errorf("sqlfile: %s: query %q is empty", path, name)
		}
		if _, dup := q[name]; dup {
			return fmt.Errorf("sqlfile: %s: query %q defined twice", path, name)
		}
		q[name] = text
		body.Reset()
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "-- name:"); ok {
			if err := flush(); err != nil {
				return nil, err
			}
			name = strings.Fields(rest)[0]
			continue
		}
		if name != "" {
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return q, nil
}

// MustParse is Parse for package initialisation of embedded files.
func MustParse(fsys fs.FS, path string) Queries {
	q, err := Parse(fsys, path)
	if err != nil {
		panic(err)
	}
	return q
}

// ParseGlob reads the named queries of every file matching pattern
// (fs.Glob) as one set: a driver keeps its statements in a file per concept
// and looks them up in one place. A name defined in two files is an error,
// as is a pattern matching no file.
func ParseGlob(fsys fs.FS, pattern string) (Queries, error) {
	paths, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("sqlfile: no file matches %q", pattern)
	}
	all := Queries{}
	where := map[string]string{}
	for _, p := range paths {
		q, err := Parse(fsys, p)
		if err != nil {
			return nil, err
		}
		for name, text := range q {
			if first, dup := where[name]; dup {
				return nil, fmt.Errorf("sqlfile: query %q is defined in %s and again in %s", name, first, p)
			}
			where[name] = p
			all[name] = text
		}
	}
	return all, nil
}

// MustParseGlob is ParseGlob for package initialisation of embedded files.
func MustParseGlob(fsys fs.FS, pattern string) Queries {
	q, err := ParseGlob(fsys, pattern)
	if err != nil {
		panic(err)
	}
	return q
}

// Get returns the named query and panics if there is none: names are fixed at
// compile time, so a miss is a programming error that every test will catch.
func (q Queries) Get(name string) string {
	s, ok := q[name]
	if !ok {
		panic(fmt.Sprintf("sqlfile: no query named %q", name))
	}
	return s
}
