package sqlite

// The statements of driver.ClaimExecutor (driver/claim.go); their SQL is in
// queries_claim.sql.

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) WithSavepoint(ctx context.Context, fn func() error) error {
	if e.tx == nil {
		return fn() // each statement commits on its own: there is nothing to abort
	}
	return savepoint(ctx, e.tx, "oncepush_eligibility", fn)
}

func (e *executor) DeliveryClaim(ctx context.Context, p *driver.DeliveryClaimParams) (*driver.DeliveryClaimResult, error) {
	now := nowMicros(p.Now)
	res := &driver.DeliveryClaimResult{Now: fromMicros(now)}
	// Two statements in one write transaction: see DeliveryClaimDue in queries_claim.sql.
	err := e.atomic(ctx, func(db dbtx) error {
		type due struct{ id, prevLease int64 }
		dues, err := query(ctx, db, func(r scanner) (due, error) {
			var d due
			err := r.Scan(&d.id, &d.prevLease)
			return d, err
		}, q.Get("DeliveryClaimDue"), sql.Named("now", now), sql.Named("max", p.Max), sql.Named("no_campaign", p.NoCampaign))
		if err != nil || len(dues) == 0 {
			return err
		}
		ids := make([]int64, len(dues))
		for i, d := range dues {
			ids[i] = d.id
		}
		idList, err := jsonList(ids)
		if err != nil {
			return err
		}
		claimed, err := query(ctx, db, func(r scanner) (*driver.ClaimedDelivery, error) {
			c := &driver.ClaimedDelivery{}
			err := r.Scan(&c.ID, &c.MessageID, &c.Recipient, &c.NotificationID, &c.Attempts, &c.Campaign)
			return c, err
		}, q.Get("DeliveryClaim"), sql.Named("now", now), sql.Named("lease_id", p.LeaseID),
			sql.Named("lease_us", durMicros(p.Lease)), sql.Named("ids", idList))
		if err != nil {
			return err
		}
		byID := make(map[int64]*driver.ClaimedDelivery, len(claimed))
		for _, c := range claimed {
			byID[c.ID] = c
		}
		for _, d := range dues { // in due order; RETURNING's order is unspecified
			c, ok := byID[d.id]
			if !ok {
				return fmt.Errorf("sqlite: claim: delivery %d was due but not leased", d.id)
			}
			c.PrevLeaseID = d.prevLease
			res.Rows = append(res.Rows, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (e *executor) MessageGetMany(ctx context.Context, ids []int64) ([]*driver.Message, error) {
	return queryList(ctx, e.conn(), scanMessage, q.Get("MessageGetMany"), "ids", ids)
}

func (e *executor) DeviceListByRecipients(ctx context.Context, recipients []string) ([]*driver.Device, error) {
	return queryList(ctx, e.conn(), scanDevice, q.Get("DeviceListByRecipients"), "recipients", recipients)
}

// ClaimRead runs the three reads one after the other: on a local file a
// statement costs no round trip.
func (e *executor) ClaimRead(ctx context.Context, p *driver.ClaimReadParams) (*driver.ClaimReadResult, error) {
	r := &driver.ClaimReadResult{}
	var err error
	if r.Messages, err = e.MessageGetMany(ctx, p.MessageIDs); err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	if r.Devices, err = e.DeviceListByRecipients(ctx, p.Recipients); err != nil {
		return nil, fmt.Errorf("devices: %w", err)
	}
	if r.Attempts, err = e.DeviceAttemptListByDeliveries(ctx, p.DeliveryIDs); err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	return r, nil
}

func (e *executor) DeviceAttemptListByDeliveries(ctx context.Context, ids []int64) ([]*driver.DeviceAttempt, error) {
	return queryList(ctx, e.conn(), func(r scanner) (*driver.DeviceAttempt, error) {
		a := &driver.DeviceAttempt{}
		err := r.Scan(&a.DeliveryID, &a.DeviceID, &a.Transport, &a.TokenKey, &a.State, &a.Submissions, &a.Ambiguous,
			&a.ProviderID, &a.Error, nullTimeCol{&a.FirstSentAt}, nullTimeCol{&a.LastSentAt}, timeCol{&a.UpdatedAt})
		return a, err
	}, q.Get("DeviceAttemptListByDeliveries"), "delivery_ids", ids)
}
