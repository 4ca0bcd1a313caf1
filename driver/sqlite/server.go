package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/internal/migrate"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/internal/sqlfile"
)

// The server's state: its own queries and migrations, beside the engine's.

// sq holds the server's named queries, as q holds the engine's.
var sq = sqlfile.MustParse(sqlFS, "server_queries.sql")

var serverMigrations = &migrations{
	Sequence: migrate.Sequence{Driver: "sqlite", What: "server ", Files: sqlFS, Dir: "servermigration"},
	create:   sq.Get("ServerMigrationTableCreate"), list: sq.Get("ServerMigrationList"),
	insert: sq.Get("ServerMigrationInsert"), exists: sq.Get("ServerMigrationTableExists"),
}

var _ serverstore.Driver[*sql.Tx] = (*Driver)(nil)

// ServerStore implements serverstore.Driver: the server's state on the
// driver's handle, its writes queued with the engine's (see writeGate).
func (d *Driver) ServerStore() serverstore.Store[*sql.Tx] { return &serverStore{d: d} }

type serverStore struct {
	d *Driver
}

// Migrate implements serverstore.Store, as Driver.Migrate does for the
// engine's migrations.
func (s *serverStore) Migrate(ctx context.Context) (*driver.MigrateResult, error) {
	return serverMigrations.migrate(ctx, s.d)
}

func (s *serverStore) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	return serverMigrations.version(ctx, s.d.db)
}

func (s *serverStore) Exec() serverstore.Executor {
	return &serverExecutor{ex: s.d.exec()}
}

// UnwrapExecutor implements serverstore.Store. The transaction should have
// been begun on a handle opened with DSN, so that it is IMMEDIATE.
func (s *serverStore) UnwrapExecutor(tx *sql.Tx) serverstore.Executor {
	return &serverExecutor{ex: &executor{tx: tx}}
}

// serverExecutor runs the server's named queries, on the handle or in a
// transaction, the way the engine's executor runs its own.
type serverExecutor struct {
	ex *executor
}

func scanAPIKey(r scanner) (*serverstore.APIKey, error) {
	k := &serverstore.APIKey{}
	err := r.Scan(&k.ID, &k.Name, &k.Hash, stringsCol{&k.Scopes}, timeCol{&k.CreatedAt}, nullTimeCol{&k.RevokedAt})
	return k, err
}

func (e *serverExecutor) APIKeyInsert(ctx context.Context, k *serverstore.APIKey) error {
	scopes, err := jsonList(k.Scopes)
	if err != nil {
		return err
	}
	return e.ex.exec(ctx, sq.Get("APIKeyInsert"), sql.Named("id", k.ID), sql.Named("name", k.Name),
		sql.Named("hash", k.Hash), sql.Named("scopes", scopes), sql.Named("now", nowMicros(driver.NowOf(k.CreatedAt))))
}

func (e *serverExecutor) APIKeyGetByHash(ctx context.Context, hash []byte) (*serverstore.APIKey, error) {
	k, err := scanAPIKey(e.ex.conn().QueryRowContext(ctx, sq.Get("APIKeyGetByHash"), sql.Named("hash", hash)))
	if err != nil {
		return nil, translate(err)
	}
	return k, nil
}

func (e *serverExecutor) APIKeyList(ctx context.Context) ([]*serverstore.APIKey, error) {
	return query(ctx, e.ex.conn(), scanAPIKey, sq.Get("APIKeyList"))
}

func (e *serverExecutor) APIKeyRevoke(ctx context.Context, id string, now *time.Time) (bool, error) {
	n, err := e.ex.execCount(ctx, sq.Get("APIKeyRevoke"), sql.Named("id", id), sql.Named("now", nowMicros(now)))
	return n == 1, err
}

func scanPreference(r scanner) (*serverstore.Preference, error) {
	p := &serverstore.Preference{}
	err := r.Scan(&p.Recipient, stringsCol{&p.OptOut}, &p.QuietStart, &p.QuietEnd, &p.TimeZone, timeCol{&p.UpdatedAt})
	return p, err
}

func (e *serverExecutor) PreferenceGet(ctx context.Context, recipient string) (*serverstore.Preference, error) {
	p, err := scanPreference(e.ex.conn().QueryRowContext(ctx, sq.Get("PreferenceGet"), sql.Named("recipient", recipient)))
	if err != nil {
		return nil, translate(err)
	}
	return p, nil
}

func (e *serverExecutor) PreferenceGetMany(ctx context.Context, recipients []string) ([]*serverstore.Preference, error) {
	return queryList(ctx, e.ex.conn(), scanPreference, sq.Get("PreferenceGetMany"), "recipients", recipients)
}

func (e *serverExecutor) PreferencePut(ctx context.Context, p *serverstore.Preference, now *time.Time) error {
	optOut, err := jsonList(p.OptOut)
	if err != nil {
		return err
	}
	return e.ex.exec(ctx, sq.Get("PreferencePut"), sql.Named("recipient", p.Recipient),
		sql.Named("opt_out", optOut), sql.Named("quiet_start", p.QuietStart), sql.Named("quiet_end", p.QuietEnd),
		sql.Named("time_zone", p.TimeZone), sql.Named("now", nowMicros(now)))
}

func (e *serverExecutor) PreferenceDeleteByRecipient(ctx context.Context, recipient string) (int, error) {
	return e.ex.execCount(ctx, sq.Get("PreferenceDeleteByRecipient"), sql.Named("recipient", recipient))
}
