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
	// beginning says the writer holding the gate has not begun its
	// transaction yet: it waits for the file's write lock, which another
	// connection holds (see busyError).
	beginning atomic.Bool
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
// from inside one of that client's transactions (an eligibility rule, a
// hook) — into an error instead of a hang, as SQLite's own busy timeout
// would; and a writer queued behind one that waits for another process's
// lock into the same error that writer gets. Whoever enters has not begun
// its transaction yet (begun says when it has).
func (g *writeGate) enter(ctx context.Context, timeout time.Duration) error {
	if g.mu.TryLock() {
		g.beginning.Store(true)
		return nil
	}
	if f := g.onWait.Load(); f != nil {
		(*f)()
	}
	acquired := make(chan struct{})
	go func() {
		g.mu.Lock()
		g.beginning.Store(true)
		close(acquired)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-acquired:
		return nil
	case <-ctx.Done():
		err := ctx.Err()
		go func() { <-acquired; g.leave() }() // hand it on when it comes
		return err
	case <-t.C:
		go func() { <-acquired; g.leave() }()
		if g.beginning.Load() {
			return busyError(fmt.Sprintf("waited %s for this process's turn to write, behind a write that waits for the database's write lock", timeout), nil)
		}
		return fmt.Errorf("sqlite: waited %s for this process's turn to write, behind a transaction of this process that has held the database's write lock as long (is a client write called inside one of its own transactions: an eligibility rule, a hook?): %w", timeout, ErrBusy)
	}
}

// begun tells the gate its holder has begun its transaction: it holds the
// file's write lock now.
func (g *writeGate) begun() { g.beginning.Store(false) }

func (g *writeGate) leave() {
	g.beginning.Store(false)
	g.mu.Unlock()
}

// busyError is a write that waited past the busy timeout for the database's
// write lock, held by another connection. Not this process's writers (they
// queue at the gate, and its own transactions never wait for the lock they
// hold): another process — one stopped (SIGSTOP) or stalled inside a write
// transaction holds it until it goes on — or a transaction of the caller's
// own on the file, begun outside the driver, inside which a client write
// was called. cause is SQLite's error, or nil.
func busyError(what string, cause error) error {
	const hint = "another connection holds the database's write lock: another process (one stopped or stalled inside a transaction holds it until it goes on), or a transaction of your own on this file inside which a client write was called"
	if cause != nil {
		return fmt.Errorf("sqlite: %s: %s: %w (%w)", what, hint, ErrBusy, cause)
	}
	return fmt.Errorf("sqlite: %s: %s: %w", what, hint, ErrBusy)
}
