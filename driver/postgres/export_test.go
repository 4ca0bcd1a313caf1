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

// SetListenCheck replaces ListenCheck for d's wake-up listener, so that a
// test sees a silent connection replaced in a second.
func SetListenCheck(d *Driver, every time.Duration) { d.listenCheck = every }

// The suite reads through drivertest.TestExecutor what the engine never asks.
var _ drivertest.TestExecutor = (*executor)(nil)
