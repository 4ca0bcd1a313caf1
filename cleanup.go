package oncepush

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// Cleanup limits.
const (
	cleanupBatch      = 1000
	cleanupMaxBatches = 100 // per table per round; the rest waits for the next round
	cleanupLock       = "cleanup"
)

// CleanupStats says what a cleanup round did.
type CleanupStats struct {
	// Ran is false when another process holds the cleanup lock.
	Ran        bool
	Deliveries int // finished deliveries past retention deleted (their dedup keys freed)
	Messages   int // messages left without deliveries deleted
	Sessions   int // revoked sessions forgotten
	// Idempotency counts the recorded requests (SendOptions.RequestHash)
	// deleted because the deliveries deleted were the last to hold their key.
	Idempotency int
	// Overdue counts pending deliveries due for longer than a lease: workers are
	// down or falling behind. OldestDue is the oldest such due time.
	Overdue   int
	OldestDue time.Time
}

// Cleanup runs one cleanup round if no other process holds the cleanup lock:
// deletes finished deliveries past retention, with the recorded requests whose
// key they were the last to hold, and messages left without deliveries, in
// bounded batches, and reports (and logs) pending work overdue by more than a
// lease. Started clients run it every CleanupInterval.
func (c *Client[TTx]) Cleanup(ctx context.Context) (*CleanupStats, error) {
	ex := c.driver.Exec()
	st := &CleanupStats{}
	ok, err := ex.LockAcquire(ctx, &driver.LockParams{Now: c.now(), Name: cleanupLock, Owner: c.cfg.ID, TTL: c.cfg.CleanupInterval})
	if err != nil {
		return nil, fmt.Errorf("oncepush: cleanup lock: %w", err)
	}
	if !ok {
		return st, nil
	}
	st.Ran = true
	for range cleanupMaxBatches {
		n, err := c.cleanupFinished(ctx, st)
		if err != nil {
			return st, fmt.Errorf("oncepush: cleanup deliveries: %w", err)
		}
		if n < cleanupBatch {
			break
		}
	}
	steps := []struct {
		name string
		fn   func(context.Context, *driver.CleanupParams) (int, error)
		age  time.Duration
		n    *int
	}{
		// A message is written with its deliveries in one transaction, so an
		// orphan is old by construction; the age only keeps the scan short.
		{"messages", ex.MessageDeleteOrphans, time.Minute, &st.Messages},
		{"sessions", ex.SessionDeleteRevoked, c.cfg.Retention, &st.Sessions},
	}
	for _, s := range steps {
		for range cleanupMaxBatches {
			n, err := s.fn(ctx, &driver.CleanupParams{Now: c.now(), Age: s.age, Limit: cleanupBatch})
			if err != nil {
				return st, fmt.Errorf("oncepush: cleanup %s: %w", s.name, err)
			}
			*s.n += n
			if n < cleanupBatch {
				break
			}
		}
	}
	st.Overdue, st.OldestDue, err = ex.DeliveryOverdue(ctx, &driver.CleanupParams{Now: c.now(), Age: c.cfg.Lease})
	if err != nil {
		return st, fmt.Errorf("oncepush: cleanup overdue: %w", err)
	}
	if st.Overdue > 0 {
		c.log.WarnContext(ctx, "pending deliveries overdue by more than a lease: are workers running?",
			slog.Int("overdue", st.Overdue), slog.Time("oldest_due", st.OldestDue))
		c.wake()
	}
	c.log.DebugContext(ctx, "cleanup done", slog.Int("deliveries", st.Deliveries), slog.Int("messages", st.Messages),
		slog.Int("sessions", st.Sessions), slog.Int("idempotency", st.Idempotency), slog.Int("overdue", st.Overdue))
	return st, nil
}

// cleanupFinished deletes one batch of finished deliveries past retention
// and, in the same transaction, the recorded requests of the keys no delivery
// holds any more: a record lives exactly as long as the key it guards, so a
// send still pending (scheduled days ahead, retrying for hours) keeps both.
// It returns the number of deliveries deleted.
func (c *Client[TTx]) cleanupFinished(ctx context.Context, st *CleanupStats) (int, error) {
	var deleted, records int
	err := c.driver.InTx(ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
		del, err := ex.DeliveryDeleteFinished(ctx, &driver.CleanupParams{Now: c.now(), Age: c.cfg.Retention, Limit: cleanupBatch})
		if err != nil {
			return err
		}
		deleted = del.Count
		records, err = freeHeld(ctx, ex, del)
		return err
	})
	if err != nil {
		return 0, err
	}
	st.Deliveries += deleted
	st.Idempotency += records
	return deleted, nil
}

// freeHeld deletes what deleted deliveries were the last to hold: the
// recorded requests of their dedup keys. Run it in the deleting transaction.
func freeHeld(ctx context.Context, ex driver.Executor, del *driver.DeletedDeliveries) (records int, err error) {
	return ex.IdempotencyDeleteFreed(ctx, del.DedupKeys)
}

func (c *Client[TTx]) cleanupLoop(ctx context.Context) {
	t := time.NewTimer(c.cfg.CleanupInterval / 10) // not all processes at boot
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.Cleanup(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("cleanup failed", slog.Any("error", err))
		}
		t.Reset(c.cfg.CleanupInterval)
	}
}
