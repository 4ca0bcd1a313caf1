// Package migrate runs a storage driver's numbered migrations. The rules are
// the same for every driver — versions in order, each migration in a
// transaction of its own, a database a newer build migrated refused, each
// applied migration recorded — so they live here once, over two small
// interfaces that speak the driver's dialect. A driver keeps its SQL, its
// transactions and its locking.
package migrate

import (
	"context"
	"fmt"
	"io/fs"
	"slices"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/sqlfile"
)

// Sequence is one numbered sequence of migrations with a version table of
// its own. A driver has two: the engine's (migration/, oncepush_migration)
// and the server's (servermigration/, oncepush_server_migration), which
// evolve apart.
type Sequence struct {
	Driver string // the driver's name, beginning its errors: "postgres"
	What   string // "" for the engine's sequence, "server " for the server's: in errors
	Files  fs.FS  // the embedded migration files
	Dir    string // their directory in Files
}

// Tx is one migration's transaction, in the driver's dialect.
type Tx interface {
	// Prepare readies the version table: it takes the lock that serialises
	// migrators, where the transaction does not hold one already, and
	// creates the table if it is missing.
	Prepare(ctx context.Context) error
	// Applied lists the versions the table records, in order.
	Applied(ctx context.Context) ([]int, error)
	// Exec runs a migration's SQL.
	Exec(ctx context.Context, sql string) error
	// Record records m as applied.
	Record(ctx context.Context, m sqlfile.Migration) error
}

// DB reads a sequence's version table outside a transaction.
type DB interface {
	// Exists reports whether the version table exists.
	Exists(ctx context.Context) (bool, error)
	// Applied lists the versions the table records, in order.
	Applied(ctx context.Context) ([]int, error)
}

// Load returns the sequence's migration files, in version order.
func (s *Sequence) Load() ([]sqlfile.Migration, error) { return sqlfile.Migrations(s.Files, s.Dir) }

// Migrate applies the pending migrations in version order. inTx runs fn in a
// new transaction, committed if fn returns nil; each migration gets one, so
// migrators that the driver's lock serialises apply each migration once: the
// second finds it recorded. A database at a version this build does not know
// is refused with driver.ErrSchemaTooNew before anything is applied.
func (s *Sequence) Migrate(ctx context.Context, inTx func(fn func(Tx) error) error) (*driver.MigrateResult, error) {
	ms, err := s.Load()
	if err != nil {
		return nil, err
	}
	res := &driver.MigrateResult{}
	for _, m := range ms {
		err := inTx(func(tx Tx) error {
			if err := tx.Prepare(ctx); err != nil {
				return err
			}
			applied, err := tx.Applied(ctx)
			if err != nil {
				return err
			}
			if err := s.TooNew(last(applied), len(ms)); err != nil {
				return err
			}
			if slices.Contains(applied, m.Version) {
				return nil
			}
			if err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %smigration %s: %w", s.Driver, s.What, m.Name, err)
			}
			if err := tx.Record(ctx, m); err != nil {
				return err
			}
			res.Applied = append(res.Applied, m.Version)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	res.Version = len(ms)
	return res, nil
}

// Version reports the latest version db records (0 before the first
// migration) and the latest this build knows. It does not judge them: see
// TooNew.
func (s *Sequence) Version(ctx context.Context, db DB) (current, latest int, err error) {
	ms, err := s.Load()
	if err != nil {
		return 0, 0, err
	}
	latest = len(ms)
	exists, err := db.Exists(ctx)
	if err != nil || !exists {
		return 0, latest, err
	}
	applied, err := db.Applied(ctx)
	if err != nil {
		return 0, latest, err
	}
	return last(applied), latest, nil
}

// TooNew returns driver.ErrSchemaTooNew, saying which versions, when a
// database at version current is newer than the latest this build knows;
// otherwise nil.
func (s *Sequence) TooNew(current, latest int) error {
	if current <= latest {
		return nil
	}
	return fmt.Errorf("%w: database is at %sversion %d, this build knows %d",
		driver.ErrSchemaTooNew, s.What, current, latest)
}

// last is the latest of the applied versions, listed in order; 0 for none.
func last(applied []int) int {
	if len(applied) == 0 {
		return 0
	}
	return applied[len(applied)-1]
}
