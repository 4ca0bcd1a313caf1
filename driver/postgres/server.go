package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/internal/migrate"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/internal/sqlfile"
)

// The server's state: its own queries and migrations, beside the engine's.

// sq holds the server's named queries, as q holds the engine's.
var sq = sqlfile.MustParse(sqlFS, "server_queries.sql")

var serverMigrations = &migrations{
	Sequence: migrate.Sequence{Driver: "postgres", What: "server ", Files: sqlFS, Dir: "servermigration"},
	lock:     sq.Get("ServerMigrationLock"), create: sq.Get("ServerMigrationTableCreate"), list: sq.Get("ServerMigrationList"),
	insert: sq.Get("ServerMigrationInsert"), exists: sq.Get("ServerMigrationTableExists"),
}

var _ serverstore.Driver[pgx.Tx] = (*Driver)(nil)

// ServerStore implements serverstore.Driver: the server's state on the
// driver's pool.
func (d *Driver) ServerStore() serverstore.Store[pgx.Tx] { return &serverStore{pool: d.pool} }

type serverStore struct {
	pool *pgxpool.Pool
}

func (s *serverStore) Migrate(ctx context.Context) (*driver.MigrateResult, error) {
	return serverMigrations.migrate(ctx, s.pool)
}

func (s *serverStore) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	return serverMigrations.version(ctx, s.pool)
}

func (s *serverStore) Exec() serverstore.Executor { return &serverExecutor{db: s.pool} }

func (s *serverStore) UnwrapExecutor(tx pgx.Tx) serverstore.Executor { return &serverExecutor{db: tx} }

// serverExecutor runs the server's named queries on a pool or in a transaction.
type serverExecutor struct {
	db dbtx
}

func (e *serverExecutor) APIKeyInsert(ctx context.Context, k *serverstore.APIKey) error {
	_, err := e.db.Exec(ctx, sq.Get("APIKeyInsert"), named{
		"id": k.ID, "name": k.Name, "hash": k.Hash, "scopes": k.Scopes, "now": driver.NowOf(k.CreatedAt),
	})
	return err
}

func scanAPIKey(r pgx.CollectableRow) (*serverstore.APIKey, error) {
	k := &serverstore.APIKey{}
	err := r.Scan(&k.ID, &k.Name, &k.Hash, &k.Scopes, &k.CreatedAt, &k.RevokedAt)
	return k, err
}

func (e *serverExecutor) APIKeyGetByHash(ctx context.Context, hash []byte) (*serverstore.APIKey, error) {
	return queryOne(ctx, e.db, scanAPIKey, sq.Get("APIKeyGetByHash"), named{"hash": hash})
}

func (e *serverExecutor) APIKeyList(ctx context.Context) ([]*serverstore.APIKey, error) {
	return query(ctx, e.db, scanAPIKey, sq.Get("APIKeyList"))
}

func (e *serverExecutor) APIKeyRevoke(ctx context.Context, id string, now *time.Time) (bool, error) {
	tag, err := e.db.Exec(ctx, sq.Get("APIKeyRevoke"), named{"id": id, "now": now})
	return tag.RowsAffected() == 1, err
}

func scanPreference(r pgx.CollectableRow) (*serverstore.Preference, error) {
	p := &serverstore.Preference{}
	err := r.Scan(&p.Recipient, &p.OptOut, &p.QuietStart, &p.QuietEnd, &p.TimeZone, &p.UpdatedAt)
	return p, err
}

func (e *serverExecutor) PreferenceGet(ctx context.Context, recipient string) (*serverstore.Preference, error) {
	return queryOne(ctx, e.db, scanPreference, sq.Get("PreferenceGet"), named{"recipient": recipient})
}

func (e *serverExecutor) PreferenceGetMany(ctx context.Context, recipients []string) ([]*serverstore.Preference, error) {
	return queryPlanned(ctx, e.db, scanPreference, "PreferenceGetMany", sq.Get("PreferenceGetMany"), named{"recipients": recipients})
}

func (e *serverExecutor) PreferencePut(ctx context.Context, p *serverstore.Preference, now *time.Time) error {
	optOut := p.OptOut
	if optOut == nil {
		optOut = []string{}
	}
	_, err := e.db.Exec(ctx, sq.Get("PreferencePut"), named{
		"recipient": p.Recipient, "opt_out": optOut, "quiet_start": p.QuietStart, "quiet_end": p.QuietEnd,
		"time_zone": p.TimeZone, "now": now,
	})
	return err
}

func (e *serverExecutor) PreferenceDeleteByRecipient(ctx context.Context, recipient string) (int, error) {
	tag, err := e.db.Exec(ctx, sq.Get("PreferenceDeleteByRecipient"), named{"recipient": recipient})
	return int(tag.RowsAffected()), err
}
