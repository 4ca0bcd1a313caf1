package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver/internal/migrate"
	"github.com/oncepush/oncepush/driver/internal/upgradetest"
)

// oldServerMigration is the engine's migration 2 exactly as builds before
// the server's own migrations shipped it, when it (002_server) also created
// the server's tables. Never edit it: it is what files in the field were
// migrated with. Migrations 1, 3 and 4 have not changed since, so the test
// takes them from migration/ (driver's TestReleasedMigrationsUnchanged pins
// them).
//
//go:embed testdata/engine_v4/002_server.sql
var oldServerMigration string

// TestUpgradeKeepsServerRows: see upgradetest.Harness.Run.
func TestUpgradeKeepsServerRows(t *testing.T) {
	t.Parallel()
	upgradetest.Harness[*sql.Tx, *Driver]{
		Engine: engineMigrations.Files, EngineDir: engineMigrations.Dir, OldServer: oldServerMigration,
		Empty: func(t *testing.T) *Driver {
			drv, err := Open(t.Context(), filepath.Join(t.TempDir(), "test.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = drv.Close() })
			return drv
		},
		InEngineTx: func(ctx context.Context, drv *Driver) func(func(migrate.Tx) error) error {
			return engineMigrations.inTx(ctx, drv)
		},
		InsertOldRows: insertOldRows,
		Schema:        schemaOf,
	}.Run(t)
}

// insertOldRows is upgradetest.Harness.InsertOldRows (times in
// microseconds).
func insertOldRows(t *testing.T, drv *Driver) {
	t.Helper()
	created := upgradetest.KeyCreated
	now := time.Now().UnixMicro()
	if _, err := drv.DB().ExecContext(t.Context(), `
INSERT INTO oncepush_api_key (id, name, hash, scopes, created_at, revoked_at) VALUES
    ('opk_live', 'backend', x'0101', '["send","read"]', ?1, NULL),
    ('opk_gone', 'old', x'0202', '["admin"]', ?2, ?3);
INSERT INTO oncepush_preference (recipient, opt_out, quiet_start, quiet_end, time_zone, updated_at) VALUES
    ('u_1', '["news","promo"]', '22:00', '07:00', 'Europe/Zurich', ?4),
    ('u_2', '[]', '', '', '', ?4);
INSERT INTO oncepush_message (type, title, body, ambiguity, scheduled_at, expires_at, created_at)
VALUES ('t', 'kept', 'b', 'resend', ?4, ?4 + 86400000000, ?4);
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, next_attempt_at, created_at)
SELECT id, 'u_1', 'n1', 'k1', ?4, ?4 FROM oncepush_message;
INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
SELECT 'k1', x'09', id, 1, 0, ?4 FROM oncepush_message;
`, created.UnixMicro(), created.AddDate(0, -1, 0).UnixMicro(), upgradetest.KeyRevoked.UnixMicro(), now); err != nil {
		t.Fatalf("old rows: %v", err)
	}
}

// schemaOf describes the file's tables and indexes — their names and the
// statements that would create them — one line each, sorted.
func schemaOf(t *testing.T, drv *Driver) []string {
	t.Helper()
	lines, err := query(t.Context(), drv.DB(), scanValue[string], `SELECT type || ' ' || name || ' on ' || tbl_name || ': ' || coalesce(sql, '') FROM sqlite_schema`)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines
}
