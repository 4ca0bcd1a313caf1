package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/sqlite"
)

// TestWritersOfOneProcessTakeTurns: eight writers of one process, on two
// handles, under a short busy timeout. SQLite's busy handler alone lets a
// waiter lose the lock to later writers again and again until its timeout
// passes; writers that queue in the process never wait longer than the queue
// ahead of them.
func TestWritersOfOneProcessTakeTurns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncepush.db")
	opts := &sqlite.Options{MaxConns: 8, BusyTimeout: 1000 * time.Millisecond}
	a := open(t, path, opts)
	if _, err := a.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := open(t, path, opts)
	ca, _ := oncepush.NewClient(a, nil)
	cb, _ := oncepush.NewClient(b, nil)
	var fails atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Second)
	for w := range 8 {
		c := ca
		if w%2 == 1 {
			c = cb
		}
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				_, err := c.RegisterDevice(context.Background(), oncepush.Device{
					Recipient: fmt.Sprintf("w%d", w), Transport: oncepush.TransportFCM,
					Token: oncepush.Token(fmt.Sprintf("tok-%02d-%06d", w, i)),
				})
				if err != nil {
					fails.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	if n := fails.Load(); n > 0 {
		t.Fatalf("%d writes failed waiting for the lock; first: %v", n, first.Load())
	}
}
