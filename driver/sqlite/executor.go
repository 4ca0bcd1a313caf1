package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/wallclock"
)

// executor runs the named queries on the handle (each call on its own) or in a
// transaction.
type executor struct {
	db   *sql.DB    // set by Exec
	tx   *sql.Tx    // set inside a transaction
	gate *writeGate // with db: writes wait their turn here
	busy time.Duration
}

var _ driver.Executor = (*executor)(nil)

func (e *executor) conn() dbtx {
	if e.tx != nil {
		return e.tx
	}
	return e.db
}

// atomic runs fn's statements all or nothing: in a savepoint of the executor's
// transaction (so a failure undoes only fn's statements, as a nested pgx
// transaction does), or in a new BEGIN IMMEDIATE transaction of the handle's.
// IMMEDIATE matters: a transaction that reads first and writes later could fail
// with SQLITE_BUSY whatever the busy timeout, if another connection wrote between.
func (e *executor) atomic(ctx context.Context, fn func(db dbtx) error) error {
	if e.tx != nil {
		return savepoint(ctx, e.tx, "oncepush_step", func() error { return fn(e.tx) })
	}
	return e.inNewTx(ctx, func(tx *sql.Tx) error { return fn(tx) })
}

// write runs a writing statement: on the executor's transaction, or alone in
// a BEGIN IMMEDIATE transaction of its own after waiting for this process's
// write turn (see writeGate). Unlike atomic it adds no savepoint inside a
// transaction: the engine's hot path runs its writes through it.
func (e *executor) write(ctx context.Context, fn func(db dbtx) error) error {
	if e.tx != nil {
		return fn(e.tx)
	}
	return e.inNewTx(ctx, func(tx *sql.Tx) error { return fn(tx) })
}

// inNewTx runs fn in a new BEGIN IMMEDIATE transaction of the handle's (the
// DSN's _txlock), begun once this process's write turn has come (see
// writeGate), and commits it if fn returns nil.
func (e *executor) inNewTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := e.gate.enter(ctx, e.busy); err != nil {
		return err
	}
	defer e.gate.leave()
	tx, err := e.db.BeginTx(ctx, nil)
	if isBusy(err) {
		return busyError(fmt.Sprintf("waited %s to begin a write", e.busy), err)
	}
	if err != nil {
		return err
	}
	e.gate.begun()
	defer tx.Rollback() // after Commit, a no-op
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// written is write for a statement with a result.
func written[T any](ctx context.Context, e *executor, fn func(db dbtx) (T, error)) (T, error) {
	var out T
	err := e.write(ctx, func(db dbtx) error {
		var err error
		out, err = fn(db)
		return err
	})
	return out, err
}

// exec runs one writing statement through write.
func (e *executor) exec(ctx context.Context, text string, args ...any) error {
	return e.write(ctx, func(db dbtx) error {
		_, err := db.ExecContext(ctx, text, args...)
		return err
	})
}

// execCount is exec returning how many rows the statement wrote.
func (e *executor) execCount(ctx context.Context, text string, args ...any) (int, error) {
	return written(ctx, e, func(db dbtx) (int, error) {
		return rowsAffected(db.ExecContext(ctx, text, args...))
	})
}

// execList is execCount for a statement whose one parameter, name, is the
// list v. An empty list writes nothing: no statement runs.
func execList[T any](ctx context.Context, e *executor, text, name string, v []T) (int, error) {
	if len(v) == 0 {
		return 0, nil
	}
	list, err := jsonList(v)
	if err != nil {
		return 0, err
	}
	return e.execCount(ctx, text, sql.Named(name, list))
}

func savepoint(ctx context.Context, tx *sql.Tx, name string, fn func() error) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return err
	}
	if err := fn(); err != nil {
		// ROLLBACK TO keeps the savepoint on the stack; RELEASE pops it.
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name); rerr != nil {
			return errors.Join(err, rerr)
		}
		if _, rerr := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name)
	return err
}

// --- values at the boundary: times are INTEGER microseconds (UTC), lists JSON.

// nowMicros is the statement's "now": the injected clock's, or the host's
// wall clock (package wallclock, which a test build can step).
func nowMicros(now *time.Time) int64 {
	if now != nil {
		return now.UnixMicro()
	}
	return wallclock.Now().UnixMicro()
}

// optMicros is a nullable time parameter.
func optMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// durMicros converts a duration for the @…_us parameters.
func durMicros(d time.Duration) int64 { return d.Microseconds() }

// timeCol scans an INTEGER microseconds column into a time.Time.
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(src any) error {
	us, ok := src.(int64)
	if !ok {
		return fmt.Errorf("sqlite: time column holds %T, want INTEGER microseconds", src)
	}
	*c.t = fromMicros(us)
	return nil
}

// nullTimeCol scans a nullable INTEGER microseconds column.
type nullTimeCol struct{ t **time.Time }

func (c nullTimeCol) Scan(src any) error {
	if src == nil {
		*c.t = nil
		return nil
	}
	var t time.Time
	if err := (timeCol{&t}).Scan(src); err != nil {
		return err
	}
	*c.t = &t
	return nil
}

// jsonArg is a JSON document parameter: text, since json() reads a BLOB as
// SQLite's binary JSONB, and NULL, not the JSON literal null, when there is
// none.
func jsonArg(doc []byte) any {
	if doc == nil {
		return nil
	}
	return string(doc)
}

// tagsCol scans a device's tags, a JSON array text, into a []string.
type tagsCol struct{ tags *[]string }

func (c tagsCol) Scan(src any) error {
	var text []byte
	switch v := src.(type) {
	case string:
		text = []byte(v)
	case []byte:
		text = v
	default:
		return fmt.Errorf("sqlite: tags column holds %T, want a JSON array", src)
	}
	*c.tags = nil
	return json.Unmarshal(text, c.tags)
}

// jsonList encodes a list parameter for json_each: always an array, since
// json_each of the JSON null yields a row.
func jsonList[T any](v []T) (string, error) {
	if v == nil {
		v = []T{}
	}
	b, err := json.Marshal(v)
	return string(b), err
}

type scanner interface{ Scan(dest ...any) error }

// queryMap runs a query of two columns and returns them as key → value.
func queryMap[K comparable, V any](ctx context.Context, db dbtx, text string, args ...any) (map[K]V, error) {
	type kv struct {
		k K
		v V
	}
	rows, err := query(ctx, db, func(r scanner) (kv, error) {
		var x kv
		err := r.Scan(&x.k, &x.v)
		return x, err
	}, text, args...)
	if err != nil {
		return nil, err
	}
	out := make(map[K]V, len(rows))
	for _, x := range rows {
		out[x.k] = x.v
	}
	return out, nil
}

// query runs a query and scans every row.
func query[T any](ctx context.Context, db dbtx, scan func(scanner) (T, error), text string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, text, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// queryList is query for a statement whose one parameter, name, is the
// list v.
func queryList[T, V any](ctx context.Context, db dbtx, scan func(scanner) (T, error), text, name string, v []V) ([]T, error) {
	list, err := jsonList(v)
	if err != nil {
		return nil, err
	}
	return query(ctx, db, scan, text, sql.Named(name, list))
}

// scanValue scans a row of one column.
func scanValue[T any](r scanner) (T, error) {
	var v T
	err := r.Scan(&v)
	return v, err
}

func rowsAffected(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// --- sending

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

// --- claim

func (e *executor) WithSavepoint(ctx context.Context, fn func() error) error {
	if e.tx == nil {
		return fn() // each statement commits on its own: there is nothing to abort
	}
	return savepoint(ctx, e.tx, "oncepush_eligibility", fn)
}

func (e *executor) DeliveryClaim(ctx context.Context, p *driver.DeliveryClaimParams) (*driver.DeliveryClaimResult, error) {
	now := nowMicros(p.Now)
	res := &driver.DeliveryClaimResult{Now: fromMicros(now)}
	// Two statements in one write transaction: see DeliveryClaimDue in queries.sql.
	err := e.atomic(ctx, func(db dbtx) error {
		type due struct{ id, prevLease int64 }
		dues, err := query(ctx, db, func(r scanner) (due, error) {
			var d due
			err := r.Scan(&d.id, &d.prevLease)
			return d, err
		}, q.Get("DeliveryClaimDue"), sql.Named("now", now), sql.Named("max", p.Max), sql.Named("no_campaign", p.NoCampaign))
		if err != nil || len(dues) == 0 {
			return err
		}
		ids := make([]int64, len(dues))
		for i, d := range dues {
			ids[i] = d.id
		}
		idList, err := jsonList(ids)
		if err != nil {
			return err
		}
		claimed, err := query(ctx, db, func(r scanner) (*driver.ClaimedDelivery, error) {
			c := &driver.ClaimedDelivery{}
			err := r.Scan(&c.ID, &c.MessageID, &c.Recipient, &c.NotificationID, &c.Attempts, &c.Campaign)
			return c, err
		}, q.Get("DeliveryClaim"), sql.Named("now", now), sql.Named("lease_id", p.LeaseID),
			sql.Named("lease_us", durMicros(p.Lease)), sql.Named("ids", idList))
		if err != nil {
			return err
		}
		byID := make(map[int64]*driver.ClaimedDelivery, len(claimed))
		for _, c := range claimed {
			byID[c.ID] = c
		}
		for _, d := range dues { // in due order; RETURNING's order is unspecified
			c, ok := byID[d.id]
			if !ok {
				return fmt.Errorf("sqlite: claim: delivery %d was due but not leased", d.id)
			}
			c.PrevLeaseID = d.prevLease
			res.Rows = append(res.Rows, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (e *executor) MessageGetMany(ctx context.Context, ids []int64) ([]*driver.Message, error) {
	return queryList(ctx, e.conn(), scanMessage, q.Get("MessageGetMany"), "ids", ids)
}

func scanMessage(r scanner) (*driver.Message, error) {
	m := &driver.Message{}
	err := r.Scan(&m.ID, &m.Type, &m.Title, &m.Body, &m.Data, &m.Link, &m.Image, &m.Category,
		&m.Ambiguity, timeCol{&m.ScheduledAt}, timeCol{&m.ExpiresAt}, timeCol{&m.CreatedAt}, &m.Audience)
	return m, err
}

func scanDevice(r scanner) (*driver.Device, error) {
	d := &driver.Device{}
	err := r.Scan(&d.ID, &d.Recipient, &d.Transport, &d.Token, &d.TokenKey, &d.Platform, &d.Session,
		&d.Locale, &d.TimeZone, tagsCol{&d.Tags}, timeCol{&d.CreatedAt}, timeCol{&d.RegisteredAt})
	return d, err
}

func (e *executor) DeviceListByRecipients(ctx context.Context, recipients []string) ([]*driver.Device, error) {
	return queryList(ctx, e.conn(), scanDevice, q.Get("DeviceListByRecipients"), "recipients", recipients)
}

// ClaimRead runs the three reads one after the other: on a local file a
// statement costs no round trip.
func (e *executor) ClaimRead(ctx context.Context, p *driver.ClaimReadParams) (*driver.ClaimReadResult, error) {
	r := &driver.ClaimReadResult{}
	var err error
	if r.Messages, err = e.MessageGetMany(ctx, p.MessageIDs); err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	if r.Devices, err = e.DeviceListByRecipients(ctx, p.Recipients); err != nil {
		return nil, fmt.Errorf("devices: %w", err)
	}
	if r.Attempts, err = e.DeviceAttemptListByDeliveries(ctx, p.DeliveryIDs); err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	return r, nil
}

func (e *executor) DeviceAttemptListByDeliveries(ctx context.Context, ids []int64) ([]*driver.DeviceAttempt, error) {
	return queryList(ctx, e.conn(), func(r scanner) (*driver.DeviceAttempt, error) {
		a := &driver.DeviceAttempt{}
		err := r.Scan(&a.DeliveryID, &a.DeviceID, &a.Transport, &a.TokenKey, &a.State, &a.Submissions, &a.Ambiguous,
			&a.ProviderID, &a.Error, nullTimeCol{&a.FirstSentAt}, nullTimeCol{&a.LastSentAt}, timeCol{&a.UpdatedAt})
		return a, err
	}, q.Get("DeviceAttemptListByDeliveries"), "delivery_ids", ids)
}

// --- record

// deliveryUpdate is one element of DeliveryUpdateMany's @updates.
type deliveryUpdate struct {
	ID        int64   `json:"id"`
	Status    string  `json:"status"`
	Attempts  int     `json:"attempts"`
	NextAt    *int64  `json:"next_at"`
	DelayUS   int64   `json:"delay_us"`
	LastError *string `json:"last_error"`
}

func (e *executor) DeliveryUpdateMany(ctx context.Context, p *driver.DeliveryUpdateManyParams) ([]driver.UpdatedDelivery, error) {
	if len(p.Updates) == 0 {
		return nil, nil
	}
	us := make([]deliveryUpdate, len(p.Updates))
	for i, u := range p.Updates {
		us[i] = deliveryUpdate{ID: u.ID, Status: u.Status, Attempts: u.Attempts, DelayUS: durMicros(u.Delay), LastError: u.LastError}
		if u.NextAttemptAt != nil {
			at := u.NextAttemptAt.UnixMicro()
			us[i].NextAt = &at
		}
	}
	list, err := jsonList(us)
	if err != nil {
		return nil, err
	}
	return written(ctx, e, func(db dbtx) ([]driver.UpdatedDelivery, error) {
		return query(ctx, db, func(r scanner) (driver.UpdatedDelivery, error) {
			var u driver.UpdatedDelivery
			err := r.Scan(&u.ID, &u.Status)
			return u, err
		}, q.Get("DeliveryUpdateMany"),
			sql.Named("now", nowMicros(p.Now)), sql.Named("lease_id", p.LeaseID), sql.Named("updates", list))
	})
}

// attemptUpsert is one element of DeviceAttemptUpsertMany's @rows.
type attemptUpsert struct {
	DeliveryID  int64  `json:"delivery_id"`
	DeviceID    int64  `json:"device_id"`
	Transport   string `json:"transport"`
	TokenKey    string `json:"token_key"`
	State       string `json:"state"`
	Submissions int    `json:"submissions"`
	Ambiguous   int    `json:"ambiguous"`
	ProviderID  string `json:"provider_id"`
	Error       string `json:"error"`
}

func (e *executor) DeviceAttemptUpsertMany(ctx context.Context, p *driver.DeviceAttemptUpsertManyParams) error {
	if len(p.Rows) == 0 {
		return nil
	}
	rows := make([]attemptUpsert, len(p.Rows))
	for i, r := range p.Rows {
		rows[i] = attemptUpsert{
			DeliveryID: r.DeliveryID, DeviceID: r.DeviceID, Transport: r.Transport, TokenKey: r.TokenKey, State: r.State,
			Submissions: r.SubmissionsDelta, Ambiguous: r.AmbiguousDelta, ProviderID: r.ProviderID, Error: r.Error,
		}
	}
	list, err := jsonList(rows)
	if err != nil {
		return err
	}
	return e.exec(ctx, q.Get("DeviceAttemptUpsertMany"), sql.Named("now", nowMicros(p.Now)), sql.Named("rows", list))
}

// attemptKey is one element of DeviceAttemptMarkSending's @pairs (and,
// without a device, of DeviceAttemptStateMany's).
type attemptKey struct {
	DeliveryID int64  `json:"delivery_id"`
	DeviceID   int64  `json:"device_id,omitempty"`
	Transport  string `json:"transport"`
	TokenKey   string `json:"token_key"`
}

// campaignToken is a token of a campaign and the delivery holding it: an
// element of CampaignTokenTake's @tokens and CampaignTokenFree's @keys.
type campaignToken struct {
	MessageID  int64  `json:"message_id"`
	Transport  string `json:"transport"`
	TokenKey   string `json:"token_key"`
	DeliveryID int64  `json:"delivery_id"`
}

// duplicatePair is an element of DeviceAttemptDuplicateMany's @pairs.
type duplicatePair struct {
	attemptKey
	Holder int64 `json:"holder"`
}

// DeviceAttemptMarkSending implements driver.Executor in steps, under the
// write lock PostgreSQL's one statement does without: the leased
// deliveries, their campaign pairs' tokens, the holders' states where
// another delivery holds one, then the marks and the duplicates.
func (e *executor) DeviceAttemptMarkSending(ctx context.Context, p *driver.DeviceAttemptMarkSendingParams) ([]driver.MarkedPair, error) {
	if len(p.Pairs) == 0 {
		return nil, nil
	}
	now := nowMicros(p.Now)
	if !slices.ContainsFunc(p.Pairs, func(k driver.DeviceAttemptKey) bool { return k.CampaignMessageID > 0 }) {
		return e.markSending(ctx, p)
	}
	return written(ctx, e, func(db dbtx) ([]driver.MarkedPair, error) {
		var ids []int64
		for _, k := range p.Pairs {
			ids = append(ids, k.DeliveryID)
		}
		idList, err := jsonList(ids)
		if err != nil {
			return nil, err
		}
		owned, err := query(ctx, db, scanValue[int64], q.Get("DeviceAttemptMarkOwn"), sql.Named("ids", idList),
			sql.Named("now", now), sql.Named("lease_id", p.LeaseID), sql.Named("min_left_us", durMicros(p.MinLeaseLeft)))
		if err != nil {
			return nil, err
		}
		own := make(map[int64]bool, len(owned))
		for _, id := range owned {
			own[id] = true
		}
		var tokens []campaignToken
		seen := map[campaignToken]bool{}
		for _, k := range p.Pairs {
			t := campaignToken{MessageID: k.CampaignMessageID, Transport: k.Transport, TokenKey: k.TokenKey}
			if own[k.DeliveryID] && k.CampaignMessageID > 0 && !seen[t] {
				seen[t] = true
				t.DeliveryID = k.DeliveryID
				tokens = append(tokens, t)
			}
		}
		holders := map[campaignToken]int64{}
		if len(tokens) > 0 {
			list, err := jsonList(tokens)
			if err != nil {
				return nil, err
			}
			held, err := query(ctx, db, func(r scanner) (campaignToken, error) {
				var t campaignToken
				return t, r.Scan(&t.MessageID, &t.Transport, &t.TokenKey, &t.DeliveryID)
			}, q.Get("CampaignTokenTake"), sql.Named("tokens", list))
			if err != nil {
				return nil, err
			}
			for _, t := range held {
				holders[campaignToken{MessageID: t.MessageID, Transport: t.Transport, TokenKey: t.TokenKey}] = t.DeliveryID
			}
		}
		// Pairs whose token another delivery holds: that holder's attempt.
		var others []attemptKey
		for _, k := range p.Pairs {
			h := holders[campaignToken{MessageID: k.CampaignMessageID, Transport: k.Transport, TokenKey: k.TokenKey}]
			if own[k.DeliveryID] && k.CampaignMessageID > 0 && h != k.DeliveryID {
				others = append(others, attemptKey{DeliveryID: h, Transport: k.Transport, TokenKey: k.TokenKey})
			}
		}
		states := map[attemptKey]string{}
		if len(others) > 0 {
			list, err := jsonList(others)
			if err != nil {
				return nil, err
			}
			rows, err := query(ctx, db, func(r scanner) (driver.MarkedPair, error) {
				var m driver.MarkedPair
				return m, r.Scan(&m.DeliveryID, &m.Transport, &m.TokenKey, &m.State)
			}, q.Get("DeviceAttemptStateMany"), sql.Named("pairs", list))
			if err != nil {
				return nil, err
			}
			for _, m := range rows {
				states[attemptKey{DeliveryID: m.DeliveryID, Transport: m.Transport, TokenKey: m.TokenKey}] = m.State
			}
		}
		var out []driver.MarkedPair
		var marks []attemptKey
		var dups []duplicatePair
		for _, k := range p.Pairs {
			if !own[k.DeliveryID] {
				continue
			}
			key := attemptKey{DeliveryID: k.DeliveryID, DeviceID: k.DeviceID, Transport: k.Transport, TokenKey: k.TokenKey}
			state := driver.AttemptSending
			if k.CampaignMessageID > 0 {
				h := holders[campaignToken{MessageID: k.CampaignMessageID, Transport: k.Transport, TokenKey: k.TokenKey}]
				if h != k.DeliveryID {
					switch states[attemptKey{DeliveryID: h, Transport: k.Transport, TokenKey: k.TokenKey}] {
					case driver.AttemptAccepted, driver.AttemptInvalid, driver.AttemptRejected, driver.AttemptAmbiguous:
						state = driver.AttemptDuplicate
						dups = append(dups, duplicatePair{attemptKey: key, Holder: h})
					default:
						state = driver.MarkHeld
					}
				}
			}
			if state == driver.AttemptSending {
				marks = append(marks, key)
			}
			out = append(out, driver.MarkedPair{DeliveryID: k.DeliveryID, Transport: k.Transport, TokenKey: k.TokenKey, State: state})
		}
		if len(marks) > 0 {
			list, err := jsonList(marks)
			if err != nil {
				return nil, err
			}
			if _, err := db.ExecContext(ctx, q.Get("DeviceAttemptMarkSending"), sql.Named("now", now),
				sql.Named("lease_id", p.LeaseID), sql.Named("min_left_us", durMicros(p.MinLeaseLeft)), sql.Named("pairs", list)); err != nil {
				return nil, err
			}
		}
		if len(dups) > 0 {
			list, err := jsonList(dups)
			if err != nil {
				return nil, err
			}
			if _, err := db.ExecContext(ctx, q.Get("DeviceAttemptDuplicateMany"), sql.Named("now", now), sql.Named("pairs", list)); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

// markSending marks pairs none of which is a campaign's, in the one
// statement the mark was before campaign tokens: it marks every pair of
// each leased delivery, and answers their delivery ids.
func (e *executor) markSending(ctx context.Context, p *driver.DeviceAttemptMarkSendingParams) ([]driver.MarkedPair, error) {
	ks := make([]attemptKey, len(p.Pairs))
	for i, k := range p.Pairs {
		ks[i] = attemptKey{DeliveryID: k.DeliveryID, DeviceID: k.DeviceID, Transport: k.Transport, TokenKey: k.TokenKey}
	}
	list, err := jsonList(ks)
	if err != nil {
		return nil, err
	}
	ids, err := written(ctx, e, func(db dbtx) ([]int64, error) {
		return query(ctx, db, scanValue[int64], q.Get("DeviceAttemptMarkSending"), sql.Named("now", nowMicros(p.Now)),
			sql.Named("lease_id", p.LeaseID), sql.Named("min_left_us", durMicros(p.MinLeaseLeft)), sql.Named("pairs", list))
	})
	if err != nil {
		return nil, err
	}
	own := make(map[int64]bool, len(ids))
	for _, id := range ids {
		own[id] = true
	}
	var out []driver.MarkedPair
	for _, k := range p.Pairs {
		if own[k.DeliveryID] {
			out = append(out, driver.MarkedPair{DeliveryID: k.DeliveryID, Transport: k.Transport, TokenKey: k.TokenKey, State: driver.AttemptSending})
		}
	}
	return out, nil
}

func (e *executor) CampaignTokenFree(ctx context.Context, keys []driver.CampaignTokenKey) error {
	if len(keys) == 0 {
		return nil
	}
	ks := make([]campaignToken, len(keys))
	for i, k := range keys {
		ks[i] = campaignToken{MessageID: k.MessageID, Transport: k.Transport, TokenKey: k.TokenKey, DeliveryID: k.DeliveryID}
	}
	_, err := execList(ctx, e, q.Get("CampaignTokenFree"), "keys", ks)
	return err
}

// deviceKey is one element of DeviceDeleteMany's @keys.
type deviceKey struct {
	ID        int64  `json:"id"`
	Recipient string `json:"recipient"`
	Token     string `json:"token"`
}

func (e *executor) DeviceDeleteMany(ctx context.Context, keys []driver.DeviceKey) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	ks := make([]deviceKey, len(keys))
	for i, k := range keys {
		ks[i] = deviceKey{ID: k.ID, Recipient: k.Recipient, Token: k.Token}
	}
	return execList(ctx, e, q.Get("DeviceDeleteMany"), "keys", ks)
}

func (e *executor) DeliveryLeaseGetMany(ctx context.Context, ids []int64) (map[int64]int64, error) {
	list, err := jsonList(ids)
	if err != nil {
		return nil, err
	}
	return queryMap[int64, int64](ctx, e.conn(), q.Get("DeliveryLeaseGetMany"), sql.Named("ids", list))
}

// --- devices

func (e *executor) DeviceRegister(ctx context.Context, p *driver.DeviceRegisterParams) (*driver.Device, error) {
	var dev *driver.Device
	err := e.atomic(ctx, func(db dbtx) error {
		if p.Session != "" {
			var revoked bool
			if err := db.QueryRowContext(ctx, q.Get("SessionIsRevoked"), sql.Named("session", p.Session)).Scan(&revoked); err != nil {
				return err
			}
			if revoked {
				return driver.ErrSessionRevoked
			}
		}
		// A token owned by another recipient moves: that registration is
		// deleted and a new one (a new id) inserted. The write lock is held
		// throughout, so unlike PostgreSQL no other owner can register the
		// token in between and one round suffices.
		if !p.KeepOtherOwner {
			if _, err := db.ExecContext(ctx, q.Get("DeviceDeleteOtherOwner"), sql.Named("transport", p.Transport),
				sql.Named("token_key", p.TokenKey), sql.Named("recipient", p.Recipient)); err != nil {
				return err
			}
		}
		devs, err := query(ctx, db, scanDevice, q.Get("DeviceUpsert"),
			sql.Named("now", nowMicros(p.Now)), sql.Named("recipient", p.Recipient), sql.Named("transport", p.Transport),
			sql.Named("token", p.Token), sql.Named("token_key", p.TokenKey), sql.Named("platform", p.Platform),
			sql.Named("session", p.Session), sql.Named("locale", p.Locale), sql.Named("time_zone", p.TimeZone),
			sql.Named("tags", driver.TagsJSON(p.Tags)))
		if err != nil {
			return err
		}
		if len(devs) == 0 && p.KeepOtherOwner {
			return driver.ErrTokenRegistered
		}
		if len(devs) != 1 {
			return fmt.Errorf("sqlite: device registration for %s wrote %d rows, want 1", p.Transport, len(devs))
		}
		dev = devs[0]
		_, err = db.ExecContext(ctx, q.Get("DeviceTrim"), sql.Named("recipient", p.Recipient), sql.Named("max", p.MaxPerRecipient))
		return err
	})
	if err != nil {
		return nil, err
	}
	return dev, nil
}

func (e *executor) DeviceUnregister(ctx context.Context, p *driver.DeviceUnregisterParams) (int, error) {
	return e.execCount(ctx, q.Get("DeviceUnregister"),
		sql.Named("transport", p.Transport), sql.Named("token_key", p.TokenKey), sql.Named("recipient", p.Recipient))
}

func (e *executor) DeviceListByRecipient(ctx context.Context, recipient string) ([]*driver.Device, error) {
	return query(ctx, e.conn(), scanDevice, q.Get("DeviceListByRecipient"), sql.Named("recipient", recipient))
}

func (e *executor) DeviceGetByToken(ctx context.Context, transport, tokenKey string) (*driver.Device, error) {
	d, err := scanDevice(e.conn().QueryRowContext(ctx, q.Get("DeviceGetByToken"),
		sql.Named("transport", transport), sql.Named("token_key", tokenKey)))
	if err != nil {
		return nil, translate(err)
	}
	return d, nil
}

func (e *executor) SessionRevoke(ctx context.Context, session string, now *time.Time) (int, error) {
	var deleted int
	err := e.atomic(ctx, func(db dbtx) error {
		if _, err := db.ExecContext(ctx, q.Get("SessionRevoke"),
			sql.Named("session", session), sql.Named("now", nowMicros(now))); err != nil {
			return err
		}
		var err error
		deleted, err = rowsAffected(db.ExecContext(ctx, q.Get("DeviceDeleteBySession"), sql.Named("session", session)))
		return err
	})
	return deleted, err
}

func (e *executor) RecipientDelete(ctx context.Context, recipient string) (*driver.RecipientDeleteResult, error) {
	res := &driver.RecipientDeleteResult{}
	err := e.atomic(ctx, func(db dbtx) error {
		arg := sql.Named("recipient", recipient)
		var err error
		if res.Devices, err = rowsAffected(db.ExecContext(ctx, q.Get("DeviceDeleteByRecipient"), arg)); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, q.Get("CampaignRecipientDeleteByRecipient"), arg); err != nil {
			return err
		}
		return collectDeleted(ctx, db, &res.Deliveries, q.Get("DeliveryDeleteByRecipient"), arg)
	})
	return res, err
}

// --- reading the ledger

// deliveries reads a list of deliveries with their device attempts.
func (e *executor) deliveries(ctx context.Context, text string, args ...any) ([]*driver.Delivery, error) {
	ds, err := query(ctx, e.conn(), scanDelivery, text, args...)
	if err != nil {
		return nil, err
	}
	return driver.AttachAttempts(ctx, e, ds)
}

func scanDelivery(r scanner) (*driver.Delivery, error) {
	d := &driver.Delivery{}
	err := r.Scan(&d.ID, &d.MessageID, &d.Recipient, &d.NotificationID, &d.DedupKey, &d.Status, &d.Attempts,
		timeCol{&d.NextAttemptAt}, &d.LeaseID, &d.LastError, timeCol{&d.CreatedAt}, nullTimeCol{&d.FinishedAt})
	return d, err
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

// --- cleanup and housekeeping

func (e *executor) LockAcquire(ctx context.Context, p *driver.LockParams) (bool, error) {
	owners, err := written(ctx, e, func(db dbtx) ([]string, error) {
		return query(ctx, db, scanValue[string], q.Get("LockAcquire"), sql.Named("now", nowMicros(p.Now)), sql.Named("name", p.Name),
			sql.Named("owner", p.Owner), sql.Named("ttl_us", durMicros(p.TTL)))
	})
	return len(owners) == 1, err
}

func (e *executor) LockRelease(ctx context.Context, p *driver.LockParams) error {
	return e.exec(ctx, q.Get("LockRelease"), sql.Named("name", p.Name), sql.Named("owner", p.Owner))
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

// --- reading the ledger (messages)

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

// --- recorded requests

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

// --- campaigns

func scanCampaign(r scanner) (*driver.Campaign, error) {
	c := &driver.Campaign{}
	err := r.Scan(&c.ID, &c.Name, &c.Status, &c.Content, &c.Audience, &c.Filter, nullTimeCol{&c.StartAt},
		&c.RatePerMinute, &c.MessageID, &c.Cursor, &c.Written, &c.Recipients, &c.InvalidTokens, &c.DuplicateTokens,
		&c.Tries, &c.LastError, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt}, nullTimeCol{&c.StartedAt},
		nullTimeCol{&c.FinishedAt})
	return c, err
}

// CampaignInsert implements driver.Executor. CreatedAt is the given one,
// or the host's clock when it is zero; UpdatedAt is the same.
func (e *executor) CampaignInsert(ctx context.Context, c *driver.Campaign) (*driver.Campaign, error) {
	now := nowMicros(nil)
	if !c.CreatedAt.IsZero() {
		now = c.CreatedAt.UnixMicro()
	}
	return written(ctx, e, func(db dbtx) (*driver.Campaign, error) {
		return scanCampaign(db.QueryRowContext(ctx, q.Get("CampaignInsert"),
			sql.Named("now", now), sql.Named("name", c.Name), sql.Named("status", c.Status),
			sql.Named("content", jsonArg(c.Content)), sql.Named("audience", c.Audience),
			sql.Named("filter", jsonArg(c.Filter)), sql.Named("start_at", optMicros(c.StartAt)),
			sql.Named("rate_per_minute", c.RatePerMinute)))
	})
}

func (e *executor) CampaignGet(ctx context.Context, id int64) (*driver.Campaign, error) {
	return e.campaign(ctx, "CampaignGet", id)
}

// CampaignLock implements driver.Executor: a read, since the caller's write
// transaction (BEGIN IMMEDIATE) already holds the database's write lock.
func (e *executor) CampaignLock(ctx context.Context, id int64) (*driver.Campaign, error) {
	return e.campaign(ctx, "CampaignLock", id)
}

// campaign reads one campaign with the named query.
func (e *executor) campaign(ctx context.Context, name string, id int64) (*driver.Campaign, error) {
	c, err := scanCampaign(e.conn().QueryRowContext(ctx, q.Get(name), sql.Named("id", id)))
	if err != nil {
		return nil, translate(err)
	}
	return c, nil
}

func (e *executor) CampaignSave(ctx context.Context, c *driver.Campaign, now *time.Time) error {
	return e.exec(ctx, q.Get("CampaignSave"),
		sql.Named("id", c.ID), sql.Named("now", nowMicros(now)), sql.Named("name", c.Name),
		sql.Named("status", c.Status), sql.Named("content", jsonArg(c.Content)), sql.Named("audience", c.Audience),
		sql.Named("filter", jsonArg(c.Filter)), sql.Named("start_at", optMicros(c.StartAt)),
		sql.Named("rate_per_minute", c.RatePerMinute), sql.Named("message_id", c.MessageID),
		sql.Named("cursor", c.Cursor), sql.Named("written", c.Written), sql.Named("recipients", c.Recipients),
		sql.Named("invalid_tokens", c.InvalidTokens), sql.Named("duplicate_tokens", c.DuplicateTokens),
		sql.Named("tries", c.Tries), sql.Named("last_error", c.LastError),
		sql.Named("started_at", optMicros(c.StartedAt)), sql.Named("finished_at", optMicros(c.FinishedAt)))
}

func (e *executor) CampaignList(ctx context.Context, p *driver.CampaignListParams) ([]*driver.Campaign, error) {
	return query(ctx, e.conn(), scanCampaign, q.Get("CampaignList"),
		sql.Named("before_id", p.BeforeID), sql.Named("status", p.Status), sql.Named("max", p.Limit))
}

// CampaignTry implements driver.Executor in one statement, written on its
// own (or in the executor's transaction); see CampaignTry in queries.sql.
func (e *executor) CampaignTry(ctx context.Context, p *driver.CampaignTryParams) (*driver.CampaignTryResult, error) {
	return written(ctx, e, func(db dbtx) (*driver.CampaignTryResult, error) {
		res := &driver.CampaignTryResult{Found: true}
		err := db.QueryRowContext(ctx, q.Get("CampaignTry"),
			sql.Named("now", nowMicros(p.Now)), sql.Named("max_tries", p.MaxTries),
			sql.Named("lease_us", p.Lease.Microseconds()), sql.Named("abandoned", p.Abandoned)).
			Scan(&res.ID, &res.Tries, &res.Interrupted)
		if errors.Is(err, sql.ErrNoRows) {
			return &driver.CampaignTryResult{}, nil
		}
		if err != nil {
			return nil, err
		}
		return res, nil
	})
}

// CampaignPageAdd implements driver.Executor in one write transaction (or a
// savepoint of the executor's): the page row first, whose conflict decides
// between a replay and ErrPageConflict before anything else is written.
func (e *executor) CampaignPageAdd(ctx context.Context, p *driver.CampaignPageParams) (int, bool, error) {
	list, err := jsonList(p.Recipients)
	if err != nil {
		return 0, false, err
	}
	var added int
	var replayed bool
	err = e.atomic(ctx, func(db dbtx) error {
		campaign, page := sql.Named("campaign_id", p.CampaignID), sql.Named("page", p.Page)
		inserted, err := rowsAffected(db.ExecContext(ctx, q.Get("CampaignPageInsert"), campaign, page,
			sql.Named("digest", p.Digest), sql.Named("size", len(p.Recipients))))
		if err != nil {
			return err
		}
		if inserted == 0 {
			var digest []byte
			if err := db.QueryRowContext(ctx, q.Get("CampaignPageGet"), campaign, page).Scan(&digest); err != nil {
				return err
			}
			if !bytes.Equal(digest, p.Digest) {
				return driver.ErrPageConflict
			}
			replayed = true
			return nil
		}
		if added, err = rowsAffected(db.ExecContext(ctx, q.Get("CampaignRecipientInsert"), campaign,
			sql.Named("recipients", list))); err != nil {
			return err
		}
		_, err = db.ExecContext(ctx, q.Get("CampaignCountAdd"), campaign, sql.Named("added", added))
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return added, replayed, nil
}

func (e *executor) CampaignRecipientsAfter(ctx context.Context, campaignID int64, after string, limit int) ([]string, error) {
	return query(ctx, e.conn(), scanValue[string], q.Get("CampaignRecipientsAfter"),
		sql.Named("campaign_id", campaignID), sql.Named("after", after), sql.Named("max", limit))
}

func (e *executor) DeviceListAfter(ctx context.Context, after string, limit int) ([]*driver.Device, error) {
	return query(ctx, e.conn(), scanDevice, q.Get("DeviceListAfter"), sql.Named("after", after), sql.Named("max", limit))
}

// CampaignDeliveryInsert implements driver.Executor: each row carries its
// own due time.
func (e *executor) CampaignDeliveryInsert(ctx context.Context, p *driver.CampaignDeliveryInsertParams) (int, error) {
	if len(p.Recipients) != len(p.NotificationIDs) || len(p.Recipients) != len(p.DueAt) {
		return 0, fmt.Errorf("sqlite: %d recipients, %d notification ids and %d due times",
			len(p.Recipients), len(p.NotificationIDs), len(p.DueAt))
	}
	if len(p.Recipients) == 0 {
		return 0, nil
	}
	rows := make([][3]any, len(p.Recipients))
	for i, r := range p.Recipients {
		rows[i] = [3]any{r, p.NotificationIDs[i], p.DueAt[i].UnixMicro()}
	}
	list, err := jsonList(rows)
	if err != nil {
		return 0, err
	}
	return e.execCount(ctx, q.Get("CampaignDeliveryInsert"),
		sql.Named("now", nowMicros(p.Now)), sql.Named("message_id", p.MessageID), sql.Named("deliveries", list))
}

func (e *executor) DeviceAttemptCountByState(ctx context.Context, messageID int64) (map[string]int, error) {
	return queryMap[string, int](ctx, e.conn(), q.Get("DeviceAttemptCountByState"), sql.Named("message_id", messageID))
}

func (e *executor) CampaignTally(ctx context.Context, messageID int64) (map[string]int, error) {
	return queryMap[string, int](ctx, e.conn(), q.Get("CampaignTally"), sql.Named("message_id", messageID))
}

// CampaignTallyCompact has nothing to fold: the triggers keep one row per
// state (migration 7).
func (e *executor) CampaignTallyCompact(context.Context, int) (int, error) { return 0, nil }

// windowAsk is one element of SendWindowTake's @asks.
type windowAsk struct {
	Transport string `json:"transport"`
	Start     int64  `json:"start"`
	Asked     int    `json:"asked"`
	Allowance int    `json:"allowance"`
}

func (e *executor) SendWindowTake(ctx context.Context, p *driver.SendWindowParams) (map[string]int, error) {
	asks := make([]windowAsk, len(p.Transports))
	for i, t := range p.Transports {
		asks[i] = windowAsk{Transport: t, Start: p.Starts[i].UnixMicro(), Asked: p.Asked[i], Allowance: p.Allowance[i]}
	}
	list, err := jsonList(asks)
	if err != nil {
		return nil, err
	}
	return written(ctx, e, func(db dbtx) (map[string]int, error) {
		return queryMap[string, int](ctx, db, q.Get("SendWindowTake"), sql.Named("asks", list))
	})
}

func (e *executor) SendWindowDeleteBefore(ctx context.Context, t time.Time) (int, error) {
	return e.execCount(ctx, q.Get("SendWindowDeleteBefore"), sql.Named("before", t.UnixMicro()))
}
