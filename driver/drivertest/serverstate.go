package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/serverstore"
)

// The server's state (package driver/serverstore): API keys and preferences,
// with migrations of their own. RunServer runs these tests; Run, the engine's
// suite, never touches the server's tables.

// RunServer runs the suite of the server's storage contract, on databases
// that NewDB migrated for the engine only: the suite migrates the server's
// schema itself. h.ServerStore must be set.
func RunServer[TTx any](t *testing.T, h Harness[TTx]) {
	if h.ServerStore == nil {
		t.Fatal("drivertest.RunServer: Harness.ServerStore is nil")
	}
	runParallel(t, h, []testCase[TTx]{
		{"MigrationsApartFromTheEngine", testServerMigrations[TTx]},
		{"MigrateConcurrentlyAppliesOnce", testServerMigrateConcurrently[TTx]},
		{"APIKeys", testAPIKeys[TTx]},
		{"Preferences", testPreferences[TTx]},
		{"PreferencesOnTheClaimTransaction", testPreferencesOnClaimTx[TTx]},
		{"PreferencesDeletedWithTheRecipient", testPreferencesDeletedWithRecipient[TTx]},
	})
}

// serverSetup is setup with the server's store on the bundle's driver,
// migrated.
func serverSetup[TTx any](t *testing.T, h Harness[TTx], mod func(*oncepush.Config)) (*bundle[TTx], serverstore.Store[TTx]) {
	t.Helper()
	b := setup(t, h, mod)
	st := h.ServerStore(b.drv)
	if _, err := st.Migrate(b.ctx); err != nil {
		t.Fatalf("server Migrate: %v", err)
	}
	return b, st
}

// testServerMigrations: the engine's migrations create none of the server's
// tables, and the server's are numbered and recorded apart: migrating them
// leaves the engine's version as it was, and a second Migrate applies nothing.
func testServerMigrations[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	st := h.ServerStore(b.drv)
	engine, engineLatest, err := b.drv.SchemaVersion(b.ctx)
	if err != nil || engine != engineLatest {
		t.Fatalf("engine SchemaVersion = %d, %d, %v; want the harness's database migrated", engine, engineLatest, err)
	}
	cur, latest, err := st.SchemaVersion(b.ctx)
	if err != nil || cur != 0 || latest < 1 {
		t.Fatalf("server SchemaVersion of an engine-only database = %d, %d, %v; want 0 and at least 1", cur, latest, err)
	}
	if _, err := st.Exec().APIKeyList(b.ctx); err == nil {
		t.Fatal("the engine's migrations created the server's API key table")
	}
	if _, err := st.Exec().PreferenceGet(b.ctx, "r1"); err == nil || errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("the engine's migrations created the server's preference table (PreferenceGet: %v)", err)
	}
	res, err := st.Migrate(b.ctx)
	if err != nil || res.Version != latest || len(res.Applied) != latest || res.Applied[0] != 1 {
		t.Fatalf("server Migrate = %+v, %v; want versions 1…%d applied", res, err, latest)
	}
	if cur, _, err := st.SchemaVersion(b.ctx); err != nil || cur != latest {
		t.Fatalf("server SchemaVersion after Migrate = %d, %v; want %d", cur, err, latest)
	}
	if again, err := b.drv.Migrate(b.ctx); err != nil || len(again.Applied) != 0 {
		t.Fatalf("engine Migrate after the server's = %+v, %v; want nothing to apply", again, err)
	}
	if e, _, err := b.drv.SchemaVersion(b.ctx); err != nil || e != engine {
		t.Fatalf("engine version %d after the server's migrations, %v; want %d", e, err, engine)
	}
	if again, err := st.Migrate(b.ctx); err != nil || len(again.Applied) != 0 || again.Version != latest {
		t.Fatalf("second server Migrate = %+v, %v; want nothing applied", again, err)
	}
	if keys, err := st.Exec().APIKeyList(b.ctx); err != nil || len(keys) != 0 {
		t.Fatalf("APIKeyList on a fresh server schema = %v, %v", keys, err)
	}
}

// testServerMigrateConcurrently: processes starting together each migrate
// the server's schema; every migration is applied exactly once.
func testServerMigrateConcurrently[TTx any](t *testing.T, h Harness[TTx]) {
	db := h.NewDB(t)
	const n = 4
	results := make([]*driver.MigrateResult, n)
	errs := make([]error, n)
	stores := make([]serverstore.Store[TTx], n)
	for i := range n {
		stores[i] = h.ServerStore(db.Driver(t, 2))
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = stores[i].Migrate(t.Context()) })
	}
	wg.Wait()
	var applied []int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("server Migrate %d: %v", i, errs[i])
		}
		applied = append(applied, results[i].Applied...)
	}
	_, latest, err := stores[0].SchemaVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(applied)
	if want := seq(1, latest); !slices.Equal(applied, want) {
		t.Fatalf("%d concurrent server migrations applied %v in all, want %v once", n, applied, want)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func testAPIKeys[TTx any](t *testing.T, h Harness[TTx]) {
	b, st := serverSetup(t, h, nil)
	ex := st.Exec()
	k := &serverstore.APIKey{ID: "k1abcdef", Name: "backend", Hash: bytes.Repeat([]byte{1}, 32), Scopes: []string{"send", "read"}}
	if err := ex.APIKeyInsert(b.ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := ex.APIKeyInsert(b.ctx, &serverstore.APIKey{ID: "k2", Name: "dup", Hash: k.Hash, Scopes: []string{"send"}}); err == nil {
		t.Fatal("a second key with the same hash was stored")
	}
	got, err := ex.APIKeyGetByHash(b.ctx, k.Hash)
	if err != nil || got.ID != k.ID || got.Name != "backend" || !slices.Equal(got.Scopes, []string{"send", "read"}) || got.RevokedAt != nil {
		t.Fatalf("APIKeyGetByHash = %+v, %v", got, err)
	}
	if _, err := ex.APIKeyGetByHash(b.ctx, []byte("nope")); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("unknown hash: %v", err)
	}
	now := b.clock.Now()
	if ok, err := ex.APIKeyRevoke(b.ctx, k.ID, &now); err != nil || !ok {
		t.Fatalf("revoke: %v, %v", ok, err)
	}
	if ok, err := ex.APIKeyRevoke(b.ctx, k.ID, &now); err != nil || ok {
		t.Fatalf("revoking twice: %v, %v; want false", ok, err)
	}
	got, err = ex.APIKeyGetByHash(b.ctx, k.Hash)
	if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(now) {
		t.Fatalf("revoked key: %+v, %v", got, err)
	}
	if err := ex.APIKeyInsert(b.ctx, &serverstore.APIKey{ID: "k2", Name: "other", Hash: bytes.Repeat([]byte{2}, 32), Scopes: []string{"admin"}}); err != nil {
		t.Fatal(err)
	}
	list, err := ex.APIKeyList(b.ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("APIKeyList = %+v, %v", list, err)
	}
}

func testPreferences[TTx any](t *testing.T, h Harness[TTx]) {
	b, st := serverSetup(t, h, nil)
	ex := st.Exec()
	if _, err := ex.PreferenceGet(b.ctx, "r1"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("no preferences yet: %v", err)
	}
	p := &serverstore.Preference{Recipient: "r1", OptOut: []string{"news", "promo"}, QuietStart: "22:00", QuietEnd: "07:00", TimeZone: "Europe/Zurich"}
	if err := ex.PreferencePut(b.ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	if err := ex.PreferencePut(b.ctx, &serverstore.Preference{Recipient: "r2"}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := ex.PreferenceGet(b.ctx, "r1")
	if err != nil || !slices.Equal(got.OptOut, p.OptOut) || got.QuietStart != "22:00" || got.QuietEnd != "07:00" || got.TimeZone != "Europe/Zurich" {
		t.Fatalf("PreferenceGet = %+v, %v", got, err)
	}
	// Put replaces.
	if err := ex.PreferencePut(b.ctx, &serverstore.Preference{Recipient: "r1", OptOut: []string{"news"}}, nil); err != nil {
		t.Fatal(err)
	}
	many, err := ex.PreferenceGetMany(b.ctx, []string{"r1", "r2", "r3"})
	if err != nil || len(many) != 2 {
		t.Fatalf("PreferenceGetMany = %+v, %v", many, err)
	}
	for _, m := range many {
		if m.Recipient == "r1" && (!slices.Equal(m.OptOut, []string{"news"}) || m.QuietStart != "") {
			t.Fatalf("replaced preferences: %+v", m)
		}
		if m.Recipient == "r2" && len(m.OptOut) != 0 {
			t.Fatalf("empty preferences: %+v", m)
		}
	}
	if n, err := ex.PreferenceDeleteByRecipient(b.ctx, "r2"); err != nil || n != 1 {
		t.Fatalf("PreferenceDeleteByRecipient = %d, %v; want 1", n, err)
	}
	if n, err := ex.PreferenceDeleteByRecipient(b.ctx, "r2"); err != nil || n != 0 {
		t.Fatalf("PreferenceDeleteByRecipient of none = %d, %v; want 0", n, err)
	}
	if _, err := ex.PreferenceGet(b.ctx, "r1"); err != nil {
		t.Fatalf("deleting r2's preferences touched r1's: %v", err)
	}
}

// testPreferencesOnClaimTx: an eligibility rule reads preferences through
// the server's store on the claim's own transaction — consistent with the
// claim, and with no second connection: a client whose pool holds one
// connection still delivers.
func testPreferencesOnClaimTx[TTx any](t *testing.T, h Harness[TTx]) {
	b, _ := serverSetup(t, h, nil)
	one := b.db.Driver(t, 1)
	st := h.ServerStore(one)
	elig := func(ctx context.Context, n oncepush.Notice, recipients []string) (map[string]oncepush.Decision, error) {
		tx, ok := oncepush.ClaimTx[TTx](ctx)
		if !ok {
			return nil, errors.New("no claim transaction")
		}
		prefs, err := st.UnwrapExecutor(tx).PreferenceGetMany(ctx, recipients)
		if err != nil {
			return nil, err
		}
		out := map[string]oncepush.Decision{}
		for _, p := range prefs {
			if slices.Contains(p.OptOut, n.Category) {
				out[p.Recipient] = oncepush.DecisionSkip
			}
		}
		return out, nil
	}
	client := b.newClient(one, func(c *oncepush.Config) {
		c.Providers = []oncepush.Provider{b.fcm}
		c.Eligibility = perMessage(elig)
	})
	b.register("in", oncepush.TransportFCM)
	b.register("out", oncepush.TransportFCM)
	if err := st.Exec().PreferencePut(b.ctx, &serverstore.Preference{Recipient: "out", OptOut: []string{"news"}}, nil); err != nil {
		t.Fatal(err)
	}
	b.send([]string{"in", "out"}, msg("news"), &oncepush.SendOptions{Category: "news"})
	drain(t, client)
	wantStatus(t, b.only("in"), oncepush.StatusSent)
	wantStatus(t, b.only("out"), oncepush.StatusSkipped)
}

// testPreferencesDeletedWithTheRecipient: the engine's deletion of a
// recipient leaves the server's rows alone; the server takes part in it
// with a RecipientDeleter on the deletion's transaction, and its rows then
// go with the engine's or not at all.
func testPreferencesDeletedWithRecipient[TTx any](t *testing.T, h Harness[TTx]) {
	b, st := serverSetup(t, h, nil)
	ex := st.Exec()
	for _, r := range []string{"r1", "r2"} {
		b.register(r, oncepush.TransportFCM)
		if err := ex.PreferencePut(b.ctx, &serverstore.Preference{Recipient: r, OptOut: []string{"news"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.client.DeleteRecipient(b.ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.PreferenceGet(b.ctx, "r1"); err != nil {
		t.Fatalf("the engine's deletion of a recipient touched the server's preferences: %v", err)
	}
	var after error // what the next owner says, once the server's rows are deleted
	withServer := b.newClient(b.drv, func(c *oncepush.Config) {
		c.RecipientDeleters = []oncepush.RecipientDeleter{
			func(ctx context.Context, recipient string) error {
				tx, ok := oncepush.RecipientDeleteTx[TTx](ctx)
				if !ok {
					return errors.New("no deletion transaction")
				}
				n, err := st.UnwrapExecutor(tx).PreferenceDeleteByRecipient(ctx, recipient)
				if err == nil && n != 1 {
					err = fmt.Errorf("PreferenceDeleteByRecipient deleted %d rows, want 1", n)
				}
				return err
			},
			func(context.Context, string) error { return after },
		}
	})
	after = errors.New("another owner failed")
	if err := withServer.DeleteRecipient(b.ctx, "r1"); !errors.Is(err, after) {
		t.Fatalf("DeleteRecipient with a failing owner after the server: %v", err)
	}
	if _, err := ex.PreferenceGet(b.ctx, "r1"); err != nil {
		t.Fatalf("a failed deletion deleted the preferences all the same: %v", err)
	}
	after = nil
	if err := withServer.DeleteRecipient(b.ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.PreferenceGet(b.ctx, "r1"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("deleting a recipient kept its preferences: %v", err)
	}
	if _, err := ex.PreferenceGet(b.ctx, "r2"); err != nil {
		t.Fatalf("deleting r1 deleted r2's preferences: %v", err)
	}
}
