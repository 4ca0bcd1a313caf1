package config

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/strictjson"
)

// engineFile is oncepush.Config as the file writes it: the fields with a json
// tag, each time.Duration replaced by Duration (a string in JSON). It is
// derived from oncepush.Config, so a field the library adds with a tag is a
// setting without a line here.
var engineFile = sync.OnceValue(func() reflect.Type {
	src := reflect.TypeFor[oncepush.Config]()
	var fields []reflect.StructField
	for i := range src.NumField() {
		f := src.Field(i)
		tag := f.Tag.Get("json")
		if tag == "" || tag == "-" {
			continue
		}
		typ := f.Type
		if typ == reflect.TypeFor[time.Duration]() {
			typ = reflect.TypeFor[Duration]()
		}
		fields = append(fields, reflect.StructField{Name: f.Name, Type: typ, Tag: f.Tag})
	}
	return reflect.StructOf(fields)
})

// UnmarshalJSON decodes the engine section strictly: an unknown key, or a
// value of the wrong type, is an error naming the setting (engine.<key>).
func (e *Engine) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return errors.New("engine: must be a JSON object")
	}
	typ := engineFile()
	byName := map[string]reflect.StructField{}
	known := make([]string, 0, typ.NumField())
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _ := jsonName(typ, f.Name)
		byName[name] = f
		known = append(known, name)
	}
	dst := reflect.ValueOf(&e.Config).Elem()
	// Every fault, so that the file is fixed in one go.
	var faults strictjson.ShapeErrors
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		f, ok := byName[key]
		if !ok {
			faults = append(faults, &strictjson.ShapeError{Path: strictjson.Join("", key), Fault: strictjson.Unknown,
				Reason: "is not an engine setting (names are case-sensitive)", Name: key, Known: known})
			continue
		}
		v := reflect.New(f.Type)
		if err := json.Unmarshal(raw[key], v.Interface()); err != nil {
			reason := err.Error()
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				reason = "must be a JSON " + te.Type.String()
			}
			faults = append(faults, &strictjson.ShapeError{Path: strictjson.Join("", key), Fault: strictjson.Invalid, Reason: reason})
			continue
		}
		out := dst.FieldByName(f.Name)
		out.Set(v.Elem().Convert(out.Type()))
	}
	if len(faults) > 0 {
		return faults
	}
	return nil
}

// MarshalJSON writes the section back in the file's form.
func (e Engine) MarshalJSON() ([]byte, error) {
	v := reflect.New(engineFile()).Elem()
	src := reflect.ValueOf(e.Config)
	for i := range v.NumField() {
		f := v.Field(i)
		f.Set(src.FieldByName(v.Type().Field(i).Name).Convert(f.Type()))
	}
	return json.Marshal(v.Interface())
}

// engineField is how oncepush.Config's validation names a field at the start
// of its errors: "Config.Workers", "Config.Categories["news"].Ambiguity".
var engineField = regexp.MustCompile(`^Config\.(\w+)(?:\[("(?:[^"\\]|\\.)*")\](?:\.(\w+))?)?\s*`)

// goName is a Go field name (a word that starts with a capital).
var goName = regexp.MustCompile(`\b[A-Z]\w*\b`)

// engineError is an error of oncepush.Config.Validate, which names the
// library's Go fields for its users ("oncepush: Config.Workers must not be
// negative"), naming the settings as the file writes them instead
// ("engine.workers: must not be negative"). A field that is no setting
// (Providers, Transports) leaves the error to the "engine" section.
func engineError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "oncepush: ")
	m := engineField.FindStringSubmatch(msg)
	if m == nil {
		return settingErr("engine", "%s", msg)
	}
	setting, ok := engineSetting(m[1])
	switch name, qerr := strconv.Unquote(m[2]); {
	case m[2] == "":
	case m[3] != "": // Categories["news"].Ambiguity: the file's categories section
		sub, subOK := jsonName(reflect.TypeFor[oncepush.Category](), m[3])
		setting, ok = strictjson.Join(strictjson.Join("categories", name), sub), m[1] == "Categories" && qerr == nil && subOK
	default: // CampaignCeilings["fcm"]: a key of an engine map
		setting, ok = strictjson.Join(setting, name), ok && qerr == nil
	}
	if !ok {
		return settingErr("engine", "%s", msg)
	}
	problem := msg[len(m[0]):]
	if v, rest, found := strings.Cut(problem, ") "); found && strings.HasPrefix(v, "(") {
		problem = v[1:] + " " + rest // "(25s) must exceed …": the value, then what is wrong with it
	}
	// The other fields the text names, outside the quoted values.
	parts := strings.Split(problem, `"`)
	for i := 0; i < len(parts); i += 2 {
		parts[i] = goName.ReplaceAllStringFunc(parts[i], func(w string) string {
			if s, ok := engineSetting(w); ok {
				return s
			}
			return w
		})
	}
	return &Error{Setting: setting, Problem: strings.Join(parts, `"`)}
}

// engineSetting is the setting of the oncepush.Config field named goName:
// "engine." and its json name.
func engineSetting(goName string) (string, bool) {
	name, ok := jsonName(engineFile(), goName)
	return "engine." + name, ok
}

// jsonName is the json name of typ's field goName, if it has one.
func jsonName(typ reflect.Type, goName string) (string, bool) {
	f, ok := typ.FieldByName(goName)
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name, name != "" && name != "-"
}
