package sqlite

// The statements of driver.RequestExecutor (driver/request.go); their SQL is in
// queries_request.sql.

import (
	"context"
	"database/sql"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) IdempotencyGet(ctx context.Context, key string) (*driver.IdempotencyRecord, error) {
	r := &driver.IdempotencyRecord{}
	err := e.conn().QueryRowContext(ctx, q.Get("IdempotencyGet"), sql.Named("key", key)).
		Scan(&r.Key, &r.RequestHash, &r.MessageID, &r.Queued, &r.Duplicates, timeCol{&r.CreatedAt})
	if err != nil {
		return nil, translate(err)
	}
	return r, nil
}

func (e *executor) IdempotencyDeleteFreed(ctx context.Context, keys []string) (int, error) {
	return execList(ctx, e, q.Get("IdempotencyDeleteFreed"), "keys", keys)
}
