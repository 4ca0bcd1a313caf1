package sqlite

// The statements of driver.LedgerExecutor (driver/ledger.go); their SQL is in
// queries_ledger.sql.

import (
	"context"
	"database/sql"
	"errors"
	"math"

	"github.com/oncepush/oncepush/driver"
)

// deliveries reads a list of deliveries with their device attempts.
func (e *executor) deliveries(ctx context.Context, text string, args ...any) ([]*driver.Delivery, error) {
	ds, err := query(ctx, e.conn(), scanDelivery, text, args...)
	if err != nil {
		return nil, err
	}
	return driver.AttachAttempts(ctx, e, ds)
}

func (e *executor) DeliveryGet(ctx context.Context, id int64) (*driver.Delivery, error) {
	d, err := scanDelivery(e.conn().QueryRowContext(ctx, q.Get("DeliveryGet"), sql.Named("id", id)))
	if err != nil {
		return nil, translate(err)
	}
	if _, err := driver.AttachAttempts(ctx, e, []*driver.Delivery{d}); err != nil {
		return nil, err
	}
	return d, nil
}

func (e *executor) DeliveryListByMessage(ctx context.Context, messageID, afterID int64, limit int) ([]*driver.Delivery, error) {
	return e.deliveries(ctx, q.Get("DeliveryListByMessage"),
		sql.Named("message_id", messageID), sql.Named("after_id", afterID), sql.Named("max", limit))
}

func (e *executor) DeliveryListByRecipient(ctx context.Context, recipient string, beforeID int64, limit int) ([]*driver.Delivery, error) {
	return e.deliveries(ctx, q.Get("DeliveryListByRecipient"),
		sql.Named("recipient", recipient), sql.Named("before_id", beforeID), sql.Named("max", limit))
}

func (e *executor) DeliveryCountByStatus(ctx context.Context, messageID int64) (map[string]int, error) {
	return queryMap[string, int](ctx, e.conn(), q.Get("DeliveryCountByStatus"), sql.Named("message_id", messageID))
}

func (e *executor) MessageList(ctx context.Context, p *driver.MessageListParams) ([]*driver.Message, error) {
	// The cursor and the created range as one closed range of creation
	// times, which SQLite seeks its index to, and the cursor's tie-break.
	lo, hi, before := int64(math.MinInt64), int64(math.MaxInt64), int64(math.MaxInt64)
	if p.CreatedFrom != nil {
		lo = p.CreatedFrom.UnixMicro()
	}
	if p.CreatedTo != nil {
		hi = p.CreatedTo.UnixMicro() - 1
	}
	if p.BeforeAt != nil {
		before = p.BeforeAt.UnixMicro()
		hi = min(hi, before)
	}
	args := []any{
		sql.Named("lo_at", lo), sql.Named("hi_at", hi), sql.Named("before_at", before), sql.Named("before_id", p.BeforeID),
		sql.Named("status", p.Status), sql.Named("limit", p.Limit),
	}
	text := q.Get("MessageList")
	if p.Category != "" {
		text = q.Get("MessageListByCategory")
		args = append(args, sql.Named("category", p.Category))
	}
	return query(ctx, e.conn(), scanMessage, text, args...)
}

func (e *executor) MessageIDsByDedupKey(ctx context.Context, key string) ([]int64, error) {
	return query(ctx, e.conn(), scanValue[int64], q.Get("MessageIDsByDedupKey"), sql.Named("dedup_key", key))
}

func (e *executor) MessageCancel(ctx context.Context, p *driver.MessageCancelParams) (*driver.MessageCancelResult, error) {
	return written(ctx, e, func(db dbtx) (*driver.MessageCancelResult, error) {
		var exists bool
		if err := db.QueryRowContext(ctx, q.Get("MessageExists"), sql.Named("id", p.MessageID)).Scan(&exists); err != nil {
			return nil, err
		}
		if !exists {
			return nil, driver.ErrNotFound
		}
		res := &driver.MessageCancelResult{}
		if p.CampaignID == 0 {
			err := db.QueryRowContext(ctx, q.Get("CampaignIDByMessage"), sql.Named("message_id", p.MessageID)).Scan(&res.CampaignID)
			if err == nil {
				return res, nil // refused: the campaign cancels its message
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
		}
		// One writer at a time: the count and the update see the same rows.
		if err := db.QueryRowContext(ctx, q.Get("MessageCancelCount"), sql.Named("message_id", p.MessageID)).
			Scan(&res.Canceled, &res.InFlight); err != nil {
			return nil, err
		}
		_, err := db.ExecContext(ctx, q.Get("MessageCancel"), sql.Named("message_id", p.MessageID), sql.Named("now", nowMicros(p.Now)))
		return res, err
	})
}

func (e *executor) MessageGet(ctx context.Context, id int64) (*driver.Message, error) {
	m, err := scanMessage(e.conn().QueryRowContext(ctx, q.Get("MessageGet"), sql.Named("id", id)))
	if err != nil {
		return nil, translate(err)
	}
	return m, nil
}

func (e *executor) DeviceAttemptAmbiguousCount(ctx context.Context, messageID int64) (int, error) {
	var n int
	err := e.conn().QueryRowContext(ctx, q.Get("DeviceAttemptAmbiguousCount"), sql.Named("message_id", messageID)).Scan(&n)
	return n, err
}
