package postgres_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/drivertest"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/pushtest"
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
				drivertest.BenchDrain(b, newDB, 50000, 2, clients, batch)
			})
		}
	}
}

// cleanupData is a retained ledger of a busy week: 200,000 messages, one
// every 3 s, each with 6 deliveries (1.2 million) to 50,000 recipients,
// finished a minute after they were sent, each message under a dedup key
// with its recorded request.
const cleanupData = `
INSERT INTO oncepush_message (type, title, body, ambiguity, scheduled_at, expires_at, created_at)
SELECT 'bench', 'title', 'body', 'resend', t, t + interval '1 day', t
FROM (SELECT @t0::timestamptz + i * interval '3 seconds' AS t FROM generate_series(1, 200000) i) s;
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, status, next_attempt_at, created_at, finished_at)
SELECT m.id, 'r' || ((m.id * 6 + j) % 50000), md5(m.id || ':' || j), 'k' || m.id, 'sent',
       m.created_at, m.created_at, m.created_at + interval '1 minute'
FROM oncepush_message m, generate_series(1, 6) j;
INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
SELECT 'k' || id, '\x01', id, 6, 0, created_at FROM oncepush_message;
ANALYZE
`

// BenchmarkCleanupRound measures one cleanup round in steady state on the
// retained week of cleanupData: each round runs 10 minutes (the cleanup
// interval) after the last, so about 200 messages and their 1,200
// deliveries have passed retention since. Filling the ledger takes about a
// minute. Run with -benchtime=20x; see docs/benchmarks.md.
func BenchmarkCleanupRound(b *testing.B) {
	ctx := b.Context()
	pool := testdb.Pool(b, testdb.Schema(b), 4)
	drv := postgres.New(pool)
	if _, err := drv.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	for stmt := range strings.SplitSeq(strings.TrimSpace(cleanupData), ";\n") {
		if _, err := pool.Exec(ctx, stmt, pgx.NamedArgs{"t0": t0}); err != nil {
			b.Fatalf("%s: %v", stmt, err)
		}
	}
	// The first deliveries finish at t0 + 3 s + 1 min: nothing has passed
	// retention yet.
	clock := pushtest.NewClock(t0.Add(oncepush.RetentionDefault + time.Minute))
	c, err := oncepush.NewClient(drv, &oncepush.Config{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	var deliveries, messages, records int
	for b.Loop() {
		clock.Advance(oncepush.CleanupIntervalDefault)
		st, err := c.Cleanup(ctx)
		if err != nil {
			b.Fatal(err)
		}
		deliveries += st.Deliveries
		messages += st.Messages
		records += st.Idempotency
	}
	b.ReportMetric(float64(deliveries)/float64(b.N), "deliveries/round")
	b.ReportMetric(float64(messages)/float64(b.N), "messages/round")
	b.ReportMetric(float64(records)/float64(b.N), "records/round")
}
