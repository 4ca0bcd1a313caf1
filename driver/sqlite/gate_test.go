package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/internal/enginetest"
)

// TestWritersOfOneProcessTakeTurns: eight writers of one process, on two
// handles. SQLite's busy handler alone lets a waiter lose the lock to later
// writers again and again (it sleeps and polls); writers that queue in the
// process never wait longer than the queue ahead of them. The test counts,
// for every write, the writes that finished while it was under way: in
// turn, each of the seven others finishes at most once before it, and
// sync.Mutex lets a newcomer barge in only during a waiter's first
// millisecond, so a few more at most. The busy timeout is a hang guard, not
// the measure: how long a turn takes is the machine's business.
func TestWritersOfOneProcessTakeTurns(t *testing.T) {
	t.Parallel()
	const writers, writes = 8, 60
	path := filepath.Join(t.TempDir(), "oncepush.db")
	opts := &sqlite.Options{MaxConns: writers, BusyTimeout: 2 * time.Minute}
	a := open(t, path, opts)
	if _, err := a.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := open(t, path, opts)
	ca, _ := oncepush.NewClient(a, nil)
	cb, _ := oncepush.NewClient(b, nil)
	var done atomic.Int64
	overtaken := make([]int64, writers) // the most any one write of each writer saw
	var wg sync.WaitGroup
	for w := range writers {
		c := ca
		if w%2 == 1 {
			c = cb
		}
		wg.Go(func() {
			for i := range writes {
				before := done.Load()
				_, err := c.RegisterDevice(context.Background(), oncepush.Device{
					Recipient: fmt.Sprintf("w%d", w), Transport: oncepush.TransportFCM,
					Token: oncepush.Token(fmt.Sprintf("tok-%02d-%06d", w, i)),
				})
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				overtaken[w] = max(overtaken[w], done.Add(1)-1-before)
			}
		})
	}
	wg.Wait()
	const bound = 3 * (writers - 1)
	for w, n := range overtaken {
		if n > bound {
			t.Errorf("a write of writer %d saw %d other writes finish while it waited; in turn it would see at most %d", w, n, bound)
		}
	}
}

// TestBusyNamesAnotherProcess: another process stopped inside a write
// transaction (SIGSTOP) holds the database's write lock, and this
// process's writers wait for it: one in SQLite's busy handler, the others
// queued at the process's write gate behind it. Each fails after the busy
// timeout with ErrBusy (a 503 over HTTP), and the error says that another
// connection — another process — holds the lock: not that the caller's own
// transaction does, which is all the queued writers' error used to say.
func TestBusyNamesAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path, _ := migrated(t)
	drv := open(t, path, &sqlite.Options{BusyTimeout: 2 * time.Second})
	client, err := oncepush.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil { // the stopped process
		t.Fatal(err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")

	var queued enginetest.Counter
	sqlite.OnGateWait(drv, queued.Add)
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := client.RegisterDevice(ctx, oncepush.Device{
				Recipient: fmt.Sprintf("w%d", i), Transport: oncepush.TransportFCM, Token: oncepush.Token(fmt.Sprintf("tok-busy-%d", i)),
			})
			errs <- err
		}()
		if i > 0 && !queued.Wait(ctx, i) { // the others queue behind the first
			t.Fatalf("writer %d never queued at the gate", i)
		}
	}
	atTheGate := false
	for range 3 {
		err := <-errs
		if !errors.Is(err, sqlite.ErrBusy) || !drv.Unavailable(err) {
			t.Errorf("a write behind another process's lock: %v; want ErrBusy, unavailable", err)
			continue
		}
		if !strings.Contains(err.Error(), "another process") {
			t.Errorf("the error does not say another process may hold the lock: %v", err)
		}
		// The third waited out its busy timeout at the gate, while the
		// second waited in SQLite's busy handler.
		atTheGate = atTheGate || strings.Contains(err.Error(), "turn to write")
	}
	if !atTheGate {
		t.Error("no writer timed out at the gate: the test did not reach the moment it names")
	}
}
