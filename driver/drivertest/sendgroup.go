package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
)

// Grouped commits: concurrent Send and SendToDevices calls share one
// transaction and one commit (docs/architecture.md, "Grouped commits").

// aSend is one call of a group: a Send or SendToDevices on the context it
// is given.
type aSend func(ctx context.Context) (oncepush.SendResult, error)

type answer struct {
	res oncepush.SendResult
	err error
}

// sendGroup is a set of sends running at once.
type sendGroup struct {
	answers  []answer
	returned atomic.Int32
	done     chan struct{} // closed when every send has returned
}

// oneGroup makes a client write one group of sends at a time, so that a
// test holding the leader (startGroup) gets every other send queued.
func oneGroup(c *oncepush.Config) { c.SendGroups = 1 }

// startGroup starts the sends at once and holds the first group's leader
// (OnGroupTaking) until every send has queued (OnSendQueued), so that they
// are written as one group. hooks may set the other hooks.
func startGroup(t *testing.T, ctx context.Context, hooks *enginetest.Hooks, sends ...aSend) *sendGroup {
	t.Helper()
	queued := &enginetest.Counter{}
	release := make(chan struct{})
	var released, held sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) })
	hooks.OnSendQueued = func(int) { queued.Add() }
	hooks.OnGroupTaking = func() { held.Do(func() { <-release }) }
	ctx = enginetest.WithHooks(ctx, hooks)
	g := &sendGroup{answers: make([]answer, len(sends)), done: make(chan struct{})}
	var wg sync.WaitGroup
	for i, send := range sends {
		wg.Go(func() {
			g.answers[i].res, g.answers[i].err = send(ctx)
			g.returned.Add(1)
		})
	}
	go func() { wg.Wait(); close(g.done) }()
	if !queued.Wait(ctx, len(sends)) {
		t.Fatalf("only %d of %d sends queued", queued.Count(), len(sends))
	}
	released.Do(func() { close(release) })
	return g
}

func (g *sendGroup) wait() []answer {
	<-g.done
	return g.answers
}

// groupSizes records the sizes of the groups committed in a transaction.
type groupSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (s *groupSizes) add(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sizes = append(s.sizes, n)
}

func (s *groupSizes) want(t *testing.T, want ...int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(s.sizes, want) {
		t.Fatalf("groups committed: %v, want %v", s.sizes, want)
	}
}

func sendTo(c interface {
	Send(context.Context, []string, oncepush.Message, *oncepush.SendOptions) (oncepush.SendResult, error)
}, recipients []string, m oncepush.Message, opts *oncepush.SendOptions) aSend {
	return func(ctx context.Context) (oncepush.SendResult, error) { return c.Send(ctx, recipients, m, opts) }
}

func sendToDevices[TTx any](c *oncepush.Client[TTx], devices []oncepush.DeviceAddress, m oncepush.Message, opts *oncepush.SendOptions) aSend {
	return func(ctx context.Context) (oncepush.SendResult, error) { return c.SendToDevices(ctx, devices, m, opts) }
}

func recorded(key string, hash byte) *oncepush.SendOptions {
	return &oncepush.SendOptions{DedupKey: key, RequestHash: bytes.Repeat([]byte{hash}, 32)}
}

// testSendsShareOneCommit: sends that queue while a group is being written
// are written together — one transaction, the same fixed handful of
// statements for 2 sends as for 12 — each answered with its own message.
func testSendsShareOneCommit[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, oneGroup)
	cost := func(n int) int64 {
		counted := &countingDriver[TTx]{Driver: b.db.Driver(t, 0)}
		client := b.newClient(counted, oneGroup)
		var sends []aSend
		for i := range n {
			var opts *oncepush.SendOptions
			if i%2 == 1 { // half of them recorded requests, in savepoints
				opts = recorded(fmt.Sprintf("k%d-%d", n, i), byte(i))
			}
			sends = append(sends, sendTo(client, []string{fmt.Sprintf("g%d-%d", n, i)}, msg("grouped"), opts))
		}
		sizes := &groupSizes{}
		answers := startGroup(t, b.ctx, &enginetest.Hooks{OnGroupCommitting: sizes.add}, sends...).wait()
		sizes.want(t, n)
		ids := map[int64]bool{}
		for i, a := range answers {
			if a.err != nil || a.res.Queued != 1 || a.res.Duplicates != 0 || a.res.MessageID == 0 || a.res.Replayed {
				t.Fatalf("send %d of %d: %+v, %v", i, n, a.res, a.err)
			}
			ids[a.res.MessageID] = true
			d := b.only(fmt.Sprintf("g%d-%d", n, i))
			if d.MessageID != a.res.MessageID {
				t.Fatalf("send %d of %d answered message %d, its delivery is of %d", i, n, a.res.MessageID, d.MessageID)
			}
		}
		if len(ids) != n {
			t.Fatalf("%d sends answered %d distinct messages", n, len(ids))
		}
		if txs := counted.txs.Load(); txs != 1 {
			t.Fatalf("%d sends took %d transactions, want 1", n, txs)
		}
		return counted.n.Load()
	}
	// BEGIN, MessageInsertMany, COMMIT.
	if small, large := cost(2), cost(12); small != 3 || large != 3 {
		t.Fatalf("a group of 2 cost %d statements, of 12 %d; want 3 each", small, large)
	}
}

// testGroupMembersFailAlone: in one group, a dedup conflict, a replay, a
// send whose recipients are all duplicates and a refused direct send each
// get their own answer, and the others are written as if they were alone.
func testGroupMembersFailAlone[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, oneGroup, "taken", "replayed", "dup", "plain", "fresh")
	b.send([]string{"taken"}, msg("first"), recorded("k-taken", 1))
	first := b.send([]string{"replayed"}, msg("first"), recorded("k-replayed", 2))
	b.send([]string{"dup"}, msg("first"), &oncepush.SendOptions{DedupKey: "k-dup"})
	owned := b.register("owner", oncepush.TransportFCM)[0]
	free := tokenFor(oncepush.TransportFCM, "direct")

	sizes := &groupSizes{}
	answers := startGroup(t, b.ctx, &enginetest.Hooks{OnGroupCommitting: sizes.add},
		sendTo(b.client, []string{"taken", "conflict"}, msg("other request"), recorded("k-taken", 9)),
		sendTo(b.client, []string{"replayed"}, msg("first"), recorded("k-replayed", 2)),
		sendTo(b.client, []string{"dup"}, msg("again"), &oncepush.SendOptions{DedupKey: "k-dup"}),
		sendTo(b.client, []string{"plain"}, msg("plain"), nil),
		sendTo(b.client, []string{"fresh"}, msg("fresh"), recorded("k-fresh", 3)),
		sendToDevices(b.client, []oncepush.DeviceAddress{{Transport: oncepush.TransportFCM, Token: free}}, msg("direct"), nil),
		sendToDevices(b.client, []oncepush.DeviceAddress{{Transport: oncepush.TransportFCM, Token: owned.Token}}, msg("refused"), nil),
	).wait()
	sizes.want(t, 7)

	if a := answers[0]; !errors.Is(a.err, oncepush.ErrDedupConflict) {
		t.Errorf("conflict: %+v, %v; want ErrDedupConflict", a.res, a.err)
	}
	if ds := b.deliveries("conflict"); len(ds) != 0 {
		t.Errorf("the conflicting send wrote %d deliveries", len(ds))
	}
	if a := answers[1]; a.err != nil || !a.res.Replayed || a.res.MessageID != first.MessageID {
		t.Errorf("replay: %+v, %v; want message %d replayed", a.res, a.err, first.MessageID)
	}
	if a := answers[2]; a.err != nil || a.res.MessageID != 0 || a.res.Queued != 0 || a.res.Duplicates != 1 {
		t.Errorf("all duplicates: %+v, %v; want no message, 1 duplicate", a.res, a.err)
	}
	if ds := b.deliveries("dup"); len(ds) != 1 {
		t.Errorf("dup has %d deliveries, want its first", len(ds))
	}
	var written []int64
	for i, r := range map[int]string{3: "plain", 4: "fresh", 5: b.implicit(free)} {
		a := answers[i]
		if a.err != nil || a.res.Queued != 1 || a.res.MessageID == 0 || a.res.Replayed {
			t.Errorf("send to %s: %+v, %v", r, a.res, a.err)
			continue
		}
		if d := b.only(r); d.MessageID != a.res.MessageID {
			t.Errorf("send to %s answered message %d, its delivery is of %d", r, a.res.MessageID, d.MessageID)
		}
		written = append(written, a.res.MessageID)
	}
	if slices.Sort(written); len(slices.Compact(written)) != 3 {
		t.Errorf("three sends answered messages %v", written)
	}
	if a := answers[6]; !errors.Is(a.err, oncepush.ErrTokenRegistered) {
		t.Errorf("refused direct send: %+v, %v; want ErrTokenRegistered", a.res, a.err)
	}
	if ds := b.deliveries(b.implicit(owned.Token)); len(ds) != 0 {
		t.Errorf("the refused direct send wrote %d deliveries", len(ds))
	}
	if devs := b.devicesOf("owner"); len(devs) != 1 || devs[0].ID != owned.ID {
		t.Errorf("the owner's devices are %+v after a refused direct send", devs)
	}
}

// failingCommit is a driver whose transactions fail at their commit: fn
// runs, then the transaction is rolled back and InTx returns errCommit.
type failingCommit[TTx any] struct{ driver.Driver[TTx] }

var errCommit = errors.New("drivertest: commit failed")

func (d failingCommit[TTx]) InTx(ctx context.Context, fn func(context.Context, TTx, driver.Executor) error) error {
	return d.Driver.InTx(ctx, func(ctx context.Context, tx TTx, ex driver.Executor) error {
		if err := fn(ctx, tx, ex); err != nil {
			return err
		}
		return errCommit
	})
}

// testGroupCommitFails: when a group's commit fails, every member gets the
// error and nothing of any of them is written.
func testGroupCommitFails[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, oneGroup, "a", "b", "c")
	client := b.newClient(failingCommit[TTx]{b.db.Driver(t, 0)}, oneGroup)
	token := tokenFor(oncepush.TransportFCM, "direct")
	answers := startGroup(t, b.ctx, &enginetest.Hooks{},
		sendTo(client, []string{"a"}, msg("one"), nil),
		sendTo(client, []string{"b"}, msg("two"), recorded("k-b", 1)),
		sendTo(client, []string{"c"}, msg("three"), &oncepush.SendOptions{DedupKey: "k-c"}),
		sendToDevices(client, []oncepush.DeviceAddress{{Transport: oncepush.TransportFCM, Token: token}}, msg("direct"), nil),
	).wait()
	for i, a := range answers {
		if !errors.Is(a.err, errCommit) {
			t.Errorf("send %d: %+v, %v; want the commit's error", i, a.res, a.err)
		}
	}
	for _, r := range []string{"a", "b", "c", b.implicit(token)} {
		if ds := b.deliveries(r); len(ds) != 0 {
			t.Errorf("%s has %d deliveries after a failed commit", r, len(ds))
		}
	}
	if devs := b.devicesOf(b.implicit(token)); len(devs) != 0 {
		t.Errorf("a failed commit registered %d devices", len(devs))
	}
	// Free to retry: the key was not recorded.
	if res := b.send([]string{"b"}, msg("two"), recorded("k-b", 1)); res.Replayed || res.Queued != 1 {
		t.Errorf("retry after a failed commit: %+v", res)
	}
}

// testGroupAnsweredAfterCommit: no member of a group returns before the
// group's commit: while the commit is held, none has returned and another
// connection sees none of their rows, and each one, the moment it returns,
// finds its row visible from another connection.
func testGroupAnsweredAfterCommit[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, oneGroup, "a", "b", "c")
	committing, commit := make(chan struct{}), make(chan struct{})
	hooks := &enginetest.Hooks{OnGroupCommitting: func(int) { close(committing); <-commit }}
	var invisible atomic.Int32 // sends that returned before their rows were visible
	checked := func(recipient string, opts *oncepush.SendOptions) aSend {
		return func(ctx context.Context) (oncepush.SendResult, error) {
			res, err := b.client.Send(ctx, []string{recipient}, msg("checked"), opts)
			if ds, rerr := b.client.RecipientDeliveries(b.ctx, recipient, 0, 10); rerr == nil && len(ds) == 0 {
				invisible.Add(1)
			}
			return res, err
		}
	}
	g := startGroup(t, b.ctx, hooks,
		checked("a", nil), checked("b", recorded("k-b", 1)), checked("c", &oncepush.SendOptions{DedupKey: "k-c"}))
	<-committing
	if n := g.returned.Load(); n != 0 {
		t.Errorf("%d sends returned before their group committed", n)
	}
	for _, r := range []string{"a", "b", "c"} {
		if ds := b.deliveries(r); len(ds) != 0 {
			t.Errorf("%s's delivery is visible before the commit", r)
		}
	}
	close(commit)
	for i, a := range g.wait() {
		if a.err != nil || a.res.Queued != 1 {
			t.Errorf("send %d: %+v, %v", i, a.res, a.err)
		}
	}
	if n := invisible.Load(); n != 0 {
		t.Errorf("%d sends returned before another connection could see their rows", n)
	}
}

// testGroupLeftWhenCanceled: a send whose context ends while it waits for
// its group returns ctx.Err() and writes nothing; the group goes on.
func testGroupLeftWhenCanceled[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, oneGroup, "leader", "gone")
	queued := &enginetest.Counter{}
	release := make(chan struct{})
	var held sync.Once
	hooks := &enginetest.Hooks{
		OnSendQueued:  func(int) { queued.Add() },
		OnGroupTaking: func() { held.Do(func() { <-release }) },
	}
	ctx := enginetest.WithHooks(b.ctx, hooks)
	leader := make(chan error, 1)
	go func() {
		_, err := b.client.Send(ctx, []string{"leader"}, msg("leader"), nil)
		leader <- err
	}()
	if !queued.Wait(b.ctx, 1) {
		t.Fatal("the leader never queued")
	}
	gctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() {
		_, err := b.client.Send(gctx, []string{"gone"}, msg("gone"), recorded("k-gone", 1))
		gone <- err
	}()
	if !queued.Wait(b.ctx, 2) {
		t.Fatal("the second send never queued")
	}
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled while queued: %v, want context.Canceled", err)
	}
	close(release)
	if err := <-leader; err != nil {
		t.Fatalf("leader: %v", err)
	}
	b.only("leader")
	if ds := b.deliveries("gone"); len(ds) != 0 {
		t.Fatalf("a send canceled while queued wrote %d deliveries", len(ds))
	}
	// Its key is free: nothing was recorded.
	if res := b.send([]string{"gone"}, msg("gone"), recorded("k-gone", 1)); res.Replayed {
		t.Fatalf("a send canceled while queued was recorded: %+v", res)
	}
}

// implicit is the recipient a direct send to the FCM token delivers under.
func (b *bundle[TTx]) implicit(token oncepush.Token) string {
	b.t.Helper()
	r, err := b.client.DeviceRecipient(oncepush.TransportFCM, token)
	if err != nil {
		b.t.Fatalf("DeviceRecipient: %v", err)
	}
	return r
}

func (b *bundle[TTx]) devicesOf(recipient string) []oncepush.Device {
	b.t.Helper()
	devs, err := b.client.Devices(b.ctx, recipient)
	if err != nil {
		b.t.Fatalf("Devices(%s): %v", recipient, err)
	}
	return devs
}

// testSendGroupsAtOnce: with SendGroups 2, a send arriving while one group
// is being written leads a group of its own at once; the sends arriving
// while both are being written wait, and go to one of them (neither leader
// takes the other); the places are given back: sends go on afterwards.
func testSendGroupsAtOnce[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.SendGroups = 2 })
	queued := &enginetest.Counter{}
	taking := &enginetest.Counter{}
	release := make(chan struct{})
	sizes := &groupSizes{}
	hooks := &enginetest.Hooks{
		OnSendQueued:      func(int) { queued.Add() },
		OnGroupTaking:     func() { taking.Add(); <-release },
		OnGroupCommitting: sizes.add,
	}
	ctx := enginetest.WithHooks(b.ctx, hooks)
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := b.client.Send(ctx, []string{fmt.Sprintf("at-once-%d", i)}, msg("at once"), nil)
			errs <- err
		}()
		if i < 2 && !taking.Wait(b.ctx, i+1) { // the first two lead, one after the other
			t.Fatalf("send %d did not lead", i)
		}
	}
	if !queued.Wait(b.ctx, n) {
		t.Fatalf("%d of %d sends queued", queued.Count(), n)
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// One leader took the four waiting; the other wrote itself alone.
	sizes.want(t, n-1)
	if taking.Count() != 2 {
		t.Fatalf("%d groups were taken, want 2", taking.Count())
	}
	for i := range n {
		b.only(fmt.Sprintf("at-once-%d", i))
	}
	for i := range 3 { // the places were given back
		b.send([]string{fmt.Sprintf("after-%d", i)}, msg("after"), nil)
	}
}

// conflicting is a driver whose database aborts writes as PostgreSQL does
// to break a deadlock: the next abort writes of the engine's own
// transactions (InTx) fail at their commit, after their statements ran, and
// those of a send written alone (MessageInsert outside a transaction) fail
// before anything is written; Conflict (driver.ConflictDetector) knows the
// error. Each InTx and each such MessageInsert counts in tries.
type conflicting[TTx any] struct {
	driver.Driver[TTx]
	abort atomic.Int32
	tries atomic.Int32
}

var errConflict = errors.New("drivertest: deadlock detected")

func (d *conflicting[TTx]) Conflict(err error) bool { return errors.Is(err, errConflict) }

// aborts reports whether this write is to be aborted, and counts it.
func (d *conflicting[TTx]) aborts() bool {
	d.tries.Add(1)
	for {
		n := d.abort.Load()
		if n <= 0 {
			return false
		}
		if d.abort.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (d *conflicting[TTx]) InTx(ctx context.Context, fn func(context.Context, TTx, driver.Executor) error) error {
	abort := d.aborts()
	return d.Driver.InTx(ctx, func(ctx context.Context, tx TTx, ex driver.Executor) error {
		if err := fn(ctx, tx, ex); err != nil {
			return err
		}
		if abort {
			return fmt.Errorf("commit: %w", errConflict)
		}
		return nil
	})
}

func (d *conflicting[TTx]) Exec() driver.Executor {
	return conflictingExec{Executor: d.Driver.Exec(), aborts: d.aborts}
}

type conflictingExec struct {
	driver.Executor
	aborts func() bool
}

func (e conflictingExec) MessageInsert(ctx context.Context, p *driver.MessageInsertParams) (int64, int, error) {
	if e.aborts() {
		return 0, 0, fmt.Errorf("insert: %w", errConflict)
	}
	return e.Executor.MessageInsert(ctx, p)
}

// testGroupRetriedAfterConflict: a group the database aborts (a deadlock
// with a writer that locks in another order: a caller's transaction) is
// written again, its members answered as if nothing had happened — each
// written once, counted once — and so is a send written alone; only a
// write aborted try after try fails, with nothing written.
func testGroupRetriedAfterConflict[TTx any](t *testing.T, h Harness[TTx]) {
	obs := &countingObserver{}
	b := setup(t, h, oneGroup)
	d := &conflicting[TTx]{Driver: b.db.Driver(t, 0)}
	client := b.newClient(d, func(c *oncepush.Config) { oneGroup(c); c.Observer = obs })
	var retries enginetest.Counter
	hooks := &enginetest.Hooks{OnSendRetrying: func(int, error) { retries.Add() }}
	token := tokenFor(oncepush.TransportFCM, "direct")

	d.abort.Store(2)
	answers := startGroup(t, b.ctx, hooks,
		sendTo(client, []string{"plain"}, msg("plain"), nil),
		sendTo(client, []string{"recorded"}, msg("recorded"), recorded("k-recorded", 1)),
		sendTo(client, []string{"keyed"}, msg("keyed"), &oncepush.SendOptions{DedupKey: "k-keyed"}),
		sendToDevices(client, []oncepush.DeviceAddress{{Transport: oncepush.TransportFCM, Token: token}}, msg("direct"), nil),
	).wait()
	if n, tries := retries.Count(), d.tries.Load(); n != 2 || tries != 3 {
		t.Fatalf("the group was retried %d times in %d transactions, want 2 in 3", n, tries)
	}
	for i, r := range []string{"plain", "recorded", "keyed", b.implicit(token)} {
		a := answers[i]
		if a.err != nil || a.res.Queued != 1 || a.res.Replayed {
			t.Errorf("%s, in a group aborted twice: %+v, %v; want written", r, a.res, a.err)
			continue
		}
		if d := b.only(r); d.MessageID != a.res.MessageID {
			t.Errorf("%s answered message %d, its delivery is of %d", r, a.res.MessageID, d.MessageID)
		}
	}
	if devs := b.devicesOf(b.implicit(token)); len(devs) != 1 {
		t.Errorf("the direct send's device registered %d times", len(devs))
	}
	if res := b.send([]string{"recorded"}, msg("recorded"), recorded("k-recorded", 1)); !res.Replayed || res.MessageID != answers[1].res.MessageID {
		t.Errorf("the recorded request again: %+v, want the first answer replayed", res)
	}
	obs.mu.Lock()
	queued := obs.queued
	obs.mu.Unlock()
	if queued != 4 {
		t.Errorf("the observer counted %d queued for 4 sends written once", queued)
	}

	// Alone: a plain send (one statement) and a direct send (a transaction).
	ctx := enginetest.WithHooks(b.ctx, hooks)
	d.abort.Store(1)
	if res, err := client.Send(ctx, []string{"alone"}, msg("alone"), nil); err != nil || res.Queued != 1 {
		t.Fatalf("a send alone, aborted once: %+v, %v", res, err)
	}
	b.only("alone")
	alone := tokenFor(oncepush.TransportFCM, "alone")
	d.abort.Store(1)
	if res, err := client.SendToDevices(ctx, []oncepush.DeviceAddress{{Transport: oncepush.TransportFCM, Token: alone}}, msg("alone"), nil); err != nil || res.Queued != 1 {
		t.Fatalf("a direct send alone, aborted once: %+v, %v", res, err)
	}
	b.only(b.implicit(alone))
	if n := retries.Count(); n != 4 {
		t.Fatalf("%d retries in all, want 2 for the group and 1 for each send alone", n)
	}

	// Aborted every time: the abort is answered after the last try, and
	// nothing is written.
	d.abort.Store(1000)
	d.tries.Store(0)
	_, err := client.Send(ctx, []string{"never"}, msg("never"), nil)
	if !errors.Is(err, errConflict) {
		t.Fatalf("a send aborted every time: %v, want the abort", err)
	}
	if tries, n := d.tries.Load(), retries.Count(); tries < 2 || int(tries) != n-4+1 {
		t.Fatalf("%d tries and %d retries for a send aborted every time", tries, n-4)
	}
	if ds := b.deliveries("never"); len(ds) != 0 {
		t.Fatalf("a send aborted every time wrote %d deliveries", len(ds))
	}
}

func (e conflictingExec) MessageCancel(ctx context.Context, p *driver.MessageCancelParams) (*driver.MessageCancelResult, error) {
	if e.aborts() {
		return nil, fmt.Errorf("cancel: %w", errConflict)
	}
	return e.Executor.MessageCancel(ctx, p)
}

func (e conflictingExec) DeviceRegister(ctx context.Context, p *driver.DeviceRegisterParams) (*driver.Device, error) {
	if e.aborts() {
		return nil, fmt.Errorf("register: %w", errConflict)
	}
	return e.Executor.DeviceRegister(ctx, p)
}

// testEngineWritesAgainAfterConflict: the engine's other writes of its own —
// a registration, a cancel, a campaign's change, a recipient's deletion —
// are written again when the database aborts them for a deadlock or a
// serialization failure, never answered with the abort while a try is left.
func testEngineWritesAgainAfterConflict[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	d := &conflicting[TTx]{Driver: b.db.Driver(t, 0)}
	client := b.newClient(d, nil)
	var mu sync.Mutex
	retried := map[string]int{}
	ctx := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnWriteRetrying: func(op string, _ int, err error) {
		if !errors.Is(err, errConflict) {
			t.Errorf("%s retried after %v, not after the abort", op, err)
		}
		mu.Lock()
		retried[op]++
		mu.Unlock()
	}})
	count := func(op string) int {
		mu.Lock()
		defer mu.Unlock()
		return retried[op]
	}

	d.abort.Store(2)
	dev, err := client.RegisterDevice(ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportFCM, Token: tokenFor(oncepush.TransportFCM, "r1")})
	if err != nil || count("register device") != 2 {
		t.Fatalf("a registration aborted twice: %v, %v, retried %d times; want registered after 2 retries", dev, err, count("register device"))
	}

	res := b.send([]string{"r1"}, msg("to cancel"), &oncepush.SendOptions{ScheduledAt: b.clock.Now().Add(time.Hour)})
	d.abort.Store(1)
	if got, err := client.CancelMessage(ctx, res.MessageID); err != nil || got.Canceled != 1 || count("cancel message") != 1 {
		t.Fatalf("a cancel aborted once: %+v, %v, retried %d times; want 1 canceled after 1 retry", got, err, count("cancel message"))
	}

	c := b.createCampaign(campaignSpec("to cancel"))
	d.abort.Store(1)
	if got, err := client.CancelCampaign(ctx, c.ID); err != nil || got.Status != oncepush.CampaignCanceled || count("cancel campaign") != 1 {
		t.Fatalf("a campaign's cancel aborted once: %+v, %v, retried %d times; want canceled after 1 retry", got, err, count("cancel campaign"))
	}

	d.abort.Store(1)
	if err := client.DeleteRecipient(ctx, "r1"); err != nil || count("delete recipient") != 1 {
		t.Fatalf("a recipient's deletion aborted once: %v, retried %d times; want deleted after 1 retry", err, count("delete recipient"))
	}
	if ds := b.deliveries("r1"); len(ds) != 0 {
		t.Fatalf("the deleted recipient still has %d deliveries", len(ds))
	}

	// Aborted every time: the abort, after the last try.
	d.abort.Store(1000)
	if _, err := client.RegisterDevice(ctx, oncepush.Device{Recipient: "r2", Transport: oncepush.TransportFCM, Token: tokenFor(oncepush.TransportFCM, "r2")}); !errors.Is(err, errConflict) {
		t.Fatalf("a registration aborted every time: %v, want the abort", err)
	}
	d.abort.Store(0)
}
