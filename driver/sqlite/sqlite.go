// Package sqlite is the oncepush storage driver for SQLite: one file on one
// host, pure Go (modernc.org/sqlite, no cgo), through database/sql. It is the
// embedded default, for a single server or a small deployment; when several hosts
// must share the ledger, use driver/postgres.
//
//	drv, err := sqlite.Open(ctx, "/var/lib/oncepush/oncepush.db", nil)
//	defer drv.Close()
//	if _, err := drv.Migrate(ctx); err != nil { … }
//	client, err := oncepush.NewClient(drv, &oncepush.Config{…})
//
// The transaction type is *sql.Tx, so Client.SendTx joins a transaction begun
// on Driver.DB (or on a handle opened with DSN): the application's tables and
// the oncepush_ tables live in the same file.
//
// How it differs from PostgreSQL (docs/storage.md has the whole table):
//
//   - One writer at a time. Every write transaction begins IMMEDIATE, taking the
//     file's write lock as it begins, so no transaction reads and then fails to
//     upgrade to writing; other writers wait, up to the busy timeout.
//   - The clock is the host's: with no injected clock, "now" is time.Now() taken
//     at the driver's boundary (a SQLite file lives on one host).
//   - Wake-ups: SQLite cannot NOTIFY. Listen polls PRAGMA data_version on a
//     connection of its own every ListenInterval and wakes the workers when any
//     other connection or process committed; Executor.Wake does nothing.
//   - Times are stored as INTEGER microseconds since the Unix epoch (UTC), JSON as
//     TEXT, lists are passed to statements as JSON arrays.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

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

// Defaults of Options.
const (
	// MaxConnsDefault bounds a handle's connections. WAL lets readers run
	// beside the one writer; more connections than this mostly wait.
	MaxConnsDefault = 4
	// BusyTimeoutDefault is how long a statement waits for another
	// connection's write lock before failing with SQLITE_BUSY.
	BusyTimeoutDefault = 10 * time.Second
)

// ListenInterval is how often Listen polls PRAGMA data_version: the longest a
// commit by another handle or process waits before the workers hear of it.
const ListenInterval = 50 * time.Millisecond

// Errors Open returns, to be tested with errors.Is. A missing directory is
// reported as fs.ErrNotExist.
var (
	// ErrReadOnly: the file, or the directory that must hold its -wal and -shm
	// files, cannot be written.
	ErrReadOnly = errors.New("sqlite: database cannot be written")
	// ErrCorrupt: the file is not an SQLite database, or fails PRAGMA quick_check.
	ErrCorrupt = errors.New("sqlite: database file is corrupt or not a database")
	// ErrBusy: a write waited longer than the busy timeout for its turn.
	ErrBusy = errors.New("sqlite: database busy")
)

// Options configures Open. The zero value of every field means its default.
type Options struct {
	// MaxConns bounds the handle's open connections (database/sql's
	// SetMaxOpenConns; as many are kept idle). Default MaxConnsDefault. Listen
	// uses one more connection of its own while a client is started.
	MaxConns int
	// BusyTimeout is how long a statement waits for the write lock held by
	// another connection or process before failing with SQLITE_BUSY.
	// Default BusyTimeoutDefault (10 s); it is set in milliseconds.
	BusyTimeout time.Duration
	// SkipQuickCheck skips PRAGMA quick_check at Open. The check reads the
	// whole file (measured: 2.9 s for 265 MB), so a large ledger may want to
	// run it out of band instead; a file that is not a database is refused
	// either way. Default false: Open checks.
	SkipQuickCheck bool
	// SynchronousNormal trades durability for speed (synchronous=NORMAL
	// instead of FULL). Under NORMAL a commit survives a crash of the process,
	// but the last commits before a power loss or an operating-system crash may
	// be lost: a send reported as queued may vanish, and a lost claim forgets
	// that its pairs were being sent, so they are sent again as if for the
	// first time, even under at-most-once. The default, FULL, waits for the WAL
	// to reach the disk at every commit and keeps both promises (measured:
	// 6,000 sends through four clients took 3.3 s under FULL, 2.3 s under
	// NORMAL). Default false: FULL.
	SynchronousNormal bool
}

// Driver is the SQLite driver.
type Driver struct {
	db   *sql.DB
	path string // the file, when Open made the handle; "" for New until Listen asks
	opts Options
	own  bool       // Close closes db
	gate *writeGate // this process's writers to the file, in turn
	// onListenPoll, set only by this package's tests, is called after each
	// poll of the listener (and its wake-up, if the poll called for one).
	onListenPoll atomic.Pointer[func()]
	// closed is set by Close: every error after it means the database is
	// gone (Unavailable).
	closed atomic.Bool
}

var _ driver.Driver[*sql.Tx] = (*Driver)(nil)

// DSN returns the data source name of the file at path for sql.Open("sqlite",
// …) (modernc.org/sqlite), with what the driver needs on every connection:
// journal_mode=WAL, synchronous=FULL (NORMAL with opts.SynchronousNormal),
// foreign_keys=ON, the busy timeout of opts (nil = defaults), and
// _txlock=immediate so that every transaction BeginTx starts is BEGIN IMMEDIATE
// (ReadOnly ones excepted). A handle of your own must be opened with it (or
// the same settings) before you pass it to New.
func DSN(path string, opts *Options) string {
	o := withDefaults(opts)
	v := url.Values{}
	v.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()))
	v.Add("_pragma", "foreign_keys(1)")
	v.Add("_pragma", "journal_mode(WAL)")
	if o.SynchronousNormal {
		v.Add("_pragma", "synchronous(NORMAL)")
	} else {
		v.Add("_pragma", "synchronous(FULL)")
	}
	v.Set("_txlock", "immediate")
	// A file: URI, so that a path holding '?' or '#' stays a path. A Windows
	// path (C:\x) becomes file:/C:/x.
	p := filepath.ToSlash(path)
	if filepath.VolumeName(path) != "" {
		p = "/" + p
	}
	return "file:" + (&url.URL{Path: p}).EscapedPath() + "?" + v.Encode()
}

func withDefaults(opts *Options) Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxConns <= 0 {
		o.MaxConns = MaxConnsDefault
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = BusyTimeoutDefault
	}
	return o
}

// Open opens the database file at path, creating it if absent, and checks that
// it can be used: its directory exists (else an error wrapping fs.ErrNotExist),
// the file and directory can be written (else ErrReadOnly), and it is an SQLite
// database that passes PRAGMA quick_check (else ErrCorrupt; see
// Options.SkipQuickCheck). On any of these failures it leaves the file and its
// directory as they were. ctx bounds the checks (quick_check reads the whole
// file). It does not migrate: call Migrate. Close the driver when done. opts
// may be nil.
//
// path is a file system path, not a URI; ":memory:" is refused (every
// connection would see a database of its own).
func Open(ctx context.Context, path string, opts *Options) (*Driver, error) {
	o := withDefaults(opts)
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: open %q: want the path of a database file", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := checkPath(abs); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", DSN(abs, &o))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	db.SetMaxOpenConns(o.MaxConns)
	db.SetMaxIdleConns(o.MaxConns)
	if err := checkDB(ctx, db, abs, !o.SkipQuickCheck, o.BusyTimeout); err != nil {
		db.Close()
		return nil, err
	}
	return &Driver{db: db, path: abs, opts: o, own: true, gate: gateFor(abs)}, nil
}

// checkPath refuses a path whose directory is missing or that is not a regular
// file, before SQLite creates anything.
func checkPath(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("sqlite: open %s: directory %s: %w", path, dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("sqlite: open %s: %s is not a directory", path, dir)
	}
	st, err = os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	case !st.Mode().IsRegular():
		return fmt.Errorf("sqlite: open %s: not a regular file", path)
	}
	// SQLite opens a file it cannot write read-only, and creates -wal and -shm
	// files owned by whoever ran it: left behind, they can lock out the rightful
	// user. Refuse before SQLite touches anything.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%w: %s: %v", ErrReadOnly, path, err)
	}
	return f.Close()
}

// checkDB opens the first connection (which applies the DSN's pragmas) and
// checks that the file is a database the process can write and, when
// quickCheck, that PRAGMA quick_check finds it healthy.
func checkDB(ctx context.Context, db *sql.DB, path string, quickCheck bool, busy time.Duration) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return openError(path, err)
	}
	defer conn.Close()
	var mode string
	if err := conn.QueryRowContext(ctx, q.Get("JournalMode")).Scan(&mode); err != nil {
		return openError(path, err)
	}
	readOnly := false
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(interface{ IsReadOnly(string) (bool, error) })
		if !ok {
			return nil
		}
		ro, err := c.IsReadOnly("main")
		readOnly = ro
		return err
	})
	if err != nil {
		return openError(path, err)
	}
	// A file the process cannot write is opened read-only without an error; a
	// database that could not switch to WAL could not create its -wal file.
	if readOnly || !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("%w: %s (journal mode %q): check the permissions of the file and its directory", ErrReadOnly, path, mode)
	}
	if quickCheck {
		problems, err := query(ctx, conn, scanValue[string], q.Get("QuickCheck"))
		if err != nil {
			return openError(path, err)
		}
		problems = slices.DeleteFunc(problems, func(s string) bool { return s == "ok" })
		if len(problems) > 0 {
			if len(problems) > 3 {
				problems = append(problems[:3], fmt.Sprintf("and %d more", len(problems)-3))
			}
			return fmt.Errorf("%w: %s fails PRAGMA quick_check: %s", ErrCorrupt, path, strings.Join(problems, "; "))
		}
	}
	return openError(path, probeWriteLock(ctx, conn, busy))
}

// probeWriteLock takes the write lock and gives it back at once, without
// waiting for it: proof that the -wal and -shm files can be written, without
// changing the database. SQLITE_BUSY proves it as well: another connection
// holds the lock, which only a connection sharing the -shm file's locks can
// see (one that cannot write it fails with SQLITE_READONLY). Waiting for the
// lock instead would keep a process from starting while others write
// without pause: busy waiters poll, and a newcomer can lose every turn for
// minutes. conn goes back to the pool with its busy timeout as it was.
func probeWriteLock(ctx context.Context, conn *sql.Conn, busy time.Duration) error {
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return err
	}
	var err error
	if tx, berr := conn.BeginTx(ctx, nil); berr == nil {
		err = tx.Rollback()
	} else if !isBusy(berr) {
		err = berr
	}
	_, rerr := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busy.Milliseconds()))
	return errors.Join(err, rerr)
}

// isBusy reports whether err is SQLite's "another connection holds the lock".
func isBusy(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY)
}

// openError classifies SQLite's errors at open into the package's sentinels.
func openError(path string, err error) error {
	if err == nil {
		return nil
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM:
			return fmt.Errorf("%w: %s: %v (check the permissions of the file and its directory)", ErrReadOnly, path, err)
		}
	}
	return fmt.Errorf("sqlite: open %s: %w", path, err)
}

// New returns a driver on a handle of the caller's, which the driver never
// closes. The handle must be a modernc.org/sqlite handle on a file opened with
// DSN (or the same settings): without _txlock=immediate concurrent writers fail
// with SQLITE_BUSY, without foreign_keys=ON deleting a delivery leaves its
// ledger rows behind. Bound its connections with SetMaxOpenConns.
func New(db *sql.DB) *Driver {
	var file string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = db.QueryRowContext(ctx, "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file)
	return &Driver{db: db, opts: withDefaults(nil), gate: gateFor(file)}
}

// Name implements driver.Driver.
func (d *Driver) Name() string { return "sqlite" }

// SingleWriter implements driver.SingleWriter: one transaction writes to
// the file at a time.
func (d *Driver) SingleWriter() {}

// DB returns the handle the driver runs on: begin the transactions you pass to
// SendTx on it.
func (d *Driver) DB() *sql.DB { return d.db }

// Close closes the handle if Open made it; a handle given to New is the caller's.
func (d *Driver) Close() error {
	if !d.own {
		return nil
	}
	d.closed.Store(true)
	return d.db.Close()
}

// Backup writes a consistent copy of the database to the new file dst with
// VACUUM INTO, while the database stays in use: it reads one snapshot, so
// writers are not blocked (though the WAL cannot be checkpointed past that
// snapshot until it ends). dst must not exist yet. Copying the file with cp
// while a process has it open can produce a torn copy; this cannot.
func (d *Driver) Backup(ctx context.Context, dst string) error {
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqlite: backup to %s: the file must not exist yet (%v)", dst, err)
	}
	if _, err := d.db.ExecContext(ctx, q.Get("Backup"), sql.Named("dst", dst)); err != nil {
		return fmt.Errorf("sqlite: backup to %s: %w", dst, err)
	}
	return nil
}

// InTx implements driver.Driver. The transaction is BEGIN IMMEDIATE (the DSN's
// _txlock), so it holds the write lock from its start to its end.
func (d *Driver) InTx(ctx context.Context, fn func(context.Context, *sql.Tx, driver.Executor) error) error {
	return d.exec().inNewTx(ctx, func(tx *sql.Tx) error { return fn(ctx, tx, &executor{tx: tx}) })
}

// Exec implements driver.Driver.
func (d *Driver) Exec() driver.Executor { return d.exec() }

// exec is an executor on the handle: each call on its own, writes waiting
// their turn at the gate.
func (d *Driver) exec() *executor {
	return &executor{db: d.db, gate: d.gate, busy: d.opts.BusyTimeout}
}

// UnwrapExecutor implements driver.Driver. The transaction should have been
// begun on a handle opened with DSN, so that it is IMMEDIATE.
func (d *Driver) UnwrapExecutor(tx *sql.Tx) driver.Executor { return &executor{tx: tx} }

// Notify implements driver.Driver: it does nothing. Other handles and
// processes hear every commit through Listen's poll of PRAGMA data_version.
func (d *Driver) Notify(context.Context) error { return nil }

// Listen implements driver.Driver. SQLite has no NOTIFY: Listen polls PRAGMA
// data_version every ListenInterval on a connection of its own (outside the
// handle's pool) and calls wake when it changes, which it does whenever another
// connection — of this process or another — commits to the file. It reopens the
// connection with a pause after errors, until ctx ends. A database that is not a
// file (in memory) has no other writers to hear: Listen returns nil at once.
func (d *Driver) Listen(ctx context.Context, wake func()) error {
	path, err := d.file(ctx)
	if err != nil || path == "" {
		return err
	}
	return listen.Reconnecting(ctx, wake, func(ctx context.Context) error {
		return d.listenOnce(ctx, path, wake)
	})
}

// file returns the path of the database file, asking the handle when New made
// the driver.
func (d *Driver) file(ctx context.Context) (string, error) {
	if d.path != "" {
		return d.path, nil
	}
	var path string
	if err := d.db.QueryRowContext(ctx, q.Get("MainFile")).Scan(&path); err != nil {
		return "", fmt.Errorf("sqlite: listen: %w", err)
	}
	return path, nil
}

func (d *Driver) listenOnce(ctx context.Context, path string, wake func()) error {
	db, err := sql.Open("sqlite", DSN(path, &d.opts))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// data_version is per connection: every poll must use the same one.
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var last int64
	if err := conn.QueryRowContext(ctx, q.Get("DataVersion")).Scan(&last); err != nil {
		return err
	}
	wake()
	tick := time.NewTicker(ListenInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		var v int64
		if err := conn.QueryRowContext(ctx, q.Get("DataVersion")).Scan(&v); err != nil {
			return err
		}
		if v != last {
			last = v
			wake()
		}
		if f := d.onListenPoll.Load(); f != nil {
			(*f)()
		}
	}
}

// migrations is one of the driver's two sequences of migrations (see
// migrate.Sequence) with the statements that create, list, record into and
// probe its version table.
type migrations struct {
	migrate.Sequence
	create, list, insert, exists string
}

var engineMigrations = &migrations{
	Sequence: migrate.Sequence{Driver: "sqlite", Files: sqlFS, Dir: "migration"},
	create:   q.Get("MigrationTableCreate"), list: q.Get("MigrationList"),
	insert: q.Get("MigrationInsert"), exists: q.Get("MigrationTableExists"),
}

// Migrate implements driver.Driver. Each migration runs in its own BEGIN
// IMMEDIATE transaction, which holds the file's write lock, so processes that
// migrate at once apply each migration once: the second finds it recorded.
// A database migrated by a newer build is refused with driver.ErrSchemaTooNew
// before anything is written.
func (d *Driver) Migrate(ctx context.Context) (*driver.MigrateResult, error) {
	return engineMigrations.migrate(ctx, d)
}

func (l *migrations) migrate(ctx context.Context, d *Driver) (*driver.MigrateResult, error) {
	if err := d.checkHandle(ctx); err != nil {
		return nil, err
	}
	// Up to date (every start after the first): nothing to write, so no write
	// lock to wait for, which other processes may hold back to back.
	if current, latest, err := l.version(ctx, d.db); err == nil && current == latest {
		return &driver.MigrateResult{Version: latest}, nil
	}
	return l.Migrate(ctx, l.inTx(ctx, d))
}

// inTx runs a migration step in one of the driver's write transactions.
func (l *migrations) inTx(ctx context.Context, d *Driver) func(func(migrate.Tx) error) error {
	return func(fn func(migrate.Tx) error) error {
		return d.InTx(ctx, func(_ context.Context, tx *sql.Tx, _ driver.Executor) error {
			return fn(versionTable{l, tx})
		})
	}
}

// checkHandle refuses a handle whose connections lack what the schema relies
// on (a handle given to New that was not opened with DSN).
func (d *Driver) checkHandle(ctx context.Context) error {
	var fk int
	if err := d.db.QueryRowContext(ctx, q.Get("ForeignKeys")).Scan(&fk); err != nil {
		return err
	}
	if fk != 1 {
		return errors.New("sqlite: the handle's connections run with foreign_keys=OFF; open it with sqlite.DSN")
	}
	return nil
}

// SchemaVersion implements driver.Driver. A database migrated by a newer build
// reports its version and driver.ErrSchemaTooNew.
func (d *Driver) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	return engineMigrations.version(ctx, d.db)
}

func (l *migrations) version(ctx context.Context, db *sql.DB) (current, latest int, err error) {
	current, latest, err = l.Version(ctx, versionTable{l, db})
	if err != nil {
		return current, latest, err
	}
	return current, latest, l.TooNew(current, latest)
}

// versionTable is a sequence's version table on the handle or in a
// migration's transaction: migrate.Tx and migrate.DB in SQLite's words.
type versionTable struct {
	l  *migrations
	db dbtx
}

// Prepare creates the table if it is missing. It takes no lock: the
// transaction is IMMEDIATE and holds the file's write lock already.
func (v versionTable) Prepare(ctx context.Context) error {
	_, err := v.db.ExecContext(ctx, v.l.create)
	return err
}

func (v versionTable) Applied(ctx context.Context) ([]int, error) {
	return query(ctx, v.db, scanValue[int], v.l.list)
}

func (v versionTable) Exists(ctx context.Context) (bool, error) {
	var exists bool
	err := v.db.QueryRowContext(ctx, v.l.exists).Scan(&exists)
	return exists, err
}

func (v versionTable) Exec(ctx context.Context, sql string) error {
	_, err := v.db.ExecContext(ctx, sql)
	return err
}

func (v versionTable) Record(ctx context.Context, m sqlfile.Migration) error {
	_, err := v.db.ExecContext(ctx, v.l.insert, sql.Named("version", m.Version),
		sql.Named("name", m.Name), sql.Named("now", time.Now().UnixMicro()))
	return err
}

// dbtx is what both a handle and a transaction offer.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// translate maps database/sql errors onto the driver's sentinels.
func translate(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return driver.ErrNotFound
	}
	return err
}
