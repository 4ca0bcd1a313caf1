package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/sqlite"
)

func TestUnavailableTellsABusyOrClosedDatabaseFromAFailedStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "oncepush.db")
	drv := open(t, path, &sqlite.Options{BusyTimeout: 20 * time.Millisecond})
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, undefined := drv.DB().ExecContext(ctx, "SELECT * FROM no_such_table")

	// Another process's writer holds the lock past the busy timeout.
	conn, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, busy := drv.DB().ExecContext(ctx, "DELETE FROM oncepush_message")
	_, _ = conn.ExecContext(ctx, "ROLLBACK")
	_ = conn.Close()

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"busy past the timeout", busy, true},
		{"the driver's own wait", fmt.Errorf("register: %w", sqlite.ErrBusy), true},
		{"undefined table", undefined, false},
		{"not found", driver.ErrNotFound, false},
		{"nil", nil, false},
	} {
		if got := drv.Unavailable(tc.err); got != tc.want {
			t.Errorf("%s (%v): Unavailable = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	_, closed := drv.DB().ExecContext(ctx, "SELECT 1")
	if !drv.Unavailable(closed) {
		t.Errorf("after Close (%v): Unavailable = false", closed)
	}
}
