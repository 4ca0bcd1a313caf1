package oncepush_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
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
				drv, err := sqlite.Open(filepath.Join(t.TempDir(), "oncepush.db"), nil)
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
