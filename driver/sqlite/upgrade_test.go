package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/internal/sqlfile"
)

// testdata/engine_v4 holds the engine's migrations 1–4 exactly as builds
// before the server's own migrations shipped them, when migration 2
// (002_server) also created the server's tables. Never edit them: they are
// what files in the field were migrated with.
//
//go:embed testdata/engine_v4/*.sql
var engineV4FS embed.FS

// openFile opens the database file at path for a test.
func openFile(t *testing.T, path string) *Driver {
	t.Helper()
	drv, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	return drv
}

// migrateAsBefore migrates the file to version upTo the way an older build
// did: its migration files, recorded in oncepush_migration under their old
// names.
func migrateAsBefore(t *testing.T, drv *Driver, upTo int) {
	t.Helper()
	ms, err := sqlfile.Migrations(engineV4FS, "testdata/engine_v4")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:upTo] {
		err := drv.InTx(t.Context(), func(ctx context.Context, tx *sql.Tx, _ driver.Executor) error {
			if _, err := tx.ExecContext(ctx, q.Get("MigrationTableCreate")); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("old migration %s: %w", m.Name, err)
			}
			_, err := tx.ExecContext(ctx, q.Get("MigrationInsert"), sql.Named("version", m.Version),
				sql.Named("name", m.Name), sql.Named("now", time.Now().UnixMicro()))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpgradeKeepsServerRows: a file an older build migrated to engine
// version 2, 3 or 4 — its API keys and preferences in tables the engine's
// migration 2 made — migrates forward with this build's engine and server
// migrations without losing a row of either, and ends with the same schema
// as a file this build migrated from nothing.
func TestUpgradeKeepsServerRows(t *testing.T) {
	t.Parallel()
	freshDrv := openFile(t, filepath.Join(t.TempDir(), "fresh.db"))
	if _, err := freshDrv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := freshDrv.ServerStore().Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	fresh := schemaOf(t, freshDrv)
	for _, from := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("FromEngineVersion%d", from), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			drv := openFile(t, filepath.Join(t.TempDir(), "old.db"))
			migrateAsBefore(t, drv, from)

			// What the older server and engine wrote (times in microseconds).
			created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
			revoked := time.Date(2025, 12, 24, 10, 0, 0, 0, time.UTC)
			now := time.Now().UnixMicro()
			if _, err := drv.DB().ExecContext(ctx, `
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
`, created.UnixMicro(), created.AddDate(0, -1, 0).UnixMicro(), revoked.UnixMicro(), now); err != nil {
				t.Fatalf("old rows: %v", err)
			}

			res, err := drv.Migrate(ctx)
			if err != nil {
				t.Fatalf("engine Migrate: %v", err)
			}
			if want := versions(from+1, res.Version); !slices.Equal(res.Applied, want) {
				t.Fatalf("engine Migrate applied %v, want %v", res.Applied, want)
			}
			st := drv.ServerStore()
			sres, err := st.Migrate(ctx)
			if err != nil {
				t.Fatalf("server Migrate: %v", err)
			}
			if want := versions(1, sres.Version); !slices.Equal(sres.Applied, want) {
				t.Fatalf("server Migrate applied %v, want %v", sres.Applied, want)
			}

			ex := st.Exec()
			live, err := ex.APIKeyGetByHash(ctx, []byte{1, 1})
			if err != nil || live.ID != "opk_live" || live.Name != "backend" || !slices.Equal(live.Scopes, []string{"send", "read"}) ||
				live.RevokedAt != nil || !live.CreatedAt.Equal(created) {
				t.Fatalf("the live key after the upgrade: %+v, %v", live, err)
			}
			gone, err := ex.APIKeyGetByHash(ctx, []byte{2, 2})
			if err != nil || gone.RevokedAt == nil || !gone.RevokedAt.Equal(revoked) {
				t.Fatalf("the revoked key after the upgrade: %+v, %v", gone, err)
			}
			if keys, err := ex.APIKeyList(ctx); err != nil || len(keys) != 2 {
				t.Fatalf("APIKeyList after the upgrade = %v, %v; want both keys", keys, err)
			}
			p, err := ex.PreferenceGet(ctx, "u_1")
			if err != nil || !slices.Equal(p.OptOut, []string{"news", "promo"}) || p.QuietStart != "22:00" || p.QuietEnd != "07:00" || p.TimeZone != "Europe/Zurich" {
				t.Fatalf("u_1's preferences after the upgrade: %+v, %v", p, err)
			}
			if many, err := ex.PreferenceGetMany(ctx, []string{"u_1", "u_2"}); err != nil || len(many) != 2 {
				t.Fatalf("PreferenceGetMany after the upgrade = %v, %v; want both", many, err)
			}
			// The adopted tables take new rows, and the engine's rows and
			// recorded request are the engine's as before.
			if err := ex.PreferencePut(ctx, &serverstore.Preference{Recipient: "u_3", OptOut: []string{"news"}}, nil); err != nil {
				t.Fatalf("PreferencePut after the upgrade: %v", err)
			}
			client, err := oncepush.NewClient(drv, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := client.CheckSchema(ctx); err != nil {
				t.Fatalf("CheckSchema after the upgrade: %v", err)
			}
			replay, err := client.Send(ctx, []string{"u_1"}, oncepush.Message{Title: "again"}, &oncepush.SendOptions{DedupKey: "k1", RequestHash: []byte{9}})
			if err != nil || !replay.Replayed || replay.Queued != 1 {
				t.Fatalf("the recorded request after the upgrade: %+v, %v; want it replayed", replay, err)
			}
			if rec, err := drv.Exec().IdempotencyGet(ctx, "k1"); err != nil || !bytes.Equal(rec.RequestHash, []byte{9}) {
				t.Fatalf("IdempotencyGet after the upgrade: %+v, %v", rec, err)
			}

			if got := schemaOf(t, drv); !slices.Equal(got, fresh) {
				t.Errorf("the upgraded schema differs from a fresh one:\n%s", diffLines(fresh, got))
			}
		})
	}
}

// schemaOf describes the file's tables and indexes — their names and the
// statements that would create them — one line each, sorted.
func schemaOf(t *testing.T, drv *Driver) []string {
	t.Helper()
	lines, err := query(t.Context(), drv.DB(), func(r scanner) (string, error) {
		var s string
		err := r.Scan(&s)
		return s, err
	}, `SELECT type || ' ' || name || ' on ' || tbl_name || ': ' || coalesce(sql, '') FROM sqlite_schema`)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines
}

// diffLines lists the lines only one of want and got has.
func diffLines(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}

func versions(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
