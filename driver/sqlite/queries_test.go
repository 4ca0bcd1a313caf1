package sqlite

import (
	"context"
	"database/sql"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/oncepush/oncepush/driver/internal/upgradetest"
)

// TestQueriesReadThroughIndexes: no named query scans a whole table. The
// ledger grows to millions of rows, and a statement that scans it holds the
// one write lock meanwhile; SQLite's planner cannot use a partial index unless
// the query repeats its predicate, which is easy to forget.
func TestQueriesReadThroughIndexes(t *testing.T) {
	t.Parallel()
	drv := migratedFile(t)
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
		plan, err := queryPlan(t.Context(), drv, text, args...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, detail := range plan {
			if fullScan.MatchString(detail) {
				t.Errorf("%s scans a whole table: %s", name, detail)
			}
		}
	}
}

// TestListsSeekTheirCursor: a page of a list searches its index from the
// cursor, so a deep page does not walk (and test) every row before it, and
// reads it in index order: no sort of what it passes. The notification
// list's cursor is folded by the executor into a range of creation times.
func TestListsSeekTheirCursor(t *testing.T) {
	t.Parallel()
	drv := migratedFile(t)
	for name, search := range map[string]string{
		"DeliveryListByRecipient": "SEARCH oncepush_delivery USING INDEX oncepush_delivery_recipient (recipient=? AND id<?)",
		"DeliveryListByMessage":   "SEARCH oncepush_delivery USING INDEX oncepush_delivery_message (message_id=? AND id>?)",
		"MessageList":             "SEARCH m USING INDEX oncepush_message_created (created_at>? AND created_at<?)",
		"MessageListByCategory":   "SEARCH m USING INDEX oncepush_message_category (category=? AND created_at>? AND created_at<?)",
	} {
		var args []any
		for _, p := range []string{"recipient", "message_id", "before_id", "after_id", "max", "lo_at", "hi_at", "before_at", "status", "limit", "category"} {
			if strings.Contains(q.Get(name), "@"+p) {
				args = append(args, sql.Named(p, 1))
			}
		}
		plan, err := queryPlan(t.Context(), drv, q.Get(name), args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(plan) == 0 || plan[0] != search || slices.ContainsFunc(plan, func(s string) bool { return strings.Contains(s, "TEMP B-TREE") }) {
			t.Errorf("%s: plan %q, want %s in index order", name, plan, search)
		}
	}
}

// migratedFile opens a new database file for the test, migrated with the
// engine's migrations and the server's.
func migratedFile(t *testing.T) *Driver {
	t.Helper()
	drv, err := Open(t.Context(), filepath.Join(t.TempDir(), "plans.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	upgradetest.MigrateAll(t, drv)
	return drv
}

// queryPlan is what EXPLAIN QUERY PLAN says of each step of text: the detail
// column, as "SEARCH oncepush_delivery USING INDEX …".
func queryPlan(ctx context.Context, drv *Driver, text string, args ...any) ([]string, error) {
	return query(ctx, drv.DB(), func(r scanner) (string, error) {
		var id, parent, unused int
		var detail string
		err := r.Scan(&id, &parent, &unused, &detail)
		return detail, err
	}, "EXPLAIN QUERY PLAN "+text, args...)
}
