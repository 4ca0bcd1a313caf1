package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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

// stringsCol scans a TEXT column holding a JSON array of strings (a
// device's tags; the server's scopes and opt-outs) into a []string.
type stringsCol struct{ v *[]string }

func (c stringsCol) Scan(src any) error {
	var text []byte
	switch v := src.(type) {
	case string:
		text = []byte(v)
	case []byte:
		text = v
	default:
		return fmt.Errorf("sqlite: list column holds %T, want a JSON array", src)
	}
	*c.v = nil
	return json.Unmarshal(text, c.v)
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

func scanMessage(r scanner) (*driver.Message, error) {
	m := &driver.Message{}
	err := r.Scan(&m.ID, &m.Type, &m.Title, &m.Body, &m.Data, &m.Link, &m.Image, &m.Category,
		&m.Ambiguity, timeCol{&m.ScheduledAt}, timeCol{&m.ExpiresAt}, timeCol{&m.CreatedAt}, &m.Audience)
	return m, err
}

func scanDevice(r scanner) (*driver.Device, error) {
	d := &driver.Device{}
	err := r.Scan(&d.ID, &d.Recipient, &d.Transport, &d.Token, &d.TokenKey, &d.Platform, &d.Session,
		&d.Locale, &d.TimeZone, stringsCol{&d.Tags}, timeCol{&d.CreatedAt}, timeCol{&d.RegisteredAt})
	return d, err
}

func scanDelivery(r scanner) (*driver.Delivery, error) {
	d := &driver.Delivery{}
	err := r.Scan(&d.ID, &d.MessageID, &d.Recipient, &d.NotificationID, &d.DedupKey, &d.Status, &d.Attempts,
		timeCol{&d.NextAttemptAt}, &d.LeaseID, &d.LastError, timeCol{&d.CreatedAt}, nullTimeCol{&d.FinishedAt})
	return d, err
}
