// Package config resolves the server's settings — flags over environment over
// the configuration file (JSON) over defaults — validates them once with errors
// that name the setting, opens the database and builds the providers.
package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/registry"
	"github.com/oncepush/oncepush/internal/strictjson"
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
	EnvAccessLog     = "ONCEPUSH_ACCESS_LOG"
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
		// AccessLog logs one line per API request (serve).
		AccessLog bool `json:"accessLog,omitempty"`
		// MaxBacklogAge, when set, refuses sends for now with 429 while the
		// oldest due delivery outside campaigns has waited longer
		// (backpressure; a campaign's deliveries wait in a lane of their own).
		MaxBacklogAge Duration `json:"maxBacklogAge,omitempty"`
	} `json:"http,omitzero"`
	Engine     Engine              `json:"engine,omitzero"`
	Categories map[string]Category `json:"categories,omitempty"`
	Providers  Providers           `json:"providers,omitempty"`
}

// Engine is the "engine" section: an oncepush.Config, decoded by the json
// tags of its fields (every field with a tag other than "-" is a setting), with
// durations written as strings ("10s", "1h30m"). Zero means the library's
// default.
type Engine struct {
	oncepush.Config
}

// Category is a declared notification category.
type Category = oncepush.Category

// Providers configure the transports, one section per transport
// (internal/registry); an absent one is not served: its devices are recorded
// as rejected with a text that says so, and a delivery with no other device
// ends failed.
type Providers = registry.Sections

// Flags are the command-line values that override everything else; empty
// means "not given".
type Flags struct {
	Listen, MetricsListen, Database, Config, LogFormat, LogLevel string
	// AccessLog is --access-log as given: "true", "false" or "".
	AccessLog string
}

// Settings are the resolved settings.
type Settings struct {
	File
	ConfigPath string
	// from names, by file key ("listen"), where each value given as a
	// flag, an environment variable or in the file came from, as the user
	// wrote it (Origin).
	from map[string]string
}

// Origin names where the setting with the file key key ("listen",
// "log.level") came from, as the user wrote it: its flag ("--listen"),
// environment variable ("ONCEPUSH_LISTEN") or file key ("listen"); its flag
// when none was given. An error in the value names its origin.
func (st *Settings) Origin(key string) string {
	if from, ok := st.from[key]; ok {
		return from
	}
	for _, l := range layers {
		if l.key == key {
			return l.flag
		}
	}
	return key
}

// layers are the settings that a flag and an environment variable
// override, by file key.
var layers = []struct{ key, flag, env string }{
	{"listen", "--listen", EnvListen},
	{"metricsListen", "--metrics-listen", EnvMetricsListen},
	{"database", "--database", EnvDatabase},
	{"log.format", "--log-format", EnvLogFormat},
	{"log.level", "--log-level", EnvLogLevel},
}

// pick resolves the layered setting key: the flag's value over the
// environment's over the file's over def, remembering where it came from.
func (st *Settings) pick(getenv func(string) string, key, flag, file, def string) string {
	for _, l := range layers {
		if l.key != key {
			continue
		}
		for _, v := range []struct{ from, value string }{{l.flag, flag}, {l.env, getenv(l.env)}, {key, file}} {
			if v.value != "" {
				st.from[key] = v.from
				return v.value
			}
		}
	}
	return def
}

// LogValue implements slog.LogValuer: the resolved settings, for a debug
// line at start-up (the engine's are logged when its client starts). Fields are listed one by one, so that a setting added
// later is not logged until someone decides it may be; the database URL
// loses its password, and credentials show only whether they are set.
func (st *Settings) LogValue() slog.Value {
	database := st.Database
	if strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://") {
		database = RedactURL(database)
	} else if KeywordDSN(database) {
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
		slog.Duration("max_backlog_age", time.Duration(st.HTTP.MaxBacklogAge)),
		slog.Duration("shutdown_timeout", time.Duration(st.HTTP.ShutdownTimeout)),
		slog.Bool("access_log", st.HTTP.AccessLog),
	}
	attrs = append(attrs, registry.Default().LogAttrs(st.Providers)...)
	return slog.GroupValue(attrs...)
}

// Error names the setting at fault.
type Error struct {
	Setting string
	Problem string
	// Path is, for a fault inside the configuration file (Setting
	// "--config" or ONCEPUSH_CONFIG, whichever named it), the path of the
	// setting at fault: "engine.runBudget", "providers.fcm.serviceAccount";
	// empty when the whole file is.
	Path string
}

func (e *Error) Error() string { return e.Setting + ": " + e.Problem }

func settingErr(setting, format string, args ...any) *Error {
	return &Error{Setting: setting, Problem: fmt.Sprintf(format, args...)}
}

// Load resolves the settings from flags, the environment (getenv) and the
// configuration file the flags or environment name.
func Load(f Flags, getenv func(string) string) (*Settings, error) {
	st := &Settings{ConfigPath: cmp.Or(f.Config, getenv(EnvConfig)), from: map[string]string{}}
	configFrom := "--config"
	if f.Config == "" && st.ConfigPath != "" {
		configFrom = EnvConfig
	}
	if st.ConfigPath != "" {
		b, err := os.ReadFile(st.ConfigPath)
		if err != nil {
			return nil, settingErr(configFrom, "cannot read %s: %v", st.ConfigPath, err)
		}
		if err := decodeFile(b, &st.File); err != nil {
			e := settingErr(configFrom, "%s: %v", st.ConfigPath, err)
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
	st.Listen = st.pick(getenv, "listen", f.Listen, st.Listen, ListenDefault)
	st.MetricsListen = st.pick(getenv, "metricsListen", f.MetricsListen, st.MetricsListen, "")
	st.Database = st.pick(getenv, "database", f.Database, st.Database, DatabaseDefault)
	st.Log.Format = st.pick(getenv, "log.format", f.LogFormat, st.Log.Format, "text")
	st.Log.Level = st.pick(getenv, "log.level", f.LogLevel, st.Log.Level, "info")
	if st.HTTP.ShutdownTimeout == 0 {
		st.HTTP.ShutdownTimeout = Duration(ShutdownTimeoutDefault)
	}
	for _, v := range []struct{ setting, value string }{{EnvAccessLog, getenv(EnvAccessLog)}, {"--access-log", f.AccessLog}} {
		if v.value == "" {
			continue
		}
		on, err := strconv.ParseBool(v.value)
		if err != nil {
			return nil, settingErr(v.setting, "%q is neither true nor false", v.value)
		}
		st.HTTP.AccessLog = on
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
		return settingErr(st.Origin("listen"), "%q is not host:port (%v)", st.Listen, err)
	}
	if st.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(st.MetricsListen); err != nil {
			return settingErr(st.Origin("metricsListen"), "%q is not host:port (%v)", st.MetricsListen, err)
		}
	}
	switch st.Log.Format {
	case "text", "json":
	default:
		return settingErr(st.Origin("log.format"), "%q is neither text nor json", st.Log.Format)
	}
	if _, err := parseLevel(st.Log.Level); err != nil {
		return settingErr(st.Origin("log.level"), "%v", err)
	}
	if st.HTTP.MaxBodyBytes < 0 {
		return settingErr("http.maxBodyBytes", "must not be negative")
	}
	if st.HTTP.MaxBacklogAge < 0 {
		return settingErr("http.maxBacklogAge", "must not be negative")
	}
	// The engine's own validation names its Go field; check it now, before
	// serving, and name the setting.
	if err := st.ClientConfig().Validate(); err != nil {
		return engineError(err)
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
	cfg := st.Engine.Config
	cfg.Categories = st.Categories
	// The transports the server speaks, the registry's, whether or not a
	// provider is configured for each.
	cfg.Transports = registry.Default().Specs()
	return &cfg
}

// KeywordDSN reports whether s is a libpq key=value connection string
// ("host=db user=push password=…"), which --database does not take.
func KeywordDSN(s string) bool {
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

// BuildProviders builds the configured providers, in the registry's order.
// The providers tell the time of the client they are given to.
func (st *Settings) BuildProviders(log *slog.Logger) ([]oncepush.Provider, error) {
	providers, err := registry.Default().Providers(st.Providers, registry.Env{Logger: log})
	var se *registry.SettingError
	if errors.As(err, &se) {
		return nil, &Error{Setting: se.Setting, Problem: se.Problem}
	}
	return providers, err
}

// RedactURL is a PostgreSQL URL without its password, for logs and errors.
func RedactURL(s string) string {
	cfg, err := pgxpool.ParseConfig(s)
	if err != nil {
		return "(unparsable URL)"
	}
	// Every host a multi-host URL names (a primary and its standbys), in
	// the order they are tried.
	hosts := fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	for _, f := range cfg.ConnConfig.Fallbacks {
		if h := fmt.Sprintf("%s:%d", f.Host, f.Port); !strings.Contains(","+hosts+",", ","+h+",") {
			hosts += "," + h
		}
	}
	return fmt.Sprintf("%s@%s/%s", cfg.ConnConfig.User, hosts, cfg.ConnConfig.Database)
}
