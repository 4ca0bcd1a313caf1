package server_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/oncepush/oncepush/internal/apikey"
)

// serverSource is what the server's Go source registers, read with go/parser
// so that a route added to the code and not to the document (or the other
// way round) fails a test.
type serverSource struct {
	routes map[string]string   // "GET /v1/notifications/{id}" → scope ("" for none)
	allow  map[string][]string // the 405 table: path → methods, sorted
	codes  map[string]bool     // the Code… constants' values
}

func readServerSource(t *testing.T) *serverSource {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	scopes := map[string]string{
		"ScopeSend": apikey.ScopeSend, "ScopeDevices": apikey.ScopeDevices, "ScopeRead": apikey.ScopeRead, "ScopeAdmin": apikey.ScopeAdmin,
	}
	src := &serverSource{routes: map[string]string{}, allow: map[string][]string{}, codes: map[string]bool{}}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || len(n.Args) < 2 {
					return true
				}
				pattern, ok := stringLit(n.Args[0])
				if !ok {
					return true // the 405 loop registers its paths from the table
				}
				switch sel.Sel.Name {
				case "handle": // s.handle(pattern, scope, handler)
					scope, ok := stringLit(n.Args[1])
					if !ok {
						s, isSel := n.Args[1].(*ast.SelectorExpr)
						if !isSel || scopes[s.Sel.Name] == "" {
							t.Errorf("%s: the scope of %q is neither a literal nor an apikey scope", fset.Position(n.Pos()), pattern)
							return true
						}
						scope = scopes[s.Sel.Name]
					}
					src.routes[pattern] = scope
				case "Handle", "HandleFunc": // s.mux.Handle(pattern, handler): no key
					if strings.Contains(pattern, " ") {
						src.routes[pattern] = ""
					}
				}
			case *ast.CompositeLit:
				mt, ok := n.Type.(*ast.MapType)
				if !ok || !isString(mt.Key) || !isString(mt.Value) {
					return true
				}
				for _, el := range n.Elts {
					kv := el.(*ast.KeyValueExpr)
					path, ok1 := stringLit(kv.Key)
					allow, ok2 := stringLit(kv.Value)
					if !ok1 || !ok2 || !strings.HasPrefix(path, "/") {
						continue
					}
					var methods []string
					for _, m := range strings.Split(allow, ",") {
						methods = append(methods, strings.TrimSpace(m))
					}
					slices.Sort(methods)
					src.allow[path] = methods
				}
			case *ast.ValueSpec:
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
	if len(src.routes) == 0 || len(src.allow) == 0 || len(src.codes) == 0 {
		t.Fatalf("found %d routes, %d paths with Allow and %d problem codes in the source: has it moved?", len(src.routes), len(src.allow), len(src.codes))
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

func isString(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "string"
}

// TestRoutesMatchTheDocument: every route the server registers is documented
// with its scope, every documented operation is a route, and the 405 table
// allows exactly the documented methods.
func TestRoutesMatchTheDocument(t *testing.T) {
	t.Parallel()
	src := readServerSource(t)
	s, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	methods := map[string][]string{}
	for _, op := range s.Operations() {
		key := op.Method + " " + op.Path
		documented[key] = true
		methods[op.Path] = append(methods[op.Path], op.Method)
		scope, served := src.routes[key]
		switch {
		case !served:
			t.Errorf("the document has %s; the server does not register it", key)
		case scope != op.Scope:
			t.Errorf("%s: the server wants the scope %q, the document says %q", key, scope, op.Scope)
		case (scope != "") != op.Secured:
			t.Errorf("%s: the server's scope is %q, the document's security says secured=%v", key, scope, op.Secured)
		}
	}
	for route := range src.routes {
		if !documented[route] {
			t.Errorf("the server registers %s; the document does not have it", route)
		}
	}
	for path, ms := range methods {
		slices.Sort(ms)
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		if got, ok := src.allow[path]; !ok || !slices.Equal(got, ms) {
			t.Errorf("%s: the server's 405 answer allows %v, the document has %v", path, got, ms)
		}
	}
	for path := range src.allow {
		if _, ok := methods[path]; !ok {
			t.Errorf("the server's 405 table has %s; the document does not", path)
		}
	}
}

// TestProblemCodesAreDocumented: the ProblemCode enum is exactly the codes of
// problem.go.
func TestProblemCodesAreDocumented(t *testing.T) {
	t.Parallel()
	src := readServerSource(t)
	s, err := spec()
	if err != nil {
		t.Fatal(err)
	}
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
	t.Parallel()
	s, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	each(t, envOptions{}, func(t *testing.T, e *env) {
		fill := strings.NewReplacer("{id}", "1", "{recipient}", "u_probe", "{session}", "s_probe")
		for _, op := range s.Operations() {
			var body any
			if op.RequestBody {
				body = obj{}
			}
			r := e.do(op.Method, fill.Replace(op.Path), "", body)
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
