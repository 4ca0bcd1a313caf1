// Package driver defines the storage contract between the oncepush engine and a
// database. The engine owns this contract: it lists exactly the statements the
// engine runs, in the engine's vocabulary, and every driver (driver/postgres,
// driver/sqlite) passes the same conformance suite against it (driver/drivertest).
// The server's own state (API keys, preferences) is a second contract beside
// this one, package driver/serverstore, with migrations of its own.
//
// The package is for driver authors. Applications construct a driver with its
// package's New function and hand it to oncepush.NewClient; they never call these
// methods. The contract may change between minor versions.
//
// Time: every method that needs "now" takes a Now *time.Time. Nil means the
// database's own clock (PostgreSQL's now()); a value means an injected clock (tests).
// Drivers never read the process's wall clock when Now is nil, except where the
// database has no clock of its own worth trusting more than the host's (SQLite, a
// file on the same host).
package driver

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors drivers translate their database errors into, so that the engine
// never sees a driver's own error types.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("oncepush/driver: not found")
	// ErrSchemaTooNew: the database was migrated by a newer oncepush than this one.
	ErrSchemaTooNew = errors.New("oncepush/driver: database schema is newer than this build")
	// ErrSchemaNotCurrent: migrations are pending; run Migrate.
	ErrSchemaNotCurrent = errors.New("oncepush/driver: database schema is not migrated")
	// ErrSessionRevoked: a device was registered under a session that was revoked.
	ErrSessionRevoked = errors.New("oncepush/driver: session revoked")
	// ErrRequestRecorded: MessageInsert was asked to record a request whose key
	// is recorded already; it wrote nothing.
	ErrRequestRecorded = errors.New("oncepush/driver: request already recorded")
	// ErrTokenRegistered: DeviceRegister with KeepOtherOwner found the token
	// registered to another recipient; it wrote nothing.
	ErrTokenRegistered = errors.New("oncepush/driver: token registered to another recipient")
	// ErrPageConflict: CampaignPageAdd found the page number taken by a page
	// of other recipients; it wrote nothing.
	ErrPageConflict = errors.New("oncepush/driver: campaign page number taken by another page")
)

// Delivery statuses. A delivery is pending until it reaches one of the others,
// which are final.
const (
	StatusPending   = "pending"
	StatusSent      = "sent"
	StatusFailed    = "failed"
	StatusAmbiguous = "ambiguous"
	StatusSkipped   = "skipped"
	StatusNoDevices = "no_devices"
	StatusExpired   = "expired"
	StatusCanceled  = "canceled"
)

// Driver is a database that can hold the oncepush ledger. TTx is the driver's
// transaction type (pgx.Tx, *sql.Tx), so that SendTx can join a caller's
// transaction with compile-time type safety.
type Driver[TTx any] interface {
	// Name is a short name for logs: "postgres", "sqlite".
	Name() string

	// InTx runs fn in a new transaction of the driver's own and commits it if fn
	// returns nil. fn gets the transaction itself (so the engine can hand it to
	// code that runs inside the claim, such as eligibility) and an executor on it.
	// Write transactions take their write locks up front (SQLite: BEGIN IMMEDIATE).
	InTx(ctx context.Context, fn func(ctx context.Context, tx TTx, ex Executor) error) error

	// Exec returns an executor that runs each call on its own, outside any
	// caller transaction (each call may still use a transaction internally).
	Exec() Executor

	// UnwrapExecutor wraps a caller's transaction.
	UnwrapExecutor(tx TTx) Executor

	// Notify tells listening workers (of every process) that work may be due,
	// outside any transaction, at once. Drivers without such a channel do nothing.
	Notify(ctx context.Context) error

	// Listen blocks until ctx is done, calling wake whenever another connection
	// or process may have made work due (PostgreSQL LISTEN). Drivers that cannot
	// hear other writers return nil at once; the engine then relies on polling.
	Listen(ctx context.Context, wake func()) error

	// Migrate applies pending migrations in order, each in its own transaction, and
	// is safe to run from several processes at once.
	Migrate(ctx context.Context) (*MigrateResult, error)

	// SchemaVersion reports the applied and the latest known migration version.
	SchemaVersion(ctx context.Context) (current, latest int, err error)
}

// Executor runs the engine's statements, either in a transaction or on their
// own. It holds what the engine needs and nothing else: the server's own state
// is a contract of its own (package driver/serverstore).
//
// It is composed of one interface per concept, each in a file of its own
// with its parameters and rows (send.go, claim.go, record.go, …), so that
// a new concept adds a file and a line here. Methods only tests need are
// not part of it (drivertest.TestExecutor).
type Executor interface {
	SendExecutor
	ClaimExecutor
	RecordExecutor
	DeviceExecutor
	LedgerExecutor
	CleanupExecutor
	CampaignExecutor
	RequestExecutor
}

// SingleWriter is implemented by a driver whose database lets one
// transaction write at a time (SQLite's one write lock): the engine then
// writes one group of concurrent sends at a time (oncepush.Config.SendGroups),
// since a second group would only wait for the first's lock.
type SingleWriter interface {
	SingleWriter()
}

// ConflictDetector is implemented by a driver whose database may abort a
// statement or a transaction that would succeed on its own, to break a
// deadlock or for a serialization failure (PostgreSQL: SQLSTATE 40P01,
// 40001). The aborted work wrote nothing, and run again in a new
// transaction it may succeed: the engine runs again what it wrote in
// transactions of its own (a group of sends, a send written alone), and
// never retries a caller's transaction, which the abort has ended.
type ConflictDetector interface {
	// Conflict reports whether err, or an error it wraps, is such an abort.
	Conflict(err error) bool
}

// NowOf is t as a method's Now: nil, the database's clock, when t is zero.
// Rows whose creation time a caller may give (Campaign.CreatedAt,
// serverstore.APIKey.CreatedAt) mean "now" by leaving it zero.
func NowOf(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// MigrateResult says what Migrate did.
type MigrateResult struct {
	Applied []int // versions applied by this call, in order
	Version int   // version after the call
}
