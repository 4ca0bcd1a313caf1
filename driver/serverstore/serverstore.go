// Package serverstore defines the storage contract of oncepush's server: the
// state it keeps beside the engine's ledger, which the engine never reads —
// API keys and recipients' preferences, and whatever else only the server
// keeps (operator accounts, say). State the engine reads or expands into
// deliveries is the engine's, in package driver, even when the server
// drives it: campaigns are there (driver.CampaignExecutor), and so will be a
// feed, an outbox or apps (docs/decisions.md D142). It is the second contract a
// storage driver implements, beside package driver's engine contract, and it
// has migrations of its own, recorded apart from the engine's: the server's
// schema evolves without the engine's, and a database used only through the
// library holds only the engine's tables.
//
// The engine never reads these tables. The server reads and writes them
// through a Store; where its rows belong in an engine transaction (its
// eligibility rule on the claim, its part of deleting a recipient) it wraps
// that transaction with UnwrapExecutor. Everything else it needs of the
// ledger it reads through oncepush.Client, never through package driver.
//
// The package is for driver authors; the contract may change between minor
// versions. Errors are package driver's sentinels (driver.ErrNotFound,
// driver.ErrSchemaTooNew).
package serverstore

import (
	"context"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// Store is the server's state in one database. TTx is the transaction type
// of the driver it shares the database with.
type Store[TTx any] interface {
	// Migrate applies the server's pending migrations in order, each in its
	// own transaction, and is safe to run from several processes at once.
	// They are numbered and recorded apart from the engine's
	// (oncepush_server_migration), and need none of the engine's tables.
	Migrate(ctx context.Context) (*driver.MigrateResult, error)

	// SchemaVersion reports the applied and the latest known server
	// migration version.
	SchemaVersion(ctx context.Context) (current, latest int, err error)

	// Exec returns an executor that runs each call on its own.
	Exec() Executor

	// UnwrapExecutor wraps a transaction of the driver's: the claim's, for
	// the server's eligibility rule (oncepush.ClaimTx), or a recipient
	// deletion's, for the server's part in it (oncepush.RecipientDeleteTx).
	UnwrapExecutor(tx TTx) Executor
}

// Driver is a storage driver that keeps the server's state too; both
// built-in drivers are. What the server runs on.
type Driver[TTx any] interface {
	driver.Driver[TTx]
	// ServerStore returns the server's store on the driver's database (and
	// its handle or pool).
	ServerStore() Store[TTx]
}

// Executor runs the server's statements, either in a transaction or on
// their own.
type Executor interface {
	// APIKeyInsert stores a new API key. A zero CreatedAt means now.
	APIKeyInsert(ctx context.Context, k *APIKey) error
	// APIKeyGetByHash returns the key with this hash (revoked or not), or
	// driver.ErrNotFound.
	APIKeyGetByHash(ctx context.Context, hash []byte) (*APIKey, error)
	// APIKeyList returns every key, oldest first.
	APIKeyList(ctx context.Context) ([]*APIKey, error)
	// APIKeyRevoke marks the key revoked; false when there is no such
	// unrevoked key.
	APIKeyRevoke(ctx context.Context, id string, now *time.Time) (bool, error)

	// PreferenceGet returns a recipient's preferences, or driver.ErrNotFound.
	PreferenceGet(ctx context.Context, recipient string) (*Preference, error)
	// PreferenceGetMany returns the preferences of those recipients who
	// have any, with one statement (the eligibility rule calls it once per
	// message per claimed batch, on the claim's transaction).
	PreferenceGetMany(ctx context.Context, recipients []string) ([]*Preference, error)
	// PreferencePut replaces a recipient's preferences.
	PreferencePut(ctx context.Context, p *Preference, now *time.Time) error
	// PreferenceDeleteByRecipient deletes a recipient's preferences and
	// returns how many rows it deleted (0 or 1).
	PreferenceDeleteByRecipient(ctx context.Context, recipient string) (int, error)
}

// APIKey is a server API key. The secret itself is never stored: Hash is the
// SHA-256 of the whole key.
type APIKey struct {
	ID        string // the public part of the key, unique
	Name      string
	Hash      []byte
	Scopes    []string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Preference is a recipient's notification preferences.
type Preference struct {
	Recipient string
	// OptOut lists the categories the recipient does not want.
	OptOut []string
	// QuietStart and QuietEnd are local times "HH:MM" in TimeZone; both empty
	// means no quiet hours. A window may cross midnight (22:00–07:00).
	QuietStart string
	QuietEnd   string
	TimeZone   string
	UpdatedAt  time.Time
}
