package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/testdb"
)

// TestRecordFreedByConcurrentDeleters: two transactions each delete one of
// the two deliveries holding a key, and each then looks for deliveries still
// holding it. Under READ COMMITTED each still sees the other's uncommitted
// row; without a lock both would keep the record, which then nobody would
// ever delete. The second must wait for the first and see its commit.
// (SQLite has one writer at a time; the race cannot arise there.)
func TestRecordFreedByConcurrentDeleters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testdb.Pool(t, testdb.Schema(t), 4)
	drv := postgres.New(pool)
	if _, err := drv.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := oncepush.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, []string{"r1", "r2"}, oncepush.Message{Title: "t"},
		&oncepush.SendOptions{DedupKey: "k", RequestHash: []byte{1}}); err != nil {
		t.Fatal(err)
	}

	// Each transaction deletes its recipient's delivery: neither waits.
	begin := func(recipient string) (pgx.Tx, driver.Executor, []string) {
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
		return tx, ex, res.Deliveries.DedupKeys
	}
	tx1, ex1, keys1 := begin("r1")
	tx2, ex2, keys2 := begin("r2")
	var pid2 uint32
	if err := tx2.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid2); err != nil {
		t.Fatal(err)
	}

	if n, err := ex1.IdempotencyDeleteFreed(ctx, keys1); err != nil || n != 0 {
		t.Fatalf("first: %d, %v; want the record kept (r2's delivery is not deleted yet)", n, err)
	}
	type result struct {
		n   int
		err error
	}
	second := make(chan result, 1)
	go func() {
		n, err := ex2.IdempotencyDeleteFreed(ctx, keys2)
		second <- result{n, err}
	}()
	// The second either answers at once (it did not wait: the record stays
	// forever) or waits for the first's lock.
	select {
	case r := <-second:
		_ = tx1.Commit(ctx)
		_ = tx2.Commit(ctx)
		t.Fatalf("the second deleter answered %d, %v without waiting for the first", r.n, r.err)
	case <-waitForLock(t, pool, pid2):
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-second
	if r.err != nil || r.n != 1 {
		t.Fatalf("second, after the first committed: %d, %v; want the record deleted", r.n, r.err)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, err := drv.Exec().IdempotencyGet(ctx, "k"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("record left behind: %+v, %v", rec, err)
	}
}

// waitForLock closes the returned channel once the backend pid waits for a
// lock, as pg_stat_activity reports it.
func waitForLock(t *testing.T, pool *pgxpool.Pool, pid uint32) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			var waiting bool
			err := pool.QueryRow(t.Context(),
				"SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting)
			if err != nil {
				t.Errorf("pg_stat_activity: %v", err)
			}
			if err != nil || waiting {
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
