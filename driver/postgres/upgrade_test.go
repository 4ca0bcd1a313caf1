package postgres

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush/driver/internal/migrate"
	"github.com/oncepush/oncepush/driver/internal/upgradetest"
	"github.com/oncepush/oncepush/internal/testdb"
)

// oldServerMigration is the engine's migration 2 exactly as builds before
// the server's own migrations shipped it, when it (002_server) also created
// the server's tables. Never edit it: it is what databases in the field were
// migrated with. Migrations 1, 3 and 4 have not changed since, so the test
// takes them from migration/ (driver's TestReleasedMigrationsUnchanged pins
// them).
//
//go:embed testdata/engine_v4/002_server.sql
var oldServerMigration string

// TestUpgradeKeepsServerRows: see upgradetest.Harness.Run.
func TestUpgradeKeepsServerRows(t *testing.T) {
	t.Parallel()
	upgradeHarness().Run(t)
}

// TestUpgradeMidCampaign: see upgradetest.Harness.RunMidCampaign.
func TestUpgradeMidCampaign(t *testing.T) {
	t.Parallel()
	upgradeHarness().RunMidCampaign(t)
}

// upgradeHarness is the PostgreSQL driver's part of the upgrade tests.
func upgradeHarness() upgradetest.Harness[pgx.Tx, *Driver] {
	return upgradetest.Harness[pgx.Tx, *Driver]{
		Engine: engineMigrations.Files, EngineDir: engineMigrations.Dir, OldServer: oldServerMigration,
		Empty: func(t *testing.T) *Driver { return New(testdb.Pool(t, testdb.Schema(t), 4)) },
		InEngineTx: func(ctx context.Context, drv *Driver) func(func(migrate.Tx) error) error {
			return engineMigrations.inTx(ctx, drv.Pool())
		},
		InsertOldRows: insertOldRows,
		Schema:        func(t *testing.T, drv *Driver) []string { return schemaOf(t, drv.Pool()) },
		Time:          func(at time.Time) string { return "'" + at.Format(time.RFC3339Nano) + "'::timestamptz" },
		Blob:          func(hex string) string { return `'\x` + hex + "'::bytea" },
		Exec: func(t *testing.T, drv *Driver, text string) error {
			// Statements sent together, with no arguments, run in one
			// implicit transaction.
			_, err := drv.Pool().Exec(t.Context(), text)
			return err
		},
		Try: func(t *testing.T, drv *Driver, text string) error {
			tx, err := drv.Pool().Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
			_, err = tx.Exec(t.Context(), text)
			return err
		},
		Rows: rowsOf,
	}
}

// rowsOf is upgradetest.Harness.Rows.
func rowsOf(t *testing.T, drv *Driver, text string) []string {
	t.Helper()
	rows, err := drv.Pool().Query(t.Context(), text)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	lines, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		vals, err := r.Values()
		line := make([]string, len(vals))
		for i, v := range vals {
			line[i] = fmt.Sprint(v)
		}
		return strings.Join(line, " | "), err
	})
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	slices.Sort(lines)
	return lines
}

// insertOldRows is upgradetest.Harness.InsertOldRows.
func insertOldRows(t *testing.T, drv *Driver) {
	t.Helper()
	stamp := func(at time.Time) string { return at.Format(time.RFC3339) }
	if _, err := drv.Pool().Exec(t.Context(), fmt.Sprintf(`
INSERT INTO oncepush_api_key (id, name, hash, scopes, created_at, revoked_at) VALUES
    ('opk_live', 'backend', '\x0101', '{send,read}', '%s', NULL),
    ('opk_gone', 'old', '\x0202', '{admin}', '%s', '%s');
INSERT INTO oncepush_preference (recipient, opt_out, quiet_start, quiet_end, time_zone, updated_at) VALUES
    ('u_1', '{news,promo}', '22:00', '07:00', 'Europe/Zurich', '2026-01-02T10:00:00Z'),
    ('u_2', '{}', '', '', '', '2026-01-03T10:00:00Z');
INSERT INTO oncepush_message (type, title, body, ambiguity, scheduled_at, expires_at, created_at)
VALUES ('t', 'kept', 'b', 'resend', now(), now() + interval '1 day', now());
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, next_attempt_at, created_at)
SELECT id, 'u_1', 'n1', 'k1', now(), now() FROM oncepush_message;
INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
SELECT 'k1', '\x09', id, 1, 0, now() FROM oncepush_message;
`, stamp(upgradetest.KeyCreated), stamp(upgradetest.KeyCreated.AddDate(0, -1, 0)), stamp(upgradetest.KeyRevoked))); err != nil {
		t.Fatalf("old rows: %v", err)
	}
}

// schemaOf describes the tables of the pool's schema — columns, constraints
// and indexes — one line each, sorted, without the schema's name.
func schemaOf(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	ctx := t.Context()
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `
SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
FROM information_schema.columns WHERE table_schema = current_schema()
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		lines[i] = strings.ReplaceAll(l, schema+".", "")
	}
	slices.Sort(lines)
	return lines
}
