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
	"github.com/oncepush/oncepush/internal/nearest"
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

// Errors are every problem found in the settings, in the order of the file
// and then of the settings' table: a person fixes them all in one go. Its
// message is one line per problem.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the first problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Join adds the problems of err (an *Error, Errors, or errors.Join of
// them) to es. An error of another kind is returned as it is, for the
// caller to report alone.
func (es Errors) Join(err error) (Errors, error) {
	switch e := err.(type) {
	case nil:
		return es, nil
	case *Error:
		return append(es, e), nil
	case Errors:
		return append(es, e...), nil
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			var other error
			if es, other = es.Join(inner); other != nil {
				return es, other
			}
		}
		return es, nil
	}
	return es, err
}

// Err is es as an error: nil when there is no problem.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

func settingErr(setting, format string, args ...any) *Error {
	return &Error{Setting: setting, Problem: fmt.Sprintf(format, args...)}
}

// Load resolves the settings from flags, the environment (getenv) and the
// configuration file the flags or environment name. Its error is Errors:
// every problem of the file and of the settings at once. The settings are
// returned with it unless the file could not be read at all, so that a
// caller may add the problems it finds itself (Settings.BuildProviders).
func Load(f Flags, getenv func(string) string) (*Settings, error) {
	st := &Settings{ConfigPath: cmp.Or(f.Config, getenv(EnvConfig)), from: map[string]string{}}
	configFrom := "--config"
	if f.Config == "" && st.ConfigPath != "" {
		configFrom = EnvConfig
	}
	var errs Errors
	if st.ConfigPath != "" {
		b, err := os.ReadFile(st.ConfigPath)
		if err != nil {
			return nil, Errors{settingErr(configFrom, "cannot read %s: %v", st.ConfigPath, err)}
		}
		faults, err := decodeFile(b, &st.File)
		if err != nil {
			e := settingErr(configFrom, "%s: %v", st.ConfigPath, err)
			if pe, ok := errors.AsType[*strictjson.Error](err); ok {
				e.Path = pe.Path
			}
			return nil, Errors{e}
		}
		for _, se := range faults {
			errs = append(errs, &Error{Setting: configFrom, Problem: st.ConfigPath + ": " + describe(se), Path: se.Path})
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
			errs = append(errs, settingErr(v.setting, "%q is neither true nor false", v.value))
			continue
		}
		st.HTTP.AccessLog = on
	}
	errs = append(errs, st.validate()...)
	return st, errs.Err()
}

// describe says what is wrong at a fault of the file, with the setting
// probably meant for a name that is no setting.
func describe(se *strictjson.ShapeError) string {
	switch {
	case se.Fault == strictjson.Unknown:
		msg := "unknown setting " + se.Path + " (names are case-sensitive)"
		if strings.HasPrefix(se.Reason, "is not a transport") {
			msg = se.Error()
		}
		if near, ok := nearest.Name(se.Name, se.Known); ok {
			msg += "; did you mean " + strictjson.Join(parentPath(se.Path, se.Name), near) + "?"
		}
		return msg
	case se.Path == "":
		return "the file " + se.Reason
	}
	return se.Error()
}

// parentPath is the path of the object whose member name is at path.
func parentPath(path, name string) string {
	if p, ok := strings.CutSuffix(path, "."+name); ok {
		return p
	}
	if p, ok := strings.CutSuffix(path, strictjson.Join("", name)); ok {
		return p
	}
	return ""
}

// decodeFile reads the JSON configuration strictly, by the rules request
// bodies are read by (internal/strictjson): one I-JSON value (UTF-8, no name
// twice, no lone surrogate, no number beyond a double), every setting named
// exactly as documented, case included, with a value of its kind, and a
// duration a duration. An error names the setting's path, so that a typo
// cannot silently fall back to a default, nor the second of two values win.
//
// A document that is not JSON is err. Otherwise every fault is returned,
// and the rest of the file is decoded into f without the members at fault,
// so that the settings' own checks can look at what was written well: a
// person sees every problem of the file at once.
func decodeFile(b []byte, f *File) (faults strictjson.ShapeErrors, err error) {
	doc, err := strictjson.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("not a valid configuration file: %w", err)
	}
	faults = strictjson.CheckAll(doc, reflect.TypeFor[File]())
	if len(faults) > 0 {
		at := map[string]bool{}
		for _, se := range faults {
			at[se.Path] = true
		}
		if at[""] {
			return faults, nil // not an object: nothing to keep
		}
		doc = without(doc, "", at)
		// What is left may fail only where a type checks a combination
		// itself; then nothing more is said than the faults.
		if strictjson.Check(doc, reflect.TypeFor[File]()) != nil {
			return faults, nil
		}
	}
	if err := json.Unmarshal(doc.AppendJSON(nil), f); err != nil {
		return nil, fmt.Errorf("decode a checked file: %w", err) // Check refused what this could
	}
	return faults, nil
}

// without is v, at path, without the object members whose path is in at,
// nor those holding one of them inside an array (an element taken out
// would change the others' places).
func without(v *strictjson.Value, path string, at map[string]bool) *strictjson.Value {
	if v.Kind != strictjson.Object {
		return v
	}
	out := *v
	out.Members = nil
	for _, m := range v.Members {
		child := strictjson.Join(path, m.Name)
		if at[child] || (m.Value.Kind == strictjson.Array && faultUnder(child, at)) {
			continue
		}
		out.Members = append(out.Members, strictjson.Member{Name: m.Name, Value: without(m.Value, child, at)})
	}
	return &out
}

// faultUnder reports whether a path in at is inside the value at path.
func faultUnder(path string, at map[string]bool) bool {
	for p := range at {
		if strings.HasPrefix(p, path+"[") || strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

// validate checks the resolved settings and returns every problem.
func (st *Settings) validate() Errors {
	var errs Errors
	if _, _, err := net.SplitHostPort(st.Listen); err != nil {
		errs = append(errs, settingErr(st.Origin("listen"), "%q is not host:port (%v)", st.Listen, err))
	}
	if st.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(st.MetricsListen); err != nil {
			errs = append(errs, settingErr(st.Origin("metricsListen"), "%q is not host:port (%v)", st.MetricsListen, err))
		}
	}
	switch st.Log.Format {
	case "text", "json":
	default:
		errs = append(errs, settingErr(st.Origin("log.format"), "%q is neither text nor json", st.Log.Format))
	}
	if _, err := parseLevel(st.Log.Level); err != nil {
		errs = append(errs, settingErr(st.Origin("log.level"), "%v", err))
	}
	if st.HTTP.MaxBodyBytes < 0 {
		errs = append(errs, settingErr("http.maxBodyBytes", "must not be negative"))
	}
	if st.HTTP.MaxBacklogAge < 0 {
		errs = append(errs, settingErr("http.maxBacklogAge", "must not be negative"))
	}
	// The engine's own validation names its Go field; check it now, before
	// serving, and name the setting. It stops at its first problem.
	if err := st.ClientConfig().Validate(); err != nil {
		errs = append(errs, engineError(err))
	}
	return errs
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
// The providers tell the time of the client they are given to. Its error
// is Errors: one problem per section at fault, each naming the setting as
// the file writes it (providers.apns.keyID).
func (st *Settings) BuildProviders(log *slog.Logger) ([]oncepush.Provider, error) {
	providers, err := registry.Default().Providers(st.Providers, registry.Env{Logger: log})
	if err == nil {
		return providers, nil
	}
	var errs Errors
	var all []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		all = j.Unwrap()
	} else {
		all = []error{err}
	}
	for _, e := range all {
		se, ok := errors.AsType[*registry.SettingError](e)
		if !ok {
			return nil, err
		}
		errs = append(errs, &Error{Setting: se.Setting, Problem: se.Problem})
	}
	return nil, errs
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
