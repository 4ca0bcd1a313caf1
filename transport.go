package oncepush

import (
	"fmt"
	"slices"
	"strings"

	"github.com/oncepush/oncepush/provider"
)

// Transport names a push service; see provider.Transport.
type Transport = provider.Transport

// The transports oncepush ships providers for (provider/<name>). Their specs
// are BuiltinTransports.
const (
	TransportFCM     = provider.TransportFCM
	TransportAPNs    = provider.TransportAPNs
	TransportWebPush = provider.TransportWebPush
	TransportRuStore = provider.TransportRuStore
)

// TransportSpec is what the engine knows of one transport: its name and the
// rules its device tokens and payloads follow; see provider.TransportSpec. A
// client knows the transports of Config.Transports.
type TransportSpec = provider.TransportSpec

// BuiltinTransports returns the specs of the transports oncepush ships
// providers for, in their documented order: fcm, apns, webpush, rustore. It is
// a client's list when Config.Transports is nil. Each call returns a new
// slice.
func BuiltinTransports() []TransportSpec { return builtinTransports() }

// Transports returns the names of the built-in transports, in the order of
// BuiltinTransports. Each call returns a new slice.
func Transports() []Transport {
	specs := builtinTransports()
	out := make([]Transport, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// transportTable is a client's transports, checked once.
type transportTable struct {
	specs  []TransportSpec
	byName map[Transport]*TransportSpec
	// list names them for errors: "fcm, apns, webpush, rustore".
	list string
	// maxPayload is the smallest MaxPayload: what every transport carries.
	maxPayload int
}

// newTransportTable checks specs and indexes them; its error names the
// Config field to fix.
func newTransportTable(specs []TransportSpec) (*transportTable, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("oncepush: Config.Transports is empty; leave it nil for the built-in transports")
	}
	specs = slices.Clone(specs) // the table's own: Config() hands out its slice
	t := &transportTable{specs: specs, byName: make(map[Transport]*TransportSpec, len(specs))}
	names := make([]string, len(specs))
	for i := range specs {
		s := &specs[i]
		switch {
		case !validTransportName(s.Name):
			return nil, fmt.Errorf("oncepush: Config.Transports[%d].Name %q is not 1 to 32 lower-case letters and digits starting with a letter", i, s.Name)
		case t.byName[s.Name] != nil:
			return nil, fmt.Errorf("oncepush: Config.Transports names %q twice", s.Name)
		case s.NormalizeToken == nil:
			return nil, fmt.Errorf("oncepush: Config.Transports[%d] (%s) has no NormalizeToken", i, s.Name)
		case s.MaxPayload <= 0:
			return nil, fmt.Errorf("oncepush: Config.Transports[%d] (%s) has no MaxPayload", i, s.Name)
		}
		t.byName[s.Name] = s
		names[i] = string(s.Name)
		if t.maxPayload == 0 || s.MaxPayload < t.maxPayload {
			t.maxPayload = s.MaxPayload
		}
	}
	t.list = strings.Join(names, ", ")
	return t, nil
}

func validTransportName(n Transport) bool {
	if len(n) == 0 || len(n) > 32 || n[0] < 'a' || n[0] > 'z' {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// spec returns the transport's spec, or an error naming field.
func (t *transportTable) spec(field string, name Transport) (*TransportSpec, error) {
	if s := t.byName[name]; s != nil {
		return s, nil
	}
	return nil, invalid(field, "%q is not one of %s", name, t.list)
}

// normalizeToken checks a token for its transport and returns its canonical
// form and key.
func (t *transportTable) normalizeToken(name Transport, token string) (canonical, key string, err error) {
	s, err := t.spec("transport", name)
	if err != nil {
		return "", "", err
	}
	if token == "" {
		return "", "", invalid("token", "must not be empty")
	}
	if err := checkText("token", token); err != nil {
		return "", "", err
	}
	if len(token) > maxTokenLen {
		return "", "", invalid("token", "is %d bytes, at most %d allowed", len(token), maxTokenLen)
	}
	canonical, key, err = s.NormalizeToken(token)
	if err != nil {
		return "", "", asValidation("token", err)
	}
	return canonical, key, nil
}

// reservedDataKey reports whether a message's data may not use k: every
// "oncepush_" name (oncepush_id, and the oncepush_link, oncepush_title,
// oncepush_body and oncepush_image the providers add), or one that any of the
// transports reserves. A send whose data would fail at every device is
// refused when made.
func (t *transportTable) reservedDataKey(k string) bool {
	if strings.HasPrefix(k, "oncepush_") {
		return true
	}
	for i := range t.specs {
		if r := t.specs[i].ReservedDataKey; r != nil && r(k) {
			return true
		}
	}
	return false
}
