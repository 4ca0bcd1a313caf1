package postgres

// The statements of driver.CleanupExecutor (driver/cleanup.go); their SQL is in
// queries_cleanup.sql.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) LockAcquire(ctx context.Context, p *driver.LockParams) (bool, error) {
	owners, err := query(ctx, e.db, pgx.RowTo[string], q.Get("LockAcquire"), named{
		"now": p.Now, "name": p.Name, "owner": p.Owner, "ttl_us": micros(p.TTL),
	})
	return len(owners) == 1, err
}

func (e *executor) cleanup(ctx context.Context, name string, p *driver.CleanupParams) (int, error) {
	tag, err := e.db.Exec(ctx, q.Get(name), named{"now": p.Now, "age_us": micros(p.Age), "max": p.Limit})
	return int(tag.RowsAffected()), err
}

// scanDeleted reads the one row of DeliveryDeleteFinished and DeliveryDeleteByRecipient.
func scanDeleted(row pgx.Row, d *driver.DeletedDeliveries) error {
	return row.Scan(&d.Count, &d.MessageIDs, &d.DedupKeys)
}

func (e *executor) DeliveryDeleteFinished(ctx context.Context, p *driver.CleanupParams) (*driver.DeletedDeliveries, error) {
	d := &driver.DeletedDeliveries{}
	err := scanDeleted(e.db.QueryRow(ctx, q.Get("DeliveryDeleteFinished"),
		named{"now": p.Now, "age_us": micros(p.Age), "max": p.Limit}), d)
	return d, err
}

func (e *executor) MessageDeleteOrphans(ctx context.Context, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	return e.lockThenDelete(ctx, "MessageLockMany", "MessageDeleteOrphans", named{"ids": ids})
}

func (e *executor) MessageSweepOrphans(ctx context.Context, p *driver.SweepParams) (int, int64, error) {
	var n int
	var last int64
	err := e.db.QueryRow(ctx, q.Get("MessageSweepOrphans"), named{"after_id": p.AfterID, "max": p.Limit}).Scan(&n, &last)
	return n, last, err
}

// lockThenDelete locks rows, then deletes those no delivery references any
// more in a statement of its own, whose snapshot sees what a concurrent
// deleter of those deliveries committed while this one waited for the lock.
// Under READ COMMITTED two such deleters would otherwise each still see the
// other's delivery and both keep the row, which nothing would delete later.
// One round trip: a batch runs in one (implicit) transaction.
func (e *executor) lockThenDelete(ctx context.Context, lock, del string, args named) (int, error) {
	b := &pgx.Batch{}
	b.Queue(q.Get(lock), args)
	b.Queue(q.Get(del), args)
	br := e.db.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return 0, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return int(tag.RowsAffected()), err
}

func (e *executor) DeliveryOverdue(ctx context.Context, p *driver.CleanupParams) (int, time.Time, error) {
	var n int
	var oldest time.Time
	err := e.db.QueryRow(ctx, q.Get("DeliveryOverdue"), named{"now": p.Now, "age_us": micros(p.Age)}).Scan(&n, &oldest)
	return n, oldest, err
}

func (e *executor) DeliveryDueStats(ctx context.Context, now *time.Time, max int) (driver.DueStats, error) {
	var st driver.DueStats
	var ageT, ageC float64
	err := e.db.QueryRow(ctx, q.Get("DeliveryDueStats"), named{"now": now, "max": max}).
		Scan(&st.Transactional.Count, &ageT, &st.Campaign.Count, &ageC)
	st.Transactional.OldestAge = time.Duration(ageT * float64(time.Second))
	st.Campaign.OldestAge = time.Duration(ageC * float64(time.Second))
	return st, err
}
