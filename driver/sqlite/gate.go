package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// writeGate queues this process's writers to one database file.
//
// SQLite lets one writer in at a time, and a writer that finds the file locked
// waits in SQLite's busy handler: it sleeps and retries, and is not served in
// order. Under steady write load a waiter can keep losing the lock to writers
// that arrive later, past the busy timeout (measured: the first of 100,000
// registrations by 8 concurrent writers failed with SQLITE_BUSY after 10 s).
// Writers of one process therefore wait here, in Go, where sync.Mutex stops
// handing the lock to newcomers once a waiter has waited more than 1 ms; the
// busy handler is left to arbitrate between processes only.
type writeGate struct {
	mu sync.Mutex
	// onWait, set only by this package's tests, is called when a writer
	// finds the gate taken and starts waiting.
	onWait atomic.Pointer[func()]
}

// gates holds one gate per database file, shared by every handle of the
// process on that file: the contention it orders is the file's, not a
// handle's. Entries live as long as the process (one per file it ever opened).
var gates = struct {
	sync.Mutex
	byPath map[string]*writeGate
}{byPath: map[string]*writeGate{}}

// gateFor returns the gate of the file at path ("" gives a gate of its own).
func gateFor(path string) *writeGate {
	if path == "" {
		return &writeGate{}
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	gates.Lock()
	defer gates.Unlock()
	g, ok := gates.byPath[path]
	if !ok {
		g = &writeGate{}
		gates.byPath[path] = g
	}
	return g
}

// enter waits for the gate until ctx ends or timeout passes. The timeout (the
// busy timeout) turns a writer that waits on itself — a client write called
// from inside that client's own open transaction — into an error instead of a
// hang, as SQLite's own busy timeout would.
func (g *writeGate) enter(ctx context.Context, timeout time.Duration) error {
	if g.mu.TryLock() {
		return nil
	}
	if f := g.onWait.Load(); f != nil {
		(*f)()
	}
	acquired := make(chan struct{})
	go func() {
		g.mu.Lock()
		close(acquired)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-acquired:
		return nil
	case <-ctx.Done():
		err := ctx.Err()
		go func() { <-acquired; g.mu.Unlock() }() // hand it on when it comes
		return err
	case <-t.C:
		go func() { <-acquired; g.mu.Unlock() }()
		return fmt.Errorf("sqlite: waited %s for this process's write turn on the database (is a client write called inside one of your own open transactions?): %w", timeout, ErrBusy)
	}
}

func (g *writeGate) leave() { g.mu.Unlock() }
