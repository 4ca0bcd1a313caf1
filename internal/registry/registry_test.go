package registry_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/api"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/internal/registry"
	"github.com/oncepush/oncepush/internal/strictjson"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/provider/hms"
	"github.com/oncepush/oncepush/pushtest"
)

// The server's table holds the built-in transports, in their order, then
// Huawei Push Kit (whose spec is provider/hms's), each with everything a
// row needs, and the fake speaks every one of them.
func TestDefaultMatchesBuiltins(t *testing.T) {
	t.Parallel()
	table := registry.Default()
	if got, want := table.Names(), append(oncepush.Transports(), hms.Name); !slices.Equal(got, want) {
		t.Fatalf("Default() names %v, want the built-in transports and hms %v", got, want)
	}
	for _, row := range table {
		if row.Title == "" || row.NewSection == nil || row.Fake == nil || row.Spec.NormalizeToken == nil {
			t.Errorf("%s: an incomplete row: %+v", row.Spec.Name, row)
		}
	}
	fake, err := fakepush.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	if got := fake.Transports(); !slices.Equal(got, table.Names()) {
		t.Errorf("the fake speaks %v, the registry lists %v", got, table.Names())
	}
	if got := table.Titles(); got != "FCM, APNs, Web Push, RuStore and Huawei Push Kit" {
		t.Errorf("Titles() = %q", got)
	}
}

// openAPITransports returns the document's Transport enum.
func openAPITransports(t *testing.T) []oncepush.Transport {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas struct {
				Transport struct {
					Enum []oncepush.Transport `json:"enum"`
				} `json:"Transport"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Components.Schemas.Transport.Enum
}

// enumMismatch says how the document's enum differs from the table's names.
func enumMismatch(enum []oncepush.Transport, table registry.Table) string {
	if slices.Equal(enum, table.Names()) {
		return ""
	}
	quoted := make([]string, len(table))
	for i, n := range table.Names() {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return fmt.Sprintf("api/openapi.json: components.schemas.Transport.enum is %v; the registry's transports are [%s]", enum, strings.Join(quoted, ", "))
}

// TestOpenAPITransportEnum keeps the document in step with the registry: a
// transport added to Default is named here until the document has it.
func TestOpenAPITransportEnum(t *testing.T) {
	t.Parallel()
	if msg := enumMismatch(openAPITransports(t), registry.Default()); msg != "" {
		t.Fatal(msg)
	}
}

// The fake's sections, written to files, read back strictly as a
// configuration file holds them, and built into providers.
func TestFakeSectionsRoundTrip(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	table := registry.Default()
	sections, err := table.FakeSections(fake, registry.FakeParams{Project: "p", Topic: "dev.oncepush.test", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(sections)
	if err != nil {
		t.Fatal(err)
	}
	if i, j := bytes.Index(b, []byte(`"fcm"`)), bytes.Index(b, []byte(`"rustore"`)); i < 0 || j < i {
		t.Errorf("sections not in the registry's order: %s", b)
	}
	var back registry.Sections
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("the sections do not read back: %v\n%s", err, b)
	}
	again, _ := json.Marshal(back)
	if !bytes.Equal(b, again) {
		t.Errorf("read back differently:\n%s\n%s", b, again)
	}
	providers, err := table.Providers(back, registry.Env{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var got []oncepush.Transport
	for _, p := range providers {
		got = append(got, p.Transport())
	}
	if !slices.Equal(got, table.Names()) {
		t.Errorf("providers for %v, want %v", got, table.Names())
	}
}

func TestDecodeNamesWhatIsWrong(t *testing.T) {
	t.Parallel()
	table := registry.Default()
	for _, tc := range []struct{ raw, want string }{
		{`{"mipush": {}}`, `mipush: is not a transport: the transports are fcm, apns, webpush, rustore, hms`},
		{`{"hms": {"keyfile": "x"}}`, `hms.keyfile: is not known`},
		{`{"apns": {"keyFle": "x"}}`, `apns.keyFle: is not known`},
		{`[]`, `providers: must be a JSON object`},
	} {
		_, err := table.Decode([]byte(tc.raw))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.raw, err, tc.want)
		}
	}
	var se *strictjson.ShapeError
	if _, err := table.Decode([]byte(`{"apns": {"keyID": 5}}`)); !errors.As(err, &se) || se.Path != "apns.keyID" {
		t.Errorf("a wrong type: %v, want one naming apns.keyID", err)
	}
	s, err := table.Decode([]byte(`{"fcm": null}`))
	if err != nil || len(s) != 0 {
		t.Errorf("a null section: %v, %v; want it not configured", s, err)
	}
}

// testpush is one more transport, registered the way a new provider is: a
// spec (token rules, payload limit), a configuration section that builds its
// provider, and a fake.
var testpush = oncepush.TransportSpec{
	Name: "testpush",
	NormalizeToken: func(token string) (string, string, error) {
		if !strings.HasPrefix(token, "tp-") {
			return "", "", errors.New("a testpush token starts with tp-")
		}
		return token, token, nil
	},
	MaxPayload:   2048,
	ExampleToken: func(n int) oncepush.Token { return oncepush.Token(fmt.Sprintf("tp-%d", n)) },
}

// testpushSection is providers.testpush.
type testpushSection struct {
	// Refuse, when set, is what its provider answers every send: rejected.
	Refuse string `json:"refuse,omitempty"`
	// Secret stands for a credential.
	Secret string `json:"secret"`

	built *pushtest.Provider
}

func (s *testpushSection) Provider(registry.Env) (oncepush.Provider, error) {
	if s.Secret == "" {
		return nil, &registry.SettingError{Setting: "secret", Problem: "must not be empty"}
	}
	s.built = pushtest.NewProvider("testpush")
	if s.Refuse != "" {
		s.built.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: s.Refuse})
	}
	return s.built, nil
}

func (s *testpushSection) LogValue() slog.Value {
	return slog.GroupValue(slog.Bool("secret_set", s.Secret != ""), slog.String("refuse", s.Refuse))
}

var testpushRow = registry.Transport{
	Spec:       testpush,
	Title:      "Test Push",
	NewSection: func() registry.Section { return &testpushSection{} },
	Fake: func(*fakepush.Server, *registry.FakeParams) (registry.Section, error) {
		return &testpushSection{Secret: "fake"}, nil
	},
}

// TestFifthTransport follows a transport that is one registration and
// nothing else from a configuration file to a delivered notification: its
// section decodes strictly and builds its provider, naming its settings in
// errors; its spec reaches the engine, which checks its tokens, names it in
// its errors and sends its devices to its provider; it logs, it points at
// the fake, and the OpenAPI test would name it.
func TestFifthTransport(t *testing.T) {
	t.Parallel()
	table := append(registry.Default(), testpushRow)

	if _, err := table.Decode([]byte(`{"testpush": {"secret": "s", "refus": "x"}}`)); err == nil {
		t.Error("an unknown setting of the added transport was accepted")
	}
	sections, err := table.Decode([]byte(`{"testpush": {"secret": "s3cr3t"}, "fcm": null}`))
	if err != nil {
		t.Fatal(err)
	}
	var se *registry.SettingError
	if _, err := table.Providers(registry.Sections{"testpush": &testpushSection{}}, registry.Env{}); !errors.As(err, &se) || se.Setting != "providers.testpush.secret" {
		t.Errorf("a section it refuses: %v, want an error naming providers.testpush.secret", err)
	}
	providers, err := table.Providers(sections, registry.Env{})
	if err != nil || len(providers) != 1 || providers[0].Transport() != "testpush" {
		t.Fatalf("providers %v, %v; want one for testpush", providers, err)
	}

	drv := testdb.SQLite(t)
	client, err := oncepush.NewClient(drv, &oncepush.Config{Transports: table.Specs(), Providers: providers})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := client.RegisterDevice(ctx, oncepush.Device{Recipient: "r1", Transport: "testpush", Token: "not-ours"}); err == nil || !strings.Contains(err.Error(), "starts with tp-") {
		t.Errorf("a token its rules refuse: %v", err)
	}
	if _, err := client.RegisterDevice(ctx, oncepush.Device{Recipient: "r1", Transport: "mipush", Token: "mipush-token-1"}); err == nil ||
		!strings.Contains(err.Error(), "is not one of fcm, apns, webpush, rustore, hms, testpush") {
		t.Errorf("an unknown transport: %v, want the registry's names", err)
	}
	if _, err := client.RegisterDevice(ctx, oncepush.Device{Recipient: "r1", Transport: "testpush", Token: testpush.ExampleToken(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Send(ctx, []string{"r1"}, oncepush.Message{Body: strings.Repeat("b", 2049)}, nil); err == nil {
		t.Error("a message over its payload limit was accepted")
	}
	if _, err := client.Send(ctx, []string{"r1"}, oncepush.Message{Title: "five"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	built := sections["testpush"].(*testpushSection).built
	if subs := built.Submissions(); len(subs) != 1 || subs[0].Token != "tp-1" || subs[0].Title != "five" {
		t.Fatalf("its provider was sent %+v", subs)
	}

	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("settings", table.LogAttrs(sections)[0])
	if !strings.Contains(logged.String(), "testpush.secret_set=true") || strings.Contains(logged.String(), "s3cr3t") {
		t.Errorf("its section logs as %s", logged.String())
	}
	fakes, err := table.FakeSections(pushtest.NewFakeServer(t), registry.FakeParams{Project: "p", Topic: "t"})
	if err != nil || fakes["testpush"] == nil {
		t.Errorf("the fake's sections: %v, %v; want one for testpush", fakes, err)
	}
	if got := table.Titles(); got != "FCM, APNs, Web Push, RuStore, Huawei Push Kit and Test Push" {
		t.Errorf("Titles() = %q", got)
	}
	if msg := enumMismatch(openAPITransports(t), table); !strings.Contains(msg, `"testpush"`) {
		t.Errorf("the OpenAPI check would not name the added transport: %q", msg)
	}
}

// TestCredentialFilesNameTheSetting: a credential file setting left empty,
// naming a file that does not exist, or one that cannot be read, is an
// error naming the setting in full and the path, for every provider; a
// secret given neither inline nor as a file names both settings.
func TestCredentialFilesNameTheSetting(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	dir := t.TempDir() // a directory: there, but not readable as a file
	for _, c := range []struct {
		section registry.Section
		setting string
		path    string // in the problem; "" when none was given
	}{
		{&registry.FCM{}, "providers.fcm.serviceAccountFile", ""},
		{&registry.FCM{ServiceAccountFile: missing}, "providers.fcm.serviceAccountFile", missing},
		{&registry.FCM{ServiceAccountFile: dir}, "providers.fcm.serviceAccountFile", dir},
		{&registry.APNs{}, "providers.apns.keyFile", ""},
		{&registry.APNs{KeyFile: missing}, "providers.apns.keyFile", missing},
		{&registry.WebPush{}, "providers.webpush.vapidPrivateKey", ""},
		{&registry.WebPush{VAPIDPrivateKeyFile: missing}, "providers.webpush.vapidPrivateKeyFile", missing},
		{&registry.WebPush{VAPIDPrivateKey: "k", CAFile: missing}, "providers.webpush.caFile", missing},
		{&registry.RuStore{ProjectID: "p"}, "providers.rustore.serviceToken", ""},
		{&registry.RuStore{ProjectID: "p", ServiceTokenFile: dir}, "providers.rustore.serviceTokenFile", dir},
		{&registry.RuStore{ProjectID: "p", ServiceToken: "t", CAFile: missing}, "providers.rustore.caFile", missing},
		{&registry.HMS{}, "providers.hms.keyFile", ""},
		{&registry.HMS{KeyFile: missing}, "providers.hms.keyFile", missing},
		{&registry.HMS{KeyFile: dir}, "providers.hms.keyFile", dir},
	} {
		tr := oncepush.Transport(strings.Split(c.setting, ".")[1])
		_, err := registry.Default().Providers(registry.Sections{tr: c.section}, registry.Env{})
		var se *registry.SettingError
		if !errors.As(err, &se) || se.Setting != c.setting || !strings.Contains(se.Problem, c.path) || strings.Contains(se.Problem, "open ") {
			t.Errorf("%s (path %q): %v; want an error naming it and the path", c.setting, c.path, err)
		}
	}
}

// The Push Kit section's faults are named by the setting as the file
// writes it, and the key file's problem by the file; the key is not quoted.
func TestHMSSettingsAreNamed(t *testing.T) {
	t.Parallel()
	fake := pushtest.NewFakeServer(t)
	var acct map[string]string
	if err := json.Unmarshal(fake.HMSServiceAccount("p"), &acct); err != nil {
		t.Fatal(err)
	}
	keyText := acct["private_key"]
	delete(acct, "sub_account")
	noSub, _ := json.Marshal(acct)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "hms.json")
	if err := os.WriteFile(keyFile, noSub, 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, fake.HMSServiceAccount("p"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		raw, setting, problem string
	}{
		{`{"hms": {"keyFile": "` + keyFile + `"}}`, "providers.hms.keyFile", keyFile + " lacks sub_account"},
		{`{"hms": {"keyFile": "` + good + `", "category": "news"}}`, "providers.hms.category", `"news" is not a Push Kit category`},
		{`{"hms": {"keyFile": "` + good + `", "baseURL": "http://push.example"}}`, "providers.hms.baseURL", "https"},
	} {
		sections, err := registry.Default().Decode([]byte(c.raw))
		if err != nil {
			t.Fatal(err)
		}
		_, err = registry.Default().Providers(sections, registry.Env{})
		var se *registry.SettingError
		if !errors.As(err, &se) || se.Setting != c.setting || !strings.Contains(se.Problem, c.problem) {
			t.Errorf("%s: %v; want %s: …%s…", c.raw, err, c.setting, c.problem)
		}
		if err != nil && strings.Contains(err.Error(), keyText[40:80]) {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
}
