package oncepush_test

import (
	"testing"

	"github.com/oncepush/oncepush/driver/drivertest"
	"github.com/oncepush/oncepush/internal/testdb/sqliteharness"
)

// TestConformance proves the engine's promises beside the engine: the
// public conformance suite (driver/drivertest), every promise as a test
// that tries to break it, on the embedded SQLite driver. PostgreSQL runs
// the same suite in driver/postgres.
func TestConformance(t *testing.T) {
	drivertest.Run(t, sqliteharness.New())
}
