package postgres

// The statements of driver.LedgerExecutor (driver/ledger.go); their SQL is in
// queries_ledger.sql.

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
)

// deliveries reads a list of deliveries with their device attempts.
func (e *executor) deliveries(ctx context.Context, text string, args named) ([]*driver.Delivery, error) {
	ds, err := query(ctx, e.db, scanDelivery, text, args)
	if err != nil {
		return nil, err
	}
	return driver.AttachAttempts(ctx, e, ds)
}

func (e *executor) DeliveryGet(ctx context.Context, id int64) (*driver.Delivery, error) {
	d, err := queryOne(ctx, e.db, scanDelivery, q.Get("DeliveryGet"), named{"id": id})
	if err != nil {
		return nil, err
	}
	if _, err := driver.AttachAttempts(ctx, e, []*driver.Delivery{d}); err != nil {
		return nil, err
	}
	return d, nil
}

func (e *executor) DeliveryListByMessage(ctx context.Context, messageID, afterID int64, limit int) ([]*driver.Delivery, error) {
	return e.deliveries(ctx, q.Get("DeliveryListByMessage"), named{"message_id": messageID, "after_id": afterID, "max": limit})
}

func (e *executor) DeliveryListByRecipient(ctx context.Context, recipient string, beforeID int64, limit int) ([]*driver.Delivery, error) {
	return e.deliveries(ctx, q.Get("DeliveryListByRecipient"), named{"recipient": recipient, "before_id": beforeID, "max": limit})
}

func (e *executor) DeliveryCountByStatus(ctx context.Context, messageID int64) (map[string]int, error) {
	return queryMap[string, int](ctx, e.db, q.Get("DeliveryCountByStatus"), named{"message_id": messageID})
}

func (e *executor) MessageGet(ctx context.Context, id int64) (*driver.Message, error) {
	return queryOne(ctx, e.db, scanMessage, q.Get("MessageGet"), named{"id": id})
}

func (e *executor) MessageList(ctx context.Context, p *driver.MessageListParams) ([]*driver.Message, error) {
	args := named{
		"before_at": p.BeforeAt, "before_id": p.BeforeID, "created_from": p.CreatedFrom, "created_to": p.CreatedTo,
		"status": p.Status, "limit": p.Limit, "category": p.Category,
	}
	text := q.Get("MessageList")
	if p.Category != "" {
		text = q.Get("MessageListByCategory")
	} else {
		delete(args, "category")
	}
	return query(ctx, e.db, scanMessage, text, args)
}

func (e *executor) MessageIDsByDedupKey(ctx context.Context, key string) ([]int64, error) {
	return query(ctx, e.db, pgx.RowTo[int64], q.Get("MessageIDsByDedupKey"), named{"dedup_key": key})
}

func (e *executor) MessageCancel(ctx context.Context, p *driver.MessageCancelParams) (*driver.MessageCancelResult, error) {
	res := &driver.MessageCancelResult{}
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		if p.CampaignID == 0 {
			err := tx.QueryRow(ctx, q.Get("CampaignIDByMessage"), named{"message_id": p.MessageID}).Scan(&res.CampaignID)
			if err == nil {
				return nil // refused: the campaign cancels its message
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		ids, err := query(ctx, tx, pgx.RowTo[int64], q.Get("MessageCancel"), named{"now": p.Now, "message_id": p.MessageID})
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			var exists bool
			if err := tx.QueryRow(ctx, q.Get("MessageExists"), named{"id": p.MessageID}).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return driver.ErrNotFound
			}
			return nil
		}
		res.Canceled = len(ids)
		return tx.QueryRow(ctx, q.Get("MessageCancelInFlight"), named{"ids": ids}).Scan(&res.InFlight)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (e *executor) DeviceAttemptAmbiguousCount(ctx context.Context, messageID int64) (int, error) {
	var n int
	err := e.db.QueryRow(ctx, q.Get("DeviceAttemptAmbiguousCount"), named{"message_id": messageID}).Scan(&n)
	return n, err
}
