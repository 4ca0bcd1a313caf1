// Lock order: two processes writing the same keys in opposite orders must
// not deadlock. Each test holds a third transaction's lock in the middle of
// the first writer's statements, so that the first writer holds its first
// lock and waits, and lets the second writer take its own first lock and
// wait for the first writer's, before anything goes on: with the writers'
// locks taken in the callers' orders the deadlock is then certain, not a
// matter of timing.

package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/internal/testdb"
)

// lockTest is a schema with clients on pools of their own, as processes
// would have, and a pool for the test's own transactions.
type lockTest struct {
	t    *testing.T
	conn string
	pool *pgxpool.Pool // the test's
}

func newLockTest(t *testing.T) *lockTest {
	t.Helper()
	pool, _ := migrated(t)
	return &lockTest{t: t, conn: pool.Config().ConnString(), pool: pool}
}

// client returns a client on a pool of its own that writes one group of
// sends at a time (so that a test holding a leader gets the others queued
// behind it).
func (l *lockTest) client() *oncepush.Client[pgx.Tx] {
	l.t.Helper()
	pool, err := pgxpool.New(context.Background(), l.conn)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(pool.Close)
	c, err := oncepush.NewClient(postgres.New(pool), &oncepush.Config{SendGroups: 1})
	if err != nil {
		l.t.Fatal(err)
	}
	return c
}

// blocker is a transaction of the test's that holds what its callers wrote
// until it rolls back.
type blocker struct {
	tx  pgx.Tx
	pid uint32
}

func (l *lockTest) begin() *blocker {
	l.t.Helper()
	ctx := l.t.Context()
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
	b := &blocker{tx: tx}
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&b.pid); err != nil {
		l.t.Fatal(err)
	}
	return b
}

// blockedBy waits until a backend waits for a lock the backend pid holds,
// and returns the waiting backend's pid. PostgreSQL signals no lock wait,
// so it polls (waitForBlockedBy).
func (l *lockTest) blockedBy(pid uint32, what string) uint32 {
	l.t.Helper()
	<-waitForBlockedBy(l.t, l.pool, pid)
	if l.t.Failed() {
		l.t.FailNow()
	}
	var waiter uint32
	err := l.pool.QueryRow(l.t.Context(),
		"SELECT pid FROM pg_locks WHERE NOT granted AND $1 = ANY (pg_blocking_pids(pid)) LIMIT 1", pid).Scan(&waiter)
	if err != nil {
		l.t.Fatalf("%s: %v", what, err)
	}
	return waiter
}

// sendAnswer is what one send answered.
type sendAnswer struct {
	name string
	res  oncepush.SendResult
	err  error
}

// groupSend is one send of a group, named for the test's messages.
type groupSend struct {
	name       string
	recipients []string
	key        string
}

// group starts the sends on c as one group, queued in the order given (the
// first leads, held until the others have queued), and returns the channel
// their answers arrive on. retries counts the group's retried writes.
func (l *lockTest) group(c *oncepush.Client[pgx.Tx], retries *enginetest.Counter, sends ...groupSend) <-chan sendAnswer {
	l.t.Helper()
	queued := &enginetest.Counter{}
	release := make(chan struct{})
	var held, released sync.Once
	l.t.Cleanup(func() { released.Do(func() { close(release) }) })
	ctx := enginetest.WithHooks(l.t.Context(), &enginetest.Hooks{
		OnSendQueued:   func(int) { queued.Add() },
		OnGroupTaking:  func() { held.Do(func() { <-release }) },
		OnSendRetrying: func(int, error) { retries.Add() },
	})
	out := make(chan sendAnswer, len(sends))
	for i, s := range sends {
		go func() {
			var opts *oncepush.SendOptions
			if s.key != "" {
				opts = &oncepush.SendOptions{DedupKey: s.key}
			}
			res, err := c.Send(ctx, s.recipients, oncepush.Message{Type: "lock", Title: s.name}, opts)
			out <- sendAnswer{s.name, res, err}
		}()
		if !queued.Wait(l.t.Context(), i+1) { // the queue's order is the order given
			l.t.Fatalf("send %s never queued", s.name)
		}
	}
	released.Do(func() { close(release) })
	return out
}

// TestGroupsInOppositeOrdersCommit: two processes write groups of sends
// whose dedup keys they list in opposite orders, each group also holding a
// send that shares nothing with the other. The first group holds (r1, k1)
// and waits (for a third transaction's kz) before it reaches (r2, k2); the
// second takes (r2, k2) and waits for (r1, k1). Taken in the groups' own
// orders that is a deadlock, which PostgreSQL breaks by aborting one group —
// every member of it, the send that shares nothing included. Taken in one
// order (the keys sorted) the second group waits for the first, and every
// send succeeds: the ones the first group wrote as written, the second
// group's to the same recipient and key as duplicates.
func TestGroupsInOppositeOrdersCommit(t *testing.T) {
	t.Parallel()
	l := newLockTest(t)
	ctx := t.Context()
	first, second, third := l.client(), l.client(), l.client()

	z := l.begin()
	if _, err := third.SendTx(ctx, z.tx, []string{"rz"}, oncepush.Message{Type: "lock", Title: "z"}, &oncepush.SendOptions{DedupKey: "kz"}); err != nil {
		t.Fatal(err)
	}
	var retries enginetest.Counter
	a := l.group(first, &retries,
		groupSend{"a1", []string{"r1"}, "k1"},
		groupSend{"az", []string{"rz"}, "kz"},
		groupSend{"a2", []string{"r2"}, "k2"},
		groupSend{"a-alone", []string{"alone-a"}, ""},
	)
	aPid := l.blockedBy(z.pid, "the first group waiting for kz")
	b := l.group(second, &retries,
		groupSend{"b2", []string{"r2"}, "k2"},
		groupSend{"b1", []string{"r1"}, "k1"},
		groupSend{"b-alone", []string{"alone-b"}, ""},
	)
	l.blockedBy(aPid, "the second group waiting for the first")
	if err := z.tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	for range 4 {
		ans := <-a
		if ans.err != nil || ans.res.Queued != 1 {
			t.Errorf("first group, %s: %+v, %v; want written", ans.name, ans.res, ans.err)
		}
	}
	for range 3 {
		ans := <-b
		want := oncepush.SendResult{Duplicates: 1} // the first group wrote its recipient and key
		if ans.name == "b-alone" {
			want = oncepush.SendResult{Queued: 1, MessageID: ans.res.MessageID}
		}
		if ans.err != nil || ans.res != want {
			t.Errorf("second group, %s: %+v, %v; want %+v", ans.name, ans.res, ans.err, want)
		}
	}
	if n := retries.Count(); n != 0 {
		t.Errorf("a group was written %d more times: the groups deadlocked (their locks were not taken in one order)", n)
	}
}

// TestDirectSendsInOppositeOrdersCommit: two processes send directly to
// the same new tokens listed in opposite orders. The first registers t1 and
// waits (for a third transaction's registration of tz) before it reaches
// t2; the second registers t2 and waits for t1. Registered in the callers'
// orders that is a deadlock (one send fails: register device: 40P01);
// registered in one order (the token keys sorted), both sends succeed.
func TestDirectSendsInOppositeOrdersCommit(t *testing.T) {
	t.Parallel()
	l := newLockTest(t)
	ctx := t.Context()
	first, second, third := l.client(), l.client(), l.client()
	// Keys in this order: t1 < t2 < tz.
	t1, t2, tz := oncepush.Token("fcm-lock-token-1"), oncepush.Token("fcm-lock-token-2"), oncepush.Token("fcm-lock-token-3")
	fcm := func(tokens ...oncepush.Token) []oncepush.DeviceAddress {
		var out []oncepush.DeviceAddress
		for _, tok := range tokens {
			out = append(out, oncepush.DeviceAddress{Transport: oncepush.TransportFCM, Token: tok})
		}
		return out
	}

	z := l.begin()
	if _, err := third.RegisterDeviceTx(ctx, z.tx, oncepush.Device{Recipient: "z", Transport: oncepush.TransportFCM, Token: tz}); err != nil {
		t.Fatal(err)
	}
	var retries enginetest.Counter
	hooks := enginetest.WithHooks(ctx, &enginetest.Hooks{OnSendRetrying: func(int, error) { retries.Add() }})
	send := func(c *oncepush.Client[pgx.Tx], name string, tokens ...oncepush.Token) <-chan sendAnswer {
		out := make(chan sendAnswer, 1)
		go func() {
			res, err := c.SendToDevices(hooks, fcm(tokens...), oncepush.Message{Type: "lock", Title: name}, nil)
			out <- sendAnswer{name, res, err}
		}()
		return out
	}
	a := send(first, "first", t1, tz, t2)
	aPid := l.blockedBy(z.pid, "the first send waiting for tz")
	b := send(second, "second", t2, t1)
	l.blockedBy(aPid, "the second send waiting for the first")
	if err := z.tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	for want, ch := range map[int]<-chan sendAnswer{3: a, 2: b} {
		if ans := <-ch; ans.err != nil || ans.res.Queued != want {
			t.Errorf("%s send: %+v, %v; want %d queued", ans.name, ans.res, ans.err, want)
		}
	}
	if n := retries.Count(); n != 0 {
		t.Errorf("a send was written %d more times: the sends deadlocked (their devices were not registered in one order)", n)
	}
	for _, tok := range []oncepush.Token{t1, t2, tz} {
		r, err := first.DeviceRecipient(oncepush.TransportFCM, tok)
		if err != nil {
			t.Fatal(err)
		}
		if ds, err := first.RecipientDeliveries(ctx, r, 0, 10); err != nil || len(ds) != map[oncepush.Token]int{t1: 2, t2: 2, tz: 1}[tok] {
			t.Errorf("%s: deliveries %d, %v", tok, len(ds), err)
		}
	}
}

// TestConflictTellsAnAbortFromAFailedStatement: what the engine retries
// (driver.ConflictDetector) is an abort that broke a deadlock or a
// serialization failure, however wrapped, and nothing else — least of all a
// statement that failed on its own, which would fail again.
func TestConflictTellsAnAbortFromAFailedStatement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testdb.Pool(t, testdb.Schema(t), 3) // two transactions and the wait's query
	// A real deadlock: two transactions take two locks in opposite orders.
	key := time.Now().UnixNano()
	lock := func(tx pgx.Tx, k int64) error {
		_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", k)
		return err
	}
	tx1, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(context.WithoutCancel(ctx))
	tx2, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(context.WithoutCancel(ctx))
	if err := errors.Join(lock(tx1, key), lock(tx2, key+1)); err != nil {
		t.Fatal(err)
	}
	var pid1 uint32
	if err := tx1.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid1); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- lock(tx1, key+1) }()
	<-waitForLock(t, pool, pid1)
	second := lock(tx2, key)
	if second == nil { // the first was the victim
		second = <-first
	} else if err := errors.Join(tx2.Rollback(ctx), <-first); err != nil {
		t.Fatal(err)
	}
	if second == nil {
		t.Fatal("no transaction was aborted")
	}

	drv := postgres.New(nil)
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a deadlock broken by the database", second, true},
		{"deadlock_detected, wrapped", fmt.Errorf("oncepush: write messages: %w", &pgconn.PgError{Code: "40P01"}), true},
		{"serialization_failure", &pgconn.PgError{Code: "40001"}, true},
		{"serialization_failure, joined", errors.Join(&pgconn.PgError{Code: "40001"}, errors.New("close: conn busy")), true},
		{"statement_completion_unknown", &pgconn.PgError{Code: "40003"}, false},
		{"lock_not_available", &pgconn.PgError{Code: "55P03"}, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"admin_shutdown", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, false},
		{"not found", driver.ErrNotFound, false},
		{"cancelled by the caller", context.Canceled, false},
		{"nil", nil, false},
	} {
		if got := drv.Conflict(tc.err); got != tc.want {
			t.Errorf("%s (%v): Conflict = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestStoppedTransactionReleasesItsRows: a process stopped inside one of
// the engine's transactions (SIGSTOP: here a transaction whose code never
// goes on) holds its rows until it wakes, and every writer that needs them
// waits as long. The driver bounds the time its own transactions may sit
// idle, so PostgreSQL ends the stopped one and the writer goes on; the
// bound is per transaction, so it never reaches the session nor a caller's
// transaction (SendTx), which the caller bounds as it sees fit.
func TestStoppedTransactionReleasesItsRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, drv := migrated(t)
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	session := show(pool)
	if err := drv.InTx(ctx, func(_ context.Context, tx pgx.Tx, _ driver.Executor) error {
		if v, want := show(tx), fmt.Sprint(postgres.IdleInTransactionTimeout.Seconds())+"s"; v != want {
			t.Errorf("inside the engine's transaction the idle bound is %s, want %s", v, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	client, err := oncepush.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendTx(ctx, tx, []string{"caller"}, oncepush.Message{Type: "idle", Title: "t"}, &oncepush.SendOptions{DedupKey: "k", RequestHash: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if v := show(tx); v != session {
		t.Errorf("the caller's transaction has the idle bound %s after SendTx, want the session's %s", v, session)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// A transaction of the engine's, stopped while it holds (r, k).
	postgres.SetIdleInTransactionTimeout(drv, 500*time.Millisecond)
	wrote, wake := make(chan struct{}), make(chan struct{})
	stopped := make(chan error, 1)
	go func() {
		stopped <- drv.InTx(ctx, func(ctx context.Context, _ pgx.Tx, ex driver.Executor) error {
			if _, _, err := ex.MessageInsert(ctx, &driver.MessageInsertParams{
				Type: "idle", Title: "stopped", Ambiguity: "resend", Recipients: []string{"r"}, NotificationIDs: []string{"n"}, DedupKey: "k",
			}); err != nil {
				return err
			}
			close(wrote)
			<-wake // the process is stopped
			_, err := ex.MessageGetMany(ctx, []int64{1})
			return err
		})
	}()
	defer close(wake)
	<-wrote
	// Another writer needs (r, k): it waits for the stopped transaction,
	// then finds the key free once the database has ended it. On a failure
	// the wait is bounded, so that the test says what it saw.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := client.Send(wctx, []string{"r"}, oncepush.Message{Type: "idle", Title: "other"}, &oncepush.SendOptions{DedupKey: "k"})
	if err != nil || res.Queued != 1 {
		t.Fatalf("a send needing the stopped transaction's rows: %+v, %v; want written once the transaction was ended", res, err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("the stopped transaction returned (%v) before it woke", err)
	default:
	}
	wake <- struct{}{}
	if err := <-stopped; err == nil {
		t.Fatal("the stopped transaction committed after the database ended it")
	}
}
