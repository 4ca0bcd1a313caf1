package sqlite

// The statements of driver.CampaignExecutor (driver/campaign.go); their SQL is in
// queries_campaign.sql.

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oncepush/oncepush/driver"
)

func scanCampaign(r scanner) (*driver.Campaign, error) {
	c := &driver.Campaign{}
	err := r.Scan(&c.ID, &c.Name, &c.Status, &c.Content, &c.Audience, &c.Filter, nullTimeCol{&c.StartAt},
		&c.RatePerMinute, &c.MessageID, &c.Cursor, &c.Written, &c.Recipients, &c.InvalidTokens, &c.DuplicateTokens,
		&c.NoDevice, &c.FilteredOut, &c.MalformedOnly, &c.DuplicateOnly,
		&c.Tries, &c.LastError, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt}, nullTimeCol{&c.StartedAt},
		nullTimeCol{&c.FinishedAt})
	return c, err
}

// CampaignInsert implements driver.Executor. CreatedAt is the given one,
// or the host's clock when it is zero; UpdatedAt is the same.
func (e *executor) CampaignInsert(ctx context.Context, c *driver.Campaign) (*driver.Campaign, error) {
	now := nowMicros(driver.NowOf(c.CreatedAt))
	return written(ctx, e, func(db dbtx) (*driver.Campaign, error) {
		return scanCampaign(db.QueryRowContext(ctx, q.Get("CampaignInsert"),
			sql.Named("now", now), sql.Named("name", c.Name), sql.Named("status", c.Status),
			sql.Named("content", jsonArg(c.Content)), sql.Named("audience", c.Audience),
			sql.Named("filter", jsonArg(c.Filter)), sql.Named("start_at", optMicros(c.StartAt)),
			sql.Named("rate_per_minute", c.RatePerMinute)))
	})
}

func (e *executor) CampaignGet(ctx context.Context, id int64) (*driver.Campaign, error) {
	return e.campaign(ctx, "CampaignGet", id)
}

// CampaignLock implements driver.Executor: a read, since the caller's write
// transaction (BEGIN IMMEDIATE) already holds the database's write lock.
func (e *executor) CampaignLock(ctx context.Context, id int64) (*driver.Campaign, error) {
	return e.campaign(ctx, "CampaignLock", id)
}

// campaign reads one campaign with the named query.
func (e *executor) campaign(ctx context.Context, name string, id int64) (*driver.Campaign, error) {
	c, err := scanCampaign(e.conn().QueryRowContext(ctx, q.Get(name), sql.Named("id", id)))
	if err != nil {
		return nil, translate(err)
	}
	return c, nil
}

func (e *executor) CampaignSave(ctx context.Context, c *driver.Campaign, now *time.Time) error {
	return e.exec(ctx, q.Get("CampaignSave"),
		sql.Named("id", c.ID), sql.Named("now", nowMicros(now)), sql.Named("name", c.Name),
		sql.Named("status", c.Status), sql.Named("content", jsonArg(c.Content)), sql.Named("audience", c.Audience),
		sql.Named("filter", jsonArg(c.Filter)), sql.Named("start_at", optMicros(c.StartAt)),
		sql.Named("rate_per_minute", c.RatePerMinute), sql.Named("message_id", c.MessageID),
		sql.Named("cursor", c.Cursor), sql.Named("written", c.Written), sql.Named("recipients", c.Recipients),
		sql.Named("invalid_tokens", c.InvalidTokens), sql.Named("duplicate_tokens", c.DuplicateTokens),
		sql.Named("unreached_no_device", c.NoDevice), sql.Named("unreached_filtered_out", c.FilteredOut),
		sql.Named("unreached_malformed", c.MalformedOnly), sql.Named("unreached_duplicate", c.DuplicateOnly),
		sql.Named("tries", c.Tries), sql.Named("last_error", c.LastError),
		sql.Named("started_at", optMicros(c.StartedAt)), sql.Named("finished_at", optMicros(c.FinishedAt)))
}

func (e *executor) CampaignList(ctx context.Context, p *driver.CampaignListParams) ([]*driver.Campaign, error) {
	return query(ctx, e.conn(), scanCampaign, q.Get("CampaignList"),
		sql.Named("before_id", p.BeforeID), sql.Named("status", p.Status), sql.Named("max", p.Limit))
}

// CampaignTry implements driver.Executor in one statement, written on its
// own (or in the executor's transaction); see CampaignTry in queries_campaign.sql.
func (e *executor) CampaignTry(ctx context.Context, p *driver.CampaignTryParams) (*driver.CampaignTryResult, error) {
	return written(ctx, e, func(db dbtx) (*driver.CampaignTryResult, error) {
		res := &driver.CampaignTryResult{Found: true}
		err := db.QueryRowContext(ctx, q.Get("CampaignTry"),
			sql.Named("now", nowMicros(p.Now)), sql.Named("max_tries", p.MaxTries),
			sql.Named("lease_us", p.Lease.Microseconds()), sql.Named("abandoned", p.Abandoned)).
			Scan(&res.ID, &res.Tries, &res.Interrupted)
		if errors.Is(err, sql.ErrNoRows) {
			return &driver.CampaignTryResult{}, nil
		}
		if err != nil {
			return nil, err
		}
		return res, nil
	})
}

// CampaignPageAdd implements driver.Executor in one write transaction (or a
// savepoint of the executor's): the page row first, whose conflict decides
// between a replay and ErrPageConflict before anything else is written.
func (e *executor) CampaignPageAdd(ctx context.Context, p *driver.CampaignPageParams) (int, bool, error) {
	list, err := jsonList(p.Recipients)
	if err != nil {
		return 0, false, err
	}
	var added int
	var replayed bool
	err = e.atomic(ctx, func(db dbtx) error {
		campaign, page := sql.Named("campaign_id", p.CampaignID), sql.Named("page", p.Page)
		inserted, err := rowsAffected(db.ExecContext(ctx, q.Get("CampaignPageInsert"), campaign, page,
			sql.Named("digest", p.Digest), sql.Named("size", len(p.Recipients))))
		if err != nil {
			return err
		}
		if inserted == 0 {
			var digest []byte
			if err := db.QueryRowContext(ctx, q.Get("CampaignPageGet"), campaign, page).Scan(&digest); err != nil {
				return err
			}
			if !bytes.Equal(digest, p.Digest) {
				return driver.ErrPageConflict
			}
			replayed = true
			return nil
		}
		if added, err = rowsAffected(db.ExecContext(ctx, q.Get("CampaignRecipientInsert"), campaign,
			sql.Named("recipients", list))); err != nil {
			return err
		}
		_, err = db.ExecContext(ctx, q.Get("CampaignCountAdd"), campaign, sql.Named("added", added))
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return added, replayed, nil
}

func (e *executor) CampaignRecipientsAfter(ctx context.Context, campaignID int64, after string, limit int) ([]string, error) {
	return query(ctx, e.conn(), scanValue[string], q.Get("CampaignRecipientsAfter"),
		sql.Named("campaign_id", campaignID), sql.Named("after", after), sql.Named("max", limit))
}

func (e *executor) DeviceListAfter(ctx context.Context, after string, limit int) ([]*driver.Device, error) {
	return query(ctx, e.conn(), scanDevice, q.Get("DeviceListAfter"), sql.Named("after", after), sql.Named("max", limit))
}

// CampaignDeliveryInsert implements driver.Executor: each row carries its
// own due time.
func (e *executor) CampaignDeliveryInsert(ctx context.Context, p *driver.CampaignDeliveryInsertParams) (int, error) {
	if len(p.Recipients) != len(p.NotificationIDs) || len(p.Recipients) != len(p.DueAt) {
		return 0, fmt.Errorf("sqlite: %d recipients, %d notification ids and %d due times",
			len(p.Recipients), len(p.NotificationIDs), len(p.DueAt))
	}
	if len(p.Recipients) == 0 {
		return 0, nil
	}
	rows := make([][3]any, len(p.Recipients))
	for i, r := range p.Recipients {
		rows[i] = [3]any{r, p.NotificationIDs[i], p.DueAt[i].UnixMicro()}
	}
	list, err := jsonList(rows)
	if err != nil {
		return 0, err
	}
	return e.execCount(ctx, q.Get("CampaignDeliveryInsert"),
		sql.Named("now", nowMicros(p.Now)), sql.Named("message_id", p.MessageID), sql.Named("deliveries", list))
}

func (e *executor) CampaignTally(ctx context.Context, messageID int64) (map[string]int, error) {
	return queryMap[string, int](ctx, e.conn(), q.Get("CampaignTally"), sql.Named("message_id", messageID))
}

// CampaignTallyCompact has nothing to fold: the triggers keep one row per
// state (migration 7).
func (e *executor) CampaignTallyCompact(context.Context, int) (int, error) { return 0, nil }

// windowAsk is one element of SendWindowTake's @asks.
type windowAsk struct {
	Transport string `json:"transport"`
	Start     int64  `json:"start"`
	Asked     int    `json:"asked"`
	Allowance int    `json:"allowance"`
}

func (e *executor) SendWindowTake(ctx context.Context, p *driver.SendWindowParams) (map[string]int, error) {
	asks := make([]windowAsk, len(p.Transports))
	for i, t := range p.Transports {
		asks[i] = windowAsk{Transport: t, Start: p.Starts[i].UnixMicro(), Asked: p.Asked[i], Allowance: p.Allowance[i]}
	}
	list, err := jsonList(asks)
	if err != nil {
		return nil, err
	}
	return written(ctx, e, func(db dbtx) (map[string]int, error) {
		return queryMap[string, int](ctx, db, q.Get("SendWindowTake"), sql.Named("asks", list))
	})
}

func (e *executor) SendWindowDeleteBefore(ctx context.Context, t time.Time) (int, error) {
	return e.execCount(ctx, q.Get("SendWindowDeleteBefore"), sql.Named("before", t.UnixMicro()))
}
