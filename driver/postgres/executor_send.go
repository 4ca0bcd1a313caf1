package postgres

// The statements of driver.SendExecutor (driver/send.go); their SQL is in
// queries_send.sql.

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) MessageInsert(ctx context.Context, p *driver.MessageInsertParams) (int64, int, error) {
	var id int64
	var n int
	err := e.db.QueryRow(ctx, q.Get("MessageInsert"), messageInsertArgs(p)).Scan(&id, &n)
	if isRecorded(err) {
		return 0, 0, driver.ErrRequestRecorded
	}
	return id, n, err
}

func messageInsertArgs(p *driver.MessageInsertParams) named {
	return named{
		"now": p.Now, "type": p.Type, "title": p.Title, "body": p.Body, "data": jsonArg(p.Data),
		"link": p.Link, "image": p.Image, "category": p.Category, "ambiguity": p.Ambiguity,
		"scheduled_at": p.ScheduledAt, "lifetime_us": micros(p.Lifetime),
		"recipients": p.Recipients, "notification_ids": p.NotificationIDs, "dedup_key": p.DedupKey,
		"request_hash": p.RequestHash, "duplicates": p.Duplicates, "audience": jsonArg(p.Audience),
	}
}

// isRecorded reports whether err is MessageInsert's record finding its key
// taken.
func isRecorded(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "oncepush_idempotency_pkey"
}

// MessageInsertMany implements driver.Executor: the sends' statements are
// pipelined in one batch (one round trip), those recording a request each
// in a savepoint. A recorded key aborts the batch from its statement on: the
// driver rolls back to that send's savepoint and sends the rest again.
func (e *executor) MessageInsertMany(ctx context.Context, ps []*driver.MessageInsertParams) ([]driver.MessageInserted, error) {
	if _, inTx := e.db.(pgx.Tx); !inTx {
		var out []driver.MessageInserted
		err := e.inTx(ctx, func(tx pgx.Tx) error {
			var err error
			out, err = (&executor{db: tx}).MessageInsertMany(ctx, ps)
			return err
		})
		return out, err
	}
	out := make([]driver.MessageInserted, len(ps))
	for done := 0; done < len(ps); {
		n, err := e.insertBatch(ctx, ps[done:], out[done:])
		if err != nil {
			return nil, err
		}
		done += n
	}
	return out, nil
}

// insertBatch sends ps in one batch and fills out. It returns how many sends
// it settled: all, or those up to and including the first whose key was
// recorded, whose savepoint it has rolled back to.
func (e *executor) insertBatch(ctx context.Context, ps []*driver.MessageInsertParams, out []driver.MessageInserted) (int, error) {
	const savepoint = "SAVEPOINT oncepush_send"
	const release = "RELEASE SAVEPOINT oncepush_send"
	b := &pgx.Batch{}
	for _, p := range ps {
		if p.RequestHash != nil {
			b.Queue(savepoint)
		}
		b.Queue(q.Get("MessageInsert"), messageInsertArgs(p))
		if p.RequestHash != nil {
			b.Queue(release)
		}
	}
	br := e.db.SendBatch(ctx, b)
	for i, p := range ps {
		if p.RequestHash != nil {
			if _, err := br.Exec(); err != nil {
				return 0, errors.Join(err, br.Close())
			}
		}
		err := br.QueryRow().Scan(&out[i].ID, &out[i].Inserted)
		if isRecorded(err) {
			out[i] = driver.MessageInserted{Err: driver.ErrRequestRecorded}
			_ = br.Close() // the rest of the batch failed with the transaction
			_, err := e.db.Exec(ctx, "ROLLBACK TO SAVEPOINT oncepush_send")
			return i + 1, err
		}
		if err != nil {
			return 0, errors.Join(err, br.Close())
		}
		if p.RequestHash != nil {
			if _, err := br.Exec(); err != nil {
				return 0, errors.Join(err, br.Close())
			}
		}
	}
	return len(ps), br.Close()
}

func (e *executor) MessageDelete(ctx context.Context, id int64) error {
	_, err := e.db.Exec(ctx, q.Get("MessageDelete"), named{"id": id})
	return err
}

func (e *executor) Wake(ctx context.Context) error {
	_, err := e.db.Exec(ctx, q.Get("Wake"))
	return err
}
