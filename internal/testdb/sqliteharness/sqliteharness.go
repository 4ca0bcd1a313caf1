// Package sqliteharness adapts the SQLite driver to the conformance suites
// (driver/drivertest): a migrated file per test. The suites run on it in two
// places, the engine's promises beside the engine (the root package's
// conformance_test.go) and the driver's own contracts in driver/sqlite, so
// the adapter lives here once. Imported by tests only.
package sqliteharness

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/drivertest"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/driver/sqlite"
)

// New returns the harness: NewDB makes a migrated file in the test's
// temporary directory, and ServerStore is the driver's.
func New() drivertest.Harness[*sql.Tx] {
	return drivertest.Harness[*sql.Tx]{NewDB: newDB, ServerStore: serverStore}
}

// BusyTimeout is how long the suites' writers wait for their turn. The
// suites' promises are not about how fast a machine gives a writer its
// turn, and under the race detector on two busy cores eight concurrent
// writers waited past the default 10 s; the tests of the wait itself
// (driver/sqlite's TestWritersOfOneProcessTakeTurns and the gate's) set
// their own.
const BusyTimeout = 5 * time.Minute

// db is one test's database file.
type db struct{ path string }

func newDB(t *testing.T) drivertest.DB[*sql.Tx] {
	d := &db{path: filepath.Join(t.TempDir(), "oncepush.db")}
	drv := Open(t, d.path, nil)
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return d
}

// Open opens a driver on the file and closes it when the test ends.
func Open(t *testing.T, path string, opts *sqlite.Options) *sqlite.Driver {
	t.Helper()
	drv, err := sqlite.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := drv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return drv
}

func (d *db) Driver(t *testing.T, maxConns int) driver.Driver[*sql.Tx] {
	return Open(t, d.path, &sqlite.Options{MaxConns: maxConns, BusyTimeout: BusyTimeout})
}

func (d *db) Begin(ctx context.Context, drv driver.Driver[*sql.Tx]) (*sql.Tx, error) {
	return drv.(*sqlite.Driver).DB().BeginTx(ctx, nil)
}

func (d *db) Commit(_ context.Context, tx *sql.Tx) error   { return tx.Commit() }
func (d *db) Rollback(_ context.Context, tx *sql.Tx) error { return tx.Rollback() }
func (d *db) Exec(ctx context.Context, tx *sql.Tx, query string) error {
	_, err := tx.ExecContext(ctx, query)
	return err
}

func serverStore(d driver.Driver[*sql.Tx]) serverstore.Store[*sql.Tx] {
	return d.(*sqlite.Driver).ServerStore()
}
