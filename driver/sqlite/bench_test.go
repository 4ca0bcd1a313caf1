package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/drivertest"
	"github.com/oncepush/oncepush/driver/sqlite"
)

// BenchmarkDrain drains 100,000 device sends (50,000 recipients × 2 devices)
// into the in-process fake provider, as the PostgreSQL benchmark does. Run with
// -benchtime=1x; see docs/benchmarks.md.
func BenchmarkDrain(b *testing.B) {
	for _, sync := range []string{"full", "normal"} {
		for _, clients := range []int{1, 2} {
			for _, batch := range []int{100, 500, 1000} {
				b.Run(fmt.Sprintf("sync=%s/clients=%d/batch=%d", sync, clients, batch), func(b *testing.B) {
					newDB := func(b *testing.B) func(int) driver.Driver[*sql.Tx] {
						path := filepath.Join(b.TempDir(), "oncepush.db")
						opts := func(maxConns int) *sqlite.Options {
							return &sqlite.Options{MaxConns: maxConns, SynchronousNormal: sync == "normal"}
						}
						first, err := sqlite.Open(b.Context(), path, opts(0))
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { first.Close() })
						if _, err := first.Migrate(b.Context()); err != nil {
							b.Fatal(err)
						}
						return func(maxConns int) driver.Driver[*sql.Tx] {
							d, err := sqlite.Open(b.Context(), path, opts(maxConns))
							if err != nil {
								b.Fatal(err)
							}
							b.Cleanup(func() { d.Close() })
							return d
						}
					}
					drivertest.BenchDrain(b, newDB, benchRecipients, 2, clients, batch)
				})
			}
		}
	}
}

var benchRecipients = 50000
