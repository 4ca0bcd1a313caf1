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

// querySets are a driver's query files, by the variable its code looks
// queries up in, as a pattern of file names: the engine's statements
// (package driver's contract; queries.sql and one queries_<concept>.sql per
// interface), and the server's (package driver/serverstore's), which the
// engine never runs.
var querySets = map[string]string{
	"q":  "queries*.sql",
	"sq": "server_queries.sql",
}

// dialectOnly lists the queries only one driver has, each with its reason. A
// query added to one driver and not the other must be added here, which makes
// the difference a decision instead of an accident.
var dialectOnly = map[string]map[string]string{
	"postgres": {
		"IdempotencyLockMany":   "row locks before a delete under READ COMMITTED; SQLite has one writer",
		"CampaignTallyCompact":  "folds the delta rows concurrent writers append (D95); SQLite's triggers keep one row per state",
		"MessageLockMany":       "as IdempotencyLockMany",
		"MessageCancelInFlight": "a statement after the cancel's, to see marks committed while it waited for their locks; SQLite counts first (MessageCancelCount)",
		"MigrationLock":         "advisory lock serialising migrators; SQLite's writer lock does it",
		"SessionLock":           "advisory lock between sign-out and registration; SQLite has one writer",
		"ServerMigrationLock":   "as MigrationLock, for the server's migrations",
		"SessionLockShared":     "as SessionLock",
		"Wake":                  "NOTIFY; SQLite wakes by polling data_version",
	},
	"sqlite": {
		"Backup":                     "VACUUM INTO for `oncepush backup`",
		"CampaignCountAdd":           "CampaignPageAdd's addition to the audience count, in a statement of its own: SQLite has no INSERT in WITH (PostgreSQL's CampaignRecipientInsert does it)",
		"CampaignPageGet":            "CampaignPageAdd's read of a taken page's digest, in a statement of its own: SQLite has no INSERT in WITH (PostgreSQL's CampaignPageInsert returns it)",
		"DataVersion":                "PRAGMA data_version, polled to wake workers",
		"DeliveryClaimDue":           "the claim's first half; one writer at a time, so no SKIP LOCKED claim in one statement",
		"DeliveryInsertMany":         "part of MessageInsert, which PostgreSQL does in one statement",
		"DeviceAttemptMarkOwn":       "DeviceAttemptMarkSending's steps, which PostgreSQL does in one statement (data-modifying CTEs)",
		"CampaignTokenTake":          "as DeviceAttemptMarkOwn",
		"DeviceAttemptStateMany":     "as DeviceAttemptMarkOwn",
		"DeviceAttemptDuplicateMany": "as DeviceAttemptMarkOwn",
		"ForeignKeys":                "PRAGMA foreign_keys, checked at open",
		"IdempotencyInsert":          "part of MessageInsert, which PostgreSQL does in one statement",
		"JournalMode":                "PRAGMA journal_mode, checked at open",
		"MainFile":                   "PRAGMA database_list, to name the file in errors",
		"MessageSweepLast":           "the sweep's cursor in a statement of its own",
		"MessageCancelCount":         "what MessageCancel will end, counted first under the write lock; PostgreSQL counts after (MessageCancelInFlight)",
		"QuickCheck":                 "PRAGMA quick_check, refusing corrupt files at open",
	},
}

// TestQueryNamesAreDefinedAndUsed: every name a driver's code looks up is in
// the query files of the set it looks it up in (q: queries*.sql, sq:
// server_queries.sql), and every query in those files is looked up through
// its own set. A misspelled name would otherwise panic only when its code path
// first runs, and an engine statement run through the server's set (or the
// other way round) would blur which contract a table belongs to.
func TestQueryNamesAreDefinedAndUsed(t *testing.T) {
	for _, dir := range drivers {
		t.Run(dir, func(t *testing.T) {
			sets := querySetsOf(t, dir)
			used := usedNames(t, dir)
			for set, names := range used {
				for name, pos := range names {
					if _, ok := sets[set][name]; !ok {
						t.Errorf("%s looks up query %q in %s, which %s/%s does not define", pos, name, set, dir, querySets[set])
					}
				}
			}
			for set, defined := range sets {
				for _, name := range slices.Sorted(maps.Keys(defined)) {
					if _, ok := used[set][name]; !ok {
						t.Errorf("%s/%s defines query %q, which its code never looks up in %s", dir, defined[name], name, set)
					}
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

// queries reads every named query of a driver's query files, merged, by
// the file that defines it.
func queries(t *testing.T, dir string) map[string]string {
	t.Helper()
	all := map[string]string{}
	for _, set := range querySetsOf(t, dir) {
		for name, file := range set {
			if first, dup := all[name]; dup {
				t.Errorf("%s: query %q is defined in %s and again in %s", dir, name, first, file)
			}
			all[name] = file
		}
	}
	return all
}

// querySetsOf reads the named queries of a driver's query files (*.sql
// beside its Go code; migrations live in directories of their own), by
// query set, each name with the file defining it. Every file must match
// one of querySets' patterns.
func querySetsOf(t *testing.T, dir string) map[string]map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no query files (%v)", dir, err)
	}
	out := map[string]map[string]string{}
	for set := range querySets {
		out[set] = map[string]string{}
	}
	for _, f := range files {
		name := filepath.Base(f)
		set := ""
		for s, pattern := range querySets {
			if ok, _ := filepath.Match(pattern, name); ok {
				set = s
			}
		}
		if set == "" {
			t.Errorf("%s: query file %s matches none of %v: add it to querySets", dir, name, slices.Sorted(maps.Values(querySets)))
			continue
		}
		q, err := sqlfile.Parse(os.DirFS(dir), name)
		if err != nil {
			t.Fatal(err)
		}
		for qname := range q {
			if first, dup := out[set][qname]; dup {
				t.Errorf("%s: query %q is defined in %s and again in %s", dir, qname, first, name)
			}
			out[set][qname] = name
		}
	}
	return out
}

// usedNames finds the query names a driver's non-test code looks up, by
// query set: string literals passed to q.Get (or sq.Get), and literals passed
// to a function of the package at a parameter that function hands to one of
// them. It returns each with the position of one use.
func usedNames(t *testing.T, dir string) map[string]map[string]string {
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
	// forwarders: function or method name → the parameters it passes to a
	// query set's Get, with that set.
	type forward struct {
		param int
		set   string
	}
	forwarders := map[string][]forward{}
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
				if set, arg, ok := getArg(n); ok {
					if id, ok := arg.(*ast.Ident); ok {
						if i := slices.Index(params, id.Name); i >= 0 {
							forwarders[fn.Name.Name] = append(forwarders[fn.Name.Name], forward{i, set})
						}
					}
				}
				return true
			})
		}
	}
	used := map[string]map[string]string{}
	for set := range querySets {
		used[set] = map[string]string{}
	}
	add := func(set string, e ast.Expr) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		name, err := strconv.Unquote(lit.Value)
		if err == nil {
			used[set][name] = fset.Position(lit.Pos()).String()
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if set, arg, ok := getArg(n); ok {
				add(set, arg)
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
			for _, fw := range forwarders[name] {
				if fw.param < len(call.Args) {
					add(fw.set, call.Args[fw.param])
				}
			}
			return true
		})
	}
	if len(used["q"]) == 0 {
		t.Fatalf("%s: found no query lookups; has the q.Get idiom changed?", dir)
	}
	return used
}

// getArg reports the argument of a call q.Get(arg) or sq.Get(arg), and which
// query set it looks up.
func getArg(n ast.Node) (set string, arg ast.Expr, ok bool) {
	call, ok := n.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return "", nil, false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Get" {
		return "", nil, false
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", nil, false
	}
	if _, known := querySets[x.Name]; !known {
		return "", nil, false
	}
	return x.Name, call.Args[0], true
}
