package sqlite

import (
	"database/sql"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestQueriesReadThroughIndexes: no named query scans a whole table. The
// ledger grows to millions of rows, and a statement that scans it holds the
// one write lock meanwhile; SQLite's planner cannot use a partial index unless
// the query repeats its predicate, which is easy to forget.
func TestQueriesReadThroughIndexes(t *testing.T) {
	t.Parallel()
	drv, err := Open(t.Context(), filepath.Join(t.TempDir(), "plans.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := drv.ServerStore().Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`@[a-z_]+`)
	// A full scan is "SCAN table" with no index; json_each and pragma
	// functions are virtual tables, scanned by design.
	fullScan := regexp.MustCompile(`^SCAN \w+$`)
	// The engine's queries and the server's.
	all := maps.Clone(q)
	maps.Copy(all, sq)
	for _, name := range slices.Sorted(maps.Keys(all)) {
		text := all[name]
		// APIKeyList lists every key by design: a handful of rows, read by
		// `oncepush keys list`, never by a request.
		if strings.HasPrefix(text, "PRAGMA") || strings.HasPrefix(name, "Migration") || strings.HasPrefix(name, "ServerMigration") || name == "APIKeyList" {
			continue
		}
		var args []any
		for _, p := range slices.Compact(slices.Sorted(slices.Values(param.FindAllString(text, -1)))) {
			args = append(args, sql.Named(p[1:], "[]"))
		}
		rows, err := drv.DB().QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+text, args...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			if fullScan.MatchString(detail) {
				t.Errorf("%s scans a whole table: %s", name, detail)
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListsSeekTheirCursor: a page of a list searches its index from the
// cursor, so a deep page does not walk (and test) every row before it.
func TestListsSeekTheirCursor(t *testing.T) {
	t.Parallel()
	drv, err := Open(t.Context(), filepath.Join(t.TempDir(), "plans.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for name, search := range map[string]string{
		"DeliveryListByRecipient": "(recipient=? AND id<?)",
		"DeliveryListByMessage":   "(message_id=? AND id>?)",
	} {
		var args []any
		for _, p := range []string{"recipient", "message_id", "before_id", "after_id", "max"} {
			args = append(args, sql.Named(p, 1))
		}
		var plan []string
		rows, err := drv.DB().QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q.Get(name), args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if len(plan) != 1 || !strings.HasPrefix(plan[0], "SEARCH oncepush_delivery USING ") || !strings.HasSuffix(plan[0], search) {
			t.Errorf("%s: plan %q, want one index search %s", name, plan, search)
		}
	}
}
