package oncepush_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/pushtest"
)

// lib is a client on a fresh database with a fake FCM, for tests of what the
// library accepts and what it hands its providers.
type lib struct {
	send       func(recipients []string, msg oncepush.Message, opts *oncepush.SendOptions) (oncepush.SendResult, error)
	register   func(oncepush.Device) error
	unregister func(recipient string, tr oncepush.Transport, token oncepush.Token) error
	revoke     func(session string) error
	drain      func()
	fcm        *pushtest.Provider
	// rows counts the rows of the tables a refused call must leave alone.
	rows func() map[string]int
}

// eachDriver runs fn on SQLite and on PostgreSQL, in parallel.
func eachDriver(t *testing.T, fn func(t *testing.T, l *lib)) {
	t.Helper()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			switch db {
			case "sqlite":
				drv, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "oncepush.db"), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = drv.Close() })
				fn(t, newLib(t, drv, func(q string) scanner { return drv.DB().QueryRowContext(context.Background(), q) }))
			case "postgres":
				pool := testdb.Pool(t, testdb.Schema(t), 0)
				fn(t, newLib[pgx.Tx](t, postgres.New(pool), func(q string) scanner { return pool.QueryRow(context.Background(), q) }))
			}
		})
	}
}

type scanner interface{ Scan(...any) error }

var _ scanner = (*sql.Row)(nil)

func newLib[TTx any](t *testing.T, drv driver.Driver[TTx], query func(string) scanner) *lib {
	t.Helper()
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	fcm := pushtest.NewProvider(oncepush.TransportFCM)
	c, err := oncepush.NewClient(drv, &oncepush.Config{
		Providers: []oncepush.Provider{fcm},
		Clock:     pushtest.NewClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.WithoutCancel(t.Context())
	return &lib{
		send: func(rs []string, msg oncepush.Message, opts *oncepush.SendOptions) (oncepush.SendResult, error) {
			return c.Send(ctx, rs, msg, opts)
		},
		register: func(d oncepush.Device) error { _, err := c.RegisterDevice(ctx, d); return err },
		unregister: func(r string, tr oncepush.Transport, tok oncepush.Token) error {
			return c.UnregisterDevice(ctx, r, tr, tok)
		},
		revoke: func(s string) error { return c.RevokeSession(ctx, s) },
		drain: func() {
			t.Helper()
			if _, err := c.Drain(ctx); err != nil {
				t.Fatalf("Drain: %v", err)
			}
		},
		fcm: fcm,
		rows: func() map[string]int {
			t.Helper()
			out := map[string]int{}
			for _, tb := range []string{"oncepush_message", "oncepush_delivery", "oncepush_device", "oncepush_revoked_session"} {
				var n int
				if err := query("SELECT count(*) FROM " + tb).Scan(&n); err != nil {
					t.Fatalf("count %s: %v", tb, err)
				}
				out[tb] = n
			}
			return out
		},
	}
}

const fcmToken = "fcm-token:0001-QQQQQQQQQQQQQQQQQQQQQQQQ"

// Data given as json.Number, json.RawMessage or a 64-bit integer reaches the
// provider with the digits the caller wrote, through either database.
func TestDataNumbersReachTheProviderExactly(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, l *lib) {
		if err := l.register(oncepush.Device{Recipient: "u_1", Transport: oncepush.TransportFCM, Token: fcmToken}); err != nil {
			t.Fatal(err)
		}
		_, err := l.send([]string{"u_1"}, oncepush.Message{Title: "Order shipped", Data: map[string]any{
			"order":  json.Number("9007199254740993"),
			"nested": json.RawMessage(`{"id": 12345678901234567890}`),
			"max":    uint64(18446744073709551615),
			"min":    int64(-9223372036854775808),
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.drain()
		subs := l.fcm.Submissions()
		if len(subs) != 1 {
			t.Fatalf("%d submissions, want 1", len(subs))
		}
		for k, want := range map[string]string{
			"order": "9007199254740993", "nested": `{"id":12345678901234567890}`,
			"max": "18446744073709551615", "min": "-9223372036854775808",
		} {
			var got bytes.Buffer // PostgreSQL's jsonb spaces a nested value out
			if err := json.Compact(&got, []byte(subs[0].Data[k])); err != nil || got.String() != want {
				t.Errorf("data[%q] reached the provider as %q, want %s", k, subs[0].Data[k], want)
			}
		}
	})
}

// Text the databases cannot store alike — a NUL character (PostgreSQL refuses
// it, SQLite keeps it) or bytes that are not UTF-8 (which encoding/json would
// silently replace in data) — is refused before anything is written, naming
// the field, on both drivers.
func TestTextFieldsRefuseNULAndInvalidUTF8(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, l *lib) {
		msg := func(change func(*oncepush.Message)) oncepush.Message {
			m := oncepush.Message{Title: "Hello", Body: "there"}
			change(&m)
			return m
		}
		dev := func(change func(*oncepush.Device)) oncepush.Device {
			d := oncepush.Device{Recipient: "u_1", Transport: oncepush.TransportFCM, Token: fcmToken}
			change(&d)
			return d
		}
		type call struct {
			name  string
			do    func() error
			field string
		}
		var calls []call
		for _, bad := range []struct{ name, s string }{{"NUL", "a\x00b"}, {"invalid UTF-8", "a\xffb"}, {"a lone surrogate", "a\xed\xa0\x80b"}} {
			send := func(field string, rs []string, m oncepush.Message, o *oncepush.SendOptions) {
				calls = append(calls, call{bad.name + " in " + field, func() error { _, err := l.send(rs, m, o); return err }, field})
			}
			s := bad.s
			send("recipients[1]", []string{"u_1", s}, msg(func(*oncepush.Message) {}), nil)
			send("type", []string{"u_1"}, msg(func(m *oncepush.Message) { m.Type = s }), nil)
			send("title", []string{"u_1"}, msg(func(m *oncepush.Message) { m.Title = s }), nil)
			send("body", []string{"u_1"}, msg(func(m *oncepush.Message) { m.Body = s }), nil)
			send("link", []string{"u_1"}, msg(func(m *oncepush.Message) { m.Link = "/orders/" + s }), nil)
			send("image", []string{"u_1"}, msg(func(m *oncepush.Message) { m.Image = "https://img.example/" + s }), nil)
			send("data", []string{"u_1"}, msg(func(m *oncepush.Message) { m.Data = map[string]any{"note": s} }), nil)
			send("data", []string{"u_1"}, msg(func(m *oncepush.Message) { m.Data = map[string]any{s: "key"} }), nil)
			send("data", []string{"u_1"}, msg(func(m *oncepush.Message) {
				m.Data = map[string]any{"order": map[string]any{"lines": []any{"ok", map[string]string{"sku": s}}}}
			}), nil)
			send("data", []string{"u_1"}, msg(func(m *oncepush.Message) {
				m.Data = map[string]any{"raw": json.RawMessage(`{"x": "` + s + `"}`)}
			}), nil)
			send("dedupKey", []string{"u_1"}, msg(func(*oncepush.Message) {}), &oncepush.SendOptions{DedupKey: s})
			send("category", []string{"u_1"}, msg(func(*oncepush.Message) {}), &oncepush.SendOptions{Category: s})

			reg := func(field string, d oncepush.Device) {
				calls = append(calls, call{bad.name + " in device " + field, func() error { return l.register(d) }, field})
			}
			reg("recipient", dev(func(d *oncepush.Device) { d.Recipient = s }))
			reg("token", dev(func(d *oncepush.Device) { d.Token = oncepush.Token(fcmToken + s) }))
			reg("platform", dev(func(d *oncepush.Device) { d.Platform = s }))
			reg("session", dev(func(d *oncepush.Device) { d.Session = s }))
			reg("locale", dev(func(d *oncepush.Device) { d.Locale = "de" + s }))
			reg("timeZone", dev(func(d *oncepush.Device) { d.TimeZone = "Europe/Zurich" + s }))
			calls = append(calls,
				call{bad.name + " in unregister recipient", func() error { return l.unregister(s, oncepush.TransportFCM, fcmToken) }, "recipient"},
				call{bad.name + " in revoked session", func() error { return l.revoke(s) }, "session"},
			)
		}
		for _, c := range calls {
			before := l.rows()
			err := c.do()
			var ve *oncepush.ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Errorf("%s: got %v, want a validation error naming %s", c.name, err, c.field)
			}
			if after := l.rows(); !maps.Equal(before, after) {
				t.Errorf("%s: wrote rows: %v, before %v", c.name, after, before)
			}
		}
	})
}

// A number in data beyond the range of a double is refused on both drivers,
// naming where: PostgreSQL's jsonb refused 1e131072 (and so the send failed
// as a database error) where SQLite stored it, and JavaScript reads 1e400
// as Infinity. Digits beyond a double's precision are the caller's to keep.
func TestDataNumbersBeyondADoubleAreRefused(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, l *lib) {
		for _, n := range []string{"1e131072", "-1e400", "1e-400", "1.7976931348623159e308"} {
			before := l.rows()
			_, err := l.send([]string{"u_1"}, oncepush.Message{Title: "t", Data: map[string]any{"n": []any{json.Number(n)}}}, nil)
			var ve *oncepush.ValidationError
			if !errors.As(err, &ve) || ve.Field != "data" || !strings.Contains(ve.Message, "data.n[0]") {
				t.Errorf("data number %s: got %v, want a validation error naming data.n[0]", n, err)
			}
			if after := l.rows(); !maps.Equal(before, after) {
				t.Errorf("data number %s: wrote rows: %v, before %v", n, after, before)
			}
		}
		if _, err := l.send([]string{"u_1"}, oncepush.Message{Title: "t", Data: map[string]any{
			"max": json.Number("1.7976931348623157e308"), "tiny": json.Number("4.9e-324"), "id": json.Number("9007199254740993"),
		}}, nil); err != nil {
			t.Errorf("numbers a double can hold: %v", err)
		}
	})
}

// PostgreSQL's jsonb stores numbers in plain notation: 1e308 takes 5 bytes
// as written and 309 as stored. Data counts them as stored, on both drivers,
// so a 4 KB limit cannot become a 200 KB row and payload on one of them, and
// a zero jsonb cannot hold (0e-16384) fails as a validation error, not as
// the write.
func TestDataNumbersCountAsStored(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, l *lib) {
		many := make([]any, 600)
		for i := range many {
			many[i] = json.Number("1e308")
		}
		for name, data := range map[string]map[string]any{
			"600 × 1e308":             {"n": many},
			"a zero of 16,384 places": {"n": json.Number("0e-16384")},
			"an exponent jsonb fails": {"n": json.Number("0e2000000000")},
		} {
			before := l.rows()
			_, err := l.send([]string{"u_1"}, oncepush.Message{Title: "t", Data: data}, nil)
			var ve *oncepush.ValidationError
			if !errors.As(err, &ve) || ve.Field != "data" {
				t.Errorf("%s: got %v, want a validation error naming data", name, err)
			}
			if after := l.rows(); !maps.Equal(before, after) {
				t.Errorf("%s: wrote rows: %v, before %v", name, after, before)
			}
		}
		// One such number fits, and reaches the provider as stored.
		if err := l.register(oncepush.Device{Recipient: "u_1", Transport: oncepush.TransportFCM, Token: fcmToken}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.send([]string{"u_1"}, oncepush.Message{Title: "t", Data: map[string]any{"n": json.Number("1e300")}}, nil); err != nil {
			t.Fatalf("one 1e300: %v", err)
		}
		l.drain()
		subs := l.fcm.Submissions()
		if len(subs) != 1 || (subs[0].Data["n"] != "1e300" && subs[0].Data["n"] != "1"+strings.Repeat("0", 300)) {
			t.Fatalf("submissions %+v, want data n as written or in plain notation", subs)
		}
	})
}
