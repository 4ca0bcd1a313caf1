package postgres

// The statements of driver.RecordExecutor (driver/record.go); their SQL is in
// queries_record.sql.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) DeliveryUpdateMany(ctx context.Context, p *driver.DeliveryUpdateManyParams) ([]driver.UpdatedDelivery, error) {
	n := len(p.Updates)
	if n == 0 {
		return nil, nil
	}
	ids := make([]int64, n)
	statuses := make([]string, n)
	attempts := make([]int32, n)
	nextAts := make([]*time.Time, n)
	delays := make([]int64, n)
	lastErrors := make([]*string, n)
	for i, u := range p.Updates {
		ids[i], statuses[i], attempts[i] = u.ID, u.Status, int32(u.Attempts)
		nextAts[i], delays[i], lastErrors[i] = u.NextAttemptAt, micros(u.Delay), u.LastError
	}
	return queryPlanned(ctx, e.db, pgx.RowToStructByPos[driver.UpdatedDelivery], "DeliveryUpdateMany", q.Get("DeliveryUpdateMany"), named{
		"now": p.Now, "lease_id": p.LeaseID, "ids": ids, "statuses": statuses, "attempts": attempts,
		"next_ats": nextAts, "delays_us": delays, "last_errors": lastErrors,
	})
}

func (e *executor) DeviceAttemptUpsertMany(ctx context.Context, p *driver.DeviceAttemptUpsertManyParams) error {
	n := len(p.Rows)
	if n == 0 {
		return nil
	}
	deliveryIDs := make([]int64, n)
	deviceIDs := make([]int64, n)
	transports := make([]string, n)
	tokenKeys := make([]string, n)
	states := make([]string, n)
	submissions := make([]int32, n)
	ambiguous := make([]int32, n)
	providerIDs := make([]string, n)
	errs := make([]string, n)
	for i, r := range p.Rows {
		deliveryIDs[i], deviceIDs[i], transports[i], tokenKeys[i] = r.DeliveryID, r.DeviceID, r.Transport, r.TokenKey
		states[i], submissions[i], ambiguous[i] = r.State, int32(r.SubmissionsDelta), int32(r.AmbiguousDelta)
		providerIDs[i], errs[i] = r.ProviderID, r.Error
	}
	_, err := e.db.Exec(ctx, q.Get("DeviceAttemptUpsertMany"), named{
		"now": p.Now, "delivery_ids": deliveryIDs, "device_ids": deviceIDs, "transports": transports,
		"token_keys": tokenKeys, "states": states, "submissions": submissions, "ambiguous": ambiguous,
		"provider_ids": providerIDs, "errors": errs,
	})
	return err
}

func (e *executor) DeviceAttemptMarkSending(ctx context.Context, p *driver.DeviceAttemptMarkSendingParams) ([]driver.MarkedPair, error) {
	n := len(p.Pairs)
	if n == 0 {
		return nil, nil
	}
	deliveryIDs := make([]int64, n)
	deviceIDs := make([]int64, n)
	transports := make([]string, n)
	tokenKeys := make([]string, n)
	campaigns := make([]int64, n)
	for i, k := range p.Pairs {
		deliveryIDs[i], deviceIDs[i], transports[i], tokenKeys[i] = k.DeliveryID, k.DeviceID, k.Transport, k.TokenKey
		campaigns[i] = k.CampaignMessageID
	}
	return queryPlanned(ctx, e.db, pgx.RowToStructByPos[driver.MarkedPair], "DeviceAttemptMarkSending", q.Get("DeviceAttemptMarkSending"), named{
		"now": p.Now, "lease_id": p.LeaseID, "min_left_us": micros(p.MinLeaseLeft),
		"delivery_ids": deliveryIDs, "device_ids": deviceIDs, "transports": transports, "token_keys": tokenKeys,
		"campaign_messages": campaigns,
	})
}

func (e *executor) CampaignTokenFree(ctx context.Context, keys []driver.CampaignTokenKey) error {
	if len(keys) == 0 {
		return nil
	}
	msgs := make([]int64, len(keys))
	transports := make([]string, len(keys))
	tokenKeys := make([]string, len(keys))
	deliveries := make([]int64, len(keys))
	for i, k := range keys {
		msgs[i], transports[i], tokenKeys[i], deliveries[i] = k.MessageID, k.Transport, k.TokenKey, k.DeliveryID
	}
	_, err := e.db.Exec(ctx, q.Get("CampaignTokenFree"), named{
		"message_ids": msgs, "transports": transports, "token_keys": tokenKeys, "delivery_ids": deliveries,
	})
	return err
}

func (e *executor) DeviceDeleteMany(ctx context.Context, keys []driver.DeviceKey) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	ids := make([]int64, len(keys))
	recipients := make([]string, len(keys))
	tokens := make([]string, len(keys))
	for i, k := range keys {
		ids[i], recipients[i], tokens[i] = k.ID, k.Recipient, k.Token
	}
	tag, err := e.db.Exec(ctx, q.Get("DeviceDeleteMany"), named{"ids": ids, "recipients": recipients, "tokens": tokens})
	return int(tag.RowsAffected()), err
}

func (e *executor) DeliveryLeaseGetMany(ctx context.Context, ids []int64) (map[int64]int64, error) {
	return queryMap[int64, int64](ctx, e.db, q.Get("DeliveryLeaseGetMany"), named{"ids": ids})
}
