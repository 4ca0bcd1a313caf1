package oncepush

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
)

// Cleanup limits.
const (
	cleanupBatch      = 1000
	cleanupMaxBatches = 100 // per table per round; the rest waits for the next round
	// cleanupSweepBatches bounds the orphan sweep: it looks at this many
	// batches of messages per round and goes on from there the next round.
	cleanupSweepBatches = 10
	cleanupLock         = "cleanup"
	// sendWindowRetention: the per-transport ceiling's windows are kept this
	// long (D96), for an operator looking at what the campaigns took.
	sendWindowRetention = time.Hour
)

// CleanupStats says what a cleanup round did.
type CleanupStats struct {
	// Ran is false when another process holds the cleanup lock.
	Ran        bool
	Deliveries int // finished deliveries past retention deleted (their dedup keys freed)
	Messages   int // messages left without deliveries deleted
	// Idempotency counts the recorded requests (SendOptions.RequestHash)
	// deleted because the deliveries deleted were the last to hold their key.
	Idempotency int
	// Overdue counts pending deliveries due for longer than a lease: workers are
	// down or falling behind. OldestDue is the oldest such due time.
	Overdue   int
	OldestDue time.Time
}

// Cleanup runs one cleanup round if no other process holds the cleanup lock:
// deletes finished deliveries past retention, with the messages and recorded
// requests they were the last to hold, in bounded batches; sweeps part of the
// messages for orphans left otherwise; forgets revoked sessions past
// retention; and reports (and logs) pending work overdue by more than a
// lease; folds the campaign totals' deltas and forgets the ceiling's past
// windows. Every statement reads through indexes: a batch costs the same however
// many messages and deliveries are retained. Started clients run it every
// CleanupInterval.
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
	if err := c.sweepOrphans(ctx, ex, st); err != nil {
		return st, fmt.Errorf("oncepush: cleanup messages: %w", err)
	}
	if _, err := ex.CampaignTallyCompact(ctx, 2); err != nil {
		return st, fmt.Errorf("oncepush: cleanup campaign totals: %w", err)
	}
	if _, err := ex.SendWindowDeleteBefore(ctx, c.clockNow().Add(-sendWindowRetention)); err != nil {
		return st, fmt.Errorf("oncepush: cleanup send windows: %w", err)
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
		slog.Int("idempotency", st.Idempotency), slog.Int("overdue", st.Overdue))
	return st, nil
}

// cleanupFinished deletes one batch of finished deliveries past retention
// and, in the same transaction, what only they held: a record lives exactly
// as long as the key it guards, so a send still pending (scheduled days
// ahead, retrying for hours) keeps both; a message goes with its last
// delivery. It returns the number of deliveries deleted.
func (c *Client[TTx]) cleanupFinished(ctx context.Context, st *CleanupStats) (int, error) {
	var deleted, records, messages int
	err := c.driver.InTx(ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
		del, err := ex.DeliveryDeleteFinished(ctx, &driver.CleanupParams{Now: c.now(), Age: c.cfg.Retention, Limit: cleanupBatch})
		if err != nil {
			return err
		}
		deleted = del.Count
		records, messages, err = freeHeld(ctx, ex, del)
		return err
	})
	if err != nil {
		return 0, err
	}
	st.Deliveries += deleted
	st.Idempotency += records
	st.Messages += messages
	return deleted, nil
}

// freeHeld deletes what deleted deliveries were the last to hold: the
// recorded requests of their dedup keys and their messages, checking just
// those. Run it in the deleting transaction, so that a crash cannot come
// between.
func freeHeld(ctx context.Context, ex driver.Executor, del *driver.DeletedDeliveries) (records, messages int, err error) {
	// Messages before records, in every transaction: each step locks its
	// rows on PostgreSQL, always in the same order.
	if messages, err = ex.MessageDeleteOrphans(ctx, del.MessageIDs); err != nil {
		return 0, 0, err
	}
	records, err = ex.IdempotencyDeleteFreed(ctx, del.DedupKeys)
	return records, messages, err
}

// sweepOrphans is the backstop for messages that no deletion of deliveries
// left behind: a send whose recipients were all duplicates writes its
// message and deletes it again at once, and a crash (or a cancelled context)
// between the two leaves it. Each round looks at the next
// cleanupSweepBatches×cleanupBatch messages in id order, from where the last
// round stopped, and starts again from the oldest after the newest; so every
// message is looked at once per pass, and each batch costs the same however
// many are retained. The position is the process's own: another process
// taking the lock, or a restart, starts a pass from the oldest.
func (c *Client[TTx]) sweepOrphans(ctx context.Context, ex driver.Executor, st *CleanupStats) error {
	for range cleanupSweepBatches {
		n, last, err := ex.MessageSweepOrphans(ctx, &driver.SweepParams{AfterID: c.sweepAfter.Load(), Limit: cleanupBatch})
		if err != nil {
			return err
		}
		st.Messages += n
		c.sweepAfter.Store(last) // 0 after the newest: the next pass starts over
		if last == 0 {
			return nil
		}
	}
	return nil
}

func (c *Client[TTx]) cleanupLoop(ctx context.Context) {
	hooks := enginetest.From(ctx)
	// The first pass waits a tenth of the interval: not all processes at boot.
	loop(ctx, c.cfg.CleanupInterval/10, nil, nil, func() time.Duration {
		if _, err := c.Cleanup(ctx); err != nil && ctx.Err() == nil {
			c.log.ErrorContext(ctx, "cleanup failed", slog.Any("error", err))
		}
		hooks.CleanupDone()
		return c.cfg.CleanupInterval
	})
}
