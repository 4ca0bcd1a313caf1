package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncepush/oncepush/driver"
)

var _ driver.ConflictDetector = (*Driver)(nil)

// Conflict implements driver.ConflictDetector: err says PostgreSQL aborted
// the statement's transaction to break a deadlock (40P01
// deadlock_detected) or because it could not serialize it with others
// (40001 serialization_failure). Nothing of that transaction was written;
// run again, it may succeed.
func (d *Driver) Conflict(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == "40P01" || pgErr.Code == "40001"
}
