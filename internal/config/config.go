// Package config resolves the server's settings — flags over environment over
// the configuration file (JSON) over defaults — validates them once with errors
// that name the setting, opens the database and builds the providers.
package config

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/internal/strictjson"
	"github.com/oncepush/oncepush/provider/apns"
	"github.com/oncepush/oncepush/provider/fcm"
	"github.com/oncepush/oncepush/provider/rustore"
	"github.com/oncepush/oncepush/provider/webpush"
)

// Defaults.
const (
	ListenDefault          = "127.0.0.1:8080"
	DatabaseDefault        = "oncepush.db"
	ShutdownTimeoutDefault = 30 * time.Second
	// PoolMaxConnsDefault is the PostgreSQL pool size when the URL sets no
	// pool_max_conns.
	PoolMaxConnsDefault = 16
)

// Environment variables (each mirrors a flag).
const (
	EnvListen        = "ONCEPUSH_LISTEN"
	EnvMetricsListen = "ONCEPUSH_METRICS_LISTEN"
	EnvDatabase      = "ONCEPUSH_DATABASE_URL"
	EnvConfig        = "ONCEPUSH_CONFIG"
	EnvLogFormat     = "ONCEPUSH_LOG_FORMAT"
	EnvLogLevel      = "ONCEPUSH_LOG_LEVEL"
)

// Duration is a time.Duration written as a string in JSON ("10s", "1h30m").
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`a duration is a string such as "10s" or "1h30m"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration such as \"10s\" or \"1h30m\"", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// File is the configuration file. Every field is optional.
type File struct {
	Listen string `json:"listen,omitempty"`
	// MetricsListen, when set, is the address of a listener of its own for
	// /metrics, /healthz and /readyz; /metrics is then not on Listen.
	MetricsListen string `json:"metricsListen,omitempty"`
	Database      string `json:"database,omitempty"`
	Log           struct {
		Format string `json:"format,omitempty"` // text (default) or json
		Level  string `json:"level,omitempty"`  // debug, info (default), warn, error
	} `json:"log,omitzero"`
	HTTP struct {
		MaxBodyBytes    int64    `json:"maxBodyBytes,omitempty"`
		ShutdownTimeout Duration `json:"shutdownTimeout,omitempty"`
	} `json:"http,omitzero"`
	Engine     Engine              `json:"engine,omitzero"`
	Categories map[string]Category `json:"categories,omitempty"`
	Providers  Providers           `json:"providers,omitzero"`
}

// Engine mirrors oncepush.Config; zero means the library's default.
type Engine struct {
	BatchSize              int      `json:"batchSize,omitempty"`
	Workers                int      `json:"workers,omitempty"`
	ConcurrentSends        int      `json:"concurrentSends,omitempty"`
	RunBudget              Duration `json:"runBudget,omitempty"`
	SendTimeout            Duration `json:"sendTimeout,omitempty"`
	Lease                  Duration `json:"lease,omitempty"`
	MaxAttempts            int      `json:"maxAttempts,omitempty"`
	BackoffMin             Duration `json:"backoffMin,omitempty"`
	BackoffMax             Duration `json:"backoffMax,omitempty"`
	MessageLifetime        Duration `json:"messageLifetime,omitempty"`
	Retention              Duration `json:"retention,omitempty"`
	MaxDevicesPerRecipient int      `json:"maxDevicesPerRecipient,omitempty"`
	CleanupInterval        Duration `json:"cleanupInterval,omitempty"`
	PollInterval           Duration `json:"pollInterval,omitempty"`
	Ambiguity              string   `json:"ambiguity,omitempty"`
}

// Category is a declared notification category.
type Category struct {
	Ambiguity string `json:"ambiguity,omitempty"`
}

// Providers configure the transports; an absent one is not served (its
// devices' deliveries are recorded as rejected with a text that says so).
type Providers struct {
	FCM     *FCM     `json:"fcm,omitempty"`
	APNs    *APNs    `json:"apns,omitempty"`
	WebPush *WebPush `json:"webpush,omitempty"`
	RuStore *RuStore `json:"rustore,omitempty"`
}

// FCM configures provider/fcm.
type FCM struct {
	ServiceAccountFile string `json:"serviceAccountFile"`
	// TokenURI replaces the service account's token_uri (a fake OAuth server).
	TokenURI  string `json:"tokenURI,omitempty"`
	BaseURL   string `json:"baseURL,omitempty"`
	WebOrigin string `json:"webOrigin,omitempty"`
	// CAFile is a PEM file of certificate authorities to trust instead of the
	// system's (the fake providers' certificate).
	CAFile string `json:"caFile,omitempty"`
}

// APNs configures provider/apns.
type APNs struct {
	KeyFile     string `json:"keyFile"`
	KeyID       string `json:"keyID"`
	TeamID      string `json:"teamID"`
	Topic       string `json:"topic"`
	Environment string `json:"environment,omitempty"`
	Host        string `json:"host,omitempty"`
	PushType    string `json:"pushType,omitempty"`
	CAFile      string `json:"caFile,omitempty"`
}

// WebPush configures provider/webpush. The private key may be given inline or
// as a file.
type WebPush struct {
	VAPIDPrivateKey     string   `json:"vapidPrivateKey,omitempty"`
	VAPIDPrivateKeyFile string   `json:"vapidPrivateKeyFile,omitempty"`
	VAPIDSubject        string   `json:"vapidSubject"`
	AllowedHosts        []string `json:"allowedHosts,omitempty"`
	AllowLoopback       bool     `json:"allowLoopback,omitempty"`
	AllowPrivate        bool     `json:"allowPrivate,omitempty"`
	CAFile              string   `json:"caFile,omitempty"`
}

// RuStore configures provider/rustore. The service token may be given inline
// or as a file.
type RuStore struct {
	ProjectID        string `json:"projectID"`
	ServiceToken     string `json:"serviceToken,omitempty"`
	ServiceTokenFile string `json:"serviceTokenFile,omitempty"`
	BaseURL          string `json:"baseURL,omitempty"`
	CAFile           string `json:"caFile,omitempty"`
}

// Flags are the command-line values that override everything else; empty
// means "not given".
type Flags struct {
	Listen, MetricsListen, Database, Config, LogFormat, LogLevel string
}

// Settings are the resolved settings.
type Settings struct {
	File
	ConfigPath string
}

// LogValue implements slog.LogValuer: the resolved settings, for a debug
// line at start-up (the engine's are logged when its client starts). Fields are listed one by one, so that a setting added
// later is not logged until someone decides it may be; the database URL
// loses its password, and credentials show only whether they are set.
func (st *Settings) LogValue() slog.Value {
	set := func(v string) string {
		if v == "" {
			return ""
		}
		return "[redacted]"
	}
	database := st.Database
	if strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://") {
		database = redactURL(database)
	} else if keywordDSN(database) {
		database = "(a key=value string)"
	}
	attrs := []slog.Attr{
		slog.String("config", st.ConfigPath),
		slog.String("listen", st.Listen),
		slog.String("metrics_listen", st.MetricsListen),
		slog.String("database", database),
		slog.String("log_format", st.Log.Format),
		slog.String("log_level", st.Log.Level),
		slog.Int64("max_body_bytes", st.HTTP.MaxBodyBytes),
		slog.Duration("shutdown_timeout", time.Duration(st.HTTP.ShutdownTimeout)),
	}
	p := st.Providers
	if c := p.FCM; c != nil {
		attrs = append(attrs, slog.Group("fcm", slog.String("service_account_file", c.ServiceAccountFile),
			slog.String("token_uri", c.TokenURI), slog.String("base_url", c.BaseURL), slog.String("web_origin", c.WebOrigin),
			slog.String("ca_file", c.CAFile)))
	}
	if c := p.APNs; c != nil {
		attrs = append(attrs, slog.Group("apns", slog.String("key_file", c.KeyFile), slog.String("key_id", c.KeyID),
			slog.String("team_id", c.TeamID), slog.String("topic", c.Topic), slog.String("environment", c.Environment),
			slog.String("host", c.Host), slog.String("push_type", c.PushType), slog.String("ca_file", c.CAFile)))
	}
	if c := p.WebPush; c != nil {
		attrs = append(attrs, slog.Group("webpush", slog.String("vapid_private_key", set(c.VAPIDPrivateKey)),
			slog.String("vapid_private_key_file", c.VAPIDPrivateKeyFile), slog.String("vapid_subject", c.VAPIDSubject),
			slog.Any("allowed_hosts", c.AllowedHosts), slog.Bool("allow_loopback", c.AllowLoopback),
			slog.Bool("allow_private", c.AllowPrivate), slog.String("ca_file", c.CAFile)))
	}
	if c := p.RuStore; c != nil {
		attrs = append(attrs, slog.Group("rustore", slog.String("project_id", c.ProjectID),
			slog.String("service_token", set(c.ServiceToken)), slog.String("service_token_file", c.ServiceTokenFile),
			slog.String("base_url", c.BaseURL), slog.String("ca_file", c.CAFile)))
	}
	return slog.GroupValue(attrs...)
}

// Error names the setting at fault.
type Error struct {
	Setting string
	Problem string
	// Path is, for a fault inside the configuration file (Setting
	// "--config"), the path of the setting at fault: "engine.runBudget",
	// "providers.fcm.serviceAccount"; empty when the whole file is.
	Path string
}

func (e *Error) Error() string { return e.Setting + ": " + e.Problem }

func settingErr(setting, format string, args ...any) *Error {
	return &Error{Setting: setting, Problem: fmt.Sprintf(format, args...)}
}

// Load resolves the settings from flags, the environment (getenv) and the
// configuration file the flags or environment name.
func Load(f Flags, getenv func(string) string) (*Settings, error) {
	st := &Settings{ConfigPath: cmp.Or(f.Config, getenv(EnvConfig))}
	if st.ConfigPath != "" {
		b, err := os.ReadFile(st.ConfigPath)
		if err != nil {
			return nil, settingErr("--config", "cannot read %s: %v", st.ConfigPath, err)
		}
		if err := decodeFile(b, &st.File); err != nil {
			e := settingErr("--config", "%s: %v", st.ConfigPath, err)
			var pe *strictjson.Error
			var se *strictjson.ShapeError
			switch {
			case errors.As(err, &pe):
				e.Path = pe.Path
			case errors.As(err, &se):
				e.Path = se.Path
			}
			return nil, e
		}
	}
	st.Listen = cmp.Or(f.Listen, getenv(EnvListen), st.Listen, ListenDefault)
	st.MetricsListen = cmp.Or(f.MetricsListen, getenv(EnvMetricsListen), st.MetricsListen)
	st.Database = cmp.Or(f.Database, getenv(EnvDatabase), st.Database, DatabaseDefault)
	st.Log.Format = cmp.Or(f.LogFormat, getenv(EnvLogFormat), st.Log.Format, "text")
	st.Log.Level = cmp.Or(f.LogLevel, getenv(EnvLogLevel), st.Log.Level, "info")
	if st.HTTP.ShutdownTimeout == 0 {
		st.HTTP.ShutdownTimeout = Duration(ShutdownTimeoutDefault)
	}
	return st, st.validate()
}

// decodeFile reads the JSON configuration strictly, by the rules request
// bodies are read by (internal/strictjson): one I-JSON value (UTF-8, no name
// twice, no lone surrogate, no number beyond a double), every setting named
// exactly as documented, case included, with a value of its kind, and a
// duration a duration. An error names the setting's path, so that a typo
// cannot silently fall back to a default, nor the second of two values win.
func decodeFile(b []byte, f *File) error {
	doc, err := strictjson.Parse(b)
	if err != nil {
		return fmt.Errorf("not a valid configuration file: %w", err)
	}
	if err := strictjson.Check(doc, reflect.TypeFor[File]()); err != nil {
		var se *strictjson.ShapeError
		switch {
		case !errors.As(err, &se):
			return err
		case se.Fault == strictjson.Unknown:
			return fmt.Errorf("unknown setting %s (names are case-sensitive): %w", se.Path, err)
		case se.Path == "":
			return fmt.Errorf("the file %s: %w", se.Reason, err)
		}
		return err
	}
	if err := json.Unmarshal(b, f); err != nil {
		return fmt.Errorf("decode a checked file: %w", err) // Check refused what this could
	}
	return nil
}

func (st *Settings) validate() error {
	if _, _, err := net.SplitHostPort(st.Listen); err != nil {
		return settingErr("--listen", "%q is not host:port (%v)", st.Listen, err)
	}
	if st.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(st.MetricsListen); err != nil {
			return settingErr("--metrics-listen", "%q is not host:port (%v)", st.MetricsListen, err)
		}
	}
	switch st.Log.Format {
	case "text", "json":
	default:
		return settingErr("--log-format", "%q is neither text nor json", st.Log.Format)
	}
	if _, err := parseLevel(st.Log.Level); err != nil {
		return settingErr("--log-level", "%v", err)
	}
	if st.HTTP.MaxBodyBytes < 0 {
		return settingErr("http.maxBodyBytes", "must not be negative")
	}
	// The engine's own validation names the field; check it now, before serving.
	if err := st.ClientConfig().Validate(); err != nil {
		return settingErr("engine", "%v", err)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not one of debug, info, warn, error", s)
	}
	return l, nil
}

// Logger builds the process's logger.
func (st *Settings) Logger(w *os.File) *slog.Logger {
	level, _ := parseLevel(st.Log.Level)
	opts := &slog.HandlerOptions{Level: level}
	if st.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// ClientConfig is the engine configuration the settings describe (without
// providers, eligibility, observer and logger, which the caller adds).
func (st *Settings) ClientConfig() *oncepush.Config {
	e := st.Engine
	cfg := &oncepush.Config{
		BatchSize: e.BatchSize, Workers: e.Workers, ConcurrentSends: e.ConcurrentSends,
		RunBudget: time.Duration(e.RunBudget), SendTimeout: time.Duration(e.SendTimeout), Lease: time.Duration(e.Lease),
		MaxAttempts: e.MaxAttempts, BackoffMin: time.Duration(e.BackoffMin), BackoffMax: time.Duration(e.BackoffMax),
		MessageLifetime: time.Duration(e.MessageLifetime), Retention: time.Duration(e.Retention),
		MaxDevicesPerRecipient: e.MaxDevicesPerRecipient, CleanupInterval: time.Duration(e.CleanupInterval),
		PollInterval: time.Duration(e.PollInterval), Ambiguity: oncepush.AmbiguityPolicy(e.Ambiguity),
	}
	if st.Categories != nil {
		cfg.Categories = map[string]oncepush.Category{}
		for name, c := range st.Categories {
			cfg.Categories[name] = oncepush.Category{Ambiguity: oncepush.AmbiguityPolicy(c.Ambiguity)}
		}
	}
	return cfg
}

// Database is an opened database: exactly one of Postgres and SQLite is set.
type Database struct {
	Postgres *postgres.Driver
	SQLite   *sqlite.Driver
	close    func()
}

// Close closes what OpenDatabase opened.
func (d *Database) Close() { d.close() }

// Kind is "postgres" or "sqlite".
func (d *Database) Kind() string {
	if d.Postgres != nil {
		return "postgres"
	}
	return "sqlite"
}

// OpenDatabase opens the database the settings name: a postgres:// or
// postgresql:// URL, or else a SQLite file path (an optional "sqlite:" prefix is
// dropped). Nothing is written; Migrate is the caller's choice.
func (st *Settings) OpenDatabase(ctx context.Context) (*Database, error) {
	dsn := st.Database
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, settingErr("--database", "not a PostgreSQL URL: %v", err)
		}
		if !strings.Contains(dsn, "pool_max_conns") {
			// pgxpool's default (4 on a 2-core host) queues concurrent API
			// requests; the URL's pool_max_conns overrides this.
			cfg.MaxConns = PoolMaxConnsDefault
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, settingErr("--database", "%v", err)
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := pool.Ping(pctx); err != nil {
			pool.Close()
			return nil, settingErr("--database", "cannot reach PostgreSQL at %s: %v", redactURL(dsn), err)
		}
		return &Database{Postgres: postgres.New(pool), close: pool.Close}, nil
	}
	if keywordDSN(dsn) {
		// Taken as a SQLite path it would become a file named after the
		// password, and the error would repeat it.
		return nil, settingErr("--database", "is a PostgreSQL key=value connection string; give a postgres:// URL (anything else is a SQLite file path)")
	}
	path := strings.TrimPrefix(dsn, "sqlite:")
	drv, err := sqlite.Open(path, nil)
	if err != nil {
		return nil, settingErr("--database", "%v", err)
	}
	return &Database{SQLite: drv, close: func() { _ = drv.Close() }}, nil
}

// keywordDSN reports whether s is a libpq key=value connection string
// ("host=db user=push password=…"), which OpenDatabase does not take.
func keywordDSN(s string) bool {
	for _, f := range strings.Fields(s) {
		k, _, ok := strings.Cut(f, "=")
		switch k {
		case "host", "hostaddr", "port", "dbname", "user", "password", "sslmode", "passfile", "connect_timeout":
			if ok {
				return true
			}
		}
	}
	return false
}

// Providers builds the configured providers.
func (st *Settings) BuildProviders(log *slog.Logger) ([]oncepush.Provider, error) {
	p := st.Providers
	var out []oncepush.Provider
	if c := p.FCM; c != nil {
		sa, err := fcm.LoadServiceAccount(c.ServiceAccountFile)
		if err != nil {
			return nil, settingErr("providers.fcm.serviceAccountFile", "%v", err)
		}
		if c.TokenURI != "" {
			if sa, err = replaceTokenURI(sa, c.TokenURI); err != nil {
				return nil, settingErr("providers.fcm.serviceAccountFile", "%v", err)
			}
		}
		tlsConfig, err := loadCA("providers.fcm.caFile", c.CAFile)
		if err != nil {
			return nil, err
		}
		f, err := fcm.New(fcm.Config{ServiceAccountJSON: sa, BaseURL: c.BaseURL, WebOrigin: c.WebOrigin, TLSConfig: tlsConfig, Logger: log})
		if err != nil {
			return nil, settingErr("providers.fcm", "%v", err)
		}
		out = append(out, f)
	}
	if c := p.APNs; c != nil {
		key, err := apns.ReadKeyFile(c.KeyFile)
		if err != nil {
			return nil, settingErr("providers.apns.keyFile", "%v", err)
		}
		tlsConfig, err := loadCA("providers.apns.caFile", c.CAFile)
		if err != nil {
			return nil, err
		}
		a, err := apns.New(apns.Config{Key: key, KeyID: c.KeyID, TeamID: c.TeamID, Topic: c.Topic, Environment: c.Environment,
			Host: c.Host, PushType: c.PushType, TLSConfig: tlsConfig, Logger: log})
		if err != nil {
			return nil, settingErr("providers.apns", "%v", err)
		}
		out = append(out, a)
	}
	if c := p.WebPush; c != nil {
		key := c.VAPIDPrivateKey
		if c.VAPIDPrivateKeyFile != "" {
			b, err := os.ReadFile(c.VAPIDPrivateKeyFile)
			if err != nil {
				return nil, settingErr("providers.webpush.vapidPrivateKeyFile", "%v", err)
			}
			key = strings.TrimSpace(string(b))
		}
		tlsConfig, err := loadCA("providers.webpush.caFile", c.CAFile)
		if err != nil {
			return nil, err
		}
		w, err := webpush.New(webpush.Config{VAPIDPrivateKey: key, VAPIDSubject: c.VAPIDSubject, AllowedHosts: c.AllowedHosts,
			AllowLoopback: c.AllowLoopback, AllowPrivate: c.AllowPrivate, TLSConfig: tlsConfig, Logger: log})
		if err != nil {
			return nil, settingErr("providers.webpush", "%v", err)
		}
		out = append(out, w)
	}
	if c := p.RuStore; c != nil {
		token := c.ServiceToken
		if c.ServiceTokenFile != "" {
			b, err := os.ReadFile(c.ServiceTokenFile)
			if err != nil {
				return nil, settingErr("providers.rustore.serviceTokenFile", "%v", err)
			}
			token = strings.TrimSpace(string(b))
		}
		tlsConfig, err := loadCA("providers.rustore.caFile", c.CAFile)
		if err != nil {
			return nil, err
		}
		r, err := rustore.New(rustore.Config{ProjectID: c.ProjectID, ServiceToken: rustore.ServiceToken(token), BaseURL: c.BaseURL,
			TLSConfig: tlsConfig, Logger: log})
		if err != nil {
			return nil, settingErr("providers.rustore", "%v", err)
		}
		out = append(out, r)
	}
	return out, nil
}

func loadCA(setting, path string) (*tls.Config, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, settingErr(setting, "%v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, settingErr(setting, "%s holds no PEM certificate", path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func replaceTokenURI(sa []byte, uri string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(sa, &m); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	m["token_uri"] = uri
	return json.Marshal(m)
}

func redactURL(s string) string {
	cfg, err := pgxpool.ParseConfig(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}
