package server_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestServerGoesThroughTheClient: the server's code imports no storage
// package but the server's own contract. It reads and writes the ledger
// through oncepush.Client, and its own state through driver/serverstore; a
// call to the engine's executor (package driver) or to a driver directly
// would go around the Client.
func TestServerGoesThroughTheClient(t *testing.T) {
	t.Parallel()
	for p, f := range parseServerSource(t, parser.ImportsOnly) {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			rest, ok := strings.CutPrefix(path, "github.com/oncepush/oncepush/driver")
			if ok && rest != "/serverstore" {
				t.Errorf("%s imports %s: read the ledger through oncepush.Client, the server's state through driver/serverstore", p, path)
			}
		}
	}
}

// parseServerSource parses the package's Go files but its tests, by name.
func parseServerSource(t *testing.T, mode parser.Mode) map[string]*ast.File {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, mode)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = f
	}
	return files
}
