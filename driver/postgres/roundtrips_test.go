package postgres_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/pushtest"
)

// TestBatchRoundTrips: a batch of a run costs a fixed number of round trips
// to PostgreSQL, whatever its size — under a busy CPU each costs a
// scheduling delay on both sides, and the claim, which a run makes one at a
// time, was mostly round trips (D91). 9 per batch: BEGIN, the claim, its
// three reads (one round trip), COMMIT; the mark; BEGIN, the deliveries,
// the ledger, COMMIT. Single-recipient messages, as the server sends them.
func TestBatchRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// The workers' wake-up (pg_notify after a send commits) is not the batch's.
	drv, writes := roundTripDriver(t, func(b []byte) bool { return bytes.Contains(b, []byte("pg_notify")) })
	fcm := pushtest.NewProvider(oncepush.TransportFCM)
	c, err := oncepush.NewClient(drv, &oncepush.Config{Providers: []oncepush.Provider{fcm}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	seq := 0
	batch := func(n int) int64 {
		t.Helper()
		for range n {
			seq++
			name := fmt.Sprintf("r%04d", seq)
			if _, err := c.RegisterDevice(ctx, oncepush.Device{Recipient: name, Transport: oncepush.TransportFCM,
				Token: oncepush.Token(fmt.Sprintf("fcm-round-trip-token-%08d", seq))}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Send(ctx, []string{name}, oncepush.Message{Title: "t", Body: name}, nil); err != nil {
				t.Fatal(err)
			}
		}
		before := writes.Load()
		st, err := c.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Batches != 1 || st.Submitted != n {
			t.Fatalf("stats %+v, want one batch of %d submissions", st, n)
		}
		trips := writes.Load() - before
		if n == oncepush.BatchSizeDefault {
			// A full batch is followed by a claim that finds nothing: BEGIN,
			// the claim, COMMIT. A short one ends the run.
			trips -= 3
		}
		return trips
	}
	batch(5) // prepares the statements
	small, large := batch(10), batch(100)
	t.Logf("round trips per batch: %d at 10 deliveries, %d at 100", small, large)
	if small != 9 || large != 9 {
		t.Errorf("a batch took %d round trips at 10 deliveries and %d at 100, want 9", small, large)
	}
}
