package sqlite

// The statements of driver.CleanupExecutor (driver/cleanup.go); their SQL is in
// queries_cleanup.sql.

import (
	"context"
	"database/sql"
	"time"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) LockAcquire(ctx context.Context, p *driver.LockParams) (bool, error) {
	owners, err := written(ctx, e, func(db dbtx) ([]string, error) {
		return query(ctx, db, scanValue[string], q.Get("LockAcquire"), sql.Named("now", nowMicros(p.Now)), sql.Named("name", p.Name),
			sql.Named("owner", p.Owner), sql.Named("ttl_us", durMicros(p.TTL)))
	})
	return len(owners) == 1, err
}

func (e *executor) cleanup(ctx context.Context, name string, p *driver.CleanupParams) (int, error) {
	return e.execCount(ctx, q.Get(name),
		sql.Named("now", nowMicros(p.Now)), sql.Named("age_us", durMicros(p.Age)), sql.Named("max", p.Limit))
}

// collectDeleted runs a DELETE … RETURNING message_id, dedup_key and gathers
// what the deleted rows held.
func collectDeleted(ctx context.Context, db dbtx, d *driver.DeletedDeliveries, text string, args ...any) error {
	type held struct {
		message int64
		key     sql.NullString
	}
	rows, err := query(ctx, db, func(r scanner) (held, error) {
		var h held
		err := r.Scan(&h.message, &h.key)
		return h, err
	}, text, args...)
	if err != nil {
		return err
	}
	d.Count = len(rows)
	messages := map[int64]bool{}
	keys := map[string]bool{}
	for _, h := range rows {
		if !messages[h.message] {
			messages[h.message] = true
			d.MessageIDs = append(d.MessageIDs, h.message)
		}
		if h.key.Valid && h.key.String != "" && !keys[h.key.String] {
			keys[h.key.String] = true
			d.DedupKeys = append(d.DedupKeys, h.key.String)
		}
	}
	return nil
}

func (e *executor) DeliveryDeleteFinished(ctx context.Context, p *driver.CleanupParams) (*driver.DeletedDeliveries, error) {
	d := &driver.DeletedDeliveries{}
	err := e.write(ctx, func(db dbtx) error {
		return collectDeleted(ctx, db, d, q.Get("DeliveryDeleteFinished"),
			sql.Named("now", nowMicros(p.Now)), sql.Named("age_us", durMicros(p.Age)), sql.Named("max", p.Limit))
	})
	return d, err
}

func (e *executor) MessageDeleteOrphans(ctx context.Context, ids []int64) (int, error) {
	return execList(ctx, e, q.Get("MessageDeleteOrphans"), "ids", ids)
}

func (e *executor) MessageSweepOrphans(ctx context.Context, p *driver.SweepParams) (int, int64, error) {
	var n int
	var last sql.NullInt64
	err := e.write(ctx, func(db dbtx) error {
		after := sql.Named("after_id", p.AfterID)
		if err := db.QueryRowContext(ctx, q.Get("MessageSweepLast"), after, sql.Named("max", p.Limit)).Scan(&last); err != nil || !last.Valid {
			return err
		}
		var err error
		n, err = rowsAffected(db.ExecContext(ctx, q.Get("MessageSweepOrphans"), after, sql.Named("last", last.Int64)))
		return err
	})
	return n, last.Int64, err
}

func (e *executor) DeliveryOverdue(ctx context.Context, p *driver.CleanupParams) (int, time.Time, error) {
	var n int
	var oldest time.Time
	err := e.conn().QueryRowContext(ctx, q.Get("DeliveryOverdue"),
		sql.Named("now", nowMicros(p.Now)), sql.Named("age_us", durMicros(p.Age))).Scan(&n, timeCol{&oldest})
	return n, oldest, err
}

func (e *executor) DeliveryDueStats(ctx context.Context, now *time.Time, max int) (driver.DueStats, error) {
	var st driver.DueStats
	var ageT, ageC int64
	err := e.conn().QueryRowContext(ctx, q.Get("DeliveryDueStats"), sql.Named("now", nowMicros(now)), sql.Named("max", max)).
		Scan(&st.Transactional.Count, &ageT, &st.Campaign.Count, &ageC)
	st.Transactional.OldestAge = time.Duration(ageT) * time.Microsecond
	st.Campaign.OldestAge = time.Duration(ageC) * time.Microsecond
	return st, err
}
