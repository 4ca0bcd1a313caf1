package config

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
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
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		byName[name] = f
	}
	dst := reflect.ValueOf(&e.Config).Elem()
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		f, ok := byName[key]
		if !ok {
			return &strictjson.ShapeError{Path: key, Fault: strictjson.Unknown, Reason: "is not an engine setting (names are case-sensitive)"}
		}
		v := reflect.New(f.Type)
		if err := json.Unmarshal(raw[key], v.Interface()); err != nil {
			reason := err.Error()
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				reason = "must be a JSON " + te.Type.String()
			}
			return &strictjson.ShapeError{Path: key, Fault: strictjson.Invalid, Reason: reason}
		}
		out := dst.FieldByName(f.Name)
		out.Set(v.Elem().Convert(out.Type()))
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
