package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/registry"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "oncepush.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedenceFlagsEnvFileDefaults(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, `{"listen": "127.0.0.1:7001", "database": "file.db", "log": {"level": "warn"},
		"engine": {"batchSize": 500, "runBudget": "5s"}}`)
	st, err := Load(Flags{Config: file}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if st.Listen != "127.0.0.1:7001" || st.Database != "file.db" || st.Log.Level != "warn" || st.Log.Format != "text" {
		t.Fatalf("file values: %+v", st.File)
	}
	if cfg := st.ClientConfig(); cfg.BatchSize != 500 || cfg.RunBudget != 5*time.Second {
		t.Fatalf("engine: %+v", cfg)
	}
	st, err = Load(Flags{Config: file}, env(map[string]string{EnvListen: "127.0.0.1:7002", EnvDatabase: "env.db"}))
	if err != nil || st.Listen != "127.0.0.1:7002" || st.Database != "env.db" {
		t.Fatalf("environment over file: %+v, %v", st.File, err)
	}
	st, err = Load(Flags{Config: file, Listen: "127.0.0.1:7003"}, env(map[string]string{EnvListen: "127.0.0.1:7002"}))
	if err != nil || st.Listen != "127.0.0.1:7003" {
		t.Fatalf("flag over environment: %+v, %v", st.File, err)
	}
	st, err = Load(Flags{}, env(nil))
	if err != nil || st.Listen != ListenDefault || st.Database != DatabaseDefault || time.Duration(st.HTTP.ShutdownTimeout) != ShutdownTimeoutDefault {
		t.Fatalf("defaults: %+v, %v", st.File, err)
	}
}

func TestErrorsNameTheSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		file    string
		flags   Flags
		setting string
	}{
		{"unknown key", `{"lisen": "x"}`, Flags{}, "--config"},
		{"nested unknown key", `{"providers": {"fcm": {"serviceAccount": "x"}}}`, Flags{}, "--config"},
		{"unknown transport", `{"providers": {"mipush": {}}}`, Flags{}, "--config"},
		{"nested wrong type", `{"providers": {"apns": {"keyID": 5}}}`, Flags{}, "--config"},
		{"wrong type", `{"engine": {"batchSize": "many"}}`, Flags{}, "--config"},
		{"bad duration", `{"engine": {"runBudget": "soon"}}`, Flags{}, "--config"},
		{"not json", `listen = 1`, Flags{}, "--config"},
		{"bad listen", `{}`, Flags{Listen: "nowhere"}, "--listen"},
		{"bad log format", `{}`, Flags{LogFormat: "xml"}, "--log-format"},
		{"bad log level", `{"log": {"level": "loud"}}`, Flags{}, "log.level"},
		{"bad log level flag", `{"log": {"level": "loud"}}`, Flags{LogLevel: "louder"}, "--log-level"},
		{"engine refuses", `{"engine": {"batchSize": 20000}}`, Flags{}, "engine.batchSize"},
		{"bad policy", `{"engine": {"ambiguity": "twice"}}`, Flags{}, "engine.ambiguity"},
		{"lease within a run", `{"engine": {"lease": "25s"}}`, Flags{}, "engine.lease"},
		{"lease shorter than a longer run", `{"engine": {"runBudget": "1m", "lease": "70s"}}`, Flags{}, "engine.lease"},
		{"bad category policy", `{"categories": {"news": {"ambiguity": "twice"}}}`, Flags{}, "categories.news.ambiguity"},
	} {
		f := tc.flags
		f.Config = writeConfig(t, tc.file)
		_, err := Load(f, env(nil))
		var se *Error
		if !errors.As(err, &se) || se.Setting != tc.setting {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.setting)
		}
	}
	if _, err := Load(Flags{Config: filepath.Join(t.TempDir(), "missing.json")}, env(nil)); err == nil {
		t.Error("a missing config file was accepted")
	}
	// Inside a provider's section, the problem is named in full.
	for file, want := range map[string]string{
		`{"providers": {"mipush": {}}}`:               `providers.mipush: is not a transport: the transports are fcm, apns, webpush, rustore, hms`,
		`{"providers": {"apns": {"keyID": 5}}}`:       "providers.apns.keyID: must be a string",
		`{"providers": {"fcm": {"serviceAccnt": 1}}}`: `unknown setting providers.fcm.serviceAccnt`,
	} {
		_, err := Load(Flags{Config: writeConfig(t, file)}, env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", file, err, want)
		}
	}
}

func TestProviderFilesAreChecked(t *testing.T) {
	t.Parallel()
	st, err := Load(Flags{Config: writeConfig(t, `{"providers": {"apns": {"keyFile": "/no/such.p8", "keyID": "ABCDEFGHIJ",
		"teamID": "ABCDEFGHIJ", "topic": "t"}}}`)}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.BuildProviders(nil)
	var se *Error
	if !errors.As(err, &se) || se.Setting != "providers.apns.keyFile" {
		t.Fatalf("unreadable key file: %v", err)
	}
}

// The lease is a setting of its own, validated the way the library validates
// it: longer than RunBudget + SendTimeout.
func TestLeaseIsASetting(t *testing.T) {
	t.Parallel()
	st, err := Load(Flags{Config: writeConfig(t, `{"engine": {"lease": "5m"}}`)}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.ClientConfig().Lease; got != 5*time.Minute {
		t.Fatalf("engine.lease 5m gave Config.Lease %s", got)
	}
	st, err = Load(Flags{}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.ClientConfig().Lease; got != 0 {
		t.Fatalf("without engine.lease, Config.Lease is %s, want 0 (the library's default)", got)
	}
}

func TestMetricsListen(t *testing.T) {
	t.Parallel()
	st, err := Load(Flags{}, env(nil))
	if err != nil || st.MetricsListen != "" {
		t.Fatalf("default: %q, %v; want none", st.MetricsListen, err)
	}
	file := writeConfig(t, `{"metricsListen": "127.0.0.1:9001"}`)
	if st, err = Load(Flags{Config: file}, env(nil)); err != nil || st.MetricsListen != "127.0.0.1:9001" {
		t.Fatalf("file: %q, %v", st.MetricsListen, err)
	}
	if st, err = Load(Flags{Config: file}, env(map[string]string{EnvMetricsListen: "127.0.0.1:9002"})); err != nil || st.MetricsListen != "127.0.0.1:9002" {
		t.Fatalf("environment over file: %q, %v", st.MetricsListen, err)
	}
	if st, err = Load(Flags{Config: file, MetricsListen: "127.0.0.1:9003"}, env(map[string]string{EnvMetricsListen: "127.0.0.1:9002"})); err != nil || st.MetricsListen != "127.0.0.1:9003" {
		t.Fatalf("flag over environment: %q, %v", st.MetricsListen, err)
	}
	_, err = Load(Flags{MetricsListen: "9090"}, env(nil))
	var se *Error
	if !errors.As(err, &se) || se.Setting != "--metrics-listen" {
		t.Fatalf("a port without a host: %v, want an error naming --metrics-listen", err)
	}
}

// TestSettingsLogRedacted: the settings' debug line names files and hosts,
// and says only whether a credential given inline is set.
func TestSettingsLogRedacted(t *testing.T) {
	t.Parallel()
	const pw, vapid, token = "CANARY-db-password-1f2e3d", "CANARY-vapid-private-key-4c5b6a", "CANARY-rustore-service-token-9e8d"
	st := &Settings{File: File{Database: "postgres://push:" + pw + "@db.internal:5432/push"}}
	st.Providers = Providers{
		oncepush.TransportWebPush: &registry.WebPush{VAPIDPrivateKey: vapid, VAPIDSubject: "mailto:ops@example.com"},
		oncepush.TransportRuStore: &registry.RuStore{ProjectID: "p", ServiceToken: token},
	}
	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var b bytes.Buffer
		slog.New(h(&b)).Info("settings", slog.Any("settings", st))
		out := b.String()
		for _, secret := range []string{pw, vapid, token} {
			if strings.Contains(out, secret) {
				t.Errorf("the settings line holds %s: %s", secret, out)
			}
		}
		if !strings.Contains(out, "db.internal") || !strings.Contains(out, "[redacted]") {
			t.Errorf("the settings line: %s", out)
		}
	}
}

// TestEveryEngineFieldIsASetting: each oncepush.Config field with a json tag
// can be set from the file and arrives in ClientConfig unchanged, so a field
// the library adds with a tag is a setting without another line in config.
func TestEveryEngineFieldIsASetting(t *testing.T) {
	t.Parallel()
	want := oncepush.Config{}
	v := reflect.ValueOf(&want).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if tag := f.Tag.Get("json"); tag == "" || tag == "-" {
			continue
		}
		switch fv := v.Field(i); {
		case f.Type == reflect.TypeFor[time.Duration]():
			fv.SetInt(int64(time.Duration(i+1) * time.Minute))
		case fv.Kind() == reflect.Int:
			fv.SetInt(int64(i + 1))
		case f.Type == reflect.TypeFor[oncepush.AmbiguityPolicy]():
			fv.SetString(string(oncepush.AmbiguityAtMostOnce))
		case f.Type == reflect.TypeFor[map[oncepush.Transport]int]():
			fv.Set(reflect.ValueOf(map[oncepush.Transport]int{oncepush.TransportFCM: 500000}))
		default:
			t.Fatalf("Config.%s: a %s setting; teach this test (and the file's decoder) its form", f.Name, f.Type)
		}
	}
	b, err := json.Marshal(map[string]any{"engine": Engine{Config: want}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Load(Flags{Config: writeConfig(t, string(b))}, env(nil))
	if err != nil {
		// The values are arbitrary, so the engine may refuse them; only
		// decoding is under test here.
		var se *Error
		if !errors.As(err, &se) || !strings.HasPrefix(se.Setting, "engine.") {
			t.Fatalf("%s: %v", b, err)
		}
		f := &File{}
		if faults, err := decodeFile(b, f); err != nil || faults != nil {
			t.Fatalf("%s: %v %v", b, faults, err)
		}
		st = &Settings{File: *f}
	}
	got := *st.ClientConfig()
	got.Transports = nil // not a setting: the registry's, always
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("file %s\ngave  %+v\nwant %+v", b, got, want)
	}
}

// TestEngineErrorsNameTheKey: a bad engine value names the key as written.
func TestEngineErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		`{"engine": {"batchSize": "many"}}`:        "engine.batchSize",
		`{"engine": {"runBudget": "soon"}}`:        "engine.runBudget",
		`{"engine": {"runBudget": 5}}`:             "engine.runBudget",
		`{"engine": {"batchsize": 5}}`:             "engine.batchsize",
		`{"engine": {"providers": []}}`:            "engine.providers",
		`{"engine": [1]}`:                          "engine",
		`{"categories": {"x": {"amb": "resend"}}}`: "amb",
	} {
		_, err := Load(Flags{Config: writeConfig(t, file)}, env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error naming %s", file, err, want)
		}
	}
}

// The file is read by the rules request bodies are: one I-JSON value, names
// exactly as documented, values of their kind. encoding/json took the last
// of two values, "Listen" for "listen", text after the object, a lone
// surrogate as U+FFFD, and named neither a duration's setting nor a nested
// unknown one's path.
func TestFileIsReadStrictly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ file, path string }{
		{`{"listen": "127.0.0.1:7000", "listen": "127.0.0.1:7001"}`, "listen"},
		{`{"engine": {"batchSize": 1, "batchSize": 2}}`, "engine.batchSize"},
		{`{"Listen": "127.0.0.1:7001"}`, "Listen"},
		{`{"engine": {"BatchSize": 500}}`, "engine.BatchSize"},
		{`{"database": "\ud800.db"}`, "database"},
		{"{\"database\": \"caf\xe9.db\"}", "database"},
		{`{"http": {"maxBodyBytes": 1e400}}`, "http.maxBodyBytes"},
		{`{"http": {"maxBodyBytes": 1.5}}`, "http.maxBodyBytes"},
		{`{"engine": {"runBudget": 10}}`, "engine.runBudget"},
		{`{"engine": {"runBudget": "soon"}}`, "engine.runBudget"},
		{`{"engine": null}`, "engine"},
		{`{"providers": {"fcm": {"serviceAccount": "x"}}}`, "providers.fcm.serviceAccount"},
		{`{"categories": {"news": {"Ambiguity": "resend"}}}`, "categories.news.Ambiguity"},
		{`{}}`, ""},
		{`null`, ""},
	} {
		_, err := Load(Flags{Config: writeConfig(t, tc.file)}, env(nil))
		var se *Error
		if !errors.As(err, &se) || se.Setting != "--config" || se.Path != tc.path {
			t.Errorf("%s: %v, want an error naming --config at %q", tc.file, err, tc.path)
		}
	}
	st, err := Load(Flags{Config: writeConfig(t, `{"categories": {"Billing": {"ambiguity": "at-most-once"}}, "engine": {"runBudget": "5s"}}`)}, env(nil))
	if err != nil || st.Categories["Billing"].Ambiguity != "at-most-once" || st.Engine.RunBudget != 5*time.Second {
		t.Fatalf("a valid file: %+v, %v", st, err)
	}
}

// Backpressure is off unless the file sets a bound; a negative one names the
// setting.
func TestMaxBacklogAgeSetting(t *testing.T) {
	t.Parallel()
	st, err := Load(Flags{Config: writeConfig(t, `{"http": {"maxBacklogAge": "30s"}}`)}, env(nil))
	if err != nil || time.Duration(st.HTTP.MaxBacklogAge) != 30*time.Second {
		t.Fatalf("maxBacklogAge 30s: %v, %v", st.HTTP.MaxBacklogAge, err)
	}
	if st, err := Load(Flags{}, env(nil)); err != nil || st.HTTP.MaxBacklogAge != 0 {
		t.Fatalf("no file: maxBacklogAge %v, %v; want off", st.HTTP.MaxBacklogAge, err)
	}
	_, err = Load(Flags{Config: writeConfig(t, `{"http": {"maxBacklogAge": "-1s"}}`)}, env(nil))
	var se *Error
	if !errors.As(err, &se) || se.Path != "http.maxBacklogAge" {
		t.Fatalf("a negative bound: %v; want an error naming http.maxBacklogAge", err)
	}
}

// The access log is off unless asked for: flag over environment over file,
// and a value that is not a boolean names where it was written.
func TestAccessLogSetting(t *testing.T) {
	t.Parallel()
	on := writeConfig(t, `{"http": {"accessLog": true}}`)
	for _, tc := range []struct {
		name  string
		flags Flags
		env   map[string]string
		want  bool
	}{
		{"default", Flags{}, nil, false},
		{"file", Flags{Config: on}, nil, true},
		{"environment over file", Flags{Config: on}, map[string]string{EnvAccessLog: "false"}, false},
		{"flag over environment", Flags{AccessLog: "true"}, map[string]string{EnvAccessLog: "0"}, true},
		{"flag off over file", Flags{Config: on, AccessLog: "false"}, nil, false},
	} {
		st, err := Load(tc.flags, env(tc.env))
		if err != nil || st.HTTP.AccessLog != tc.want {
			t.Errorf("%s: access log %v, %v; want %v", tc.name, st != nil && st.HTTP.AccessLog, err, tc.want)
		}
	}
	for setting, tc := range map[string]struct {
		flags Flags
		env   map[string]string
	}{
		EnvAccessLog:   {Flags{}, map[string]string{EnvAccessLog: "yes please"}},
		"--access-log": {Flags{AccessLog: "maybe"}, nil},
	} {
		_, err := Load(tc.flags, env(tc.env))
		var se *Error
		if !errors.As(err, &se) || se.Setting != setting {
			t.Errorf("a bad %s: %v, want an error naming it", setting, err)
		}
	}
}

// TestEngineValidationNamesTheSetting: oncepush.Config.Validate names the
// library's Go fields (Config.Workers), for its users; the configuration's
// errors name the setting as the file writes it (engine.workers), every
// field of the engine section, and the other fields the text mentions.
func TestEngineValidationNamesTheSetting(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[oncepush.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || (f.Type.Kind() != reflect.Int && f.Type != reflect.TypeFor[time.Duration]()) {
			continue
		}
		var cfg oncepush.Config
		reflect.ValueOf(&cfg).Elem().Field(i).SetInt(-1)
		err := engineError(cfg.Validate())
		if err.Setting != "engine."+name || err.Problem != "must not be negative" {
			t.Errorf("a negative Config.%s: %v; want engine.%s: must not be negative", f.Name, err, name)
		}
	}
	for file, want := range map[string]string{
		`{"engine": {"workers": -1}}`:                      "engine.workers: must not be negative",
		`{"engine": {"batchSize": 20000}}`:                 "engine.batchSize: 20000 is above 10000",
		`{"engine": {"lease": "25s"}}`:                     "engine.lease: 25s must exceed engine.runBudget + engine.sendTimeout (25s), or a healthy run could lose its lease",
		`{"engine": {"backoffMin": "2h"}}`:                 "engine.backoffMax: 1h0m0s is below engine.backoffMin (2h0m0s)",
		`{"engine": {"ambiguity": "BatchSize"}}`:           `engine.ambiguity: "BatchSize" is neither "resend" nor "at-most-once"`,
		`{"categories": {"a.b": {"ambiguity": "twice"}}}`:  `categories["a.b"].ambiguity: "twice" is neither "resend" nor "at-most-once"`,
		`{"categories": {"news": {"ambiguity": "twice"}}}`: `categories.news.ambiguity: "twice" is neither "resend" nor "at-most-once"`,
		`{"engine": {"messageLifetime": "700h"}}`:          "engine.messageLifetime: is longer than 672h0m0s",
		`{"engine": {"campaignCeilings": {"fcm": 5}}}`:     `engine.campaignCeilings.fcm: 5 is below engine.maxDevicesPerRecipient (10), the most submissions one delivery can need`,
		`{"engine": {"campaignCeilings": {"sms": 500}}}`:   `engine.campaignCeilings: names unknown transport "sms" (the transports are fcm, apns, webpush, rustore, hms)`,
	} {
		_, err := Load(Flags{Config: writeConfig(t, file)}, env(nil))
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %s", file, err, want)
		}
	}
	// A field that is no setting stays the section's, in the library's words.
	err := engineError((&oncepush.Config{Providers: []oncepush.Provider{nil}}).Validate())
	if err.Setting != "engine" || !strings.Contains(err.Problem, "Config.Providers[0]") {
		t.Errorf("a nil provider: %v", err)
	}
}

// TestErrorsNameTheOrigin: an error in a value names where the value was
// written: its flag, its environment variable or its key in the file.
func TestErrorsNameTheOrigin(t *testing.T) {
	t.Parallel()
	for _, s := range []struct{ key, flag, env, bad string }{
		{"listen", "--listen", EnvListen, "nowhere"},
		{"metricsListen", "--metrics-listen", EnvMetricsListen, "9090"},
		{"log.format", "--log-format", EnvLogFormat, "xml"},
		{"log.level", "--log-level", EnvLogLevel, "loud"},
	} {
		section, key, nested := strings.Cut(s.key, ".")
		file := fmt.Sprintf(`{%q: %q}`, section, s.bad)
		if nested {
			file = fmt.Sprintf(`{%q: {%q: %q}}`, section, key, s.bad)
		}
		var flags Flags
		switch s.flag {
		case "--listen":
			flags.Listen = s.bad
		case "--metrics-listen":
			flags.MetricsListen = s.bad
		case "--log-format":
			flags.LogFormat = s.bad
		case "--log-level":
			flags.LogLevel = s.bad
		}
		for want, load := range map[string]func() (*Settings, error){
			s.flag: func() (*Settings, error) { return Load(flags, env(nil)) },
			s.env:  func() (*Settings, error) { return Load(Flags{}, env(map[string]string{s.env: s.bad})) },
			s.key:  func() (*Settings, error) { return Load(Flags{Config: writeConfig(t, file)}, env(nil)) },
		} {
			_, err := load()
			var se *Error
			if !errors.As(err, &se) || se.Setting != want {
				t.Errorf("a bad %s given as %s: %v; want an error naming %s", s.key, want, err, want)
			}
		}
	}
	_, err := Load(Flags{}, env(map[string]string{EnvConfig: filepath.Join(t.TempDir(), "missing.json")}))
	var se *Error
	if !errors.As(err, &se) || se.Setting != EnvConfig {
		t.Errorf("a missing file named by %s: %v", EnvConfig, err)
	}
	st, err := Load(Flags{Database: "flag.db"}, env(map[string]string{EnvDatabase: "env.db"}))
	if err != nil || st.Origin("database") != "--database" {
		t.Errorf("database from the flag: %v, origin %q", err, st.Origin("database"))
	}
	if st, err = Load(Flags{}, env(map[string]string{EnvDatabase: "env.db"})); err != nil || st.Origin("database") != EnvDatabase {
		t.Errorf("database from the environment: %v, origin %q", err, st.Origin("database"))
	}
	if st, err = Load(Flags{}, env(nil)); err != nil || st.Origin("database") != "--database" {
		t.Errorf("the default database: %v, origin %q; want the flag that sets it", err, st.Origin("database"))
	}
}

// TestEnvironmentIsCaseSensitive: only the variables as documented are read;
// oncepush_listen or Oncepush_Listen is some other variable.
func TestEnvironmentIsCaseSensitive(t *testing.T) {
	t.Parallel()
	vars := map[string]string{}
	for _, name := range []string{EnvListen, EnvMetricsListen, EnvDatabase, EnvConfig, EnvLogFormat, EnvLogLevel, EnvAccessLog} {
		vars[strings.ToLower(name)] = "bad value"
		vars[name[:1]+strings.ToLower(name[1:])] = "bad value"
	}
	st, err := Load(Flags{}, env(vars))
	if err != nil || st.Listen != ListenDefault || st.Database != DatabaseDefault || st.Log.Level != "info" {
		t.Fatalf("variables spelt in other cases were read: %+v, %v", st, err)
	}
}

// TestRedactURLNamesEveryHost: a multi-host URL (a primary and its standby,
// target_session_attrs=read-write) is named with every host it tries, and
// without its password.
func TestRedactURLNamesEveryHost(t *testing.T) {
	const pw = "CANARY-multi-host-9f8e"
	got := RedactURL("postgres://push:" + pw + "@db-a:5432,db-b:5433/ledger?target_session_attrs=read-write&sslmode=disable")
	if want := "push@db-a:5432,db-b:5433/ledger"; got != want {
		t.Errorf("RedactURL = %q, want %q", got, want)
	}
	if got := RedactURL("postgres://push:" + pw + "@db:5432/ledger"); got != "push@db:5432/ledger" {
		t.Errorf("RedactURL of one host = %q", got)
	}
}
