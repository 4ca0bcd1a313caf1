package testdb

import (
	"path/filepath"
	"testing"

	"github.com/oncepush/oncepush/driver/sqlite"
)

// SQLite opens a SQLite driver on a new file in the test's temporary
// directory, with the engine's migrations applied, and closes it when the
// test ends.
func SQLite(t testing.TB) *sqlite.Driver {
	t.Helper()
	drv, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "oncepush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return drv
}
