// A database file that cannot take a write: it is full (SQLite's
// max_page_count), another process's writer holds the lock past the busy
// timeout, or the handle is closed. A full disk loses nothing; a busy or
// closed database is told apart from a statement that failed.

package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/pushtest"
)

// TestDiskFullLosesNothing: the file cannot grow (SQLite's max_page_count,
// as a full disk answers SQLITE_FULL). A send that does not fit is refused
// whole; a run that cannot write its claim sends nothing and fails; once the
// disk has room, every pair is submitted once and recorded once. (A record
// that cannot be written is retried: RecordOutlastsSlowDatabase.)
func TestDiskFullLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path, _ := migrated(t)
	db := rawDB(t, path)
	db.SetMaxOpenConns(1) // the page limit is a setting of the connection
	drv := sqlite.New(db)
	fcm := pushtest.NewProvider(oncepush.TransportFCM)
	client, err := oncepush.NewClient(drv, &oncepush.Config{
		Providers: []oncepush.Provider{fcm}, Clock: pushtest.NewClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("r%02d", i))
		if _, err := client.RegisterDevice(ctx, oncepush.Device{Recipient: names[i], Transport: oncepush.TransportFCM,
			Token: oncepush.Token(fmt.Sprintf("fcm-token-%03d-%s", i, strings.Repeat("x", 100)))}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := client.Send(ctx, names, oncepush.Message{Type: "t", Title: "before the disk filled"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	setLimit := func(n int) {
		if _, err := db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", n)); err != nil {
			t.Fatal(err)
		}
	}
	setLimit(pages) // full: not one more page

	big := strings.Repeat("x", 3000)
	if _, err := client.Send(ctx, names, oncepush.Message{Type: "t", Title: "does not fit", Body: big}, nil); err == nil {
		t.Fatal("a send that cannot fit on the disk succeeded")
	}
	if _, err := client.Drain(ctx); err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("drain on a full disk: %v, want the claim's disk-full error", err)
	}
	if n := fcm.Count(); n != 0 {
		t.Fatalf("%d submissions from a run that could not write its claim", n)
	}
	setLimit(1 << 30) // room again
	if _, err := client.Drain(ctx); err != nil {
		t.Fatalf("drain once the disk has room: %v", err)
	}
	if n := fcm.Count(); n != len(names) {
		t.Fatalf("%d submissions, want %d (each pair once)", n, len(names))
	}
	counts, err := client.DeliveryCounts(ctx, res.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	if counts[oncepush.StatusSent] != len(names) || len(counts) != 1 {
		t.Fatalf("counts %v, want all %d sent", counts, len(names))
	}
	var messages int
	if err := db.QueryRow("SELECT count(*) FROM oncepush_message").Scan(&messages); err != nil || messages != 1 {
		t.Fatalf("%d messages stored (%v): the refused send left a part of itself", messages, err)
	}
}

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

// TestUnavailableFullOrReadOnly: a disk that is full (SQLITE_FULL, here from
// max_page_count) or a file that can no longer be written (SQLITE_READONLY:
// made read-only, or its file system remounted so) is the database being
// unusable for now, as a busy one is: a server answers 503 and Retry-After,
// not 500, and a worker tries again.
func TestUnavailableFullOrReadOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path, drv := migrated(t)

	db := rawDB(t, path)
	db.SetMaxOpenConns(1) // the page limit is a setting of the connection
	var pages int
	if err := db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	_, full := db.ExecContext(ctx, "INSERT INTO oncepush_lock (name, owner, locked_until) VALUES (?, 'x', 0)", strings.Repeat("x", 64<<10))

	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ro.Close() })
	_, readOnly := ro.ExecContext(ctx, "DELETE FROM oncepush_lock")

	for _, tc := range []struct {
		name string
		err  error
	}{{"disk full", full}, {"read-only", readOnly}} {
		if tc.err == nil {
			t.Fatalf("%s: the write succeeded", tc.name)
		}
		if !drv.Unavailable(tc.err) {
			t.Errorf("%s (%v): Unavailable = false, want true", tc.name, tc.err)
		}
	}
}
