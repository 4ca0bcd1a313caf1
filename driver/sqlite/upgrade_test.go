package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
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
	upgradeHarness().Run(t)
}

// upgradeHarness is the SQLite driver's part of the upgrade tests.
func upgradeHarness() upgradetest.Harness[*sql.Tx, *Driver] {
	return upgradetest.Harness[*sql.Tx, *Driver]{
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
		Time:          func(at time.Time) string { return strconv.FormatInt(at.UnixMicro(), 10) },
		Blob:          func(hex string) string { return "x'" + hex + "'" },
		Exec: func(t *testing.T, drv *Driver, text string) error {
			return drv.InTx(t.Context(), func(ctx context.Context, tx *sql.Tx, _ driver.Executor) error {
				_, err := tx.ExecContext(ctx, text)
				return err
			})
		},
		Try: func(t *testing.T, drv *Driver, text string) error {
			rollback := errors.New("rolled back")
			err := drv.InTx(t.Context(), func(ctx context.Context, tx *sql.Tx, _ driver.Executor) error {
				if _, err := tx.ExecContext(ctx, text); err != nil {
					return err
				}
				return rollback
			})
			if errors.Is(err, rollback) {
				return nil
			}
			return err
		},
		Rows:      rowsOf,
		CheckFile: checkFile,
	}
}

// rowsOf is upgradetest.Harness.Rows.
func rowsOf(t *testing.T, drv *Driver, text string) []string {
	t.Helper()
	rows, err := drv.DB().QueryContext(t.Context(), text)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		line := make([]string, len(vals))
		for i, v := range vals {
			line[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(line, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// checkFile is upgradetest.Harness.CheckFile: migration 9 rebuilt
// oncepush_device_attempt (a CHECK cannot change in place), which drops
// the table's triggers and indexes with it. The file is consistent, every
// foreign key holds, and the rebuilt table has its primary key's index and
// its two tally triggers back.
func checkFile(t *testing.T, drv *Driver) {
	t.Helper()
	if got := rowsOf(t, drv, `PRAGMA integrity_check`); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("integrity_check after the upgrade: %v", got)
	}
	if got := rowsOf(t, drv, `PRAGMA foreign_key_check`); len(got) != 0 {
		t.Errorf("foreign_key_check after the upgrade: %v", got)
	}
	if got := rowsOf(t, drv, `SELECT name, origin, "unique", partial FROM pragma_index_list('oncepush_device_attempt')`); !slices.Equal(got, []string{"sqlite_autoindex_oncepush_device_attempt_1 | pk | 1 | 0"}) {
		t.Errorf("oncepush_device_attempt's indexes after the upgrade: %v", got)
	}
	if got := rowsOf(t, drv, `SELECT "table", "from", "to", on_delete FROM pragma_foreign_key_list('oncepush_device_attempt')`); !slices.Equal(got, []string{"oncepush_delivery | delivery_id | id | CASCADE"}) {
		t.Errorf("oncepush_device_attempt's foreign keys after the upgrade: %v", got)
	}
	if got := rowsOf(t, drv, `SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'oncepush_device_attempt'`); !slices.Equal(got, []string{"oncepush_tally_attempt_insert", "oncepush_tally_attempt_update"}) {
		t.Errorf("oncepush_device_attempt's triggers after the upgrade: %v", got)
	}
}

// TestUpgradeMidCampaign: see upgradetest.Harness.RunMidCampaign.
func TestUpgradeMidCampaign(t *testing.T) {
	t.Parallel()
	upgradeHarness().RunMidCampaign(t)
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
