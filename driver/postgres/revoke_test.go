package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/pushtest"
)

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
