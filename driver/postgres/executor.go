package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
)

// plannerOff names, per query, the planner methods turned off while it is
// planned (D90): the statements every batch of a run executes, each of
// which has one good plan, an index read of the batch's rows, whatever the
// statistics say. Without statistics (a table never analyzed, or analyzed
// while nearly empty, as every fresh database is for its first minutes) the
// planner takes an equality on status, or each id of a list, to match 0.5 %
// of the rows: it sorted the whole due queue for every claim and read the
// device attempts whole for every batch (TestQueryPlansWithoutStatistics).
// A generic plan made then is kept until an ANALYZE invalidates it.
var plannerOff = map[string][]string{
	// The due indexes walked in order up to now, stopping at the batch's
	// end: never the due queue sorted.
	"DeliveryClaim": {"enable_seqscan", "enable_sort"},
	// The batch's rows by id or recipient.
	"MessageGetMany":                {"enable_seqscan"},
	"DeviceListByRecipients":        {"enable_seqscan"},
	"DeviceAttemptListByDeliveries": {"enable_seqscan"},
	"DeviceAttemptMarkSending":      {"enable_seqscan"},
	"DeliveryUpdateMany":            {"enable_seqscan"},
	"PreferenceGetMany":             {"enable_seqscan"},
}

// Around a statement planned under plannerOff: the settings are changed for
// the transaction (the batch's implicit one outside a transaction) and given
// back right after it, in the same round trip, so that nothing else of the
// transaction — an eligibility rule's own queries — is planned under them.
const (
	plannerSettingsOff = `SELECT set_config('oncepush.saved_' || s, current_setting(s), true), set_config(s, 'off', true)
FROM unnest($1::text[]) AS s`
	plannerSettingsBack = `SELECT set_config(s, current_setting('oncepush.saved_' || s), true)
FROM unnest($1::text[]) AS s`
)

// queryPlanned runs the named query planned under its plannerOff settings
// and scans every row.
func queryPlanned[T any](ctx context.Context, db dbtx, scan pgx.RowToFunc[T], name, text string, args named) ([]T, error) {
	var out []T
	err := sendPlanned(ctx, db, plannerOff[name], func(b *pgx.Batch) {
		b.Queue(text, args)
	}, func(br pgx.BatchResults) error {
		return collect(br, scan, &out)
	})
	return out, err
}

// sendPlanned sends the statements queue adds in one round trip, planned
// with the planner methods off turned off, and hands their results to read.
func sendPlanned(ctx context.Context, db dbtx, off []string, queue func(*pgx.Batch), read func(pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	b.Queue(plannerSettingsOff, off)
	queue(b)
	b.Queue(plannerSettingsBack, off)
	br := db.SendBatch(ctx, b)
	err := func() error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := read(br); err != nil {
			return err
		}
		_, err := br.Exec()
		return err
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// collect scans every row of the batch's next result into out.
func collect[T any](br pgx.BatchResults, scan pgx.RowToFunc[T], out *[]T) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	*out, err = pgx.CollectRows(rows, scan)
	return err
}

// executor runs the named queries on a pool or in a transaction.
type executor struct {
	db dbtx
	// begin begins a transaction on the pool (Driver.begin); unused in a
	// transaction, where a nested one is a savepoint.
	begin pgx.TxOptions
}

// inTx runs fn in a transaction of its own: a savepoint of the executor's
// transaction, or a transaction on the pool begun as the driver begins its
// own (bounded by IdleInTransactionTimeout).
func (e *executor) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if pool, ok := e.db.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	}); ok {
		return pgx.BeginTxFunc(ctx, pool, e.begin, fn)
	}
	return pgx.BeginFunc(ctx, e.db, fn)
}

var _ driver.Executor = (*executor)(nil)

// query runs a query and scans every row.
func query[T any](ctx context.Context, db dbtx, scan pgx.RowToFunc[T], text string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, text, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}

// queryOne runs a query of one row and scans it; no row is driver.ErrNotFound.
func queryOne[T any](ctx context.Context, db dbtx, scan pgx.RowToFunc[T], text string, args ...any) (T, error) {
	rows, err := db.Query(ctx, text, args...)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := pgx.CollectExactlyOneRow(rows, scan)
	return v, translate(err)
}

// queryMap runs a query of two columns and returns them as key → value.
func queryMap[K comparable, V any](ctx context.Context, db dbtx, text string, args ...any) (map[K]V, error) {
	rows, err := db.Query(ctx, text, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[K]V{}
	for rows.Next() {
		var k K
		var v V
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

func scanMessage(r pgx.CollectableRow) (*driver.Message, error) {
	m := &driver.Message{}
	err := r.Scan(&m.ID, &m.Type, &m.Title, &m.Body, &m.Data, &m.Link, &m.Image, &m.Category,
		&m.Ambiguity, &m.ScheduledAt, &m.ExpiresAt, &m.CreatedAt, &m.Audience)
	return m, err
}

func scanDevice(r pgx.CollectableRow) (*driver.Device, error) {
	d := &driver.Device{}
	err := r.Scan(&d.ID, &d.Recipient, &d.Transport, &d.Token, &d.TokenKey, &d.Platform, &d.Session,
		&d.Locale, &d.TimeZone, &d.Tags, &d.CreatedAt, &d.RegisteredAt)
	return d, err
}

func scanDeviceAttempt(r pgx.CollectableRow) (*driver.DeviceAttempt, error) {
	a := &driver.DeviceAttempt{}
	err := r.Scan(&a.DeliveryID, &a.DeviceID, &a.Transport, &a.TokenKey, &a.State, &a.Submissions, &a.Ambiguous,
		&a.ProviderID, &a.Error, &a.FirstSentAt, &a.LastSentAt, &a.UpdatedAt)
	return a, err
}

func scanDelivery(r pgx.CollectableRow) (*driver.Delivery, error) {
	d := &driver.Delivery{}
	err := r.Scan(&d.ID, &d.MessageID, &d.Recipient, &d.NotificationID, &d.DedupKey, &d.Status, &d.Attempts,
		&d.NextAttemptAt, &d.LeaseID, &d.LastError, &d.CreatedAt, &d.FinishedAt)
	return d, err
}

// jsonArg is a JSON document for a jsonb parameter: NULL, not the JSON
// literal null, when there is none.
func jsonArg(doc []byte) any {
	if doc == nil {
		return nil
	}
	return string(doc)
}
