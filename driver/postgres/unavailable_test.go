package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/testdb"
)

func TestUnavailableTellsAnUnreachableDatabaseFromAFailedStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A port nobody listens on: the listener is closed before the dial.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, refused := pgx.Connect(ctx, "postgres://oncepush@"+addr+"/oncepush?sslmode=disable&connect_timeout=5")
	if refused == nil {
		t.Fatal("connected to a closed port")
	}
	pool := testdb.Pool(t, testdb.Schema(t), 1)
	_, undefined := pool.Exec(ctx, "SELECT * FROM no_such_table")
	pool.Close()
	_, closed := pool.Exec(ctx, "SELECT 1")

	drv := postgres.New(nil)
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"closed pool", fmt.Errorf("read: %w", closed), true},
		{"admin_shutdown", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true},
		{"crash_shutdown", &pgconn.PgError{Severity: "FATAL", Code: "57P02"}, true},
		{"cannot_connect_now", fmt.Errorf("write: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P03"}), true},
		{"too_many_connections", &pgconn.PgError{Severity: "FATAL", Code: "53300"}, true},
		{"connection_failure", &pgconn.PgError{Code: "08006"}, true},
		{"EOF mid-answer", fmt.Errorf("read rows: %w", io.ErrUnexpectedEOF), true},
		{"undefined table", undefined, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"not found", driver.ErrNotFound, false},
		{"cancelled by the caller", context.Canceled, false},
		{"nil", nil, false},
	} {
		if got := drv.Unavailable(tc.err); got != tc.want {
			t.Errorf("%s (%v): Unavailable = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
