package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/drivertest"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/internal/testdb"
)

// pgDB is one test's schema.
type pgDB struct{ conn string }

func newDB(t *testing.T) drivertest.DB[pgx.Tx] {
	db := &pgDB{conn: testdb.Schema(t)}
	if _, err := postgres.New(testdb.Pool(t, db.conn, 2)).Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

func (d *pgDB) Driver(t *testing.T, maxConns int) driver.Driver[pgx.Tx] {
	return postgres.New(testdb.Pool(t, d.conn, int32(maxConns)))
}

func (d *pgDB) Begin(ctx context.Context, drv driver.Driver[pgx.Tx]) (pgx.Tx, error) {
	return drv.(*postgres.Driver).Pool().Begin(ctx)
}

func (d *pgDB) Commit(ctx context.Context, tx pgx.Tx) error   { return tx.Commit(ctx) }
func (d *pgDB) Rollback(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) }
func (d *pgDB) Exec(ctx context.Context, tx pgx.Tx, sql string) error {
	_, err := tx.Exec(ctx, sql)
	return err
}

// migrated returns a pool on a fresh, migrated schema of the test, and a
// driver on it.
func migrated(t *testing.T) (*pgxpool.Pool, *postgres.Driver) {
	t.Helper()
	pool := testdb.Pool(t, testdb.Schema(t), 4)
	drv := postgres.New(pool)
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return pool, drv
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Harness[pgx.Tx]{NewDB: newDB})
}

// TestMethods runs the per-method layer: each promise of a single method,
// on the executor directly.
func TestMethods(t *testing.T) {
	drivertest.RunMethods(t, drivertest.Harness[pgx.Tx]{NewDB: newDB})
}

func TestServerConformance(t *testing.T) {
	drivertest.RunServer(t, drivertest.Harness[pgx.Tx]{NewDB: newDB, ServerStore: serverStore})
}

func serverStore(d driver.Driver[pgx.Tx]) serverstore.Store[pgx.Tx] {
	return d.(*postgres.Driver).ServerStore()
}
