package postgres_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/testdb"
)

func TestMigrateConcurrentlyAppliesOnce(t *testing.T) {
	t.Parallel()
	conn := testdb.Schema(t)
	var wg sync.WaitGroup
	results := make([]*driver.MigrateResult, 5)
	errs := make([]error, 5)
	for i := range 5 {
		wg.Go(func() {
			results[i], errs[i] = postgres.New(testdb.Pool(t, conn, 2)).Migrate(t.Context())
		})
	}
	wg.Wait()
	applied := 0
	for i := range 5 {
		if errs[i] != nil {
			t.Fatalf("migrate %d: %v", i, errs[i])
		}
		applied += len(results[i].Applied)
	}
	d := postgres.New(testdb.Pool(t, conn, 1))
	cur, latest, err := d.SchemaVersion(t.Context())
	if err != nil || cur != latest || cur < 1 {
		t.Fatalf("SchemaVersion = %d, %d, %v", cur, latest, err)
	}
	if applied != latest {
		t.Fatalf("five concurrent migrations applied %d migrations in all, want each once (%d)", applied, latest)
	}
	again, err := d.Migrate(t.Context())
	if err != nil || len(again.Applied) != 0 {
		t.Fatalf("second migrate: %+v, %v", again, err)
	}
}

func TestSchemaChecks(t *testing.T) {
	t.Parallel()
	conn := testdb.Schema(t)
	pool := testdb.Pool(t, conn, 2)
	c, err := oncepush.NewClient(postgres.New(pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSchema(t.Context()); !errors.Is(err, oncepush.ErrSchemaNotCurrent) {
		t.Fatalf("unmigrated: %v", err)
	}
	if err := c.Start(t.Context()); !errors.Is(err, oncepush.ErrSchemaNotCurrent) {
		t.Fatalf("Start on an unmigrated database: %v", err)
	}
	if _, err := c.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSchema(t.Context()); err != nil {
		t.Fatalf("migrated: %v", err)
	}
	// A newer oncepush migrated this database.
	if _, err := pool.Exec(t.Context(), "INSERT INTO oncepush_migration (version, name) VALUES (999, '999_future')"); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSchema(t.Context()); !errors.Is(err, oncepush.ErrSchemaTooNew) {
		t.Fatalf("newer schema: %v", err)
	}
	if _, err := c.Migrate(t.Context()); !errors.Is(err, oncepush.ErrSchemaTooNew) {
		t.Fatalf("Migrate on a newer schema: %v", err)
	}
}
