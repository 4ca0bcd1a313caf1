package drivertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/pushtest"
)

// testConcurrentClients: four independent clients, each on its own pool,
// drain 2,000 deliveries × 3 devices; every pair is submitted exactly once and
// nothing is left pending.
func testConcurrentClients[TTx any](t *testing.T, h Harness[TTx]) {
	if testing.Short() {
		t.Skip("long: 6,000 sends through four clients")
	}
	b := setup(t, h, nil)
	const recipients, devices = 2000, 3
	transports := []oncepush.Transport{oncepush.TransportFCM, oncepush.TransportAPNs, oncepush.TransportRuStore}
	names, err := registerMany(b.ctx, b.client, "u%04d", recipients, transports)
	if err != nil {
		t.Fatal(err)
	}
	var msgIDs []int64
	for i := 0; i < recipients; i += 100 {
		res := b.send(names[i:i+100], msg(fmt.Sprintf("batch %d", i/100)), nil)
		msgIDs = append(msgIDs, res.MessageID)
	}

	// One set of providers shared by all clients, answering with jitter so that
	// runs interleave.
	jitter := func(ctx context.Context, s *oncepush.Submission) oncepush.Result {
		select {
		case <-time.After(time.Duration(rand.IntN(2000)) * time.Microsecond):
		case <-ctx.Done():
		}
		return oncepush.Accepted("ok")
	}
	provs := make([]oncepush.Provider, 0, devices)
	fakes := make([]*pushtest.Provider, 0, devices)
	for _, tr := range transports {
		p := pushtest.NewProvider(tr)
		p.Answer(jitter)
		provs = append(provs, p)
		fakes = append(fakes, p)
	}
	var clients []*oncepush.Client[TTx]
	for range 4 {
		c := b.newClient(b.db.Driver(t, 4), func(c *oncepush.Config) {
			c.Providers = provs
			c.BatchSize = 50
			c.Workers = 2
		})
		clients = append(clients, c)
	}
	// The race this test names: several clients holding batches at once.
	var mu sync.Mutex
	claims := make([]int, len(clients))
	open, mostOpen := 0, 0
	for i, c := range clients {
		hooks := &enginetest.Hooks{
			OnClaimCommitted: func(_, pairs int) {
				mu.Lock()
				defer mu.Unlock()
				claims[i]++
				if pairs > 0 {
					open++
					mostOpen = max(mostOpen, open)
				}
			},
			OnRecordCommitting: func(int) {
				mu.Lock()
				defer mu.Unlock()
				open--
			},
		}
		if err := c.Start(enginetest.WithHooks(b.ctx, hooks)); err != nil {
			t.Fatal(err)
		}
	}
	// No bound of its own: how long 6,000 sends take depends on the machine,
	// and the test binary's -timeout bounds a hang.
	for _, p := range fakes {
		if !p.WaitCount(b.ctx, recipients) {
			t.Fatalf("%s received %d submissions, want %d", p.Transport(), p.Count(), recipients)
		}
	}
	for _, c := range clients {
		if err := c.Stop(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	claimed := 0
	for _, n := range claims {
		if n > 0 {
			claimed++
		}
	}
	if claimed < 2 || mostOpen < 2 {
		t.Fatalf("batches claimed per client %v, at most %d batches open at once: the clients never raced", claims, mostOpen)
	}
	mu.Unlock()
	seen := map[string]int{}
	for _, p := range fakes {
		for _, s := range p.Submissions() {
			seen[s.SubmissionID]++
		}
	}
	if len(seen) != recipients*devices {
		t.Fatalf("%d distinct pairs submitted, want %d", len(seen), recipients*devices)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("pair %s submitted %d times", id, n)
		}
	}
	for _, id := range msgIDs {
		counts, err := b.client.DeliveryCounts(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if counts[oncepush.StatusSent] != 100 || len(counts) != 1 {
			t.Fatalf("message %d: counts %v, want 100 sent and nothing else", id, counts)
		}
	}
}

// holdThen makes the provider block every send until release, then answer r.
func holdThen(p *pushtest.Provider, r oncepush.Result) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	p.Answer(func(ctx context.Context, s *oncepush.Submission) oncepush.Result {
		select {
		case <-ch:
			return r
		case <-ctx.Done():
			return oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer: " + ctx.Err().Error()}
		}
	})
	return func() { once.Do(func() { close(ch) }) }
}

// abandon starts a drain of client whose provider holds its answer, waits until
// the provider has the submission, and returns a function that lets the
// provider answer r and waits for the drain to end.
func abandon[TTx any](t *testing.T, b *bundle[TTx], client *oncepush.Client[TTx], p *pushtest.Provider, r oncepush.Result) (finish func()) {
	t.Helper()
	already := p.Count()
	release := holdThen(p, r)
	done := make(chan error, 1)
	go func() {
		_, err := client.Drain(context.WithoutCancel(b.ctx))
		done <- err
	}()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if !p.WaitCount(ctx, already+1) {
		release()
		t.Fatal("the abandoned run never called its provider")
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			release()
			if err := <-done; err != nil {
				t.Errorf("abandoned run: %v", err)
			}
		})
	}
}

func testAbandonedResend[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	dev := b.register("r1", oncepush.TransportFCM)[0]
	b.send([]string{"r1"}, msg("hello"), nil)

	// Run A claims, marks sending, submits, and never records: its answer is
	// lost and it outlives its lease. When it finally answers it says
	// "rejected", which would change the record if it were allowed to.
	finishA := abandon(t, b, b.client, b.fcm, oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: "400 late answer"})
	first := b.fcm.Submissions()[0]

	d := b.only("r1")
	if a := attempt(t, d, dev.ID); a.State != oncepush.AttemptSending || a.Submissions != 1 {
		t.Fatalf("before the provider answered: %+v, want sending with 1 submission", a)
	}

	// While the lease holds, nobody else sends.
	fcmB := pushtest.NewProvider(oncepush.TransportFCM)
	clientB := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{fcmB} })
	drain(t, clientB)
	wantSends(t, fcmB, 0, "a second client while the first held the lease")

	b.clock.Advance(clientB.Config().Lease + time.Second)
	drain(t, clientB)
	subs := fcmB.Submissions()
	if len(subs) != 1 {
		t.Fatalf("after the lease expired, resend submitted %d times, want 1", len(subs))
	}
	again := subs[0]
	if again.CollapseID != first.CollapseID || again.SubmissionID != first.SubmissionID || again.NotificationID != first.NotificationID {
		t.Fatalf("resend identity changed: first %s/%s, again %s/%s", first.CollapseID, first.SubmissionID, again.CollapseID, again.SubmissionID)
	}
	if !again.Resend {
		t.Fatal("resend not marked as such")
	}
	d = b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
	a := attempt(t, d, dev.ID)
	if a.State != oncepush.AttemptAccepted || a.Submissions != 2 || a.Ambiguous != 1 || d.Attempts != 1 {
		t.Fatalf("ledger after resend: %+v, delivery attempts %d; want accepted, 2 submissions, 1 ambiguous, 1 attempt", a, d.Attempts)
	}

	// Run A answers at last. Its lease was taken: it must change nothing.
	finishA()
	after := b.only("r1")
	wantStatus(t, after, oncepush.StatusSent)
	if a2 := attempt(t, after, dev.ID); fmt.Sprintf("%+v", a2) != fmt.Sprintf("%+v", a) {
		t.Fatalf("a run that lost its lease changed the ledger:\nbefore %+v\nafter  %+v", a, a2)
	}
	if !b.logs.has("lease lost") {
		t.Fatalf("the lost lease was not logged; logs:\n%s", b.logs.all())
	}
}

func testAbandonedAtMostOnce[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	dev := b.register("r1", oncepush.TransportFCM)[0]
	b.send([]string{"r1"}, msg("once"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})
	finishA := abandon(t, b, b.client, b.fcm, oncepush.Accepted("late"))

	fcmB := pushtest.NewProvider(oncepush.TransportFCM)
	clientB := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{fcmB} })
	b.clock.Advance(clientB.Config().Lease + time.Second)
	drain(t, clientB)
	b.clock.Advance(24 * time.Hour)
	drain(t, clientB)
	wantSends(t, fcmB, 0, "an ambiguous at-most-once pair again")
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusAmbiguous)
	a := attempt(t, d, dev.ID)
	if a.State != oncepush.AttemptAmbiguous || a.Submissions != 1 || a.Ambiguous != 1 {
		t.Fatalf("ledger: %+v, want ambiguous with 1 submission", a)
	}
	finishA()
	after := b.only("r1")
	wantStatus(t, after, oncepush.StatusAmbiguous)
	if b.fcm.Count()+fcmB.Count() != 1 {
		t.Fatalf("pair submitted %d times in all, want exactly 1", b.fcm.Count()+fcmB.Count())
	}
}

func testNoDevicesNoProvider[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	onlyFCM := b.newClient(b.drv, func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	apnsDev := b.register("apple", oncepush.TransportAPNs)[0]
	b.send([]string{"nobody", "apple"}, msg("x"), nil)
	drain(t, onlyFCM)
	wantStatus(t, b.only("nobody"), oncepush.StatusNoDevices)
	d := b.only("apple")
	wantStatus(t, d, oncepush.StatusFailed)
	if a := attempt(t, d, apnsDev.ID); a.State != oncepush.AttemptRejected || !strings.Contains(a.Error, `no provider configured for transport "apns"`) {
		t.Fatalf("ledger: %+v", a)
	}
	if !strings.Contains(d.LastError, fmt.Sprintf("apns device %d: no provider configured", apnsDev.ID)) {
		t.Fatalf("last error %q", d.LastError)
	}
}

func testClaimBatchBound[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.BatchSize = 7 })
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("r%02d", i))
	}
	b.send(names, msg("x"), nil) // no devices: each finishes at claim
	st := b.drain()
	if st.Batches != 3 || st.Claimed != 20 {
		t.Fatalf("stats %+v: want 20 deliveries in 3 batches of at most 7", st)
	}
}

// freezeDriver stops its client dead after its first claim commits, until
// released: a crash at that exact step, as far as the database can tell.
type freezeDriver[TTx any] struct {
	driver.Driver[TTx]
	frozen  chan struct{} // closed once the claim has committed and the run froze
	release chan struct{}
	once    atomic.Bool
}

func (d *freezeDriver[TTx]) InTx(ctx context.Context, fn func(context.Context, TTx, driver.Executor) error) error {
	err := d.Driver.InTx(ctx, fn)
	if d.once.CompareAndSwap(false, true) {
		close(d.frozen)
		<-d.release
	}
	return err
}

// testCrashAfterClaimSendsNormally: a run that dies right after its claim
// commits has sent nothing and marked nothing sending, so the next run sends
// its pairs normally — even under at-most-once, where a pair left marked
// would be given up as ambiguous.
func testCrashAfterClaimSendsNormally[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	fd := &freezeDriver[TTx]{Driver: b.db.Driver(t, 0), frozen: make(chan struct{}), release: make(chan struct{})}
	crashed := b.newClient(fd, func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	b.register("r1", oncepush.TransportFCM)
	b.send([]string{"r1"}, msg("once"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = crashed.Drain(context.WithoutCancel(b.ctx))
	}()
	<-fd.frozen
	defer func() { close(fd.release); <-done }()

	b.drainAfter(b.client.Config().Lease + time.Second)
	wantSends(t, b.fcm, 1, "after a crash right after the claim")
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
	if a := d.Devices[0]; a.Submissions != 1 || a.Ambiguous != 0 {
		t.Fatalf("ledger %+v: the crashed run's claim counted a submission it never made", a)
	}
}
