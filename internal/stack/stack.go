// Package stack opens the storage the settings name and builds on it what a
// command runs: the engine's client and, for the commands that serve, the HTTP
// server. It is the one place that knows which storage drivers exist and what
// their transaction types are; the commands above it work with a Storage and
// a Stack, whatever the driver.
//
// Adding a storage driver means one case in Open; nothing in the commands.
package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/nearest"
	"github.com/oncepush/oncepush/internal/server"
)

// Storage is an opened database, free of its driver's transaction type.
type Storage struct {
	// Name is the driver's name: "postgres" or "sqlite".
	Name string
	// Exec runs the engine's storage operations outside a transaction.
	Exec driver.Executor
	// Server runs the server's own (API keys, preferences) outside a
	// transaction.
	Server serverstore.Executor

	migrate       func(context.Context) (*driver.MigrateResult, error)
	migrateServer func(context.Context) (*driver.MigrateResult, error)
	assemble      func(*oncepush.Config, *ServerOptions) (*Stack, error)
	close         func()
}

// Stack is the engine, and the HTTP server when one was asked for, on a
// Storage.
type Stack struct {
	// Client is the engine's client.
	Client Engine
	// Server is nil unless Assemble was given ServerOptions.
	Server HTTPServer
}

// Engine is what the commands use of an oncepush.Client, whatever its
// transaction type.
type Engine interface {
	Send(ctx context.Context, recipients []string, msg oncepush.Message, opts *oncepush.SendOptions) (oncepush.SendResult, error)
	RequestHash(recipients []string, msg oncepush.Message, opts oncepush.SendOptions) ([]byte, error)
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// HTTPServer is what the commands use of a server.Server, whatever its
// transaction type.
type HTTPServer interface {
	Handler() http.Handler
	OperationsHandler() http.Handler
	RefreshBacklog(ctx context.Context) error
	WatchBacklog(ctx context.Context, every time.Duration)
	BacklogInterval() time.Duration
}

// ServerOptions are server.Options without what Assemble supplies itself
// (the client and the server's store).
type ServerOptions struct {
	Metrics         *server.Metrics
	SeparateMetrics bool
	MaxBodyBytes    int64
	Version         string
	AccessLog       bool
	MaxBacklogAge   time.Duration
}

// Open opens the database the settings name: a postgres:// or postgresql://
// URL, or else a SQLite file, by its path or a file: or sqlite: URL
// (sqliteFile). A URL of any other scheme is refused, naming the ones
// taken: "postgress://…" is a typing slip, not a file to create. Nothing is
// written; migrating is the caller's choice (Migrate). Errors name the
// database setting where it was given (--database, ONCEPUSH_DATABASE_URL
// or the file's database), say whether the database is missing, the login
// refused or the server not reached, and never hold a password.
func Open(ctx context.Context, st *config.Settings) (*Storage, error) {
	dsn := st.Database
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		pool, err := openPool(ctx, st, dsn)
		if err != nil {
			return nil, err
		}
		return on[pgx.Tx](postgres.New(pool), pool.Close), nil
	}
	if config.KeywordDSN(dsn) {
		// Taken as a SQLite path it would become a file named after the
		// password, and the error would repeat it.
		return nil, databaseErr(st, "is a PostgreSQL key=value connection string; give a postgres:// URL (anything else is a SQLite file path)")
	}
	path, problem := sqliteFile(dsn)
	if problem != "" {
		return nil, databaseErr(st, problem)
	}
	drv, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		return nil, databaseErr(st, err.Error())
	}
	return on(drv, func() { _ = drv.Close() }), nil
}

// Schemes are the database URL schemes Open takes, in the order errors
// list them.
var Schemes = []string{"postgres", "postgresql", "sqlite", "file"}

// urlScheme is the scheme a database URL starts with. One letter is no
// scheme: C:\data\oncepush.db is a path.
var urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]+):`)

// sqliteFile is the SQLite file dsn names, or the problem with it. A path
// is taken as written; "sqlite:" and "file:" name a path after them, as
// file URLs do ("file:oncepush.db", "file:///var/lib/oncepush.db"), without
// a query (oncepush sets SQLite's options itself). Another scheme followed
// by "//" is a URL of a database Open does not know, or a slip.
func sqliteFile(dsn string) (path, problem string) {
	m := urlScheme.FindStringSubmatch(dsn)
	if m == nil {
		return dsn, ""
	}
	switch scheme, rest := m[1], dsn[len(m[0]):]; scheme {
	case "sqlite", "file":
		if !strings.HasPrefix(rest, "//") && !strings.ContainsAny(rest, "?#%") {
			return rest, "" // sqlite:oncepush.db, file:/var/lib/oncepush.db
		}
		u, err := url.Parse(dsn)
		switch {
		case err != nil:
			return "", fmt.Sprintf("%q is not a %s: URL: %v", dsn, scheme, err)
		case u.Host != "" && u.Host != "localhost":
			return "", fmt.Sprintf("%q names host %q: a SQLite file is on this host (%s:///path/to/oncepush.db)", dsn, u.Host, scheme)
		case u.RawQuery != "" || u.Fragment != "":
			return "", fmt.Sprintf("%q has a query or a fragment; oncepush sets SQLite's options itself: give the file alone", dsn)
		case u.Opaque != "":
			p, err := url.PathUnescape(u.Opaque)
			if err != nil {
				return "", fmt.Sprintf("%q is not a %s: URL: %v", dsn, scheme, err)
			}
			return p, ""
		}
		return u.Path, ""
	default:
		if !strings.HasPrefix(rest, "//") {
			return dsn, "" // a file name with a colon in it
		}
		problem := fmt.Sprintf("unknown scheme %q in %q: the database is a URL of scheme %s, or a SQLite file path",
			scheme, redactUserinfo(dsn), strings.Join(Schemes, ", "))
		if near, ok := nearest.Name(scheme, Schemes); ok {
			problem += fmt.Sprintf(" (did you mean %s://?)", near)
		}
		return "", problem
	}
}

// redactUserinfo is dsn without the password of its user information, for
// an error: a URL of a scheme nobody parsed may still hold one.
func redactUserinfo(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// OpenMigrated opens the database as Open does and applies both schemas'
// migrations (Migrate): what every command that serves or writes needs.
func OpenMigrated(ctx context.Context, st *config.Settings) (*Storage, error) {
	db, err := Open(ctx, st)
	if err != nil {
		return nil, err
	}
	if _, _, err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func openPool(ctx context.Context, st *config.Settings, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, databaseErr(st, "not a PostgreSQL URL: "+err.Error())
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		// pgxpool's default (4 on a 2-core host) queues concurrent API
		// requests; the URL's pool_max_conns overrides this.
		cfg.MaxConns = config.PoolMaxConnsDefault
	}
	postgres.BoundConnections(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, databaseErr(st, err.Error())
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, databaseErr(st, pingProblem(config.RedactURL(dsn), cfg.ConnConfig.User, cfg.ConnConfig.Database, err))
	}
	return pool, nil
}

// pingTimeout bounds the first connection to PostgreSQL.
const pingTimeout = 10 * time.Second

// The SQLSTATEs of a connection the server refuses that pingProblem tells
// apart.
const (
	sqlstateNoDatabase  = "3D000" // invalid_catalog_name
	sqlstateBadPassword = "28P01" // invalid_password
	sqlstateBadLogin    = "28000" // invalid_authorization_specification: no such role, pg_hba refusal
)

// pingProblem says why the first connection to the server at where (a
// redacted URL) failed, telling apart what the operator fixes differently:
// a database that does not exist, a login refused, a server not reached.
// pgx's and the server's texts name the user and database, never the
// password.
func pingProblem(where, user, database string, err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case sqlstateNoDatabase:
			return fmt.Sprintf("database %q does not exist on the PostgreSQL server at %s: create it (createdb %s), or name another in the URL", database, where, database)
		case sqlstateBadPassword, sqlstateBadLogin:
			return fmt.Sprintf("PostgreSQL at %s refused the login of user %q: authentication failed (%s, SQLSTATE %s)", where, user, pe.Message, pe.Code)
		}
		return fmt.Sprintf("PostgreSQL at %s refused the connection: %s (SQLSTATE %s)", where, pe.Message, pe.Code)
	}
	if pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("cannot reach PostgreSQL at %s: no answer within %s (%v)", where, pingTimeout, err)
	}
	return fmt.Sprintf("cannot reach PostgreSQL at %s: %v", where, err)
}

// databaseErr names the database setting as the operator gave it.
func databaseErr(st *config.Settings, problem string) error {
	return &config.Error{Setting: st.Origin("database"), Problem: problem}
}

// on erases drv's transaction type: every operation a command needs is a
// closure over the typed driver.
func on[TTx any](drv serverstore.Driver[TTx], close func()) *Storage {
	store := drv.ServerStore()
	return &Storage{
		Name:          drv.Name(),
		Exec:          drv.Exec(),
		Server:        store.Exec(),
		migrate:       drv.Migrate,
		migrateServer: store.Migrate,
		close:         close,
		assemble: func(cfg *oncepush.Config, so *ServerOptions) (*Stack, error) {
			return assemble(drv, cfg, so)
		},
	}
}

// Close closes what Open opened.
func (s *Storage) Close() { s.close() }

// Migrate applies the engine's migrations and then the server's, which are
// numbered apart (driver/serverstore), and returns what each applied.
func (s *Storage) Migrate(ctx context.Context) (engine, srv *driver.MigrateResult, err error) {
	if engine, err = s.migrate(ctx); err != nil {
		return nil, nil, fmt.Errorf("migrate %s: %w", s.Name, err)
	}
	if srv, err = s.migrateServer(ctx); err != nil {
		return nil, nil, fmt.Errorf("migrate %s (server): %w", s.Name, err)
	}
	return engine, srv, nil
}

// Assemble builds the engine on the storage with cfg, configured for the
// server's state (server.Configure: preferences as the eligibility rule, and
// deleted with their recipient), and the HTTP server when so is not nil.
// cfg's errors are the library's, naming its field.
func (s *Storage) Assemble(cfg *oncepush.Config, so *ServerOptions) (*Stack, error) {
	return s.assemble(cfg, so)
}

func assemble[TTx any](drv serverstore.Driver[TTx], cfg *oncepush.Config, so *ServerOptions) (*Stack, error) {
	c := *cfg
	store := drv.ServerStore()
	server.Configure(&c, store)
	client, err := oncepush.NewClient(drv, &c)
	if err != nil {
		return nil, err
	}
	st := &Stack{Client: client}
	if so == nil {
		return st, nil
	}
	srv, err := server.New(server.Options[TTx]{
		Client: client, Store: store, Metrics: so.Metrics, Logger: c.Logger,
		MaxBodyBytes: so.MaxBodyBytes, Version: so.Version, SeparateMetrics: so.SeparateMetrics,
		AccessLog: so.AccessLog, MaxBacklogAge: so.MaxBacklogAge,
	})
	if err != nil {
		return nil, err
	}
	st.Server = srv
	return st, nil
}
