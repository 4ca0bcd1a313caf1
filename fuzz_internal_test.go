package oncepush

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/oncepush/oncepush/internal/strictjson"
)

// messageFields are the fields a send's ValidationError may name.
var messageFields = regexp.MustCompile(`^(recipients(\[\d+\])?|type|title|body|data|link|image|dedupKey|category|lifetime|ambiguity)$`)

// reservedByProviders are the names of data that a provider refuses or
// writes itself: FCM's reserved words (provider/fcm, any case), APNs's
// "aps", the keys the providers add (oncepush_id, oncepush_link, …), and
// FCM's legacy collapse_key.
var reservedByProviders = regexp.MustCompile(`^(?i:from|message_type)$|^aps$|^(?i:google|gcm)|^oncepush_|^collapse_key`)

// FuzzMessage feeds a send's validation (prepare) arbitrary recipients,
// texts, data and options. It never panics; a refusal is a *ValidationError
// naming one of the send's fields; what it accepts is what the databases
// store alike and the providers can carry: UTF-8 without NUL everywhere,
// data an I-JSON object without reserved names within MaxDataBytes, a link
// that is an in-app path, an image that is an http(s) URL, everything
// within MaxPayloadBytes; and the stored data, read back, is accepted again
// as the same data.
func FuzzMessage(f *testing.F) {
	builtins, err := newTransportTable(BuiltinTransports())
	if err != nil {
		f.Fatal(err)
	}
	type seed struct {
		recipients, typ, title, body, link, image string
		data                                      string
		raw                                       bool
		note, dedup, category                     string
		lifetime                                  int64
		ambiguity                                 string
		declared                                  bool
	}
	for _, s := range []seed{
		{recipients: "u_1", title: "Hello"},
		{recipients: "u_1\nu_2\nu_1", typ: "invoice.paid", title: "Paid", body: "€12.40", link: "/invoices/inv_2201",
			image: "https://img.example/a.png", data: `{"invoice": "inv_2201", "amount": 1240, "n": 9007199254740993}`,
			dedup: "k1", category: "billing", lifetime: 3600, ambiguity: "at-most-once"},
		{recipients: "u_1", body: "b", image: "http://img.example/a.png", data: `{"nested": {"a": [1, {"b": null}]}}`, raw: true},
		{recipients: "", title: "no recipients"},
		{recipients: "u_1\n", title: "an empty recipient"},
		{recipients: strings.Repeat("r", 201), title: "long recipient"},
		{recipients: "u_1", title: " \t\n"},
		{recipients: "u_1", title: "a\x00b"},
		{recipients: "u_\xff", title: "t"},
		{recipients: "u_1", title: "caf\xe9"},
		{recipients: "u_1", title: "t", note: "\xed\xa0\x80"},
		{recipients: "u_1", title: "t", note: "a\x00"},
		{recipients: "u_1", title: "t", data: `{"oncepush_id": "x"}`},
		{recipients: "u_1", title: "t", data: `{"google.c.a": 1, "collapse_key_x": 2, "from": 3}`},
		{recipients: "u_1", title: "t", data: `{"a": "\u0000"}`},
		{recipients: "u_1", title: "t", data: `{"a": {"\u0000": 1}}`, raw: true},
		{recipients: "u_1", title: "t", data: `{"a": 1, "a": 2}`, raw: true},
		{recipients: "u_1", title: "t", data: `{"a": "\ud800"}`, raw: true},
		{recipients: "u_1", title: "t", data: `{"a": 1e400}`, raw: true},
		{recipients: "u_1", title: "t", data: `{"a": 1e308, "b": 4.9e-324, "c": 1E+2}`},
		{recipients: "u_1", title: "t", data: `{"a": [` + strings.Repeat("1e308,", 100) + `0]}`},
		{recipients: "u_1", title: "t", data: `{"a": 0e-16384}`},
		{recipients: "u_1", title: "t", data: `{"a": 0e2000000000}`},
		{recipients: "u_1", title: "t", data: `[1, 2]`, raw: true},
		{recipients: "u_1", title: "t", data: `{"a": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, raw: true},
		{recipients: "u_1", title: "t", data: `{"blob": "` + strings.Repeat("x", 4100) + `"}`},
		{recipients: "u_1", title: strings.Repeat("t", 3000), body: strings.Repeat("b", 1100)},
		{recipients: "u_1", title: "t", link: "//evil.example/x"},
		{recipients: "u_1", title: "t", link: "/\\evil.example"},
		{recipients: "u_1", title: "t", link: "https://evil.example/"},
		{recipients: "u_1", title: "t", image: "ftp://img.example/a"},
		{recipients: "u_1", title: "t", image: "https:///path"},
		{recipients: "u_1", title: "t", image: "HTTPS://IMG.example/%zz"},
		{recipients: "u_1", title: "t", dedup: strings.Repeat("k", 201)},
		{recipients: "u_1", title: "t", category: "spam", declared: true},
		{recipients: "u_1", title: "t", category: "news", declared: true},
		{recipients: "u_1", title: "t", lifetime: -1},
		{recipients: "u_1", title: "t", lifetime: 1 << 62},
		{recipients: "u_1", title: "t", ambiguity: "twice"},
		{recipients: "u_1", title: "t", typ: strings.Repeat("y", 101)},
	} {
		f.Add(s.recipients, s.typ, s.title, s.body, s.link, s.image, []byte(s.data), s.raw, s.note, s.dedup, s.category,
			s.lifetime, s.ambiguity, s.declared)
	}
	f.Fuzz(func(t *testing.T, recipients, typ, title, body, link, image string, data []byte, raw bool, note, dedup, category string,
		lifetime int64, ambiguity string, declared bool) {
		c := &clientCore{cfg: &Config{MessageLifetime: MessageLifetimeDefault, Ambiguity: AmbiguityResend}, transports: builtins}
		if declared {
			c.cfg.Categories = map[string]Category{"news": {Ambiguity: AmbiguityAtMostOnce}}
		}
		var rs []string
		if recipients != "" {
			rs = strings.Split(recipients, "\n")
		}
		msg := &Message{Type: typ, Title: title, Body: body, Link: link, Image: image}
		if len(data) > 0 {
			if raw {
				msg.Data = map[string]any{"raw": json.RawMessage(data)}
			} else {
				dec := json.NewDecoder(bytes.NewReader(data))
				dec.UseNumber()
				var m map[string]any
				if dec.Decode(&m) == nil && m != nil {
					msg.Data = m
				}
			}
		}
		if note != "" {
			if msg.Data == nil {
				msg.Data = map[string]any{}
			}
			msg.Data[note] = []any{note}
		}
		opts := &SendOptions{DedupKey: dedup, Category: category, Lifetime: time.Duration(lifetime), Ambiguity: AmbiguityPolicy(ambiguity)}

		p, err := c.prepare(rs, msg, opts)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || !messageFields.MatchString(ve.Field) || ve.Message == "" {
				t.Fatalf("refused with %T %v, want a ValidationError naming a field of the send", err, err)
			}
			return
		}
		checkAccepted(t, rs, msg, opts, p)

		// The stored data is what a later read hands back: it must be
		// accepted again, as itself.
		if p.data != nil {
			dec := json.NewDecoder(bytes.NewReader(p.data))
			dec.UseNumber()
			var back map[string]any
			if err := dec.Decode(&back); err != nil {
				t.Fatalf("stored data %q does not read back: %v", p.data, err)
			}
			again := *msg
			again.Data = back
			q, err := c.prepare(rs, &again, opts)
			if err != nil {
				t.Fatalf("stored data %q, read back, is refused: %v", p.data, err)
			}
			if !sameJSON(q.data, p.data) {
				t.Fatalf("stored data %q, read back and stored again, is %q", p.data, q.data)
			}
		}
	})
}

func checkAccepted(t *testing.T, rs []string, msg *Message, opts *SendOptions, p *prepared) {
	t.Helper()
	if len(p.recipients) == 0 || len(p.recipients)+p.dupes != len(rs) || len(rs) > MaxRecipients {
		t.Fatalf("accepted %d recipients as %d and %d duplicates", len(rs), len(p.recipients), p.dupes)
	}
	seen := map[string]bool{}
	for _, r := range p.recipients {
		if r == "" || len(r) > maxRecipientLen || !storable(r) || seen[r] {
			t.Fatalf("accepted recipient %q", r)
		}
		seen[r] = true
	}
	for name, s := range map[string]string{"type": msg.Type, "title": msg.Title, "body": msg.Body, "link": msg.Link,
		"image": msg.Image, "dedupKey": opts.DedupKey, "category": opts.Category} {
		if !storable(s) {
			t.Fatalf("accepted %s %q, which is not UTF-8 without NUL", name, s)
		}
	}
	if strings.TrimSpace(msg.Title) == "" && strings.TrimSpace(msg.Body) == "" {
		t.Fatalf("accepted a message with neither title nor body")
	}
	if msg.Link != "" {
		if u, err := url.Parse(msg.Link); err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(msg.Link, "/") || strings.HasPrefix(msg.Link, "//") {
			t.Fatalf("accepted link %q, which is not an in-app path", msg.Link)
		}
	}
	if msg.Image != "" {
		u, err := url.Parse(msg.Image)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("accepted image %q", msg.Image)
		}
		if (u.Scheme == "https") != (p.image == msg.Image) || (u.Scheme == "http") != (p.dropped == msg.Image) {
			t.Fatalf("image %q kept as %q, dropped %q", msg.Image, p.image, p.dropped)
		}
	}
	if (p.data == nil) != (msg.Data == nil) {
		t.Fatalf("data %v stored as %q", msg.Data, p.data)
	}
	if p.data != nil {
		checkStoredData(t, p.data)
	}
	if size := len(msg.Title) + len(msg.Body) + len(p.data) + len(msg.Link) + len(p.image); size > MaxPayloadBytes {
		t.Fatalf("accepted a payload of %d bytes", size)
	}
	if !p.policy.valid() || p.lifetime <= 0 || p.lifetime > MaxLifetime {
		t.Fatalf("accepted policy %q, lifetime %v", p.policy, p.lifetime)
	}
}

// checkStoredData: an I-JSON object within MaxDataBytes (as either database
// stores it), no reserved name at
// its top, no NUL in any name or string.
func checkStoredData(t *testing.T, data []byte) {
	t.Helper()
	doc, err := strictjson.Parse(data)
	if err != nil || doc.Kind != strictjson.Object {
		t.Fatalf("stored data %q is not an I-JSON object: %v", data, err)
	}
	// PostgreSQL stores numbers in plain notation (plainNumberLen, checked
	// against it by TestPlainNumberLenIsWhatJSONBStores).
	stored := len(data)
	var grow func(v *strictjson.Value)
	grow = func(v *strictjson.Value) {
		if v.Kind == strictjson.Number {
			stored += max(0, plainNumberLen(v.Text)-len(v.Text))
		}
		for _, m := range v.Members {
			grow(m.Value)
		}
		for _, e := range v.Elems {
			grow(e)
		}
	}
	grow(doc)
	if stored > MaxDataBytes {
		t.Fatalf("stored data %q takes %d bytes as PostgreSQL stores it", data, stored)
	}
	for _, m := range doc.Members {
		if reservedByProviders.MatchString(m.Name) {
			t.Fatalf("stored data has the reserved name %q", m.Name)
		}
	}
	var walk func(v *strictjson.Value)
	walk = func(v *strictjson.Value) {
		if v.Kind == strictjson.String && strings.IndexByte(v.Text, 0) >= 0 {
			t.Fatalf("stored data %q holds a NUL", data)
		}
		for _, m := range v.Members {
			if strings.IndexByte(m.Name, 0) >= 0 {
				t.Fatalf("stored data %q holds a NUL in a name", data)
			}
			walk(m.Value)
		}
		for _, e := range v.Elems {
			walk(e)
		}
	}
	walk(doc)
}

func storable(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// sameJSON compares two documents as values, numbers by their digits.
func sameJSON(a, b []byte) bool {
	read := func(b []byte) any {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return errors.New("not JSON")
		}
		return v
	}
	return reflect.DeepEqual(read(a), read(b))
}

// FuzzDeviceToken feeds registration's token check (the built-in transport
// table's normalizeToken) every
// transport and arbitrary text. It never panics; a refusal is a
// *ValidationError naming the token (or the transport); what it accepts has
// the transport's shape, and a Web Push subscription is I-JSON read exactly
// as written (names and their case, one value, no name twice), its
// canonical form parses back to the same subscription and key.
func FuzzDeviceToken(f *testing.F) {
	p256dh := base64.RawURLEncoding.EncodeToString(append([]byte{4}, bytes.Repeat([]byte{7}, 64)...))
	auth := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{9}, 16))
	sub := func(endpoint, rest string) string {
		return `{"endpoint": "` + endpoint + `", "keys": {"p256dh": "` + p256dh + `", "auth": "` + auth + `"}` + rest + `}`
	}
	for _, s := range []struct {
		transport, token string
	}{
		{"fcm", "dQw4w9WgXcQ:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx"},
		{"rustore", "rustore-token_0001.abc"},
		{"apns", strings.Repeat("ab", 32)},
		{"apns", strings.Repeat("AB", 100)},
		{"apns", strings.Repeat("ab", 101)},
		{"fcm", "short"},
		{"fcm", "tok\x00en-000"},
		{"fcm", "tok\xffen-000"},
		{"hms", "anything-at-all"},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", "")},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", `, "expirationTime": null`)},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", `, "expirationTime": 1767225600000`)},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", `, "expirationTime": 1e400`)},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", `, "expirationTime": "soon"`)},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", `, "endpoint": "https://evil.example/x"`)},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", `, "ENDPOINT": "https://evil.example/x"`)},
		{"webpush", sub(`https://fcm.googleapis.com/fcm/send/\ud800`, "")},
		{"webpush", sub(`https://fcm.googleapis.com/fcm/send/\u0000`, "")},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", "") + ` {"endpoint": "https://evil.example/x"}`},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", "") + `]`},
		{"webpush", sub("http://fcm.googleapis.com/fcm/send/abc", "")},
		{"webpush", sub("https://user@fcm.googleapis.com/fcm/send/abc", "")},
		{"webpush", sub("https://fcm.googleapis.com/fcm/send/abc", `, "keys": {}`)},
		{"webpush", `{"endpoint": "https://a.example/x", "keys": {"p256dh": "` + p256dh + `==", "auth": "` + auth + `"}}`},
		{"webpush", `{"endpoint": "https://a.example/x", "keys": {"p256dh": "BA", "auth": "` + auth + `"}}`},
		{"webpush", `{"endpoint": "https://a.example/x", "keys": {"P256DH": "` + p256dh + `", "auth": "` + auth + `"}}`},
		{"webpush", `"` + strings.ReplaceAll(sub("https://fcm.googleapis.com/x", ""), `"`, `\"`) + `"`},
		{"webpush", `null`},
		{"webpush", `[]`},
	} {
		f.Add(s.transport, s.token)
	}
	table, err := newTransportTable(BuiltinTransports())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, transport, token string) {
		canonical, key, err := table.normalizeToken(Transport(transport), token)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || (ve.Field != "token" && ve.Field != "transport") || ve.Message == "" {
				t.Fatalf("refused with %T %v, want a ValidationError naming the token", err, err)
			}
			return
		}
		if _, known := table.byName[Transport(transport)]; !known || token == "" || len(token) > maxTokenLen || !storable(token) || !storable(canonical) || key == "" {
			t.Fatalf("accepted %s token %q as %q (key %q)", transport, token, canonical, key)
		}
		switch Transport(transport) {
		case TransportAPNs:
			if canonical != strings.ToLower(token) || key != canonical {
				t.Fatalf("APNs token %q became %q, key %q", token, canonical, key)
			}
		case TransportFCM, TransportRuStore:
			if canonical != token || key != token || strings.Trim(token, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:.") != "" {
				t.Fatalf("%s token %q became %q, key %q", transport, token, canonical, key)
			}
		case TransportWebPush:
			checkSubscription(t, token, canonical, key)
		}
	})
}

// checkSubscription: the token as written is an I-JSON object whose
// "endpoint" and "keys" members — named exactly so — are the subscription
// that was read, and the canonical form reads back as the same.
func checkSubscription(t *testing.T, token, canonical, key string) {
	t.Helper()
	doc, err := strictjson.Parse([]byte(token))
	if err != nil || doc.Kind != strictjson.Object {
		t.Fatalf("accepted a subscription %q that is not an I-JSON object: %v", token, err)
	}
	sub, err := ParseWebPushSubscription(canonical)
	if err != nil {
		t.Fatalf("the canonical form %q of %q does not parse: %v", canonical, token, err)
	}
	member := func(v *strictjson.Value, name string) *strictjson.Value {
		for _, m := range v.Members {
			if m.Name == name {
				return m.Value
			}
		}
		return nil
	}
	endpoint, keys := member(doc, "endpoint"), member(doc, "keys")
	if endpoint == nil || endpoint.Kind != strictjson.String || endpoint.Text != sub.Endpoint || key != sub.Endpoint {
		t.Fatalf("subscription %q read as endpoint %q (key %q)", token, sub.Endpoint, key)
	}
	if keys == nil || keys.Kind != strictjson.Object {
		t.Fatalf("subscription %q has no keys object, read as %+v", token, sub)
	}
	for name, want := range map[string][]byte{"p256dh": sub.P256dh, "auth": sub.Auth} {
		v := member(keys, name)
		if v == nil || v.Kind != strictjson.String {
			t.Fatalf("subscription %q has no keys.%s string", token, name)
		}
		if got, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(v.Text, "=")); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("subscription %q: keys.%s read as %x", token, name, want)
		}
	}
	if exp := member(doc, "expirationTime"); exp != nil && exp.Kind != strictjson.Number && exp.Kind != strictjson.Null {
		t.Fatalf("subscription %q: expirationTime is %v, the document says a number or null", token, exp.Kind)
	}
	u, err := url.Parse(sub.Endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		t.Fatalf("subscription %q: endpoint %q is not an https URL", token, sub.Endpoint)
	}
	if len(sub.P256dh) != 65 || sub.P256dh[0] != 4 || len(sub.Auth) != 16 {
		t.Fatalf("subscription %q read as %+v", token, sub)
	}
	table, _ := newTransportTable(BuiltinTransports())
	if again, _, err := table.normalizeToken(TransportWebPush, canonical); err != nil || again != canonical {
		t.Fatalf("the canonical form %q normalizes to %q, %v", canonical, again, err)
	}
}
