package sqlite_test

import (
	"testing"

	"github.com/oncepush/oncepush/driver/drivertest"
	"github.com/oncepush/oncepush/internal/testdb/sqliteharness"
)

// The engine's promises (drivertest.Run) run on this driver beside the
// engine, in the root package's conformance_test.go, with the same harness:
// running them here too would run the same suite on the same driver twice.
// What is the driver's alone runs here: its methods one by one, and the
// server's contract.

// open opens a driver on the file and closes it when the test ends.
var open = sqliteharness.Open

// TestMethods runs the per-method layer: each promise of a single method,
// on the executor directly.
func TestMethods(t *testing.T) {
	drivertest.RunMethods(t, sqliteharness.New())
}

func TestServerConformance(t *testing.T) {
	drivertest.RunServer(t, sqliteharness.New())
}
