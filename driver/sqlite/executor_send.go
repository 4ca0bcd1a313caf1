package sqlite

// The statements of driver.SendExecutor (driver/send.go); their SQL is in
// queries_send.sql.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) MessageInsert(ctx context.Context, p *driver.MessageInsertParams) (int64, int, error) {
	if len(p.Recipients) != len(p.NotificationIDs) {
		return 0, 0, fmt.Errorf("sqlite: %d recipients but %d notification ids", len(p.Recipients), len(p.NotificationIDs))
	}
	pairs := make([][2]string, len(p.Recipients))
	for i, r := range p.Recipients {
		pairs[i] = [2]string{r, p.NotificationIDs[i]}
	}
	list, err := jsonList(pairs)
	if err != nil {
		return 0, 0, err
	}
	now := nowMicros(p.Now) // one instant for both statements
	var id int64
	var n int
	err = e.write(ctx, func(db dbtx) error {
		err := db.QueryRowContext(ctx, q.Get("MessageInsert"),
			sql.Named("now", now), sql.Named("type", p.Type), sql.Named("title", p.Title),
			sql.Named("body", p.Body), sql.Named("data", jsonArg(p.Data)), sql.Named("link", p.Link),
			sql.Named("image", p.Image), sql.Named("category", p.Category), sql.Named("ambiguity", p.Ambiguity),
			sql.Named("scheduled_at", optMicros(p.ScheduledAt)), sql.Named("lifetime_us", durMicros(p.Lifetime)),
			sql.Named("audience", jsonArg(p.Audience)),
		).Scan(&id)
		if err != nil {
			return err
		}
		n, err = rowsAffected(db.ExecContext(ctx, q.Get("DeliveryInsertMany"),
			sql.Named("now", now), sql.Named("message_id", id), sql.Named("deliveries", list),
			sql.Named("dedup_key", p.DedupKey), sql.Named("scheduled_at", optMicros(p.ScheduledAt)),
		))
		if err != nil || p.RequestHash == nil {
			return err
		}
		recorded := id
		if n == 0 {
			recorded = 0
		}
		ok, err := rowsAffected(db.ExecContext(ctx, q.Get("IdempotencyInsert"), sql.Named("key", p.DedupKey),
			sql.Named("request_hash", p.RequestHash), sql.Named("message_id", recorded), sql.Named("queued", n),
			sql.Named("duplicates", p.Duplicates+len(p.Recipients)-n), sql.Named("now", now)))
		if err != nil {
			return err
		}
		if ok == 0 {
			// Nothing of this send may remain: in a transaction of its own
			// (write) the error rolls it back; inside the caller's, the
			// engine wraps the call in a savepoint.
			return driver.ErrRequestRecorded
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return id, n, nil
}

// MessageInsertMany implements driver.Executor: the sends one after the
// other in the executor's transaction (or one write transaction of its
// own), those recording a request each in a savepoint.
func (e *executor) MessageInsertMany(ctx context.Context, ps []*driver.MessageInsertParams) ([]driver.MessageInserted, error) {
	out := make([]driver.MessageInserted, len(ps))
	err := e.write(ctx, func(db dbtx) error {
		tx := db.(*sql.Tx)
		in := &executor{tx: tx}
		for i, p := range ps {
			insert := func() error {
				var err error
				out[i].ID, out[i].Inserted, err = in.MessageInsert(ctx, p)
				return err
			}
			if p.RequestHash == nil {
				if err := insert(); err != nil {
					return err
				}
				continue
			}
			err := savepoint(ctx, tx, "oncepush_send", insert)
			if errors.Is(err, driver.ErrRequestRecorded) {
				out[i] = driver.MessageInserted{Err: err}
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (e *executor) MessageDelete(ctx context.Context, id int64) error {
	return e.exec(ctx, q.Get("MessageDelete"), sql.Named("id", id))
}

// Wake does nothing: SQLite cannot notify. Listen hears the commit through
// PRAGMA data_version, and Client.Send wakes its own workers after committing.
func (e *executor) Wake(context.Context) error { return nil }
