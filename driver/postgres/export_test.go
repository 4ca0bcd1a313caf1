package postgres

import (
	"time"

	"github.com/oncepush/oncepush/driver/drivertest"
)

// Test hooks for this package's tests (package postgres_test), compiled only
// into them.

// SetIdleInTransactionTimeout replaces IdleInTransactionTimeout for the
// transactions d begins, so that a test sees the bound act in a second.
func SetIdleInTransactionTimeout(d *Driver, idle time.Duration) { d.begin = beginBounded(idle) }

// The suite reads through drivertest.TestExecutor what the engine never asks.
var _ drivertest.TestExecutor = (*executor)(nil)
