// Package upgradetest is the upgrade test both built-in drivers run: a
// database an older build migrated, holding rows that build wrote, migrates
// forward with this build's migrations, keeps every row and ends with the
// schema a fresh database gets. The driver supplies what is in its dialect
// (the old rows, the schema's description, its transactions); the test's
// steps and checks are here, once. Only tests import it.
package upgradetest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/internal/migrate"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/internal/sqlfile"
)

// The times of the API keys the older build wrote (Harness.InsertOldRows).
var (
	// KeyCreated is when the live key, opk_live, was created.
	KeyCreated = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	// KeyRevoked is when the revoked key, opk_gone, was revoked; it was
	// created a month before KeyCreated.
	KeyRevoked = time.Date(2025, 12, 24, 10, 0, 0, 0, time.UTC)
)

// Harness is one driver's part of the upgrade test. D is the driver's type.
type Harness[TTx any, D serverstore.Driver[TTx]] struct {
	// Engine holds this build's engine migrations (the driver's embedded
	// migration/ directory), in the directory EngineDir.
	Engine    fs.FS
	EngineDir string
	// OldServer is the engine's migration 2 as builds before the server's
	// own migrations shipped it, 002_server.sql, which also created the
	// server's tables. It is the one released engine migration that has
	// changed since: migrations 1, 3 and 4 ran then as they are in Engine
	// today, which driver's TestReleasedMigrationsUnchanged keeps true.
	OldServer string
	// Empty returns a driver on an empty database of the test's own.
	Empty func(t *testing.T) D
	// InEngineTx runs a step in a new transaction of drv's on the engine's
	// version table (oncepush_migration).
	InEngineTx func(ctx context.Context, drv D) func(func(migrate.Tx) error) error
	// InsertOldRows writes, in the old schema, what the older server and
	// engine wrote: the API keys opk_live (hash 01 01, scopes send and read,
	// created KeyCreated) and opk_gone (hash 02 02, scope admin, created a
	// month before KeyCreated, revoked KeyRevoked); the preferences of u_1
	// (opting out of news and promo, quiet from 22:00 to 07:00 in
	// Europe/Zurich) and u_2 (none); and a message with one pending
	// delivery to u_1 under the dedup key k1, recorded as the request k1
	// with hash 09 that queued it.
	InsertOldRows func(t *testing.T, drv D)
	// Schema describes the database's tables, columns, constraints and
	// indexes, one line each, sorted.
	Schema func(t *testing.T, drv D) []string

	// What RunMidCampaign writes and reads in the driver's dialect.
	//
	// Time is t as a literal of a time column; Blob the bytes of hex as a
	// literal of a bytes column.
	Time func(t time.Time) string
	Blob func(hex string) string
	// Exec runs statements, one transaction for all of them.
	Exec func(t *testing.T, drv D, sql string) error
	// Try runs statements in a transaction it then rolls back, and returns
	// the first error.
	Try func(t *testing.T, drv D, sql string) error
	// Rows returns the query's rows, each its values formatted with
	// fmt.Sprint (NULL as <nil>) and joined by " | ", sorted.
	Rows func(t *testing.T, drv D, query string) []string
	// CheckFile, when set, checks what only the driver can: its storage's
	// own consistency after the upgrade.
	CheckFile func(t *testing.T, drv D)
}

// MigrateAll applies this build's engine migrations, then the server's, as
// `oncepush migrate` does.
func MigrateAll[TTx any](t *testing.T, drv serverstore.Driver[TTx]) {
	t.Helper()
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatalf("engine Migrate: %v", err)
	}
	if _, err := drv.ServerStore().Migrate(t.Context()); err != nil {
		t.Fatalf("server Migrate: %v", err)
	}
}

// Run checks that a database an older build migrated to engine version 2, 3
// or 4 — its API keys and preferences in tables the engine's migration 2
// made — migrates forward with this build's engine and server migrations
// without losing a row of either, and ends with the same schema as a
// database this build migrated from nothing.
func (h Harness[TTx, D]) Run(t *testing.T) {
	freshDrv := h.Empty(t)
	MigrateAll(t, freshDrv)
	fresh := h.Schema(t, freshDrv)
	for _, from := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("FromEngineVersion%d", from), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			drv := h.Empty(t)
			h.migrateAsBefore(t, drv, from)
			h.InsertOldRows(t, drv)

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
				live.RevokedAt != nil || !live.CreatedAt.Equal(KeyCreated) {
				t.Fatalf("the live key after the upgrade: %+v, %v", live, err)
			}
			gone, err := ex.APIKeyGetByHash(ctx, []byte{2, 2})
			if err != nil || gone.RevokedAt == nil || !gone.RevokedAt.Equal(KeyRevoked) {
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

			if got := h.Schema(t, drv); !slices.Equal(got, fresh) {
				t.Errorf("the upgraded schema differs from a fresh one:\n%s", diffLines(fresh, got))
			}
		})
	}
}

// oldEngineVersion is the last engine version builds before the server's own
// migrations shipped.
const oldEngineVersion = 4

// migrateAsBefore migrates drv's database to engine version upTo the way an
// older build did: its migration files, recorded in oncepush_migration under
// their old names.
func (h Harness[TTx, D]) migrateAsBefore(t *testing.T, drv D, upTo int) {
	t.Helper()
	ms, err := sqlfile.Migrations(h.Engine, h.EngineDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < oldEngineVersion {
		t.Fatalf("%d engine migrations; the old builds had %d", len(ms), oldEngineVersion)
	}
	ms = slices.Clone(ms[:oldEngineVersion])
	ms[1] = sqlfile.Migration{Version: 2, Name: "002_server", SQL: h.OldServer}
	h.apply(t, drv, ms[:upTo], "old migration")
}

// apply runs migrations ms on drv's database one by one, each in its
// transaction and recorded, as the migrator of the build that shipped them
// did; what names a failure is what.
func (h Harness[TTx, D]) apply(t *testing.T, drv D, ms []sqlfile.Migration, what string) {
	t.Helper()
	ctx := t.Context()
	for _, m := range ms {
		err := h.InEngineTx(ctx, drv)(func(tx migrate.Tx) error {
			if err := tx.Prepare(ctx); err != nil {
				return err
			}
			if err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s %s: %w", what, m.Name, err)
			}
			return tx.Record(ctx, m)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
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
