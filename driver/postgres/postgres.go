// Package postgres is the oncepush storage driver for PostgreSQL, on pgx/v5 and
// pgxpool. It is the production engine: many processes share one database and
// scale-out is more processes.
//
//	pool, err := pgxpool.New(ctx, "postgres://…")
//	client, err := oncepush.NewClient(postgres.New(pool), &oncepush.Config{…})
//
// The tables carry the prefix oncepush_ and live in the schema the connection's
// search_path selects (public by default), so SendTx can join the application's
// own transactions. Wake-ups use LISTEN/NOTIFY on the channel oncepush_wake, on a
// connection of their own (never one of the pool's).
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/internal/listen"
	"github.com/oncepush/oncepush/driver/internal/migrate"
	"github.com/oncepush/oncepush/internal/sqlfile"
)

// sqlFS holds the driver's SQL: the engine's queries and migrations, and the
// server's (server.go).
//
//go:embed queries*.sql migration/*.sql server_queries.sql servermigration/*.sql
var sqlFS embed.FS

// q holds the engine's named queries: queries.sql and one queries_<concept>.sql
// per interface of package driver, read as one set.
var q = sqlfile.MustParseGlob(sqlFS, "queries*.sql")

// Channel is the LISTEN/NOTIFY channel; the payload is the schema name.
const Channel = "oncepush_wake"

// IdleInTransactionTimeout is how long a transaction the driver begins may
// wait between two of its statements before PostgreSQL ends its session
// (idle_in_transaction_session_timeout), rolling it back and releasing its
// locks. The engine's transactions are short and never wait on anything but
// the database (an eligibility rule's queries run in the claim's), so only a
// process stopped or stalled inside one (SIGSTOP, a debugger, a machine
// frozen) idles that long; without the bound its rows stay locked, and
// cancels, records and campaign steps that need them wait, until it wakes.
// It is set per transaction (SET LOCAL, sent with BEGIN in one round trip)
// on the transactions the driver begins on the pool, never on the session
// nor on a caller's transaction (SendTx): those are the caller's to bound.
const IdleInTransactionTimeout = 30 * time.Second

// Driver is the PostgreSQL driver.
type Driver struct {
	pool *pgxpool.Pool
	// begin begins the driver's own transactions: with the idle bound.
	begin pgx.TxOptions
	// listenCheck is how long the wake-up listener waits in silence before
	// it checks its connection (ListenCheck).
	listenCheck time.Duration
}

// New returns a driver on the pool. The pool is the caller's: the driver never
// closes it.
func New(pool *pgxpool.Pool) *Driver {
	return &Driver{pool: pool, begin: beginBounded(IdleInTransactionTimeout), listenCheck: ListenCheck}
}

// Bounds on a connection that stops answering without closing: a server
// that hangs, a peer or a network path that vanished without a reset, a
// COMMIT whose answer is lost (D171). Statements are bounded by the
// engine's contexts (30 s for a claim, a mark, a record try); these bound
// what no statement's context reaches.
const (
	// ConnectTimeout bounds a new connection's dial and start-up, per host,
	// when the URL sets no connect_timeout. pgxpool makes its connections
	// on a context only closing the pool cancels: a start-up that is never
	// answered would hold one of the pool's slots for good.
	ConnectTimeout = 10 * time.Second
	// PingTimeout bounds the liveness ping pgxpool sends a connection idle
	// for more than a second before handing it out, when the URL sets no
	// pool_ping_timeout. Without it a dead connection takes its caller's
	// whole deadline rather than being replaced, and its ping goes on for up
	// to a minute after the caller gave up, holding up the pool's Close
	// (a worker's exit) meanwhile.
	PingTimeout = 5 * time.Second
	// ListenCheck is how long the wake-up listener waits for a
	// notification before it pings its connection (within PingTimeout);
	// one that does not answer is replaced. Without it a listener whose
	// connection went silent waits for good, and the engine falls back on
	// polling until the process ends.
	ListenCheck = 30 * time.Second
)

// BoundConnections sets ConnectTimeout and PingTimeout on cfg where the
// URL set neither (connect_timeout, pool_ping_timeout). The oncepush
// command does it to every pool it opens; an application that builds its
// own pool for the driver should too.
func BoundConnections(cfg *pgxpool.Config) {
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = PingTimeout
	}
}

// beginBounded is how the driver begins a transaction of its own: BEGIN and
// the transaction's idle bound as one simple-protocol query (one round trip,
// as BEGIN alone).
func beginBounded(idle time.Duration) pgx.TxOptions {
	return pgx.TxOptions{BeginQuery: fmt.Sprintf("BEGIN; SET LOCAL idle_in_transaction_session_timeout = %d", idle.Milliseconds())}
}

var _ driver.Driver[pgx.Tx] = (*Driver)(nil)

// Name implements driver.Driver.
func (d *Driver) Name() string { return "postgres" }

// Pool returns the pool the driver was built on.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// InTx implements driver.Driver. The transaction is bounded by
// IdleInTransactionTimeout.
func (d *Driver) InTx(ctx context.Context, fn func(context.Context, pgx.Tx, driver.Executor) error) error {
	return pgx.BeginTxFunc(ctx, d.pool, d.begin, func(tx pgx.Tx) error {
		return fn(ctx, tx, &executor{db: tx})
	})
}

// Exec implements driver.Driver.
func (d *Driver) Exec() driver.Executor { return &executor{db: d.pool, begin: d.begin} }

// UnwrapExecutor implements driver.Driver.
func (d *Driver) UnwrapExecutor(tx pgx.Tx) driver.Executor { return &executor{db: tx} }

// Notify implements driver.Driver: NOTIFY on the pool, outside any transaction.
func (d *Driver) Notify(ctx context.Context) error {
	_, err := d.pool.Exec(ctx, q.Get("Wake"))
	return err
}

// Listen implements driver.Driver: LISTEN on a dedicated connection built from
// the pool's configuration, reconnecting with a pause after errors, until ctx ends.
// Wake-ups of other schemas (the payload names the schema) are ignored.
func (d *Driver) Listen(ctx context.Context, wake func()) error {
	cfg := d.pool.Config().ConnConfig.Copy()
	return listen.Reconnecting(ctx, wake, func(ctx context.Context) error {
		return d.listenOnce(ctx, cfg, wake)
	})
}

func (d *Driver) listenOnce(ctx context.Context, cfg *pgx.ConnConfig, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	wake()
	for {
		wctx, cancel := context.WithTimeout(ctx, d.listenCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if n.Payload == schema {
				wake()
			}
		case ctx.Err() == nil && wctx.Err() != nil:
			// Quiet for a while: is anyone still there? (A timeout leaves
			// the connection usable.)
			pctx, cancel := context.WithTimeout(ctx, PingTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// migrations is one of the driver's two sequences of migrations (see
// migrate.Sequence) with the statements that lock, create, list, record into
// and probe its version table.
type migrations struct {
	migrate.Sequence
	lock, create, list, insert, exists string
}

var engineMigrations = &migrations{
	Sequence: migrate.Sequence{Driver: "postgres", Files: sqlFS, Dir: "migration"},
	lock:     q.Get("MigrationLock"), create: q.Get("MigrationTableCreate"), list: q.Get("MigrationList"),
	insert: q.Get("MigrationInsert"), exists: q.Get("MigrationTableExists"),
}

// Migrate implements driver.Driver. Each migration runs in its own transaction
// under an advisory lock, so concurrent callers apply each migration once.
func (d *Driver) Migrate(ctx context.Context) (*driver.MigrateResult, error) {
	return engineMigrations.migrate(ctx, d.pool)
}

func (l *migrations) migrate(ctx context.Context, pool *pgxpool.Pool) (*driver.MigrateResult, error) {
	return l.Migrate(ctx, l.inTx(ctx, pool))
}

// inTx runs a migration step in a transaction of the pool's.
func (l *migrations) inTx(ctx context.Context, pool *pgxpool.Pool) func(func(migrate.Tx) error) error {
	return func(fn func(migrate.Tx) error) error {
		return pgx.BeginTxFunc(ctx, pool, beginBounded(IdleInTransactionTimeout), func(tx pgx.Tx) error { return fn(versionTable{l, tx}) })
	}
}

// SchemaVersion implements driver.Driver.
func (d *Driver) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	return engineMigrations.version(ctx, d.pool)
}

func (l *migrations) version(ctx context.Context, pool *pgxpool.Pool) (current, latest int, err error) {
	return l.Version(ctx, versionTable{l, pool})
}

// versionTable is a sequence's version table on the pool or in a
// migration's transaction: migrate.Tx and migrate.DB in PostgreSQL's words.
type versionTable struct {
	l  *migrations
	db dbtx
}

// Prepare takes the sequence's advisory lock, held to the end of the
// transaction, then creates the table if it is missing.
func (v versionTable) Prepare(ctx context.Context) error {
	if _, err := v.db.Exec(ctx, v.l.lock); err != nil {
		return err
	}
	_, err := v.db.Exec(ctx, v.l.create)
	return err
}

func (v versionTable) Applied(ctx context.Context) ([]int, error) {
	return query(ctx, v.db, pgx.RowTo[int], v.l.list)
}

func (v versionTable) Exists(ctx context.Context) (bool, error) {
	var exists bool
	err := v.db.QueryRow(ctx, v.l.exists).Scan(&exists)
	return exists, err
}

func (v versionTable) Exec(ctx context.Context, sql string) error {
	_, err := v.db.Exec(ctx, sql)
	return err
}

func (v versionTable) Record(ctx context.Context, m sqlfile.Migration) error {
	_, err := v.db.Exec(ctx, v.l.insert, named{"version": m.Version, "name": m.Name})
	return err
}

// dbtx is what both a pool and a transaction offer.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

// translate maps pgx errors onto the driver's sentinels.
func translate(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.ErrNotFound
	}
	return err
}

// micros converts a duration for the @…_us parameters.
func micros(d time.Duration) int64 { return d.Microseconds() }
