package sqlite_test

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

// sqliteDB is one test's database file.
type sqliteDB struct{ path string }

func newDB(t *testing.T) drivertest.DB[*sql.Tx] {
	db := &sqliteDB{path: filepath.Join(t.TempDir(), "oncepush.db")}
	drv := open(t, db.path, nil)
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

// open opens a driver on the file and closes it when the test ends.
func open(t *testing.T, path string, opts *sqlite.Options) *sqlite.Driver {
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

// suiteBusyTimeout is how long the suite's writers wait for their turn. The
// suite's promises are not about how fast a machine gives a writer its turn,
// and under the race detector on two busy cores eight concurrent writers
// waited past the default 10 s; the tests of the wait itself
// (TestWritersOfOneProcessTakeTurns and the gate's) set their own.
const suiteBusyTimeout = 5 * time.Minute

func (d *sqliteDB) Driver(t *testing.T, maxConns int) driver.Driver[*sql.Tx] {
	return open(t, d.path, &sqlite.Options{MaxConns: maxConns, BusyTimeout: suiteBusyTimeout})
}

func (d *sqliteDB) Begin(ctx context.Context, drv driver.Driver[*sql.Tx]) (*sql.Tx, error) {
	return drv.(*sqlite.Driver).DB().BeginTx(ctx, nil)
}

func (d *sqliteDB) Commit(_ context.Context, tx *sql.Tx) error   { return tx.Commit() }
func (d *sqliteDB) Rollback(_ context.Context, tx *sql.Tx) error { return tx.Rollback() }
func (d *sqliteDB) Exec(ctx context.Context, tx *sql.Tx, query string) error {
	_, err := tx.ExecContext(ctx, query)
	return err
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Harness[*sql.Tx]{NewDB: newDB})
}

// TestMethods runs the per-method layer: each promise of a single method,
// on the executor directly.
func TestMethods(t *testing.T) {
	drivertest.RunMethods(t, drivertest.Harness[*sql.Tx]{NewDB: newDB})
}

func TestServerConformance(t *testing.T) {
	drivertest.RunServer(t, drivertest.Harness[*sql.Tx]{NewDB: newDB, ServerStore: serverStore})
}

func serverStore(d driver.Driver[*sql.Tx]) serverstore.Store[*sql.Tx] {
	return d.(*sqlite.Driver).ServerStore()
}
