package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/testdb"
)

// writeCounter counts what a connection sends: with pgx, one write per
// round trip. A write that skip says is not the test's is not counted.
type writeCounter struct {
	net.Conn
	n    *atomic.Int64
	skip func([]byte) bool
}

func (c writeCounter) Write(b []byte) (int, error) {
	if c.skip == nil || !c.skip(b) {
		c.n.Add(1)
	}
	return c.Conn.Write(b)
}

// roundTripDriver returns a migrated driver on one connection (so that its
// statement cache is warm after the first use) whose writes are counted,
// but those skip says are not the test's.
func roundTripDriver(t *testing.T, skip func([]byte) bool) (*postgres.Driver, *atomic.Int64) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testdb.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	writes := &atomic.Int64{}
	var dialer net.Dialer
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{c, writes, skip}, nil
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	drv := postgres.New(pool)
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return drv, writes
}

// TestGroupInsertIsOneRoundTrip: MessageInsertMany pipelines a group's
// sends, savepoints of recorded requests included, in one round trip
// whatever the group's size; a recorded key costs a few more (the rollback to
// its savepoint, the rest of the batch again, and pgx preparing its
// statement again), and fails only its send.
func TestGroupInsertIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	drv, writes := roundTripDriver(t, nil)
	seq := 0
	group := func(n int, keys map[int]string) (int64, []driver.MessageInserted) {
		t.Helper()
		ps := make([]*driver.MessageInsertParams, n)
		for i := range ps {
			seq++
			r := fmt.Sprintf("r%d", seq)
			ps[i] = &driver.MessageInsertParams{Type: "t", Ambiguity: "resend", Recipients: []string{r}, NotificationIDs: []string{r}}
			if key, ok := keys[i]; ok {
				ps[i].DedupKey, ps[i].RequestHash = key, bytes.Repeat([]byte{1}, 32)
			}
		}
		before := writes.Load()
		var out []driver.MessageInserted
		err := drv.InTx(t.Context(), func(ctx context.Context, _ pgx.Tx, ex driver.Executor) error {
			var err error
			out, err = ex.MessageInsertMany(ctx, ps)
			return err
		})
		if err != nil {
			t.Fatalf("a group of %d: %v", n, err)
		}
		return writes.Load() - before, out
	}
	group(3, map[int]string{1: "taken"}) // prepares the statements
	// BEGIN, the batch, COMMIT.
	if small, _ := group(2, map[int]string{1: "k2"}); small != 3 {
		t.Errorf("a group of 2 took %d round trips, want 3", small)
	}
	if large, _ := group(12, map[int]string{1: "k12a", 7: "k12b"}); large != 3 {
		t.Errorf("a group of 12 took %d round trips, want 3", large)
	}
	trips, out := group(12, map[int]string{3: "k-new", 5: "taken", 9: "k-after"})
	// pgx also drops the batch's prepared statement after the error and
	// prepares it again: at most 4 more round trips, whatever the size.
	if trips > 7 {
		t.Errorf("a group of 12 with a recorded key took %d round trips, want at most 7", trips)
	}
	for i, o := range out {
		switch {
		case i == 5 && !errors.Is(o.Err, driver.ErrRequestRecorded):
			t.Errorf("the send of the recorded key: %+v, want ErrRequestRecorded", o)
		case i != 5 && (o.Err != nil || o.ID == 0 || o.Inserted != 1):
			t.Errorf("send %d: %+v, want written", i, o)
		}
	}
	var n int
	if err := drv.Pool().QueryRow(t.Context(), "SELECT count(*) FROM oncepush_delivery").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if want := 3 + 2 + 12 + 11; n != want {
		t.Errorf("%d deliveries, want %d", n, want)
	}
}
