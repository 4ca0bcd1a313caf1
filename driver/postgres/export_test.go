package postgres

import "time"

// Test hooks for this package's tests (package postgres_test), compiled only
// into them.

// SetIdleInTransactionTimeout replaces IdleInTransactionTimeout for the
// transactions d begins, so that a test sees the bound act in a second.
func SetIdleInTransactionTimeout(d *Driver, idle time.Duration) { d.begin = beginBounded(idle) }
