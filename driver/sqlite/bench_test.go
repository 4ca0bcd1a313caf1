package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

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

// campaignDevices fills the devices of the campaign benchmark: ?1
// recipients with one FCM device each, inserted by one statement.
const campaignDevices = `
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1)
INSERT INTO oncepush_device (recipient, transport, token, token_key, created_at, registered_at)
SELECT 'r' || printf('%08d', i), 'fcm', 'fcm-bench-' || printf('%016x', i * 2654435761),
       'fcm-bench-' || printf('%016x', i * 2654435761), ?2, ?2
FROM s`

// campaignDB makes a fresh, migrated database file holding n devices and
// returns its path; the parent's handle is closed before the child opens it.
func campaignDB(tb testing.TB, n int) string {
	path := filepath.Join(tb.TempDir(), "oncepush.db")
	drv, err := sqlite.Open(tb.Context(), path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer drv.Close()
	if _, err := drv.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	if _, err := drv.DB().ExecContext(tb.Context(), campaignDevices, n, time.Now().UnixMicro()); err != nil {
		tb.Fatal(err)
	}
	if _, err := drv.DB().ExecContext(tb.Context(), "ANALYZE"); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("%d devices inserted in %s", n, time.Since(start).Round(time.Millisecond))
	return path
}

// TestCampaignBench runs the campaign benchmark at a size CI runs in
// seconds: the same child process, the same checks.
func TestCampaignBench(t *testing.T) {
	drivertest.RunCampaignChild(t, "TestCampaignBenchChild", campaignDB(t, 2000), 2000, 0, nil).Report(t)
}

// TestCampaignBenchChild is the benchmark's child process; it does nothing
// in any other run.
func TestCampaignBenchChild(t *testing.T) {
	drivertest.CampaignChild(t, func(t *testing.T, path string) driver.Driver[*sql.Tx] {
		d, err := sqlite.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	})
}

// BenchmarkCampaign is PostgreSQL's campaign benchmark on SQLite
// (synchronous=FULL, the default). Its size is small unless
// ONCEPUSH_BENCH_CAMPAIGN lists sizes (ONCEPUSH_BENCH_CAMPAIGN=10000,100000);
// run with -benchtime=1x. See docs/benchmarks.md.
func BenchmarkCampaign(b *testing.B) {
	for _, n := range drivertest.CampaignSizes(b, 2000) {
		for _, batch := range []int{100, 1000} {
			b.Run(fmt.Sprintf("devices=%d/batch=%d", n, batch), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					db := campaignDB(b, n)
					b.StartTimer()
					drivertest.RunCampaignChild(b, "TestCampaignBenchChild", db, n, batch, nil).Report(b)
				}
			})
		}
	}
}
