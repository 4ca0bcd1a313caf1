package driver_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/oncepush/oncepush/internal/sqlfile"
)

// drivers are the storage drivers in this repository, by directory.
var drivers = []string{"postgres", "sqlite"}

// dialectOnly lists the queries only one driver has, each with its reason. A
// query added to one driver and not the other must be added here, which makes
// the difference a decision instead of an accident.
var dialectOnly = map[string]map[string]string{
	"postgres": {
		"IdempotencyLockMany": "row locks before a delete under READ COMMITTED; SQLite has one writer",
		"MessageLockMany":     "as IdempotencyLockMany",
		"MigrationLock":       "advisory lock serialising migrators; SQLite's writer lock does it",
		"SessionLock":         "advisory lock between sign-out and registration; SQLite has one writer",
		"SessionLockShared":   "as SessionLock",
		"Wake":                "NOTIFY; SQLite wakes by polling data_version",
	},
	"sqlite": {
		"Backup":             "VACUUM INTO for `oncepush backup`",
		"DataVersion":        "PRAGMA data_version, polled to wake workers",
		"DeliveryClaimDue":   "the claim's first half; one writer at a time, so no SKIP LOCKED claim in one statement",
		"DeliveryInsertMany": "part of MessageInsert, which PostgreSQL does in one statement",
		"ForeignKeys":        "PRAGMA foreign_keys, checked at open",
		"IdempotencyInsert":  "part of MessageInsert, as DeliveryInsertMany",
		"JournalMode":        "PRAGMA journal_mode, checked at open",
		"MainFile":           "PRAGMA database_list, to name the file in errors",
		"MessageSweepLast":   "the sweep's cursor in a statement of its own",
		"QuickCheck":         "PRAGMA quick_check, refusing corrupt files at open",
	},
}

// TestQueryNamesAreDefinedAndUsed: every name a driver's code looks up is in
// its query files, and every query in them is looked up. A misspelled name
// would otherwise panic only when its code path first runs.
func TestQueryNamesAreDefinedAndUsed(t *testing.T) {
	for _, dir := range drivers {
		t.Run(dir, func(t *testing.T) {
			defined := queries(t, dir)
			used := usedNames(t, dir)
			for name, pos := range used {
				if _, ok := defined[name]; !ok {
					t.Errorf("%s looks up query %q, which no query file of %s defines", pos, name, dir)
				}
			}
			for _, name := range slices.Sorted(maps.Keys(defined)) {
				if _, ok := used[name]; !ok {
					t.Errorf("%s defines query %q, which its code never looks up", dir, name)
				}
			}
		})
	}
}

// TestDriversHaveTheSameQueries: both drivers implement the same statements
// by name, apart from the dialect-only ones listed with their reasons.
func TestDriversHaveTheSameQueries(t *testing.T) {
	sets := map[string]map[string]string{}
	for _, dir := range drivers {
		sets[dir] = queries(t, dir)
	}
	for _, dir := range drivers {
		for name := range dialectOnly[dir] {
			if _, ok := sets[dir][name]; !ok {
				t.Errorf("dialectOnly lists %s query %q, which %s does not define", dir, name, dir)
			}
		}
		for _, other := range drivers {
			if other == dir {
				continue
			}
			for _, name := range slices.Sorted(maps.Keys(sets[dir])) {
				_, shared := sets[other][name]
				_, listed := dialectOnly[dir][name]
				switch {
				case !shared && !listed:
					t.Errorf("%s defines query %q and %s does not; add it to %s or list it in dialectOnly with a reason", dir, name, other, other)
				case shared && listed:
					t.Errorf("dialectOnly lists %s query %q, but %s defines it too", dir, name, other)
				}
			}
		}
	}
}

// queries reads every named query of a driver's query files (*.sql beside its
// Go code; migrations live in a directory of their own).
func queries(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no query files (%v)", dir, err)
	}
	all := map[string]string{}
	for _, f := range files {
		q, err := sqlfile.Parse(os.DirFS(dir), filepath.Base(f))
		if err != nil {
			t.Fatal(err)
		}
		for name, text := range q {
			if _, dup := all[name]; dup {
				t.Errorf("%s: query %q is defined twice", dir, name)
			}
			all[name] = text
		}
	}
	return all
}

// usedNames finds the query names a driver's non-test code looks up: string
// literals passed to q.Get, and literals passed to a function of the package at
// a parameter that function hands to q.Get. It returns each with the position
// of one use.
func usedNames(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// forwarders: function or method name → indexes of the parameters it
	// passes to q.Get.
	forwarders := map[string][]int{}
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			var params []string
			for _, field := range fn.Type.Params.List {
				for _, n := range field.Names {
					params = append(params, n.Name)
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if arg, ok := getArg(n); ok {
					if id, ok := arg.(*ast.Ident); ok {
						if i := slices.Index(params, id.Name); i >= 0 {
							forwarders[fn.Name.Name] = append(forwarders[fn.Name.Name], i)
						}
					}
				}
				return true
			})
		}
	}
	used := map[string]string{}
	add := func(e ast.Expr) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		name, err := strconv.Unquote(lit.Value)
		if err == nil {
			used[name] = fset.Position(lit.Pos()).String()
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if arg, ok := getArg(n); ok {
				add(arg)
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var name string
			switch fun := call.Fun.(type) {
			case *ast.Ident:
				name = fun.Name
			case *ast.SelectorExpr:
				name = fun.Sel.Name
			}
			for _, i := range forwarders[name] {
				if i < len(call.Args) {
					add(call.Args[i])
				}
			}
			return true
		})
	}
	if len(used) == 0 {
		t.Fatalf("%s: found no query lookups; has the q.Get idiom changed?", dir)
	}
	return used
}

// getArg reports the argument of a call q.Get(arg).
func getArg(n ast.Node) (ast.Expr, bool) {
	call, ok := n.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return nil, false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Get" {
		return nil, false
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "q" {
		return nil, false
	}
	return call.Args[0], true
}
