package postgres

// The statements of driver.CampaignExecutor (driver/campaign.go); their SQL is in
// queries_campaign.sql.

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
)

func scanCampaign(r pgx.CollectableRow) (*driver.Campaign, error) {
	c := &driver.Campaign{}
	err := r.Scan(&c.ID, &c.Name, &c.Status, &c.Content, &c.Audience, &c.Filter, &c.StartAt, &c.RatePerMinute,
		&c.MessageID, &c.Cursor, &c.Written, &c.Recipients, &c.InvalidTokens, &c.DuplicateTokens,
		&c.NoDevice, &c.FilteredOut, &c.MalformedOnly, &c.DuplicateOnly, &c.Tries,
		&c.LastError, &c.CreatedAt, &c.UpdatedAt, &c.StartedAt, &c.FinishedAt)
	return c, err
}

func (e *executor) CampaignInsert(ctx context.Context, c *driver.Campaign) (*driver.Campaign, error) {
	out := *c
	err := e.db.QueryRow(ctx, q.Get("CampaignInsert"), named{
		"now": driver.NowOf(c.CreatedAt), "name": c.Name, "status": c.Status, "content": jsonArg(c.Content), "audience": c.Audience,
		"filter": jsonArg(c.Filter), "start_at": c.StartAt, "rate_per_minute": c.RatePerMinute,
	}).Scan(&out.ID, &out.CreatedAt)
	out.UpdatedAt = out.CreatedAt
	return &out, err
}

func (e *executor) CampaignGet(ctx context.Context, id int64) (*driver.Campaign, error) {
	return queryOne(ctx, e.db, scanCampaign, q.Get("CampaignGet"), named{"id": id})
}

func (e *executor) CampaignLock(ctx context.Context, id int64) (*driver.Campaign, error) {
	return queryOne(ctx, e.db, scanCampaign, q.Get("CampaignLock"), named{"id": id})
}

func (e *executor) CampaignSave(ctx context.Context, c *driver.Campaign, now *time.Time) error {
	_, err := e.db.Exec(ctx, q.Get("CampaignSave"), named{
		"id": c.ID, "now": now, "name": c.Name, "status": c.Status, "content": jsonArg(c.Content),
		"audience": c.Audience, "filter": jsonArg(c.Filter), "start_at": c.StartAt,
		"rate_per_minute": c.RatePerMinute, "message_id": c.MessageID, "cursor": c.Cursor, "written": c.Written,
		"recipients": c.Recipients, "invalid_tokens": c.InvalidTokens, "duplicate_tokens": c.DuplicateTokens,
		"unreached_no_device": c.NoDevice, "unreached_filtered_out": c.FilteredOut,
		"unreached_malformed": c.MalformedOnly, "unreached_duplicate": c.DuplicateOnly,
		"tries": c.Tries, "last_error": c.LastError, "started_at": c.StartedAt, "finished_at": c.FinishedAt,
	})
	return err
}

func (e *executor) CampaignList(ctx context.Context, p *driver.CampaignListParams) ([]*driver.Campaign, error) {
	return query(ctx, e.db, scanCampaign, q.Get("CampaignList"), named{
		"before_id": p.BeforeID, "status": p.Status, "max": p.Limit,
	})
}

func (e *executor) CampaignTry(ctx context.Context, p *driver.CampaignTryParams) (*driver.CampaignTryResult, error) {
	res := &driver.CampaignTryResult{Found: true}
	err := e.db.QueryRow(ctx, q.Get("CampaignTry"), named{
		"now": p.Now, "max_tries": p.MaxTries, "lease_us": micros(p.Lease), "abandoned": p.Abandoned,
	}).
		Scan(&res.ID, &res.Tries, &res.Interrupted)
	if errors.Is(err, pgx.ErrNoRows) {
		return &driver.CampaignTryResult{}, nil
	}
	return res, err
}

func (e *executor) CampaignPageAdd(ctx context.Context, p *driver.CampaignPageParams) (int, bool, error) {
	var added int
	var replayed bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		var inserted bool
		var digest []byte
		args := named{"campaign_id": p.CampaignID, "page": p.Page, "digest": p.Digest, "recipients": p.Recipients}
		if err := tx.QueryRow(ctx, q.Get("CampaignPageInsert"), args).Scan(&inserted, &digest); err != nil {
			return err
		}
		if !inserted {
			if !bytes.Equal(digest, p.Digest) {
				return driver.ErrPageConflict
			}
			replayed = true
			return nil
		}
		return tx.QueryRow(ctx, q.Get("CampaignRecipientInsert"), args).Scan(&added)
	})
	return added, replayed, err
}

func (e *executor) CampaignRecipientsAfter(ctx context.Context, campaignID int64, after string, limit int) ([]string, error) {
	return query(ctx, e.db, pgx.RowTo[string], q.Get("CampaignRecipientsAfter"), named{
		"campaign_id": campaignID, "after": after, "max": limit,
	})
}

func (e *executor) DeviceListAfter(ctx context.Context, after string, limit int) ([]*driver.Device, error) {
	return query(ctx, e.db, scanDevice, q.Get("DeviceListAfter"), named{"after": after, "max": limit})
}

func (e *executor) CampaignDeliveryInsert(ctx context.Context, p *driver.CampaignDeliveryInsertParams) (int, error) {
	var n int
	err := e.db.QueryRow(ctx, q.Get("CampaignDeliveryInsert"), named{
		"now": p.Now, "message_id": p.MessageID, "recipients": p.Recipients,
		"notification_ids": p.NotificationIDs, "due_at": p.DueAt,
	}).Scan(&n)
	return n, err
}

func (e *executor) CampaignTally(ctx context.Context, messageID int64) (map[string]int, error) {
	return queryMap[string, int](ctx, e.db, q.Get("CampaignTally"), named{"message_id": messageID})
}

func (e *executor) CampaignTallyCompact(ctx context.Context, minRows int) (int, error) {
	var n int
	err := e.db.QueryRow(ctx, q.Get("CampaignTallyCompact"), named{"min_rows": minRows}).Scan(&n)
	return n, err
}

func (e *executor) SendWindowTake(ctx context.Context, p *driver.SendWindowParams) (map[string]int, error) {
	return queryMap[string, int](ctx, e.db, q.Get("SendWindowTake"), named{
		"transports": p.Transports, "starts": p.Starts, "asked": p.Asked, "allowance": p.Allowance,
	})
}

func (e *executor) SendWindowDeleteBefore(ctx context.Context, t time.Time) (int, error) {
	tag, err := e.db.Exec(ctx, q.Get("SendWindowDeleteBefore"), named{"before": t})
	return int(tag.RowsAffected()), err
}
