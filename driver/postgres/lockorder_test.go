package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/pushtest"
)

// The lock order (docs/architecture.md, "Lock order"): every statement that
// locks several deliveries takes them by id, ascending — the campaign's
// cancel, the record, the mark that precedes each send — so a campaign's
// cancel and a run recording (or marking) the same deliveries wait for one
// another and never deadlock (40P01, found only after deadlock_timeout, 1 s,
// while both wait).
//
// Each case holds the middle delivery of three with a transaction of the
// test's own (the blocker), lets the statement under test run into it, and
// asks the database which of the other two it already holds: taken in id
// order, the one below and not the one above. The deliveries fall due in
// the reverse of id order (as a local-time campaign's, or retried ones, do),
// so a run claims, marks and records them highest id first unless a
// statement sorts them. Then the other party runs into the first, the
// blocker lets go, and both must end without an error.

// lockOrderCase is one case's campaign, client and connections.
type lockOrderCase struct {
	t        *testing.T
	ctx      context.Context
	pool     *pgxpool.Pool // the test's own connections: blocker, probes, polls
	client   *oncepush.Client[pgx.Tx]
	fcm      *pushtest.Provider
	campaign int64
	ids      [3]int64 // the campaign's deliveries, by id

	mu            sync.Mutex
	recordErrs    []error
	recordedTries int
}

func newLockOrderCase(t *testing.T) *lockOrderCase {
	t.Helper()
	ctx := t.Context()
	schema := testdb.Schema(t)
	drv := postgres.New(testdb.Pool(t, schema, 4))
	if _, err := drv.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	lc := &lockOrderCase{t: t, ctx: ctx, pool: testdb.Pool(t, schema, 4), fcm: pushtest.NewProvider(oncepush.TransportFCM)}
	clock := pushtest.NewClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	var err error
	lc.client, err = oncepush.NewClient(drv, &oncepush.Config{Providers: []oncepush.Provider{lc.fcm}, Clock: clock,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	recipients := []string{"r1", "r2", "r3"}
	for _, r := range recipients {
		if _, err := lc.client.RegisterDevice(ctx, oncepush.Device{Recipient: r, Transport: oncepush.TransportFCM,
			Token: oncepush.Token(fmt.Sprintf("token-%s-%0150d", r, 0))}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := lc.client.CreateCampaign(ctx, oncepush.CampaignSpec{Message: oncepush.Message{Title: "lock order"},
		Audience: oncepush.AudienceRecipients})
	if err != nil {
		t.Fatal(err)
	}
	lc.campaign = c.ID
	if _, err := lc.client.AddCampaignRecipients(ctx, c.ID, 1, recipients); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.client.StartCampaign(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if st, err := lc.client.ExpandCampaigns(ctx); err != nil || st.Written != 3 {
		t.Fatalf("expansion: %+v, %v", st, err)
	}
	// Due in the reverse of id order: the highest id is claimed first.
	rows, err := lc.pool.Query(ctx, `UPDATE oncepush_delivery SET next_attempt_at = next_attempt_at - id * interval '1 second'
		RETURNING id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) != 3 {
		t.Fatalf("deliveries: %v, %v", ids, err)
	}
	for i := range lc.ids {
		lc.ids[i] = min(ids[0], ids[1], ids[2]) + int64(i)
	}
	if lc.ids[2] != max(ids[0], ids[1], ids[2]) {
		t.Fatalf("delivery ids %v are not consecutive", ids)
	}
	return lc
}

// drain runs the engine until nothing is due, with the record's failures
// collected; the returned channel yields the drain's error.
func (lc *lockOrderCase) drain(h *enginetest.Hooks) <-chan error {
	h.OnRecordFailed = func(try int, err error, last bool) {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		lc.recordErrs = append(lc.recordErrs, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := lc.client.Drain(enginetest.WithHooks(lc.ctx, h))
		done <- err
	}()
	return done
}

// block holds the middle delivery's row in a transaction of its own, and
// returns its backend and the function that lets it go. It may run on an
// engine goroutine (a hook), so it reports its failure rather than ending
// the test.
func (lc *lockOrderCase) block() (pid uint32, release func(), err error) {
	tx, err := lc.pool.Begin(lc.ctx)
	if err != nil {
		return 0, nil, err
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(context.WithoutCancel(lc.ctx)) }) }
	lc.t.Cleanup(release)
	if _, err := tx.Exec(lc.ctx, "SELECT id FROM oncepush_delivery WHERE id = $1 FOR UPDATE", lc.ids[1]); err != nil {
		return 0, release, err
	}
	err = tx.QueryRow(lc.ctx, "SELECT pg_backend_pid()").Scan(&pid)
	return pid, release, err
}

// mustBlock is block on the test's goroutine.
func (lc *lockOrderCase) mustBlock() (uint32, func()) {
	lc.t.Helper()
	pid, release, err := lc.block()
	if err != nil {
		lc.t.Fatalf("the blocker: %v", err)
	}
	return pid, release
}

// held reports whether another transaction holds a lock on the delivery
// that an update would hold: a share lock on it cannot be had at once.
func (lc *lockOrderCase) held(id int64) bool {
	lc.t.Helper()
	tx, err := lc.pool.Begin(lc.ctx)
	if err != nil {
		lc.t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(lc.ctx))
	_, err = tx.Exec(lc.ctx, "SELECT id FROM oncepush_delivery WHERE id = $1 FOR SHARE NOWAIT", id)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return false
	case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available
		return true
	default:
		lc.t.Fatal(err)
		return false
	}
}

// wantIDOrder fails unless the statement waiting on the middle delivery
// holds the one below it and not the one above.
func (lc *lockOrderCase) wantIDOrder(who string) {
	lc.t.Helper()
	if below, above := lc.held(lc.ids[0]), lc.held(lc.ids[2]); !below || above {
		lc.t.Errorf("%s, waiting on delivery %d, holds delivery %d: %v, delivery %d: %v; want the lower id taken first, not the higher",
			who, lc.ids[1], lc.ids[0], below, lc.ids[2], above)
	}
}

// waitForWaiters returns once n backends wait, directly or through one
// another, on the backend pid.
func (lc *lockOrderCase) waitForWaiters(pid uint32, n int) {
	lc.t.Helper()
	<-waitFor(lc.t, lc.pool, fmt.Sprintf(`WITH RECURSIVE w(pid) AS (
		SELECT a.pid FROM pg_stat_activity a WHERE $1 = ANY (pg_blocking_pids(a.pid))
		UNION
		SELECT a.pid FROM pg_stat_activity a JOIN w ON w.pid = ANY (pg_blocking_pids(a.pid))
	) SELECT count(*) >= %d FROM w`, n), pid)
}

// cancel cancels the campaign in the background.
func (lc *lockOrderCase) cancel() <-chan error {
	done := make(chan error, 1)
	go func() {
		c, err := lc.client.CancelCampaign(lc.ctx, lc.campaign)
		if err == nil && c.Status != oncepush.CampaignCanceled {
			err = fmt.Errorf("campaign %s after its cancel", c.Status)
		}
		done <- err
	}()
	return done
}

// settled fails on any error of the cancel, the drain or a try of the
// record (a deadlock the record retried included).
func (lc *lockOrderCase) settled(canceled, drained <-chan error) {
	lc.t.Helper()
	if err := <-canceled; err != nil {
		lc.t.Errorf("CancelCampaign: %v", err)
	}
	if err := <-drained; err != nil {
		lc.t.Errorf("drain: %v", err)
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for _, err := range lc.recordErrs {
		lc.t.Errorf("a try of the record failed: %v", err)
	}
}

// sendsHeld drains the campaign with its three sends held at the provider
// until release, and returns once the provider holds them all.
func (lc *lockOrderCase) sendsHeld() (release func(), drained <-chan error) {
	lc.t.Helper()
	release = lc.fcm.Hold()
	drained = lc.drain(&enginetest.Hooks{})
	if !lc.fcm.WaitCount(lc.ctx, 3) {
		release()
		lc.t.Fatal("the sends never reached the provider")
	}
	return release, drained
}

// TestCampaignCancelAndRecordNeverDeadlock: a campaign's cancel and the
// record of a batch of its deliveries, each reaching the deliveries while
// the other holds some, in both orders; and the mark before the sends.
func TestCampaignCancelAndRecordNeverDeadlock(t *testing.T) {
	t.Parallel()

	t.Run("RecordFirst", func(t *testing.T) {
		t.Parallel()
		lc := newLockOrderCase(t)
		release, drained := lc.sendsHeld()
		defer release()
		blocker, unblock := lc.mustBlock()
		release() // the answers: the record runs into the blocker
		lc.waitForWaiters(blocker, 1)
		lc.wantIDOrder("the record")
		canceled := lc.cancel()
		lc.waitForWaiters(blocker, 2) // the cancel waits too, on the record or the blocker
		unblock()
		lc.settled(canceled, drained)
		if got, err := lc.client.Campaign(lc.ctx, lc.campaign); err != nil || got.Totals.Sent != 3 {
			t.Fatalf("campaign: %+v, %v; want the 3 recorded sent before the cancel", got, err)
		}
	})

	t.Run("CancelFirst", func(t *testing.T) {
		t.Parallel()
		lc := newLockOrderCase(t)
		release, drained := lc.sendsHeld()
		defer release()
		blocker, unblock := lc.mustBlock()
		canceled := lc.cancel()
		lc.waitForWaiters(blocker, 1)
		lc.wantIDOrder("the cancel")
		release() // the answers: the record runs into the cancel
		lc.waitForWaiters(blocker, 2)
		unblock()
		lc.settled(canceled, drained)
		got, err := lc.client.Campaign(lc.ctx, lc.campaign)
		if err != nil || got.Totals.Canceled != 3 || got.Totals.Accepted != 3 {
			t.Fatalf("campaign: %+v, %v; want the 3 canceled, their in-flight sends recorded accepted", got, err)
		}
	})

	t.Run("MarkFirst", func(t *testing.T) {
		t.Parallel()
		lc := newLockOrderCase(t)
		var blocker uint32
		var unblock func()
		var blockErr error
		claimed := make(chan struct{})
		drained := lc.drain(&enginetest.Hooks{OnClaimCommitted: func(int, int) {
			// After the claim, which skips rows locked by others; before
			// the marks.
			blocker, unblock, blockErr = lc.block()
			close(claimed)
		}})
		<-claimed
		if blockErr != nil {
			t.Fatalf("the blocker: %v", blockErr)
		}
		lc.waitForWaiters(blocker, 1)
		lc.wantIDOrder("the mark")
		canceled := lc.cancel()
		lc.waitForWaiters(blocker, 2)
		unblock()
		lc.settled(canceled, drained)
	})
}
