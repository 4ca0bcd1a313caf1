package server_test

import (
	"go/ast"
	"go/token"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// serverSource is what the server's Go source defines, read with go/parser:
// the problem codes, so that a code added to problem.go and not to the
// document (or the other way round) fails a test. The routes are read from
// the server's own table (server.RoutesOf).
type serverSource struct {
	codes map[string]bool // the Code… constants' values
}

func readServerSource(t *testing.T) *serverSource {
	t.Helper()
	src := &serverSource{codes: map[string]bool{}}
	for _, f := range parseServerSource(t, 0) {
		ast.Inspect(f, func(n ast.Node) bool {
			if n, ok := n.(*ast.ValueSpec); ok {
				for i, id := range n.Names {
					if strings.HasPrefix(id.Name, "Code") && i < len(n.Values) {
						if v, ok := stringLit(n.Values[i]); ok {
							src.codes[v] = true
						}
					}
				}
			}
			return true
		})
	}
	if len(src.codes) == 0 {
		t.Fatalf("found no problem codes in the source: have they moved?")
	}
	return src
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// TestRoutesMatchTheDocument: every route of the server's table is
// documented with its scope, every documented operation is a route, and a
// documented path answers 405 with exactly its documented methods in Allow
// to any other.
func TestRoutesMatchTheDocument(t *testing.T) {
	t.Parallel()
	s := mustSpec(t)
	e := newEnv(t, "sqlite", envOptions{})
	routes := map[string]string{}
	for _, r := range e.routes {
		routes[r.Method+" "+r.Path] = r.Scope
	}
	documented := map[string]bool{}
	methods := map[string][]string{}
	for _, op := range s.Operations() {
		key := op.Method + " " + op.Path
		documented[key] = true
		methods[op.Path] = append(methods[op.Path], op.Method)
		scope, served := routes[key]
		switch {
		case !served:
			t.Errorf("the document has %s; the server does not register it", key)
		case scope != op.Scope:
			t.Errorf("%s: the server wants the scope %q, the document says %q", key, scope, op.Scope)
		case (scope != "") != op.Secured:
			t.Errorf("%s: the server's scope is %q, the document's security says secured=%v", key, scope, op.Secured)
		}
	}
	for route := range routes {
		if !documented[route] {
			t.Errorf("the server registers %s; the document does not have it", route)
		}
	}
	for path, ms := range methods {
		slices.Sort(ms)
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if slices.Contains(ms, m) {
				continue
			}
			r := e.do(m, probePath(path), e.admin, nil)
			r.wantProblem(t, http.StatusMethodNotAllowed, "method_not_allowed", "")
			if got := strings.Split(r.header.Get("Allow"), ", "); !slices.Equal(got, ms) {
				t.Errorf("%s %s: Allow %v, the document has %v", m, path, got, ms)
			}
		}
	}
}

// TestProblemCodesAreDocumented: the ProblemCode enum is exactly the codes of
// problem.go.
func TestProblemCodesAreDocumented(t *testing.T) {
	t.Parallel()
	src := readServerSource(t)
	s := mustSpec(t)
	var documented []string
	for _, c := range dig(s.Document(), "components", "schemas", "ProblemCode")["enum"].([]any) {
		documented = append(documented, c.(string))
	}
	var inCode []string
	for c := range src.codes {
		inCode = append(inCode, c)
	}
	slices.Sort(documented)
	slices.Sort(inCode)
	if !slices.Equal(documented, inCode) {
		t.Errorf("ProblemCode enumerates %v; problem.go defines %v", documented, inCode)
	}
}

// TestEveryOperationIsServed asks every documented operation once: without a
// key, a secured one answers 401 (so the route exists and is guarded), an
// open one answers 200.
func TestEveryOperationIsServed(t *testing.T) {
	s := mustSpec(t)
	each(t, envOptions{}, func(t *testing.T, e *env) {
		for _, op := range s.Operations() {
			r := e.do(op.Method, probePath(op.Path), "", probeBody(op))
			want := http.StatusOK
			if op.Secured {
				want = http.StatusUnauthorized
			}
			if r.status != want {
				t.Errorf("%s %s without a key: status %d, want %d: %s", op.Method, op.Path, r.status, want, r.body)
			}
		}
	})
}

func dig(v map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		v, _ = v[k].(map[string]any)
	}
	return v
}
