package postgres

import (
	"bytes"
	"embed"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/internal/sqlfile"
	"github.com/oncepush/oncepush/internal/testdb"
)

// testdata/engine_v4 holds the engine's migrations 1–4 exactly as builds
// before the server's own migrations shipped them, when migration 2
// (002_server) also created the server's tables. Never edit them: they are
// what databases in the field were migrated with.
//
//go:embed testdata/engine_v4/*.sql
var engineV4FS embed.FS

// migrateAsBefore migrates the schema behind pool to version upTo the way an
// older build did: its migration files, recorded in oncepush_migration under
// their old names.
func migrateAsBefore(t *testing.T, pool *pgxpool.Pool, upTo int) {
	t.Helper()
	ms, err := sqlfile.Migrations(engineV4FS, "testdata/engine_v4")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:upTo] {
		err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(t.Context(), q.Get("MigrationTableCreate")); err != nil {
				return err
			}
			if _, err := tx.Exec(t.Context(), m.SQL); err != nil {
				return fmt.Errorf("old migration %s: %w", m.Name, err)
			}
			_, err := tx.Exec(t.Context(), q.Get("MigrationInsert"), named{"version": m.Version, "name": m.Name})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpgradeKeepsServerRows: a database an older build migrated to engine
// version 2, 3 or 4 — its API keys and preferences in tables the engine's
// migration 2 made — migrates forward with this build's engine and server
// migrations without losing a row of either, and ends with the same schema
// as a database this build migrated from nothing.
func TestUpgradeKeepsServerRows(t *testing.T) {
	t.Parallel()
	fresh := schemaOf(t, freshlyMigrated(t))
	for _, from := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("FromEngineVersion%d", from), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := testdb.Pool(t, testdb.Schema(t), 4)
			migrateAsBefore(t, pool, from)

			// What the older server and engine wrote.
			if _, err := pool.Exec(ctx, `
INSERT INTO oncepush_api_key (id, name, hash, scopes, created_at, revoked_at) VALUES
    ('opk_live', 'backend', '\x0101', '{send,read}', '2026-01-01T10:00:00Z', NULL),
    ('opk_gone', 'old', '\x0202', '{admin}', '2025-12-01T10:00:00Z', '2025-12-24T10:00:00Z');
INSERT INTO oncepush_preference (recipient, opt_out, quiet_start, quiet_end, time_zone, updated_at) VALUES
    ('u_1', '{news,promo}', '22:00', '07:00', 'Europe/Zurich', '2026-01-02T10:00:00Z'),
    ('u_2', '{}', '', '', '', '2026-01-03T10:00:00Z');
INSERT INTO oncepush_message (type, title, body, ambiguity, scheduled_at, expires_at, created_at)
VALUES ('t', 'kept', 'b', 'resend', now(), now() + interval '1 day', now());
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, next_attempt_at, created_at)
SELECT id, 'u_1', 'n1', 'k1', now(), now() FROM oncepush_message;
INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
SELECT 'k1', '\x09', id, 1, 0, now() FROM oncepush_message;
`); err != nil {
				t.Fatalf("old rows: %v", err)
			}

			drv := New(pool)
			res, err := drv.Migrate(ctx)
			if err != nil {
				t.Fatalf("engine Migrate: %v", err)
			}
			if want := seq(from+1, res.Version); !slices.Equal(res.Applied, want) {
				t.Fatalf("engine Migrate applied %v, want %v", res.Applied, want)
			}
			st := drv.ServerStore()
			sres, err := st.Migrate(ctx)
			if err != nil {
				t.Fatalf("server Migrate: %v", err)
			}
			if want := seq(1, sres.Version); !slices.Equal(sres.Applied, want) {
				t.Fatalf("server Migrate applied %v, want %v", sres.Applied, want)
			}

			ex := st.Exec()
			live, err := ex.APIKeyGetByHash(ctx, []byte{1, 1})
			if err != nil || live.ID != "opk_live" || live.Name != "backend" || !slices.Equal(live.Scopes, []string{"send", "read"}) ||
				live.RevokedAt != nil || !live.CreatedAt.Equal(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)) {
				t.Fatalf("the live key after the upgrade: %+v, %v", live, err)
			}
			gone, err := ex.APIKeyGetByHash(ctx, []byte{2, 2})
			if err != nil || gone.RevokedAt == nil || !gone.RevokedAt.Equal(time.Date(2025, 12, 24, 10, 0, 0, 0, time.UTC)) {
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

			if got := schemaOf(t, pool); !slices.Equal(got, fresh) {
				t.Errorf("the upgraded schema differs from a fresh one:\n%s", diffLines(fresh, got))
			}
		})
	}
}

// freshlyMigrated is a schema this build migrated from nothing, engine and
// server.
func freshlyMigrated(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testdb.Pool(t, testdb.Schema(t), 2)
	if _, err := New(pool).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := New(pool).ServerStore().Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return pool
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

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
