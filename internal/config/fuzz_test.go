package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/oncepush/oncepush/internal/strictjson"
)

// settings are the names a Load error may give for the file: the flag that
// names it, and the settings that validation checks (besides each engine
// setting and category, engine.<key> and categories.<name>.<key>).
var settings = []string{"--config", "listen", "metricsListen", "log.format", "log.level", "http.maxBodyBytes", "engine"}

// FuzzConfigFile loads arbitrary bytes as the configuration file. Load never
// panics, and a refusal is an *Error naming a setting. A file that is not
// I-JSON (RFC 7493: UTF-8, no name twice, no lone surrogate, no number
// beyond a double) or not exactly one value is refused, naming where when
// the fault is in one member; a file whose fault is in a member names that
// member's path; and a file that is accepted spells every setting as the
// documentation does, case included.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"listen": "127.0.0.1:7001", "metricsListen": "127.0.0.1:9090", "database": "file.db", "log": {"format": "json", "level": "warn"},
		  "http": {"maxBodyBytes": 1048576, "shutdownTimeout": "20s"},
		  "engine": {"batchSize": 500, "workers": 4, "concurrentSends": 64, "runBudget": "5s", "sendTimeout": "10s", "lease": "1m30s",
		    "maxAttempts": 6, "backoffMin": "15s", "backoffMax": "1h", "messageLifetime": "24h", "retention": "168h",
		    "maxDevicesPerRecipient": 10, "cleanupInterval": "10m", "pollInterval": "1s", "ambiguity": "at-most-once"},
		  "categories": {"billing": {"ambiguity": "at-most-once"}, "": {}},
		  "providers": {"fcm": {"serviceAccountFile": "/etc/sa.json", "webOrigin": "https://app.example"},
		    "apns": {"keyFile": "k.p8", "keyID": "ABC123DEFG", "teamID": "TEAM123456", "topic": "com.example.app", "environment": "sandbox"},
		    "webpush": {"vapidPrivateKeyFile": "v.pem", "vapidSubject": "mailto:ops@example.com", "allowedHosts": ["fcm.googleapis.com"], "allowLoopback": false},
		    "rustore": {"projectID": "p", "serviceTokenFile": "t"}}}`,
		`{"listen": "a", "listen": "127.0.0.1:7001"}`,
		`{"engine": {"batchSize": 1, "batchSize": 2}}`,
		`{"Listen": "127.0.0.1:7001"}`,
		`{"engine": {"BatchSize": 500}}`,
		`{"database": "\ud800.db"}`,
		"{\"database\": \"caf\xe9.db\"}",
		`{"database": "a\u0000b"}`,
		`{"http": {"maxBodyBytes": 1e400}}`,
		`{"http": {"maxBodyBytes": 99999999999999999999}}`,
		`{"http": {"maxBodyBytes": 1.5}}`,
		`{"http": {"maxBodyBytes": -1}}`,
		`{"engine": {"runBudget": 10}}`,
		`{"engine": {"runBudget": "-1s"}}`,
		`{"engine": {"runBudget": "soon"}}`,
		`{"engine": {"batchSize": "many"}}`,
		`{"engine": null}`,
		`{"providers": {"fcm": null}}`,
		`{"categories": {"a": {"ambiguity": 1}}}`,
		`{"lisen": "x"}`,
		`{"providers": {"fcm": {"serviceAccount": "x"}}}`,
		`{} {}`, `{}}`, `{}]`, `[]`, `null`, `1`, `""`, ``, `{`,
		`{"log": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "oncepush.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := Load(Flags{Config: path}, func(string) string { return "" })
		doc, parseErr := strictjson.Parse(b)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || !(slices.Contains(settings, se.Setting) || strings.HasPrefix(se.Setting, "engine.") || strings.HasPrefix(se.Setting, "categories")) || se.Problem == "" {
				t.Fatalf("%q: %T %v, want an error naming a setting", b, err, err)
			}
			var pe *strictjson.Error
			if errors.As(parseErr, &pe) && (se.Setting != "--config" || se.Path != pe.Path) {
				t.Fatalf("%q: %v (at %q); the fault is at %q", b, err, se.Path, pe.Path)
			}
			if parseErr == nil && doc.Kind == strictjson.Object && se.Setting == "--config" && !memberPath(doc, se.Path) {
				t.Fatalf("%q: %v names %q, no setting of the file", b, err, se.Path)
			}
			return
		}
		if parseErr != nil {
			t.Fatalf("%q: accepted, but it is not one I-JSON value: %v", b, parseErr)
		}
		if name := misspelt(doc, reflect.TypeFor[File](), ""); name != "" {
			t.Fatalf("%q: accepted %s, which is not a setting as the documentation spells it (read: %+v)", b, name, st.File)
		}
	})
}

// memberPath reports whether path is the path of one of doc's members.
func memberPath(doc *strictjson.Value, path string) bool {
	found := false
	var walk func(v *strictjson.Value, at string)
	walk = func(v *strictjson.Value, at string) {
		for _, m := range v.Members {
			p := strictjson.Join(at, m.Name)
			found = found || p == path
			walk(m.Value, p)
		}
		for i, e := range v.Elems {
			walk(e, strictjson.Index(at, i))
		}
	}
	walk(doc, "")
	return found
}

// misspelt returns the path of the first member of v that is not named
// exactly as a json tag of t, or "".
func misspelt(v *strictjson.Value, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case v.Kind == strictjson.Object && t.Kind() == reflect.Struct:
		for _, m := range v.Members {
			field, ok := fieldByTag(t, m.Name)
			p := strictjson.Join(path, m.Name)
			if !ok {
				return p
			}
			if bad := misspelt(m.Value, field.Type, p); bad != "" {
				return bad
			}
		}
	case v.Kind == strictjson.Object && t.Kind() == reflect.Map:
		for _, m := range v.Members {
			if bad := misspelt(m.Value, t.Elem(), strictjson.Join(path, m.Name)); bad != "" {
				return bad
			}
		}
	case v.Kind == strictjson.Array && t.Kind() == reflect.Slice:
		for i, e := range v.Elems {
			if bad := misspelt(e, t.Elem(), strictjson.Index(path, i)); bad != "" {
				return bad
			}
		}
	}
	return ""
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" && f.Type.Kind() == reflect.Struct {
			// An embedded struct's fields are the outer one's (Engine's
			// oncepush.Config).
			if inner, ok := fieldByTag(f.Type, name); ok {
				return inner, true
			}
			continue
		}
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
