package sqlite

import "github.com/oncepush/oncepush/driver/drivertest"

// Test hooks for this package's tests (package sqlite_test), compiled only
// into them.

// OnGateWait makes fn run whenever a writer to d's file finds this process's
// write gate taken and starts waiting for it.
func OnGateWait(d *Driver, fn func()) { d.gate.onWait.Store(&fn) }

// OnListenPoll makes fn run after each poll of d's listener, once any wake-up
// the poll called for has been handed over.
func OnListenPoll(d *Driver, fn func()) { d.onListenPoll.Store(&fn) }

// The suite reads through drivertest.TestExecutor what the engine never asks.
var _ drivertest.TestExecutor = (*executor)(nil)
