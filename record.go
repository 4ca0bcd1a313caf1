package oncepush

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/failpoint"
)

// recordTryTimeout bounds one try of the record transaction.
const recordTryTimeout = 30 * time.Second

// record writes the batch's outcomes in one transaction guarded by the lease.
// It runs even after a stop (context.WithoutCancel). A slow or failing
// database does not make it give up: it tries again, with a pause, for as long
// as the lease may still be this run's — unless sendCtx has ended (a stop
// whose deadline passed), when a failed try is the last, so a stop is not held
// up by a database that is down. Pairs not recorded are recovered as ambiguous
// when the lease expires — the safe reading of an unrecorded send.
// The outcomes of the deliveries it wrote are then logged and counted in
// tally (logOutcomes).
func (c *Client[TTx]) record(sendCtx context.Context, b *batch, tally runTally) error {
	failpoint.Hit(failpoint.Answered)
	ctx := context.WithoutCancel(sendCtx)
	plan := planRecord(b.deliveries, c.planRules())
	leaseEnd, leaseEndReal := b.claimedAt.Add(c.cfg.Lease), b.claimedReal.Add(c.cfg.Lease)
	var err error
	pause := 50 * time.Millisecond
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, recordTryTimeout)
		var owned map[int64]bool
		err = c.driver.InTx(tctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
			owned, err = c.recordTx(ctx, ex, b, plan)
			if err == nil {
				b.hooks.RecordCommitting(len(plan.updates))
			}
			return err
		})
		cancel()
		if err == nil {
			failpoint.Hit(failpoint.Recorded)
			lost := 0
			for _, u := range plan.updates {
				switch {
				case !owned[u.ID]:
					lost++
				case b.canceled[u.ID]:
					// The cancel counted it finished.
				case u.Status != driver.StatusPending:
					c.obs.Finished(DeliveryStatus(u.Status))
				}
			}
			if lost > 0 {
				c.obs.LeaseLost(lost)
			}
			for id := range b.canceled {
				c.log.InfoContext(sendCtx, "delivery canceled while this run held it; what it had in flight is recorded",
					slog.Int64("delivery_id", id))
			}
			c.logOutcomes(sendCtx, plan.outcomes, owned, tally)
			return nil
		}
		last := sendCtx.Err() != nil || !c.clockNow().Before(leaseEnd) || !time.Now().Before(leaseEndReal)
		b.hooks.RecordFailed(try, err, last)
		if last {
			break
		}
		c.log.WarnContext(sendCtx, "recording outcomes failed; retrying while the lease holds", slog.Int("try", try), slog.Any("error", err))
		// The pause ends early when the stop's deadline passes: the next
		// try is then the last, made at once.
		select {
		case <-b.hooks.Pause(pause):
		case <-sendCtx.Done():
		}
		pause = min(2*pause, time.Second)
	}
	c.log.ErrorContext(sendCtx, "recording outcomes failed until the lease could have expired; the batch's deliveries will be recovered as ambiguous",
		slog.Int64("lease_id", b.leaseID), slog.Int("deliveries", len(b.deliveries)), slog.Any("error", err))
	return fmt.Errorf("oncepush: record: %w", err)
}

// recordTx writes the plan under the batch's lease and returns the
// deliveries the run still owned: only theirs are written.
func (c *Client[TTx]) recordTx(ctx context.Context, ex driver.Executor, b *batch, plan *recordPlan) (map[int64]bool, error) {
	updates := plan.updates
	got, err := ex.DeliveryUpdateMany(ctx, &driver.DeliveryUpdateManyParams{Now: c.now(), LeaseID: b.leaseID, Updates: updates})
	if err != nil {
		return nil, err
	}
	owned := make(map[int64]bool, len(got))
	b.canceled = map[int64]bool{} // this try's answer only
	for _, u := range got {
		owned[u.ID] = true
		if u.Status == driver.StatusCanceled {
			// Canceled while this run held it: what was in flight is
			// recorded below, under the status the cancel wrote.
			b.canceled[u.ID] = true
		}
	}
	if err := ex.DeviceAttemptUpsertMany(ctx, &driver.DeviceAttemptUpsertManyParams{
		Now: c.now(), Rows: plan.writes.filter(func(id int64) bool { return owned[id] }),
	}); err != nil {
		return nil, err
	}
	var freed []driver.CampaignTokenKey
	for _, k := range plan.freed {
		if owned[k.DeliveryID] {
			freed = append(freed, k)
		}
	}
	if err := ex.CampaignTokenFree(ctx, freed); err != nil {
		return nil, err
	}
	var del []driver.DeviceKey
	for _, k := range plan.dead {
		if owned[k.deliveryID] {
			del = append(del, k.DeviceKey)
		}
	}
	if _, err := ex.DeviceDeleteMany(ctx, del); err != nil {
		return nil, err
	}
	if len(got) == len(updates) {
		return owned, nil
	}
	var lost []int64
	for _, u := range updates {
		if !owned[u.ID] {
			lost = append(lost, u.ID)
		}
	}
	leases, err := ex.DeliveryLeaseGetMany(ctx, lost)
	if err != nil {
		return nil, err
	}
	for _, id := range lost {
		if _, exists := leases[id]; !exists {
			c.log.InfoContext(ctx, "delivery deleted while it was being sent (recipient deleted); nothing recorded",
				slog.Int64("delivery_id", id))
		} else {
			c.log.WarnContext(ctx, "lease lost: another run took this delivery; this run's outcomes were not recorded",
				slog.Int64("delivery_id", id), slog.Int64("lease_id", b.leaseID), slog.Int64("current_lease", leases[id]))
		}
	}
	return owned, nil
}
