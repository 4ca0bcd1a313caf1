package postgres_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/conformance"
	"github.com/oncepush/oncepush/internal/testdb"
)

// BenchmarkDrain drains 100,000 device sends (50,000 recipients × 2 devices)
// into the in-process fake provider. Run with -benchtime=1x; see
// docs/benchmarks.md.
func BenchmarkDrain(b *testing.B) {
	newDB := func(b *testing.B) func(int) driver.Driver[pgx.Tx] {
		conn := testdb.Schema(b)
		if _, err := postgres.New(testdb.Pool(b, conn, 2)).Migrate(b.Context()); err != nil {
			b.Fatal(err)
		}
		return func(maxConns int) driver.Driver[pgx.Tx] {
			return postgres.New(testdb.Pool(b, conn, int32(maxConns)))
		}
	}
	for _, clients := range []int{1, 2} {
		for _, batch := range []int{100, 500, 1000} {
			b.Run(fmt.Sprintf("clients=%d/batch=%d", clients, batch), func(b *testing.B) {
				conformance.BenchDrain(b, newDB, 50000, 2, clients, batch)
			})
		}
	}
}
