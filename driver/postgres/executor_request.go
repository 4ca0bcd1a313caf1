package postgres

// The statements of driver.RequestExecutor (driver/request.go); their SQL is in
// queries_request.sql.

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) IdempotencyGet(ctx context.Context, key string) (*driver.IdempotencyRecord, error) {
	return queryOne(ctx, e.db, func(r pgx.CollectableRow) (*driver.IdempotencyRecord, error) {
		rec := &driver.IdempotencyRecord{}
		err := r.Scan(&rec.Key, &rec.RequestHash, &rec.MessageID, &rec.Queued, &rec.Duplicates, &rec.CreatedAt)
		return rec, err
	}, q.Get("IdempotencyGet"), named{"key": key})
}

func (e *executor) IdempotencyDeleteFreed(ctx context.Context, keys []string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	return e.lockThenDelete(ctx, "IdempotencyLockMany", "IdempotencyDeleteFreed", named{"keys": keys})
}
