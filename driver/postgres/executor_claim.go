package postgres

// The statements of driver.ClaimExecutor (driver/claim.go); their SQL is in
// queries_claim.sql.

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) WithSavepoint(ctx context.Context, fn func() error) error {
	if _, err := e.db.Exec(ctx, "SAVEPOINT oncepush_eligibility"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		if _, rerr := e.db.Exec(ctx, "ROLLBACK TO SAVEPOINT oncepush_eligibility"); rerr != nil {
			return rerr
		}
		return err
	}
	_, err := e.db.Exec(ctx, "RELEASE SAVEPOINT oncepush_eligibility")
	return err
}

func (e *executor) DeliveryClaim(ctx context.Context, p *driver.DeliveryClaimParams) (*driver.DeliveryClaimResult, error) {
	res := &driver.DeliveryClaimResult{}
	rows, err := queryPlanned(ctx, e.db, func(r pgx.CollectableRow) (*driver.ClaimedDelivery, error) {
		c := &driver.ClaimedDelivery{}
		err := r.Scan(&c.ID, &c.MessageID, &c.Recipient, &c.NotificationID, &c.Attempts, &c.Campaign, &c.PrevLeaseID, &res.Now)
		return c, err
	}, "DeliveryClaim", q.Get("DeliveryClaim"), named{
		"now": p.Now, "max": p.Max, "lease_id": p.LeaseID, "lease_us": micros(p.Lease), "no_campaign": p.NoCampaign,
	})
	if err != nil {
		return nil, err
	}
	res.Rows = rows
	return res, nil
}

func (e *executor) MessageGetMany(ctx context.Context, ids []int64) ([]*driver.Message, error) {
	return queryPlanned(ctx, e.db, scanMessage, "MessageGetMany", q.Get("MessageGetMany"), named{"ids": ids})
}

func (e *executor) DeviceListByRecipients(ctx context.Context, recipients []string) ([]*driver.Device, error) {
	return queryPlanned(ctx, e.db, scanDevice, "DeviceListByRecipients", q.Get("DeviceListByRecipients"), named{"recipients": recipients})
}

func (e *executor) DeviceAttemptListByDeliveries(ctx context.Context, ids []int64) ([]*driver.DeviceAttempt, error) {
	return queryPlanned(ctx, e.db, scanDeviceAttempt, "DeviceAttemptListByDeliveries", q.Get("DeviceAttemptListByDeliveries"), named{"delivery_ids": ids})
}

// ClaimRead sends the three reads in one round trip, each planned as it is
// alone (the three share their plannerOff settings).
func (e *executor) ClaimRead(ctx context.Context, p *driver.ClaimReadParams) (*driver.ClaimReadResult, error) {
	r := &driver.ClaimReadResult{}
	err := sendPlanned(ctx, e.db, plannerOff["MessageGetMany"], func(b *pgx.Batch) {
		b.Queue(q.Get("MessageGetMany"), named{"ids": p.MessageIDs})
		b.Queue(q.Get("DeviceListByRecipients"), named{"recipients": p.Recipients})
		b.Queue(q.Get("DeviceAttemptListByDeliveries"), named{"delivery_ids": p.DeliveryIDs})
	}, func(br pgx.BatchResults) error {
		if err := collect(br, scanMessage, &r.Messages); err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		if err := collect(br, scanDevice, &r.Devices); err != nil {
			return fmt.Errorf("devices: %w", err)
		}
		if err := collect(br, scanDeviceAttempt, &r.Attempts); err != nil {
			return fmt.Errorf("attempts: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}
