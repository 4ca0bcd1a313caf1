// What the PostgreSQL driver must get right when things go wrong: the READ
// COMMITTED races it must lock against — two transactions each see the
// database without the other's uncommitted rows, and without a lock each
// would act on what it alone sees (SQLite has one writer at a time; these
// races cannot arise there) — and a server it cannot reach, told apart from
// a statement that failed (as driver/sqlite's unwritable_test.go does for a
// file that cannot take a write).

package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/pushtest"
)

// TestConcurrentDeletersFreeWhatTheyHeld: two transactions each delete one
// of a message's two deliveries, which hold one key, and each then looks for
// deliveries still referencing the message and holding the key. Under READ
// COMMITTED each still sees the other's uncommitted row; without a lock both
// would keep the message and the record, which then nobody would ever
// delete. The second must wait for the first and see its commit. (SQLite has
// one writer at a time; the race cannot arise there.)
func TestConcurrentDeletersFreeWhatTheyHeld(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, drv, c := migratedClient(t)
	sent, err := c.Send(ctx, []string{"r1", "r2"}, oncepush.Message{Title: "t"},
		&oncepush.SendOptions{DedupKey: "k", RequestHash: []byte{1}})
	if err != nil {
		t.Fatal(err)
	}

	// Each transaction deletes its recipient's delivery: neither waits.
	begin := func(recipient string) (pgx.Tx, driver.Executor, *driver.DeletedDeliveries) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
		ex := drv.UnwrapExecutor(tx)
		res, err := ex.RecipientDelete(ctx, recipient)
		if err != nil {
			t.Fatal(err)
		}
		return tx, ex, &res.Deliveries
	}
	// What the engine does after deleting deliveries (freeHeld).
	type freed struct {
		messages, records int
		err               error
	}
	free := func(ex driver.Executor, del *driver.DeletedDeliveries) (f freed) {
		if f.messages, f.err = ex.MessageDeleteOrphans(ctx, del.MessageIDs); f.err == nil {
			f.records, f.err = ex.IdempotencyDeleteFreed(ctx, del.DedupKeys)
		}
		return f
	}
	tx1, ex1, del1 := begin("r1")
	tx2, ex2, del2 := begin("r2")
	var pid2 uint32
	if err := tx2.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid2); err != nil {
		t.Fatal(err)
	}

	if f := free(ex1, del1); f != (freed{}) {
		t.Fatalf("first: %+v; want message and record kept (r2's delivery is not deleted yet)", f)
	}
	second := make(chan freed, 1)
	go func() { second <- free(ex2, del2) }()
	// The second either answers at once (it did not wait: message and record
	// stay forever) or waits for the first's lock.
	select {
	case f := <-second:
		_ = tx1.Commit(ctx)
		_ = tx2.Commit(ctx)
		t.Fatalf("the second deleter answered %+v without waiting for the first", f)
	case <-waitForLock(t, pool, pid2):
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if f := <-second; f != (freed{messages: 1, records: 1}) {
		t.Fatalf("second, after the first committed: %+v; want the message and the record deleted", f)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ex := drv.Exec()
	if m, err := ex.MessageGet(ctx, sent.MessageID); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("message left behind: %+v, %v", m, err)
	}
	if rec, err := ex.IdempotencyGet(ctx, "k"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("record left behind: %+v, %v", rec, err)
	}
}

// migratedClient returns a client with the default configuration on a
// fresh migrated schema, with its pool and driver.
func migratedClient(t *testing.T) (*pgxpool.Pool, *postgres.Driver, *oncepush.Client[pgx.Tx]) {
	t.Helper()
	pool, drv := migrated(t)
	c, err := oncepush.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pool, drv, c
}

// waitForLock closes the returned channel once the backend pid waits for a
// lock, as pg_stat_activity reports it.
func waitForLock(t *testing.T, pool *pgxpool.Pool, pid uint32) <-chan struct{} {
	return waitFor(t, pool, "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid)
}

// waitForBlockedBy closes the returned channel once some backend waits for
// a lock the backend pid holds.
func waitForBlockedBy(t *testing.T, pool *pgxpool.Pool, pid uint32) <-chan struct{} {
	return waitFor(t, pool, "SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND $1 = ANY (pg_blocking_pids(pid))", pid)
}

// waitFor closes the returned channel once query, given pid, answers true.
// PostgreSQL signals no lock wait, so it polls.
func waitFor(t *testing.T, pool *pgxpool.Pool, query string, pid uint32) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			var yes bool
			err := pool.QueryRow(t.Context(), query, pid).Scan(&yes)
			if err != nil {
				t.Errorf("waiting for a lock: %v", err)
			}
			if err != nil || yes {
				close(ch)
				return
			}
			select {
			case <-t.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return ch
}

// TestDirectSendRacingUncommittedRegistration: a direct send names a token
// whose registration to a recipient is still uncommitted. Under READ
// COMMITTED the send cannot see that row; the registry's unique index makes
// it wait for it, and once it commits the send must be refused, the token
// left with its owner — not moved to the implicit recipient.
func TestDirectSendRacingUncommittedRegistration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _, client := migratedClient(t)
	tok := oncepush.Token("phone-" + strings.Repeat("y", 150))
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := client.RegisterDeviceTx(ctx, tx, oncepush.Device{Recipient: "alice", Transport: oncepush.TransportFCM, Token: tok}); err != nil {
		t.Fatal(err)
	}
	var pid uint32
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}

	sent := make(chan error, 1)
	go func() {
		_, err := client.SendToDevices(ctx, []oncepush.DeviceAddress{{Transport: oncepush.TransportFCM, Token: tok}},
			oncepush.Message{Title: "direct"}, nil)
		sent <- err
	}()
	select {
	case err := <-sent:
		t.Fatalf("the direct send answered %v without waiting for the registration", err)
	case <-waitForBlockedBy(t, pool, pid):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; !errors.Is(err, oncepush.ErrTokenRegistered) {
		t.Fatalf("the direct send after the registration committed: %v, want ErrTokenRegistered", err)
	}
	if devs, err := client.Devices(ctx, "alice"); err != nil || len(devs) != 1 {
		t.Fatalf("alice's devices: %v, %v; want her token", devs, err)
	}
}

// TestRevokeRacingUncommittedRegistration: a registration still uncommitted
// in the caller's transaction races RevokeSession. Under READ COMMITTED the
// revocation cannot see the new row; it must wait for it instead, so that the
// device is deleted and never sent to — not after retention either.
func TestRevokeRacingUncommittedRegistration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, drv := migrated(t)
	fcm := pushtest.NewProvider(oncepush.TransportFCM)
	clock := pushtest.NewClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	client, err := oncepush.NewClient(drv, &oncepush.Config{Providers: []oncepush.Provider{fcm}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := client.RegisterDeviceTx(ctx, tx, oncepush.Device{
		Recipient: "r1", Transport: oncepush.TransportFCM, Token: oncepush.Token("phone-" + strings.Repeat("x", 150)), Session: "s1",
	}); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}

	revoked := make(chan error, 1)
	go func() { revoked <- client.RevokeSession(ctx, "s1") }()
	// The moment: the revocation has run while the registration is open —
	// finished (it did not wait), or waiting behind the registration's backend.
	early := false
	for waiting := false; !waiting; {
		select {
		case err := <-revoked:
			if err != nil {
				t.Fatal(err)
			}
			early, waiting = true, true
			continue
		default:
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted AND $1 = ANY (pg_blocking_pids(pid))", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		waiting = n > 0
		time.Sleep(time.Millisecond) // a poll of the exact moment: PostgreSQL signals no lock wait
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !early {
		if err := <-revoked; err != nil {
			t.Fatal(err)
		}
	}

	if devs, err := client.Devices(ctx, "r1"); err != nil || len(devs) != 0 {
		t.Fatalf("after the revocation, r1 still has devices %v (%v); revoked early: %v", devs, err, early)
	}
	clock.Advance(client.Config().Retention + 24*time.Hour)
	if _, err := client.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Send(ctx, []string{"r1"}, oncepush.Message{Type: "t", Title: "after sign-out"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fcm.Count(); n != 0 {
		t.Fatalf("the revoked session's device received %d pushes", n)
	}
}

func TestUnavailableTellsAnUnreachableDatabaseFromAFailedStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A port nobody listens on: the listener is closed before the dial.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, refused := pgx.Connect(ctx, "postgres://oncepush@"+addr+"/oncepush?sslmode=disable&connect_timeout=5")
	if refused == nil {
		t.Fatal("connected to a closed port")
	}
	pool := testdb.Pool(t, testdb.Schema(t), 1)
	_, undefined := pool.Exec(ctx, "SELECT * FROM no_such_table")
	pool.Close()
	_, closed := pool.Exec(ctx, "SELECT 1")

	drv := postgres.New(nil)
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"closed pool", fmt.Errorf("read: %w", closed), true},
		{"admin_shutdown", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true},
		{"crash_shutdown", &pgconn.PgError{Severity: "FATAL", Code: "57P02"}, true},
		{"cannot_connect_now", fmt.Errorf("write: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P03"}), true},
		{"too_many_connections", &pgconn.PgError{Severity: "FATAL", Code: "53300"}, true},
		// A full disk (a table, an index or a temporary file cannot grow) and
		// its class: the same request succeeds once there is room.
		{"disk_full", fmt.Errorf("insert: %w", &pgconn.PgError{Severity: "ERROR", Code: "53100", Message: `could not extend file "base/16384/16385": No space left on device`}), true},
		{"insufficient_resources", &pgconn.PgError{Severity: "ERROR", Code: "53000"}, true},
		{"out_of_memory", &pgconn.PgError{Severity: "ERROR", Code: "53200"}, true},
		{"connection_failure", &pgconn.PgError{Code: "08006"}, true},
		{"EOF mid-answer", fmt.Errorf("read rows: %w", io.ErrUnexpectedEOF), true},
		{"undefined table", undefined, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"not found", driver.ErrNotFound, false},
		{"cancelled by the caller", context.Canceled, false},
		{"nil", nil, false},
	} {
		if got := drv.Unavailable(tc.err); got != tc.want {
			t.Errorf("%s (%v): Unavailable = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
