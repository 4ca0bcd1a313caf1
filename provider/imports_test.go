package provider_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/oncepush/oncepush"

// listed is one package as `go list -json` describes it.
type listed struct {
	ImportPath string
	Standard   bool
	DepOnly    bool
	Imports    []string
	Deps       []string
}

// TestProvidersDoNotImportTheEngine: the provider packages, the fake push
// services and the test kit speak package provider alone, so a provider's
// dependencies are what it uses and not the engine, the drivers and their
// test hooks. Their tests included: a test build that reached the root
// package would bring the engine back into every provider's test binary.
// Package provider itself is a leaf: the standard library and internal
// packages that import only the standard library.
func TestProvidersDoNotImportTheEngine(t *testing.T) {
	t.Parallel()
	patterns := []string{module + "/provider/...", module + "/internal/fakepush", module + "/pushtest"}
	args := append([]string{"list", "-deps", "-test", "-json=ImportPath,Standard,DepOnly,Imports,Deps"}, patterns...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]*listed{}
	var checked []*listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		p := new(listed)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[p.ImportPath] = p
		if !p.DepOnly {
			checked = append(checked, p)
		}
	}
	for _, want := range []string{module + "/provider", module + "/provider/fcm", module + "/provider/internal/httpsend", module + "/internal/fakepush"} {
		if pkgs[want] == nil || pkgs[want].DepOnly {
			t.Fatalf("go list did not list %s among %d packages: are the patterns right?", want, len(checked))
		}
	}

	for _, p := range checked {
		for _, imp := range p.Imports {
			if plain(imp) == module {
				t.Errorf("%s imports %s: use package provider", p.ImportPath, module)
			} else if q := pkgs[imp]; q != nil && contains(q.Deps, module) {
				t.Errorf("%s imports %s, which depends on %s", p.ImportPath, imp, module)
			}
		}
	}

	leaf := pkgs[module+"/provider"]
	for _, d := range leaf.Deps {
		q := pkgs[d]
		switch {
		case q == nil:
			t.Errorf("package provider depends on %s, which go list did not describe", d)
		case q.Standard:
		case !strings.HasPrefix(d, module+"/internal/"):
			t.Errorf("package provider depends on %s: it may import only the standard library and leaf internal packages", d)
		default:
			for _, dd := range q.Deps {
				if pkgs[dd] == nil || !pkgs[dd].Standard {
					t.Errorf("package provider imports %s, which imports %s: not a leaf", d, dd)
				}
			}
		}
	}
}

// plain drops the " [x.test]" that go list adds to a package compiled for
// a test.
func plain(path string) string {
	p, _, _ := strings.Cut(path, " ")
	return p
}

func contains(deps []string, path string) bool {
	for _, d := range deps {
		if plain(d) == path {
			return true
		}
	}
	return false
}
