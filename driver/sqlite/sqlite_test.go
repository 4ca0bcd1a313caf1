package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/sqlite"
)

// migrated returns the path of a fresh, migrated database file and a driver on it.
func migrated(t *testing.T) (string, *sqlite.Driver) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "oncepush.db")
	drv := open(t, path, nil)
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return path, drv
}

// rawDB opens a handle of the test's own on the file, outside the driver.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqlite.DSN(path, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dirState is every file of a directory with its content.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.IsDir() {
			out[e.Name()+"/"] = ""
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func sameState(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if !maps.Equal(before, after) {
		t.Errorf("%s changed the directory: files before %v, after %v (or their contents differ)",
			what, slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
}

// corrupt migrates a database with some devices, closes it, and then lets
// damage change the file as a torn write or a bad disk would; root is the page
// number of the device table's root page.
func corrupt(t *testing.T, path string, damage func(f *os.File, root, pageSize int64) error) {
	t.Helper()
	drv := open(t, path, nil)
	ctx := t.Context()
	if _, err := drv.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := drv.Exec().DeviceRegister(ctx, &driver.DeviceRegisterParams{
			Recipient: fmt.Sprintf("r%d", i), Transport: "fcm", Token: fmt.Sprintf("tok-%d", i),
			TokenKey: fmt.Sprintf("tok-%d", i), MaxPerRecipient: 10,
		}); err != nil {
			t.Fatal(err)
		}
	}
	var root, pageSize int64
	db := drv.DB()
	if err := db.QueryRowContext(ctx, "SELECT rootpage FROM sqlite_schema WHERE name = 'oncepush_device'").Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if err := drv.Close(); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := damage(f, root, pageSize); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir string) string // returns the path to open
		want    error                                 // nil: any error
	}{
		{"directory missing", func(t *testing.T, dir string) string {
			return filepath.Join(dir, "no-such-dir", "oncepush.db")
		}, fs.ErrNotExist},
		{"path is a directory", func(t *testing.T, dir string) string {
			sub := filepath.Join(dir, "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			return sub
		}, nil},
		{"in memory", func(t *testing.T, dir string) string { return ":memory:" }, nil},
		{"not a database", func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "notes.txt")
			text := []byte("These are notes, not a database. ")
			if err := os.WriteFile(path, slices.Repeat(text, 200), 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}, sqlite.ErrCorrupt},
		{"corrupt page", func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "oncepush.db")
			corrupt(t, path, func(f *os.File, root, pageSize int64) error {
				// Byte 0 of a b-tree page is its type: 0 is none of the valid ones.
				// quick_check fails with SQLITE_CORRUPT.
				_, err := f.WriteAt([]byte{0}, (root-1)*pageSize)
				return err
			})
			return path
		}, sqlite.ErrCorrupt},
		{"wrong free-page count", func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "oncepush.db")
			corrupt(t, path, func(f *os.File, _, _ int64) error {
				// Header bytes 36-39 count the free pages; there are none.
				// quick_check answers a row naming the problem.
				_, err := f.WriteAt(binary.BigEndian.AppendUint32(nil, 7), 36)
				return err
			})
			return path
		}, sqlite.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := tc.prepare(t, dir)
			before := dirState(t, dir)
			drv, err := sqlite.Open(t.Context(), path, nil)
			if err == nil {
				drv.Close()
				t.Fatalf("Open(%s) succeeded", path)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			sameState(t, "a refused Open", before, dirState(t, dir))
		})
	}
}

// TestOptionsReachEveryConnection: the settings are those of every connection
// of the handle, not only of the first.
func TestOptionsReachEveryConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		opts                   *sqlite.Options
		maxConns, busyMS, sync int
	}{
		{"defaults", nil, sqlite.MaxConnsDefault, int(sqlite.BusyTimeoutDefault.Milliseconds()), 2},
		{"set", &sqlite.Options{MaxConns: 3, BusyTimeout: 1234 * time.Millisecond, SynchronousNormal: true}, 3, 1234, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			drv := open(t, filepath.Join(t.TempDir(), "oncepush.db"), tc.opts)
			db := drv.DB()
			if got := db.Stats().MaxOpenConnections; got != tc.maxConns {
				t.Errorf("MaxOpenConnections = %d, want %d", got, tc.maxConns)
			}
			ctx := t.Context()
			for i := range tc.maxConns { // hold them all, so each is a different one
				conn, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				var busy, fk, sync int
				var mode string
				if err := conn.QueryRowContext(ctx,
					`SELECT (SELECT * FROM pragma_busy_timeout), (SELECT * FROM pragma_foreign_keys),
					        (SELECT * FROM pragma_synchronous), (SELECT * FROM pragma_journal_mode)`).
					Scan(&busy, &fk, &sync, &mode); err != nil {
					t.Fatal(err)
				}
				if busy != tc.busyMS || fk != 1 || sync != tc.sync || mode != "wal" {
					t.Errorf("connection %d: busy_timeout %d, foreign_keys %d, synchronous %d, journal_mode %s; want %d, 1, %d, wal",
						i, busy, fk, sync, mode, tc.busyMS, tc.sync)
				}
			}
		})
	}
}

// TestSkipQuickCheck: with SkipQuickCheck a file whose damage only quick_check
// finds opens; a file that is not a database is still refused.
func TestSkipQuickCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	damaged := filepath.Join(dir, "damaged.db")
	corrupt(t, damaged, func(f *os.File, _, _ int64) error {
		_, err := f.WriteAt(binary.BigEndian.AppendUint32(nil, 7), 36)
		return err
	})
	opts := &sqlite.Options{SkipQuickCheck: true}
	drv, err := sqlite.Open(t.Context(), damaged, opts)
	if err != nil {
		t.Fatalf("Open with SkipQuickCheck: %v", err)
	}
	drv.Close()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, slices.Repeat([]byte("not a database "), 300), 0o644); err != nil {
		t.Fatal(err)
	}
	if drv, err := sqlite.Open(t.Context(), notDB, opts); !errors.Is(err, sqlite.ErrCorrupt) {
		if err == nil {
			drv.Close()
		}
		t.Fatalf("Open of a text file with SkipQuickCheck: %v, want ErrCorrupt", err)
	}
}

func TestOpenPathIsAPathNotAURI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const name = "a b?mode=ro#x%41.db"
	drv := open(t, filepath.Join(dir, name), nil)
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		t.Fatalf("the file was not created under its own name: %v (directory holds %v)",
			err, slices.Sorted(maps.Keys(dirState(t, dir))))
	}
}

func TestSchemaTooNewChangesNothing(t *testing.T) {
	t.Parallel()
	path, drv := migrated(t)
	ctx := t.Context()
	if _, err := drv.DB().ExecContext(ctx,
		"INSERT INTO oncepush_migration (version, name, applied_at) VALUES (?, 'from_a_newer_build', 0)", latestVersion(t)+1); err != nil {
		t.Fatal(err)
	}
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	before := dirState(t, dir)

	newer, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open of a newer database: %v", err)
	}
	if _, err := newer.Migrate(ctx); !errors.Is(err, driver.ErrSchemaTooNew) {
		t.Errorf("Migrate: %v, want ErrSchemaTooNew", err)
	}
	cur, latest, err := newer.SchemaVersion(ctx)
	if !errors.Is(err, driver.ErrSchemaTooNew) || cur != latestVersion(t)+1 || latest != latestVersion(t) {
		t.Errorf("SchemaVersion = %d, %d, %v; want %d, %d, ErrSchemaTooNew", cur, latest, err, latestVersion(t)+1, latestVersion(t))
	}
	if err := newer.Close(); err != nil {
		t.Fatal(err)
	}
	sameState(t, "Migrate of a newer database", before, dirState(t, dir))
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	drv := open(t, filepath.Join(t.TempDir(), "oncepush.db"), nil)
	ctx := t.Context()
	n := latestVersion(t)
	if cur, latest, err := drv.SchemaVersion(ctx); err != nil || cur != 0 || latest != n {
		t.Fatalf("SchemaVersion of a new file = %d, %d, %v; want 0, %d", cur, latest, err, n)
	}
	first, err := drv.Migrate(ctx)
	if err != nil || !slices.Equal(first.Applied, allVersions(n)) || first.Version != n {
		t.Fatalf("first Migrate = %+v, %v; want versions 1…%d applied", first, err, n)
	}
	again, err := drv.Migrate(ctx)
	if err != nil || len(again.Applied) != 0 || again.Version != n {
		t.Fatalf("second Migrate = %+v, %v; want nothing applied", again, err)
	}
	if cur, latest, err := drv.SchemaVersion(ctx); err != nil || cur != n || latest != n {
		t.Fatalf("SchemaVersion = %d, %d, %v; want %d, %d", cur, latest, err, n, n)
	}
}

// TestMigrateConcurrently: handles migrating one new file at once (as processes
// starting together would) apply the migration exactly once, without errors.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncepush.db")
	const n = 4
	drvs := make([]*sqlite.Driver, n)
	for i := range drvs {
		drvs[i] = open(t, path, nil)
	}
	results := make([]*driver.MigrateResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, d := range drvs {
		wg.Go(func() {
			<-start
			results[i], errs[i] = d.Migrate(t.Context())
		})
	}
	close(start)
	wg.Wait()
	var applied []int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Migrate %d: %v", i, errs[i])
		}
		applied = append(applied, results[i].Applied...)
	}
	slices.Sort(applied)
	if want := allVersions(latestVersion(t)); !slices.Equal(applied, want) {
		t.Fatalf("concurrent migrations applied %v in all, want %v once", applied, want)
	}
}

// TestWriteTransactionsAreImmediate: a transaction that reads, lets another
// handle try to write, and then writes must succeed. Begun DEFERRED, the other
// handle would commit in between and the upgrade would fail with SQLITE_BUSY
// whatever the busy timeout.
func TestWriteTransactionsAreImmediate(t *testing.T) {
	t.Parallel()
	path, a := migrated(t)
	b := open(t, path, nil)
	ctx := t.Context()
	read := make(chan struct{})
	waiting := make(chan struct{}, 1)
	sqlite.OnGateWait(b, func() { waiting <- struct{}{} })
	var errB error
	var bDone time.Time
	var wg sync.WaitGroup
	wg.Go(func() {
		<-read
		_, errB = b.Exec().SessionRevoke(ctx, "session-b", nil)
		bDone = time.Now()
	})
	errA := a.InTx(ctx, func(ctx context.Context, _ *sql.Tx, ex driver.Executor) error {
		if _, err := ex.DeviceListByRecipient(ctx, "someone"); err != nil {
			return err
		}
		close(read)
		// In one process a writer waits at the file's write gate, before
		// SQLite's own lock: b's write is waiting once it is there.
		select {
		case <-waiting:
		case <-time.After(10 * time.Second):
			return errors.New("the other handle's write never waited for the open transaction")
		}
		_, err := ex.SessionRevoke(ctx, "session-a", nil)
		return err
	})
	aDone := time.Now()
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("transaction that read first: %v; the other handle's write: %v", errA, errB)
	}
	if bDone.Before(aDone) {
		t.Fatal("the other handle wrote while the transaction was open: it did not hold the write lock")
	}
}

// TestConcurrentWritersNeverBusy: writers on several handles of one file, in
// transactions of the driver's and in the executor's own (DeviceRegister), all
// succeed: they wait for the lock instead of failing with SQLITE_BUSY.
func TestConcurrentWritersNeverBusy(t *testing.T) {
	t.Parallel()
	path, first := migrated(t)
	drvs := []*sqlite.Driver{first, open(t, path, nil), open(t, path, nil)}
	ctx := t.Context()
	const perWriter = 20
	var wg sync.WaitGroup
	var failures atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if failures.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	for h, d := range drvs {
		for w := range 4 {
			wg.Go(func() {
				for i := range perWriter {
					recipient := fmt.Sprintf("h%d-w%d-%d", h, w, i)
					err := d.InTx(ctx, func(ctx context.Context, _ *sql.Tx, ex driver.Executor) error {
						if _, err := ex.DeviceListByRecipient(ctx, recipient); err != nil {
							return err
						}
						_, _, err := ex.MessageInsert(ctx, &driver.MessageInsertParams{Title: "t", Ambiguity: "resend", Lifetime: time.Hour,
							Recipients: []string{recipient}, NotificationIDs: []string{"n-" + recipient}})
						return err
					})
					if err != nil {
						fail(err)
					}
					if _, err := d.Exec().DeviceRegister(ctx, &driver.DeviceRegisterParams{
						Recipient: recipient, Transport: "fcm", Token: "tok-" + recipient, TokenKey: "tok-" + recipient,
						Session: "s-" + recipient, MaxPerRecipient: 10,
					}); err != nil {
						fail(err)
					}
				}
			})
		}
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d writes failed; the first: %v", n, firstErr.Load())
	}
	var deliveries, devices int
	db := first.DB()
	if err := db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM oncepush_delivery), (SELECT count(*) FROM oncepush_device)").
		Scan(&deliveries, &devices); err != nil {
		t.Fatal(err)
	}
	if want := len(drvs) * 4 * perWriter; deliveries != want || devices != want {
		t.Fatalf("%d deliveries and %d devices written, want %d of each", deliveries, devices, want)
	}
}

// TestListenWakesOnAnotherHandlesCommit: Listen hears commits by another handle
// (another process, in production) through PRAGMA data_version, stays quiet
// while nobody writes, and returns when its context ends.
func TestListenWakesOnAnotherHandlesCommit(t *testing.T) {
	t.Parallel()
	path, listener := migrated(t)
	writer := open(t, path, nil)
	wakes := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- listener.Listen(ctx, func() { wakes <- struct{}{} }) }()
	defer func() {
		cancel()
		<-done
	}()

	waitWake := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake-up %s", what)
		}
	}
	waitWake("when Listen started")
	for i := range 3 {
		if _, err := writer.Exec().SessionRevoke(t.Context(), fmt.Sprintf("s%d", i), nil); err != nil {
			t.Fatal(err)
		}
		waitWake(fmt.Sprintf("after commit %d of another handle", i+1))
	}

	// Reads change nothing, nor does a claim that finds nothing due (a write
	// transaction that writes nothing): no wake-up, so workers woken by their
	// own commits do not wake each other forever.
	var polls atomic.Int64
	polled := make(chan struct{}, 1)
	sqlite.OnListenPoll(listener, func() {
		polls.Add(1)
		select {
		case polled <- struct{}{}:
		default: // the test reads the count; the signal only wakes it
		}
	})
	for range 5 {
		if _, err := writer.Exec().DeviceListByRecipient(t.Context(), "anyone"); err != nil {
			t.Fatal(err)
		}
		err := writer.InTx(t.Context(), func(ctx context.Context, _ *sql.Tx, ex driver.Executor) error {
			res, err := ex.DeliveryClaim(ctx, &driver.DeliveryClaimParams{Max: 10, LeaseID: 1, Lease: time.Minute})
			if err == nil && len(res.Rows) != 0 {
				err = fmt.Errorf("claimed %d deliveries from an empty ledger", len(res.Rows))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Two polls that began after the last of those transactions: the first
	// may have been under way during it, the second read what it left.
	after := polls.Load()
	for polls.Load() < after+2 {
		select {
		case <-polled:
		case <-time.After(5 * time.Second):
			t.Fatal("the listener stopped polling")
		}
	}
	if n := len(wakes); n != 0 {
		t.Fatalf("%d wake-ups while nobody wrote", n)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Listen returned %v when its context ended, want nil", err)
		}
		done <- nil // for the deferred wait
	case <-time.After(5 * time.Second):
		t.Fatal("Listen did not return after its context ended")
	}
}

// TestNewOnCallersHandle: a handle opened with DSN works with New (Listen finds
// the file through the handle); one opened without DSN is refused by Migrate
// before anything is written.
func TestNewOnCallersHandle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "oncepush.db")
	drv := sqlite.New(rawDB(t, path))
	if _, err := drv.Migrate(ctx); err != nil {
		t.Fatalf("Migrate on a DSN handle: %v", err)
	}
	lctx, cancel := context.WithCancel(ctx)
	woken := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- drv.Listen(lctx, func() {
			select {
			case woken <- struct{}{}:
			default:
			}
		})
	}()
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Error("Listen on a caller's handle never started")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Listen: %v", err)
	}
	if err := drv.Close(); err != nil {
		t.Errorf("Close of a caller's handle: %v", err)
	}
	if err := drv.DB().PingContext(ctx); err != nil {
		t.Errorf("Close closed the caller's handle: %v", err)
	}

	plainPath := filepath.Join(t.TempDir(), "plain.db")
	plain, err := sql.Open("sqlite", plainPath)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	bad := sqlite.New(plain)
	if _, err := bad.Migrate(ctx); err == nil {
		t.Fatal("Migrate accepted a handle without foreign keys")
	}
	if cur, _, err := bad.SchemaVersion(ctx); err != nil || cur != 0 {
		t.Fatalf("after the refused Migrate: version %d, %v; want 0", cur, err)
	}
}

// TestBackupWhileWriting: a backup taken while another handle writes is a
// healthy, migrated database holding at least what was committed before it
// began; a backup never overwrites a file.
func TestBackupWhileWriting(t *testing.T) {
	t.Parallel()
	path, drv := migrated(t)
	ctx := t.Context()
	register := func(d *sqlite.Driver, name string) error {
		_, err := d.Exec().DeviceRegister(ctx, &driver.DeviceRegisterParams{
			Recipient: name, Transport: "fcm", Token: "tok-" + name, TokenKey: "tok-" + name, MaxPerRecipient: 10,
		})
		return err
	}
	for i := range 100 {
		if err := register(drv, fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	writer := open(t, path, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if writeErr = register(writer, fmt.Sprintf("during-%d", i)); writeErr != nil {
				return
			}
		}
	})
	dst := filepath.Join(t.TempDir(), "backup.db")
	err := drv.Backup(ctx, dst)
	close(stop)
	wg.Wait()
	if err != nil || writeErr != nil {
		t.Fatalf("Backup: %v; writes meanwhile: %v", err, writeErr)
	}

	copied := open(t, dst, nil) // quick_check runs here
	if cur, _, err := copied.SchemaVersion(ctx); err != nil || cur != latestVersion(t) {
		t.Fatalf("backup's schema version %d, %v; want %d", cur, err, latestVersion(t))
	}
	var before int
	if err := copied.DB().QueryRowContext(ctx,
		"SELECT count(*) FROM oncepush_device WHERE recipient LIKE 'before-%'").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if before != 100 {
		t.Fatalf("the backup holds %d of the 100 devices committed before it began", before)
	}

	state := dirState(t, filepath.Dir(dst))
	if err := drv.Backup(ctx, dst); err == nil {
		t.Fatal("Backup overwrote an existing file")
	}
	sameState(t, "a refused backup", state, dirState(t, filepath.Dir(dst)))
}

// latestVersion is the number of the newest embedded migration.
func latestVersion(t *testing.T) int {
	t.Helper()
	drv := open(t, filepath.Join(t.TempDir(), "version.db"), nil)
	_, latest, err := drv.SchemaVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return latest
}

// allVersions is 1…n.
func allVersions(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// TestOpenHonoursItsContext: the checks at open (quick_check reads the whole
// file) run under the caller's context, so a caller can bound them.
func TestOpenHonoursItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	drv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cancelled.db"), nil)
	if err == nil {
		drv.Close()
		t.Fatal("Open with a cancelled context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a cancelled context: %v, want an error wrapping context.Canceled", err)
	}
}

// TestStartWhileAnotherHoldsTheWriteLock: a process starting against a
// migrated file while another holds the write lock (a writer that does not
// pause, a stopped process inside a transaction) opens it and finds both
// schemas up to date without waiting for the lock: starting takes none.
// Before, Open probed the lock and Migrate took it once per migration, each
// failing with SQLITE_BUSY once the busy timeout passed.
func TestStartWhileAnotherHoldsTheWriteLock(t *testing.T) {
	t.Parallel()
	path, drv := migrated(t)
	if _, err := drv.ServerStore().Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	holder := rawDB(t, path)
	tx, err := holder.BeginTx(t.Context(), nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// A minute: a test that passed by outwaiting the lock would time out
	// instead; one that fails fails at once on the broken code's first BUSY.
	busy := time.Minute
	if _, err := tx.Exec(`CREATE TABLE held (x)`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), busy/2)
	defer cancel()
	second, err := sqlite.Open(ctx, path, &sqlite.Options{BusyTimeout: busy})
	if err != nil {
		t.Fatalf("Open while the write lock is held: %v", err)
	}
	defer second.Close()
	n := latestVersion(t)
	if res, err := second.Migrate(ctx); err != nil || len(res.Applied) != 0 || res.Version != n {
		t.Fatalf("Migrate while the write lock is held = %+v, %v; want version %d, nothing applied", res, err, n)
	}
	if _, err := second.ServerStore().Migrate(ctx); err != nil {
		t.Fatalf("server Migrate while the write lock is held: %v", err)
	}
}
