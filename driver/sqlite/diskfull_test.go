package sqlite_test

import (
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
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
	db, err := sql.Open("sqlite", sqlite.DSN(path, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
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
