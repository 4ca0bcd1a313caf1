// Package registry is the server's table of transports. Each row says, for
// one transport, what the engine knows of it (its oncepush.TransportSpec),
// how the configuration file configures it (its section, providers.<name>,
// which builds the provider) and how it is pointed at the fake providers.
// internal/config, internal/cli and pushtest/fakeproviders take their list
// from Default, and nothing else in the server lists transports.
//
// A transport is a file here (<name>.go: its row, its section type) and an
// entry in Default; see docs/architecture.md, "A new provider".
package registry

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/internal/strictjson"
)

// Transport is one transport's registration.
type Transport struct {
	// Spec is what the engine knows of the transport: its name, token rules,
	// payload limit and reserved data keys. The server's clients are given
	// the specs of every row (oncepush.Config.Transports).
	Spec oncepush.TransportSpec
	// Title is the transport's name as people write it: "Web Push".
	Title string
	// NewSection returns an empty configuration section: a pointer to the
	// struct that the file's providers.<name> decodes into, strictly.
	NewSection func() Section
	// Fake returns a section that points the transport at the fake server.
	Fake func(f *fakepush.Server, p *FakeParams) (Section, error)
}

// Section is one transport's configuration: one set of credentials.
type Section interface {
	// Provider builds the transport's provider. A *SettingError names the
	// setting at fault, relative to the section ("keyFile"; "" for the
	// section as a whole).
	Provider(env Env) (oncepush.Provider, error)
	// LogValue is the section for a log line: file names and hosts, and
	// only whether a secret given inline is set.
	slog.LogValuer
}

// Env is what a section's provider is built with besides its settings.
type Env struct {
	// Logger receives the provider's alerts; nil means slog.Default().
	Logger *slog.Logger
	// Clock, when set, is the provider's own clock. Nil: the clock of the
	// client it serves (oncepush.ClockUser), else the wall clock.
	Clock oncepush.Clock
}

// SettingError names the setting at fault.
type SettingError struct {
	Setting string
	Problem string
}

func (e *SettingError) Error() string { return e.Setting + ": " + e.Problem }

func settingErr(setting, format string, args ...any) *SettingError {
	return &SettingError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
}

// Table is an ordered list of registrations.
type Table []Transport

// Default is the server's table: every transport it speaks, in their
// documented order: the root package's built-in transports, then those
// whose spec their provider package holds (hms.Spec).
func Default() Table {
	return Table{fcmTransport(), apnsTransport(), webPushTransport(), ruStoreTransport(), hmsTransport()}
}

// builtin returns the root package's spec of a built-in transport.
func builtin(name oncepush.Transport) oncepush.TransportSpec {
	for _, s := range oncepush.BuiltinTransports() {
		if s.Name == name {
			return s
		}
	}
	panic("registry: " + string(name) + " is not a built-in transport") // TestDefaultMatchesBuiltins
}

// Names are the transports' names, in order.
func (t Table) Names() []oncepush.Transport {
	out := make([]oncepush.Transport, len(t))
	for i := range t {
		out[i] = t[i].Spec.Name
	}
	return out
}

// Specs are the transports' specs, in order: oncepush.Config.Transports.
func (t Table) Specs() []oncepush.TransportSpec {
	out := make([]oncepush.TransportSpec, len(t))
	for i := range t {
		out[i] = t[i].Spec
	}
	return out
}

// Titles lists the transports for people: "FCM, APNs, Web Push, RuStore and
// Huawei Push Kit".
func (t Table) Titles() string {
	titles := make([]string, len(t))
	for i := range t {
		titles[i] = t[i].Title
	}
	if len(titles) < 2 {
		return strings.Join(titles, "")
	}
	return strings.Join(titles[:len(titles)-1], ", ") + " and " + titles[len(titles)-1]
}

func (t Table) lookup(name oncepush.Transport) *Transport {
	for i := range t {
		if t[i].Spec.Name == name {
			return &t[i]
		}
	}
	return nil
}

func (t Table) list() string {
	names := make([]string, len(t))
	for i := range t {
		names[i] = string(t[i].Spec.Name)
	}
	return strings.Join(names, ", ")
}

// Sections are the configuration file's providers object: one section per
// configured transport. It decodes and encodes itself through Default.
type Sections map[oncepush.Transport]Section

// UnmarshalJSON implements json.Unmarshaler (Default().Decode).
func (s *Sections) UnmarshalJSON(b []byte) error {
	d, err := Default().Decode(b)
	if err != nil {
		return err
	}
	*s = d
	return nil
}

// MarshalJSON implements json.Marshaler (Default().Encode).
func (s Sections) MarshalJSON() ([]byte, error) { return Default().Encode(s) }

// Decode reads a providers object: each member names a transport of t and
// decodes, strictly, into its section; null is a transport not configured.
// A name t does not know is an error that names it and lists the known ones.
func (t Table) Decode(b []byte) (Sections, error) {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("providers: must be a JSON object whose members name transports (%s)", t.list())
	}
	out := Sections{}
	// Every fault of every section, in name order, so that the file is
	// fixed in one go.
	var faults strictjson.ShapeErrors
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		r := raw[name]
		key := strictjson.Join("", name) // as every path writes it: `[".00"]` for a name with a dot
		row := t.lookup(oncepush.Transport(name))
		if row == nil {
			known := make([]string, len(t))
			for i := range t {
				known[i] = string(t[i].Spec.Name)
			}
			faults = append(faults, &strictjson.ShapeError{Path: key, Fault: strictjson.Unknown,
				Reason: "is not a transport: the transports are " + t.list(), Name: name, Known: known})
			continue
		}
		if bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
			continue
		}
		sec := row.NewSection()
		// Checked by the rules the whole file is (internal/strictjson), so
		// that a fault is named by its path under the section.
		doc, err := strictjson.Parse(r)
		if err != nil {
			faults = append(faults, &strictjson.ShapeError{Path: key, Fault: strictjson.Invalid, Reason: err.Error()})
			continue
		}
		if errs := strictjson.CheckAll(doc, reflect.TypeOf(sec)); len(errs) > 0 {
			for _, se := range errs {
				faults = append(faults, &strictjson.ShapeError{Path: strictjson.Under(key, se.Path), Fault: se.Fault, Reason: se.Reason, Name: se.Name, Known: se.Known})
			}
			continue
		}
		if err := json.Unmarshal(r, sec); err != nil {
			faults = append(faults, &strictjson.ShapeError{Path: key, Fault: strictjson.Invalid, Reason: err.Error()})
			continue
		}
		out[row.Spec.Name] = sec
	}
	if len(faults) > 0 {
		return nil, faults
	}
	return out, nil
}

// Encode writes s as a providers object, its members in t's order.
func (t Table) Encode(s Sections) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for _, name := range t.Names() {
		sec, ok := s[name]
		if !ok {
			continue
		}
		b, err := json.Marshal(sec)
		if err != nil {
			return nil, fmt.Errorf("providers.%s: %w", name, err)
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(string(name))
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(b)
	}
	for name := range s {
		if t.lookup(name) == nil {
			return nil, fmt.Errorf("providers.%s: not a transport of the table (%s)", name, t.list())
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Providers builds the providers of the configured sections, in t's order.
// Its errors, one *SettingError per section at fault (errors.Join), name
// the setting in full, as the file writes it: "providers.apns.keyFile",
// "providers.apns.keyID" (where the provider's own error names its Go
// field, Config.KeyID).
func (t Table) Providers(s Sections, env Env) ([]oncepush.Provider, error) {
	var out []oncepush.Provider
	var errs []error
	for _, row := range t {
		sec, ok := s[row.Spec.Name]
		if !ok {
			continue
		}
		p, err := sec.Provider(env)
		if err != nil {
			prefix := "providers." + string(row.Spec.Name)
			se, ok := errors.AsType[*SettingError](err)
			if !ok {
				se, ok = fieldError(sec, err)
			}
			if ok {
				errs = append(errs, &SettingError{Setting: strings.TrimSuffix(prefix+"."+se.Setting, "."), Problem: se.Problem})
			} else {
				errs = append(errs, &SettingError{Setting: prefix, Problem: err.Error()})
			}
			continue
		}
		out = append(out, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// providerField is a provider's refusal of its Config that names the field
// at fault: "apns: Config.KeyID must not be empty: …", "rustore: ProjectID
// is empty: …", "fcm: BaseURL: …".
var providerField = regexp.MustCompile(`^\w+: (?:Config\.)?([A-Z]\w*):? (.+)$`)

// credentialFields are the provider Config fields a section gives as a
// file, by the section's setting.
var credentialFields = map[string]string{"Key": "keyFile", "ServiceAccountJSON": "serviceAccountFile"}

// fieldError names the setting of sec that the provider's error err names
// by its Go field, with the problem in the provider's words.
func fieldError(sec Section, err error) (*SettingError, bool) {
	m := providerField.FindStringSubmatch(err.Error())
	if m == nil {
		return nil, false
	}
	if name, ok := credentialFields[m[1]]; ok {
		return &SettingError{Setting: name, Problem: m[2]}, true
	}
	typ := reflect.TypeOf(sec)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	f, ok := typ.FieldByName(m[1])
	if !ok {
		return nil, false
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		return nil, false
	}
	return &SettingError{Setting: name, Problem: m[2]}, true
}

// LogAttrs are the configured sections for a log line, one group per
// transport, in t's order.
func (t Table) LogAttrs(s Sections) []slog.Attr {
	var out []slog.Attr
	for _, name := range t.Names() {
		if sec, ok := s[name]; ok {
			out = append(out, slog.Any(string(name), sec))
		}
	}
	return out
}

// FakeParams say what the fake's sections are for.
type FakeParams struct {
	// Project is the FCM, RuStore and Push Kit project; Topic the APNs topic (the
	// app's bundle id); WebOrigin FCM's web link origin (optional).
	Project, Topic, WebOrigin string
	// Dir, when set, is where the credentials are written for a server in
	// another process, and the sections name the files. Empty: they stay
	// in memory, for providers built in this process.
	Dir string

	tls    *tls.Config // Dir == "": trusts the fake
	caFile string      // Dir != "": the fake's certificate
}

// file writes a credential into Dir and returns its path.
func (p *FakeParams) file(name string, b []byte) (string, error) {
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// credential hands a fake credential to a section: in memory without Dir,
// else written into Dir and named by its path.
func (p *FakeParams) credential(name string, b []byte) (inMemory []byte, path string, err error) {
	if p.Dir == "" {
		return b, "", nil
	}
	path, err = p.file(name, b)
	return nil, path, err
}

// fakeCAFile is the fake's certificate, written once for every section.
const fakeCAFile = "fake-ca.pem"

// FakeSections returns a section for every transport of t, pointing at the
// fake server.
func (t Table) FakeSections(f *fakepush.Server, p FakeParams) (Sections, error) {
	if p.Dir == "" {
		p.tls = f.TLSConfig()
	} else {
		var err error
		if p.caFile, err = p.file(fakeCAFile, f.CertificatePEM()); err != nil {
			return nil, err
		}
	}
	out := Sections{}
	for _, row := range t {
		sec, err := row.Fake(f, &p)
		if err != nil {
			return nil, fmt.Errorf("providers.%s: %w", row.Spec.Name, err)
		}
		out[row.Spec.Name] = sec
	}
	return out, nil
}

// newProvider is a provider package's New as a section's Provider: an error
// gives a nil oncepush.Provider, not a typed nil that would compare non-nil.
func newProvider[P oncepush.Provider](p P, err error) (oncepush.Provider, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

// tlsConfig is what a section dials with: the one given in memory, or one
// trusting the CA file, or nil for the system's roots.
func tlsConfig(inMemory *tls.Config, caFile string) (*tls.Config, error) {
	if inMemory != nil {
		return inMemory, nil
	}
	if caFile == "" {
		return nil, nil
	}
	b, err := readFile("caFile", caFile, "a PEM file of certificate authorities")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, settingErr("caFile", "%s holds no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// secret is a credential a section takes inline or as a file (whose
// surrounding white space is dropped): the settings' names and what it is.
type secret struct {
	inline, file, what string
}

// value is the secret given inline or in the file; given neither, an error
// names both settings.
func (s secret) value(inline, path string) (string, error) {
	if path == "" {
		if inline == "" {
			return "", settingErr(s.inline, "is empty: give %s here, or the path of a file holding it as %s", s.what, s.file)
		}
		return inline, nil
	}
	b, err := readFile(s.file, path, "a file holding "+s.what)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readFile reads the file that setting names, what it should hold saying
// what it is for. Empty, missing or unreadable, the error names the setting
// and the path (the system's "open : no such file" named neither).
func readFile(setting, path, what string) ([]byte, error) {
	if path == "" {
		return nil, settingErr(setting, "is empty: give the path of %s", what)
	}
	b, err := os.ReadFile(path)
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, settingErr(setting, "%s does not exist (it should be %s)", path, what)
	case errors.As(err, &pe):
		return nil, settingErr(setting, "cannot read %s: %v", path, pe.Err)
	case err != nil:
		return nil, settingErr(setting, "cannot read %s: %v", path, err)
	}
	return b, nil
}

// redacted says whether a secret is set, never what it is.
func redacted(v string) string {
	if v == "" {
		return ""
	}
	return "[redacted]"
}
