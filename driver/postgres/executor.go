package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

func (e *executor) WithSavepoint(ctx context.Context, fn func() error) error {
	if _, err := e.db.Exec(ctx, "SAVEPOINT oncepush_eligibility"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		if _, rerr := e.db.Exec(ctx, "ROLLBACK TO SAVEPOINT oncepush_eligibility"); rerr != nil {
			return rerr
		}
		return err
	}
	_, err := e.db.Exec(ctx, "RELEASE SAVEPOINT oncepush_eligibility")
	return err
}

func (e *executor) DeliveryClaim(ctx context.Context, p *driver.DeliveryClaimParams) (*driver.DeliveryClaimResult, error) {
	res := &driver.DeliveryClaimResult{}
	rows, err := queryPlanned(ctx, e.db, func(r pgx.CollectableRow) (*driver.ClaimedDelivery, error) {
		c := &driver.ClaimedDelivery{}
		err := r.Scan(&c.ID, &c.MessageID, &c.Recipient, &c.NotificationID, &c.Attempts, &c.Campaign, &c.PrevLeaseID, &res.Now)
		return c, err
	}, "DeliveryClaim", q.Get("DeliveryClaim"), named{
		"now": p.Now, "max": p.Max, "lease_id": p.LeaseID, "lease_us": micros(p.Lease), "no_campaign": p.NoCampaign,
	})
	if err != nil {
		return nil, err
	}
	res.Rows = rows
	return res, nil
}

func (e *executor) MessageGetMany(ctx context.Context, ids []int64) ([]*driver.Message, error) {
	return queryPlanned(ctx, e.db, scanMessage, "MessageGetMany", q.Get("MessageGetMany"), named{"ids": ids})
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

func (e *executor) DeviceListByRecipients(ctx context.Context, recipients []string) ([]*driver.Device, error) {
	return queryPlanned(ctx, e.db, scanDevice, "DeviceListByRecipients", q.Get("DeviceListByRecipients"), named{"recipients": recipients})
}

func (e *executor) DeviceAttemptListByDeliveries(ctx context.Context, ids []int64) ([]*driver.DeviceAttempt, error) {
	return queryPlanned(ctx, e.db, scanDeviceAttempt, "DeviceAttemptListByDeliveries", q.Get("DeviceAttemptListByDeliveries"), named{"delivery_ids": ids})
}

func scanDeviceAttempt(r pgx.CollectableRow) (*driver.DeviceAttempt, error) {
	a := &driver.DeviceAttempt{}
	err := r.Scan(&a.DeliveryID, &a.DeviceID, &a.Transport, &a.TokenKey, &a.State, &a.Submissions, &a.Ambiguous,
		&a.ProviderID, &a.Error, &a.FirstSentAt, &a.LastSentAt, &a.UpdatedAt)
	return a, err
}

// ClaimRead sends the three reads in one round trip, each planned as it is
// alone (the three share their plannerOff settings).
func (e *executor) ClaimRead(ctx context.Context, p *driver.ClaimReadParams) (*driver.ClaimReadResult, error) {
	r := &driver.ClaimReadResult{}
	err := sendPlanned(ctx, e.db, plannerOff["MessageGetMany"], func(b *pgx.Batch) {
		b.Queue(q.Get("MessageGetMany"), named{"ids": p.MessageIDs})
		b.Queue(q.Get("DeviceListByRecipients"), named{"recipients": p.Recipients})
		b.Queue(q.Get("DeviceAttemptListByDeliveries"), named{"delivery_ids": p.DeliveryIDs})
	}, func(br pgx.BatchResults) error {
		if err := collect(br, scanMessage, &r.Messages); err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		if err := collect(br, scanDevice, &r.Devices); err != nil {
			return fmt.Errorf("devices: %w", err)
		}
		if err := collect(br, scanDeviceAttempt, &r.Attempts); err != nil {
			return fmt.Errorf("attempts: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (e *executor) DeliveryUpdateMany(ctx context.Context, p *driver.DeliveryUpdateManyParams) ([]driver.UpdatedDelivery, error) {
	n := len(p.Updates)
	if n == 0 {
		return nil, nil
	}
	ids := make([]int64, n)
	statuses := make([]string, n)
	attempts := make([]int32, n)
	nextAts := make([]*time.Time, n)
	delays := make([]int64, n)
	lastErrors := make([]*string, n)
	for i, u := range p.Updates {
		ids[i], statuses[i], attempts[i] = u.ID, u.Status, int32(u.Attempts)
		nextAts[i], delays[i], lastErrors[i] = u.NextAttemptAt, micros(u.Delay), u.LastError
	}
	return queryPlanned(ctx, e.db, pgx.RowToStructByPos[driver.UpdatedDelivery], "DeliveryUpdateMany", q.Get("DeliveryUpdateMany"), named{
		"now": p.Now, "lease_id": p.LeaseID, "ids": ids, "statuses": statuses, "attempts": attempts,
		"next_ats": nextAts, "delays_us": delays, "last_errors": lastErrors,
	})
}

func (e *executor) DeviceAttemptUpsertMany(ctx context.Context, p *driver.DeviceAttemptUpsertManyParams) error {
	n := len(p.Rows)
	if n == 0 {
		return nil
	}
	deliveryIDs := make([]int64, n)
	deviceIDs := make([]int64, n)
	transports := make([]string, n)
	tokenKeys := make([]string, n)
	states := make([]string, n)
	submissions := make([]int32, n)
	ambiguous := make([]int32, n)
	providerIDs := make([]string, n)
	errs := make([]string, n)
	for i, r := range p.Rows {
		deliveryIDs[i], deviceIDs[i], transports[i], tokenKeys[i] = r.DeliveryID, r.DeviceID, r.Transport, r.TokenKey
		states[i], submissions[i], ambiguous[i] = r.State, int32(r.SubmissionsDelta), int32(r.AmbiguousDelta)
		providerIDs[i], errs[i] = r.ProviderID, r.Error
	}
	_, err := e.db.Exec(ctx, q.Get("DeviceAttemptUpsertMany"), named{
		"now": p.Now, "delivery_ids": deliveryIDs, "device_ids": deviceIDs, "transports": transports,
		"token_keys": tokenKeys, "states": states, "submissions": submissions, "ambiguous": ambiguous,
		"provider_ids": providerIDs, "errors": errs,
	})
	return err
}

func (e *executor) DeviceAttemptMarkSending(ctx context.Context, p *driver.DeviceAttemptMarkSendingParams) ([]driver.MarkedPair, error) {
	n := len(p.Pairs)
	if n == 0 {
		return nil, nil
	}
	deliveryIDs := make([]int64, n)
	deviceIDs := make([]int64, n)
	transports := make([]string, n)
	tokenKeys := make([]string, n)
	campaigns := make([]int64, n)
	for i, k := range p.Pairs {
		deliveryIDs[i], deviceIDs[i], transports[i], tokenKeys[i] = k.DeliveryID, k.DeviceID, k.Transport, k.TokenKey
		campaigns[i] = k.CampaignMessageID
	}
	return queryPlanned(ctx, e.db, pgx.RowToStructByPos[driver.MarkedPair], "DeviceAttemptMarkSending", q.Get("DeviceAttemptMarkSending"), named{
		"now": p.Now, "lease_id": p.LeaseID, "min_left_us": micros(p.MinLeaseLeft),
		"delivery_ids": deliveryIDs, "device_ids": deviceIDs, "transports": transports, "token_keys": tokenKeys,
		"campaign_messages": campaigns,
	})
}

func (e *executor) CampaignTokenFree(ctx context.Context, keys []driver.CampaignTokenKey) error {
	if len(keys) == 0 {
		return nil
	}
	msgs := make([]int64, len(keys))
	transports := make([]string, len(keys))
	tokenKeys := make([]string, len(keys))
	deliveries := make([]int64, len(keys))
	for i, k := range keys {
		msgs[i], transports[i], tokenKeys[i], deliveries[i] = k.MessageID, k.Transport, k.TokenKey, k.DeliveryID
	}
	_, err := e.db.Exec(ctx, q.Get("CampaignTokenFree"), named{
		"message_ids": msgs, "transports": transports, "token_keys": tokenKeys, "delivery_ids": deliveries,
	})
	return err
}

func (e *executor) DeviceDeleteMany(ctx context.Context, keys []driver.DeviceKey) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	ids := make([]int64, len(keys))
	recipients := make([]string, len(keys))
	tokens := make([]string, len(keys))
	for i, k := range keys {
		ids[i], recipients[i], tokens[i] = k.ID, k.Recipient, k.Token
	}
	tag, err := e.db.Exec(ctx, q.Get("DeviceDeleteMany"), named{"ids": ids, "recipients": recipients, "tokens": tokens})
	return int(tag.RowsAffected()), err
}

func (e *executor) DeliveryLeaseGetMany(ctx context.Context, ids []int64) (map[int64]int64, error) {
	return queryMap[int64, int64](ctx, e.db, q.Get("DeliveryLeaseGetMany"), named{"ids": ids})
}

func (e *executor) DeviceRegister(ctx context.Context, p *driver.DeviceRegisterParams) (*driver.Device, error) {
	var dev *driver.Device
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		if p.Session != "" {
			// Shared with other registrations, exclusive with a revocation:
			// a revocation waits for this transaction, so it sees this row.
			if _, err := tx.Exec(ctx, q.Get("SessionLockShared"), named{"session": p.Session}); err != nil {
				return err
			}
			var revoked bool
			if err := tx.QueryRow(ctx, q.Get("SessionIsRevoked"), named{"session": p.Session}).Scan(&revoked); err != nil {
				return err
			}
			if revoked {
				return driver.ErrSessionRevoked
			}
		}
		key := named{"transport": p.Transport, "token_key": p.TokenKey, "recipient": p.Recipient}
		// A conflict with another owner updates nothing; that registration is
		// deleted and the insert tried again, so a moved token gets a new identity.
		// Two rounds suffice unless another owner re-registers in between.
		for range 5 {
			if !p.KeepOtherOwner {
				if _, err := tx.Exec(ctx, q.Get("DeviceDeleteOtherOwner"), key); err != nil {
					return err
				}
			}
			devs, err := query(ctx, tx, scanDevice, q.Get("DeviceUpsert"), named{
				"now": p.Now, "recipient": p.Recipient, "transport": p.Transport, "token": p.Token,
				"token_key": p.TokenKey, "platform": p.Platform, "session": p.Session,
				"locale": p.Locale, "time_zone": p.TimeZone, "tags": driver.TagsJSON(p.Tags),
			})
			if err != nil {
				return err
			}
			if len(devs) == 1 {
				dev = devs[0]
				break
			}
			// The upsert's conflict waited for any registration of the token
			// still in flight, so the owner it saw has committed.
			if p.KeepOtherOwner {
				return driver.ErrTokenRegistered
			}
		}
		if dev == nil {
			return errRegisterContended
		}
		_, err := tx.Exec(ctx, q.Get("DeviceTrim"), named{"recipient": p.Recipient, "max": p.MaxPerRecipient})
		return err
	})
	return dev, err
}

var errRegisterContended = contendedError{}

type contendedError struct{}

func (contendedError) Error() string {
	return "postgres: device registration kept conflicting with another recipient registering the same token"
}

func (e *executor) DeviceUnregister(ctx context.Context, p *driver.DeviceUnregisterParams) (int, error) {
	tag, err := e.db.Exec(ctx, q.Get("DeviceUnregister"), named{
		"transport": p.Transport, "token_key": p.TokenKey, "recipient": p.Recipient,
	})
	return int(tag.RowsAffected()), err
}

func (e *executor) DeviceListByRecipient(ctx context.Context, recipient string) ([]*driver.Device, error) {
	return query(ctx, e.db, scanDevice, q.Get("DeviceListByRecipient"), named{"recipient": recipient})
}

func (e *executor) DeviceGetByToken(ctx context.Context, transport, tokenKey string) (*driver.Device, error) {
	return queryOne(ctx, e.db, scanDevice, q.Get("DeviceGetByToken"), named{"transport": transport, "token_key": tokenKey})
}

func (e *executor) SessionRevoke(ctx context.Context, session string, now *time.Time) (int, error) {
	var deleted int
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		// Waits for registrations of the session still in flight, so the
		// delete below sees their rows (READ COMMITTED: a statement after the
		// lock sees what committed before it).
		if _, err := tx.Exec(ctx, q.Get("SessionLock"), named{"session": session}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("SessionRevoke"), named{"session": session, "now": now}); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, q.Get("DeviceDeleteBySession"), named{"session": session})
		deleted = int(tag.RowsAffected())
		return err
	})
	return deleted, err
}

func (e *executor) RecipientDelete(ctx context.Context, recipient string) (*driver.RecipientDeleteResult, error) {
	res := &driver.RecipientDeleteResult{}
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		args := named{"recipient": recipient}
		tag, err := tx.Exec(ctx, q.Get("DeviceDeleteByRecipient"), args)
		if err != nil {
			return err
		}
		res.Devices = int(tag.RowsAffected())
		if _, err := tx.Exec(ctx, q.Get("CampaignRecipientDeleteByRecipient"), args); err != nil {
			return err
		}
		return scanDeleted(tx.QueryRow(ctx, q.Get("DeliveryDeleteByRecipient"), args), &res.Deliveries)
	})
	return res, err
}

// deliveries reads a list of deliveries with their device attempts.
func (e *executor) deliveries(ctx context.Context, text string, args named) ([]*driver.Delivery, error) {
	ds, err := query(ctx, e.db, scanDelivery, text, args)
	if err != nil {
		return nil, err
	}
	return driver.AttachAttempts(ctx, e, ds)
}

func scanDelivery(r pgx.CollectableRow) (*driver.Delivery, error) {
	d := &driver.Delivery{}
	err := r.Scan(&d.ID, &d.MessageID, &d.Recipient, &d.NotificationID, &d.DedupKey, &d.Status, &d.Attempts,
		&d.NextAttemptAt, &d.LeaseID, &d.LastError, &d.CreatedAt, &d.FinishedAt)
	return d, err
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

func (e *executor) LockAcquire(ctx context.Context, p *driver.LockParams) (bool, error) {
	owners, err := query(ctx, e.db, pgx.RowTo[string], q.Get("LockAcquire"), named{
		"now": p.Now, "name": p.Name, "owner": p.Owner, "ttl_us": micros(p.TTL),
	})
	return len(owners) == 1, err
}

func (e *executor) LockRelease(ctx context.Context, p *driver.LockParams) error {
	_, err := e.db.Exec(ctx, q.Get("LockRelease"), named{"name": p.Name, "owner": p.Owner})
	return err
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

// --- reading the ledger (messages)

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

// --- recorded requests

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

// jsonArg is a JSON document for a jsonb parameter: NULL, not the JSON
// literal null, when there is none.
func jsonArg(doc []byte) any {
	if doc == nil {
		return nil
	}
	return string(doc)
}

// --- campaigns

func scanCampaign(r pgx.CollectableRow) (*driver.Campaign, error) {
	c := &driver.Campaign{}
	err := r.Scan(&c.ID, &c.Name, &c.Status, &c.Content, &c.Audience, &c.Filter, &c.StartAt, &c.RatePerMinute,
		&c.MessageID, &c.Cursor, &c.Written, &c.Recipients, &c.InvalidTokens, &c.DuplicateTokens, &c.Tries,
		&c.LastError, &c.CreatedAt, &c.UpdatedAt, &c.StartedAt, &c.FinishedAt)
	return c, err
}

func (e *executor) CampaignInsert(ctx context.Context, c *driver.Campaign) (*driver.Campaign, error) {
	out := *c
	err := e.db.QueryRow(ctx, q.Get("CampaignInsert"), named{
		"now": nowOrNil(c.CreatedAt), "name": c.Name, "status": c.Status, "content": jsonArg(c.Content), "audience": c.Audience,
		"filter": jsonArg(c.Filter), "start_at": c.StartAt, "rate_per_minute": c.RatePerMinute,
	}).Scan(&out.ID, &out.CreatedAt)
	out.UpdatedAt = out.CreatedAt
	return &out, err
}

func (e *executor) CampaignGet(ctx context.Context, id int64) (*driver.Campaign, error) {
	return queryOne(ctx, e.db, scanCampaign, q.Get("CampaignGet"), named{"id": id})
}

func (e *executor) CampaignLock(ctx context.Context, id int64) (*driver.Campaign, error) {
	return queryOne(ctx, e.db, scanCampaign, q.Get("CampaignLock"), named{"id": id})
}

func (e *executor) CampaignSave(ctx context.Context, c *driver.Campaign, now *time.Time) error {
	_, err := e.db.Exec(ctx, q.Get("CampaignSave"), named{
		"id": c.ID, "now": now, "name": c.Name, "status": c.Status, "content": jsonArg(c.Content),
		"audience": c.Audience, "filter": jsonArg(c.Filter), "start_at": c.StartAt,
		"rate_per_minute": c.RatePerMinute, "message_id": c.MessageID, "cursor": c.Cursor, "written": c.Written,
		"recipients": c.Recipients, "invalid_tokens": c.InvalidTokens, "duplicate_tokens": c.DuplicateTokens,
		"tries": c.Tries, "last_error": c.LastError, "started_at": c.StartedAt, "finished_at": c.FinishedAt,
	})
	return err
}

func (e *executor) CampaignList(ctx context.Context, p *driver.CampaignListParams) ([]*driver.Campaign, error) {
	return query(ctx, e.db, scanCampaign, q.Get("CampaignList"), named{
		"before_id": p.BeforeID, "status": p.Status, "max": p.Limit,
	})
}

func (e *executor) CampaignTry(ctx context.Context, p *driver.CampaignTryParams) (*driver.CampaignTryResult, error) {
	res := &driver.CampaignTryResult{Found: true}
	err := e.db.QueryRow(ctx, q.Get("CampaignTry"), named{
		"now": p.Now, "max_tries": p.MaxTries, "lease_us": micros(p.Lease), "abandoned": p.Abandoned,
	}).
		Scan(&res.ID, &res.Tries, &res.Interrupted)
	if errors.Is(err, pgx.ErrNoRows) {
		return &driver.CampaignTryResult{}, nil
	}
	return res, err
}

func (e *executor) CampaignPageAdd(ctx context.Context, p *driver.CampaignPageParams) (int, bool, error) {
	var added int
	var replayed bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		var inserted bool
		var digest []byte
		args := named{"campaign_id": p.CampaignID, "page": p.Page, "digest": p.Digest, "recipients": p.Recipients}
		if err := tx.QueryRow(ctx, q.Get("CampaignPageInsert"), args).Scan(&inserted, &digest); err != nil {
			return err
		}
		if !inserted {
			if !bytes.Equal(digest, p.Digest) {
				return driver.ErrPageConflict
			}
			replayed = true
			return nil
		}
		return tx.QueryRow(ctx, q.Get("CampaignRecipientInsert"), args).Scan(&added)
	})
	return added, replayed, err
}

func (e *executor) CampaignRecipientsAfter(ctx context.Context, campaignID int64, after string, limit int) ([]string, error) {
	return query(ctx, e.db, pgx.RowTo[string], q.Get("CampaignRecipientsAfter"), named{
		"campaign_id": campaignID, "after": after, "max": limit,
	})
}

func (e *executor) DeviceListAfter(ctx context.Context, after string, limit int) ([]*driver.Device, error) {
	return query(ctx, e.db, scanDevice, q.Get("DeviceListAfter"), named{"after": after, "max": limit})
}

func (e *executor) CampaignDeliveryInsert(ctx context.Context, p *driver.CampaignDeliveryInsertParams) (int, error) {
	var n int
	err := e.db.QueryRow(ctx, q.Get("CampaignDeliveryInsert"), named{
		"now": p.Now, "message_id": p.MessageID, "recipients": p.Recipients,
		"notification_ids": p.NotificationIDs, "due_at": p.DueAt,
	}).Scan(&n)
	return n, err
}

func (e *executor) DeviceAttemptCountByState(ctx context.Context, messageID int64) (map[string]int, error) {
	return queryMap[string, int](ctx, e.db, q.Get("DeviceAttemptCountByState"), named{"message_id": messageID})
}

func (e *executor) CampaignTally(ctx context.Context, messageID int64) (map[string]int, error) {
	return queryMap[string, int](ctx, e.db, q.Get("CampaignTally"), named{"message_id": messageID})
}

func (e *executor) CampaignTallyCompact(ctx context.Context, minRows int) (int, error) {
	var n int
	err := e.db.QueryRow(ctx, q.Get("CampaignTallyCompact"), named{"min_rows": minRows}).Scan(&n)
	return n, err
}

func (e *executor) SendWindowTake(ctx context.Context, p *driver.SendWindowParams) (map[string]int, error) {
	return queryMap[string, int](ctx, e.db, q.Get("SendWindowTake"), named{
		"transports": p.Transports, "starts": p.Starts, "asked": p.Asked, "allowance": p.Allowance,
	})
}

func (e *executor) SendWindowDeleteBefore(ctx context.Context, t time.Time) (int, error) {
	tag, err := e.db.Exec(ctx, q.Get("SendWindowDeleteBefore"), named{"before": t})
	return int(tag.RowsAffected()), err
}

// nowOrNil is t as a statement's @now, or nil (the database's now()) when
// it is zero.
func nowOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
