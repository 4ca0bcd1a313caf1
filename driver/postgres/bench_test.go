package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
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

// campaignDevices fills the devices of the campaign benchmark: n
// recipients with one FCM device each, inserted by one statement.
const campaignDevices = `
INSERT INTO oncepush_device (recipient, transport, token, token_key, created_at, registered_at)
SELECT 'r' || lpad(i::text, 8, '0'), 'fcm', 'fcm-bench-' || md5(i::text), 'fcm-bench-' || md5(i::text), now(), now()
FROM generate_series(1, @n::int) i`

// campaignApp names the child's sessions, so that the sampler finds them.
const campaignApp = "oncepush-campaign-bench"

// campaignDB makes a fresh, migrated schema holding n devices and returns
// the child's connection string.
func campaignDB(tb testing.TB, n int) string {
	ctx := context.Background()
	conn := testdb.Schema(tb)
	pool := testdb.Pool(tb, conn, 2)
	if _, err := postgres.New(pool).Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	if _, err := pool.Exec(ctx, campaignDevices, pgx.NamedArgs{"n": n}); err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE oncepush_device"); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("%d devices inserted in %s", n, time.Since(start).Round(time.Millisecond))
	u, err := url.Parse(conn)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", campaignApp)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestCampaignBench runs the campaign benchmark at a size CI runs in
// seconds: the same child process, the same checks.
func TestCampaignBench(t *testing.T) {
	drivertest.RunCampaignChild(t, "TestCampaignBenchChild", campaignDB(t, 2000), 2000, 0, nil).Report(t)
}

// TestCampaignBenchChild is the benchmark's child process; it does nothing
// in any other run.
func TestCampaignBenchChild(t *testing.T) {
	drivertest.CampaignChild(t, func(t *testing.T, db string) driver.Driver[pgx.Tx] {
		return postgres.New(testdb.Pool(t, db, 0))
	})
}

// BenchmarkCampaign is a campaign to every device, expanded and delivered
// by one client into the in-process fake provider, in a child process whose
// peak RSS it reports. Its size is small unless ONCEPUSH_BENCH_CAMPAIGN
// lists sizes (ONCEPUSH_BENCH_CAMPAIGN=100000,1000000); run with
// -benchtime=1x. The database sessions are sampled every 20 ms
// (pg_stat_activity) to say which statements the database spends its time
// in. See docs/benchmarks.md.
func BenchmarkCampaign(b *testing.B) {
	for _, n := range drivertest.CampaignSizes(b, 2000) {
		for _, batch := range []int{100, 1000} {
			b.Run(fmt.Sprintf("devices=%d/batch=%d", n, batch), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					db := campaignDB(b, n)
					sampler := testdb.Pool(b, db, 1)
					b.StartTimer()
					drivertest.RunCampaignChild(b, "TestCampaignBenchChild", db, n, batch, func(ctx context.Context, r *drivertest.CampaignBenchResult) {
						sampleSessions(ctx, sampler, r)
					}).Report(b)
				}
			})
		}
	}
}

// sampleSessions counts, every 20 ms until ctx ends, what each of the
// child's database sessions is doing: the statement of an active one, or
// its state; and keeps the CPU time of each session's backend process
// (/proc/<pid>/stat, read while the session lives).
func sampleSessions(ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, r *drivertest.CampaignBenchResult) {
	r.StatementSamples = map[string]int{}
	cpu := map[int]time.Duration{}
	defer func() {
		for _, d := range cpu {
			r.DatabaseCPU += d
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rows, err := pool.Query(ctx, `SELECT pid, state, query FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()`, campaignApp)
		if err != nil {
			return
		}
		for rows.Next() {
			var pid int
			var state, query string
			if rows.Scan(&pid, &state, &query) != nil {
				continue
			}
			if d := processCPU(pid); d > cpu[pid] {
				cpu[pid] = d
			}
			r.StatementSamplesTotal++
			if state != "active" {
				r.StatementSamplesNotActive++
				r.StatementSamples["("+state+")"]++
				continue
			}
			q := strings.Join(strings.Fields(query), " ")
			r.StatementSamples[q[:min(len(q), 140)]]++
		}
		rows.Close()
	}
}

// processCPU is a process's user + system time (Linux; 0 elsewhere or when
// it cannot be read).
func processCPU(pid int) time.Duration {
	doc, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command is in parentheses and may hold spaces: count fields after it.
	_, rest, ok := strings.Cut(string(doc), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ = 100
}
