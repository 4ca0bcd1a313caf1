// Package drivertest is the storage drivers' conformance suite: every promise
// of the delivery engine (at most once per pair, nothing lost, dedup, leases,
// budgets, eligibility, cleanup) as a test that tries to break it, run through
// a driver. Each driver's tests call Run with a Harness, so every driver passes
// the same suite; a third-party driver does the same:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, drivertest.Harness[mydriver.Tx]{NewDB: newDB})
//	}
//
// where newDB returns a fresh, migrated database for one test (see DB).
// RunMethods is the layer below: each promise of a single driver method,
// on the executor directly, so that a failure names the method. A driver
// that also keeps the server's state (package driver/serverstore) passes
// RunServer too, with Harness.ServerStore set. The PostgreSQL driver's
// conformance_test.go is a worked example; the SQLite driver's Run is the
// root package's conformance_test.go.
//
// The suite's files are named after the root file whose promises they
// attack (claim.go, record.go, cancel.go, sendgroup.go, …); methods.go is
// RunMethods.
package drivertest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/pushtest"
)

// DB is one isolated, migrated database of a test.
type DB[TTx any] interface {
	// Driver returns a new driver on this database with its own pool of at most
	// maxConns connections (0 = the driver's default); it is closed when the test ends.
	Driver(t *testing.T, maxConns int) driver.Driver[TTx]
	// Begin starts a caller transaction on the driver's pool.
	Begin(ctx context.Context, d driver.Driver[TTx]) (TTx, error)
	Commit(ctx context.Context, tx TTx) error
	Rollback(ctx context.Context, tx TTx) error
	// Exec runs a statement on a transaction (eligibility reading through ClaimTx).
	Exec(ctx context.Context, tx TTx, sql string) error
}

// Harness adapts a driver to the suites.
type Harness[TTx any] struct {
	// NewDB returns a fresh database for one test, migrated with the
	// driver's (engine's) Migrate.
	NewDB func(t *testing.T) DB[TTx]
	// ServerStore returns the server's store on a driver of NewDB's
	// database (serverstore.Driver.ServerStore). Only RunServer needs it.
	ServerStore func(d driver.Driver[TTx]) serverstore.Store[TTx]
}

type testCase[TTx any] struct {
	name string
	fn   func(t *testing.T, h Harness[TTx])
}

// runParallel runs each test as a parallel subtest of t.
func runParallel[TTx any](t *testing.T, h Harness[TTx], tests []testCase[TTx]) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// Run runs the whole suite. The goroutine-leak test runs first and alone; the
// rest run in parallel.
func Run[TTx any](t *testing.T, h Harness[TTx]) {
	t.Run("StopLeavesNoGoroutines", func(t *testing.T) { testStopLeavesNoGoroutines(t, h) })
	runParallel(t, h, []testCase[TTx]{
		{"SendTxRolledBackSendsNothing", testSendTxRollback[TTx]},
		{"DedupSequential", testDedupSequential[TTx]},
		{"SendToDevices", testSendToDevices[TTx]},
		{"DeviceRecipientUnreachable", testDeviceRecipientUnreachable[TTx]},
		{"DedupConcurrent", testDedupConcurrent[TTx]},
		{"DedupKeyFreeAfterRetention", testDedupFreedByRetention[TTx]},
		{"ValidationWritesNothing", testValidation[TTx]},
		{"TimesTheAPICanWrite", testTimesTheAPICanWrite[TTx]},
		{"HTTPImageDropped", testHTTPImageDropped[TTx]},
		{"ScheduledWaitsForClock", testScheduled[TTx]},
		{"ConcurrentClientsSendEachPairOnce", testConcurrentClients[TTx]},
		{"AbandonedRunResend", testAbandonedResend[TTx]},
		{"AbandonedRunAtMostOnce", testAbandonedAtMostOnce[TTx]},
		{"MaybeSentPolicies", testMaybeSent[TTx]},
		{"ProviderFailuresBackOff", testProviderFailures[TTx]},
		{"InvalidTokenDeletesOnlyThatTransport", testInvalidToken[TTx]},
		{"ProviderTextIsStorable", testProviderTextStorable[TTx]},
		{"InvalidAnswerForMovedTokenKeepsNewOwner", testInvalidMovedToken[TTx]},
		{"NoDevicesAndNoProvider", testNoDevicesNoProvider[TTx]},
		{"EligibilitySkipDelayExpire", testEligibility[TTx]},
		{"EligibilityStrangerFailsOnlyItsMessage", testEligibilityStranger[TTx]},
		{"EligibilityAnswerErrFailsOnlyItsMessage", testEligibilityAnswerErr[TTx]},
		{"EligibilityFailingQueryKeepsClaim", testEligibilityFailingQuery[TTx]},
		{"RunBudgetLeavesRestUntouched", testRunBudget[TTx]},
		{"ClaimNeverExceedsBatch", testClaimBatchBound[TTx]},
		{"OneConnectionPoolStaysUsable", testOneConnection[TTx]},
		{"CleanupRetentionAndOverdue", testCleanup[TTx]},
		{"CleanupOneRunnerAtATime", testCleanupLock[TTx]},
		{"CleanupOrphans", testCleanupOrphans[TTx]},
		{"CleanupSweepsOrphansInBatches", testSweepOrphansInBatches[TTx]},
		{"DeleteRecipientMidRun", testDeleteRecipientMidRun[TTx]},
		{"ProviderThrottleHoldsTransport", testThrottle[TTx]},
		{"StopFinishesInFlightSends", testStopFinishesInFlight[TTx]},
		{"StopDeadlineCancelsSends", testStopDeadline[TTx]},
		{"StartedClientWakesOnSend", testStartedClientDelivers[TTx]},
		{"DeviceRegistry", testDevices[TTx]},
		{"SessionRevocation", testSessions[TTx]},
		{"DeleteRecipient", testDeleteRecipient[TTx]},
		{"DeleteRecipientIsOneOperation", testDeleteRecipientIsOneOperation[TTx]},
		{"ObserverSeesEvents", testObserver[TTx]},
		{"RecordedRequests", testRecordedRequests[TTx]},
		{"RecordLivesWithItsKey", testRecordLivesWithItsKey[TTx]},
		{"RecordFreedWithRecipients", testRecordFreedWithRecipients[TTx]},
		{"MessageReads", testMessageReads[TTx]},
		{"BacklogPerLane", testBacklogPerLane[TTx]},
		{"MessageList", testMessageList[TTx]},
		{"CancelPending", testCancelPending[TTx]},
		{"CancelInFlight", testCancelInFlight[TTx]},
		{"CancelCampaignMessage", testCancelCampaignMessage[TTx]},
		{"EligibilityHostileTextBacksOffOnlyItsMessage", testEligibilityHostileText[TTx]},
		{"AcceptedDeviceEndsDeliverySent", testAcceptedEndsSent[TTx]},
		{"ObserverPanicKeepsOutcome", testObserverPanicKeepsOutcome[TTx]},
		{"PausedRunStartsNothingLate", testPausedRunStartsNothingLate[TTx]},
		{"KilledRunLeavesOnlyInFlightAmbiguous", testKilledRunLeavesOnlyInFlightAmbiguous[TTx]},
		{"ReRegisteredTokenIsTheSamePair", testReRegisteredTokenSamePair[TTx]},
		{"RecordOutlastsSlowDatabase", testRecordOutlastsSlowDatabase[TTx]},
		{"StopDuringClaimReleasesBatch", testStopDuringClaimReleasesBatch[TTx]},
		{"RevocationOutlivesRetention", testRevocationOutlivesRetention[TTx]},
		{"BatchCostIsFixed", testBatchCostIsFixed[TTx]},
		{"PipelineClaimsWhileSending", testPipelineClaimsWhileSending[TTx]},
		{"PipelineSharesTheWindow", testPipelineSharesTheWindow[TTx]},
		{"ConcurrentSendsBoundsTheProcess", testConcurrentSendsBoundsTheProcess[TTx]},
		{"PipelineTakesWorkQueuedMidRun", testPipelineTakesWorkQueuedMidRun[TTx]},
		{"EligibilityCostIsFixed", testEligibilityCostIsFixed[TTx]},
		{"CrashAfterClaimSendsNormally", testCrashAfterClaimSendsNormally[TTx]},
		{"StopNotHeldByDeadDatabase", testStopNotHeldByDeadDatabase[TTx]},
		{"ForeignTextIsRedacted", testForeignTextIsRedacted[TTx]},
		{"TokenEchoedInAnyCaseIsRedacted", testTokenEchoedInAnyCaseIsRedacted[TTx]},
		{"SendsShareOneCommit", testSendsShareOneCommit[TTx]},
		{"GroupMembersFailAlone", testGroupMembersFailAlone[TTx]},
		{"GroupCommitFails", testGroupCommitFails[TTx]},
		{"GroupAnsweredAfterCommit", testGroupAnsweredAfterCommit[TTx]},
		{"GroupLeftWhenCanceled", testGroupLeftWhenCanceled[TTx]},
		{"SendGroupsAtOnce", testSendGroupsAtOnce[TTx]},
		{"GroupRetriedAfterConflict", testGroupRetriedAfterConflict[TTx]},
		{"EngineWritesAgainAfterConflict", testEngineWritesAgainAfterConflict[TTx]},
	})
	runParallel(t, h, campaignTests[TTx]())
	runParallel(t, h, campaignTotalsTests[TTx]())
}

// epoch is where every test clock starts.
var epoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// bundle is what a test works with.
type bundle[TTx any] struct {
	t      *testing.T
	ctx    context.Context
	db     DB[TTx]
	drv    driver.Driver[TTx]
	clock  *pushtest.Clock
	logs   *logCapture
	fakes  map[oncepush.Transport]*pushtest.Provider // a fake per built-in transport; the four below among them
	fcm    *pushtest.Provider
	apns   *pushtest.Provider
	web    *pushtest.Provider
	rus    *pushtest.Provider
	client *oncepush.Client[TTx]
}

// setup returns a client on a fresh database with a test clock and fake
// providers for every transport; mod adjusts its configuration. Each of
// fcmRecipients gets an FCM device, registered in that order.
func setup[TTx any](t *testing.T, h Harness[TTx], mod func(*oncepush.Config), fcmRecipients ...string) *bundle[TTx] {
	t.Helper()
	b := &bundle[TTx]{t: t, ctx: t.Context(), db: h.NewDB(t), clock: pushtest.NewClock(epoch), logs: &logCapture{}}
	b.drv = b.db.Driver(t, 0)
	b.fakes = map[oncepush.Transport]*pushtest.Provider{}
	var providers []oncepush.Provider
	for _, tr := range oncepush.Transports() {
		b.fakes[tr] = pushtest.NewProvider(tr)
		providers = append(providers, b.fakes[tr])
	}
	b.fcm, b.apns = b.fakes[oncepush.TransportFCM], b.fakes[oncepush.TransportAPNs]
	b.web, b.rus = b.fakes[oncepush.TransportWebPush], b.fakes[oncepush.TransportRuStore]
	b.client = b.newClient(b.drv, func(c *oncepush.Config) {
		c.Providers = providers
		if mod != nil {
			mod(c)
		}
	})
	for _, r := range fcmRecipients {
		b.register(r, oncepush.TransportFCM)
	}
	return b
}

// newClient returns another client on the bundle's database (and clock).
func (b *bundle[TTx]) newClient(drv driver.Driver[TTx], mod func(*oncepush.Config)) *oncepush.Client[TTx] {
	b.t.Helper()
	cfg := &oncepush.Config{
		Clock:        b.clock,
		Logger:       slog.New(b.logs),
		PollInterval: 20 * time.Millisecond,
	}
	if mod != nil {
		mod(cfg)
	}
	c, err := oncepush.NewClient(drv, cfg)
	if err != nil {
		b.t.Fatalf("NewClient: %v", err)
	}
	return c
}

// register registers one device per transport for the recipient and returns them.
func (b *bundle[TTx]) register(recipient string, transports ...oncepush.Transport) []*oncepush.Device {
	b.t.Helper()
	var out []*oncepush.Device
	for _, tr := range transports {
		d, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: recipient, Transport: tr, Token: tokenFor(tr, recipient)})
		if err != nil {
			b.t.Fatalf("RegisterDevice(%s, %s): %v", recipient, tr, err)
		}
		out = append(out, d)
	}
	return out
}

var tokenSeq struct {
	sync.Mutex
	n int
}

// tokenFor makes a token of the right shape for the transport, unique per
// call: its spec's example token.
func tokenFor(tr oncepush.Transport, recipient string) oncepush.Token {
	tokenSeq.Lock()
	tokenSeq.n++
	n := tokenSeq.n
	tokenSeq.Unlock()
	for _, s := range oncepush.BuiltinTransports() {
		if s.Name == tr {
			return s.ExampleToken(n)
		}
	}
	panic(fmt.Sprintf("drivertest: no example token for transport %q (registering for %s)", tr, recipient))
}

func (b *bundle[TTx]) send(recipients []string, msg oncepush.Message, opts *oncepush.SendOptions) oncepush.SendResult {
	b.t.Helper()
	res, err := b.client.Send(b.ctx, recipients, msg, opts)
	if err != nil {
		b.t.Fatalf("Send: %v", err)
	}
	return res
}

func (b *bundle[TTx]) drain() oncepush.RunStats {
	b.t.Helper()
	return drain(b.t, b.client)
}

// drainAfter advances the clock by d, then drains.
func (b *bundle[TTx]) drainAfter(d time.Duration) oncepush.RunStats {
	b.t.Helper()
	b.clock.Advance(d)
	return b.drain()
}

func drain[TTx any](t *testing.T, c *oncepush.Client[TTx]) oncepush.RunStats {
	t.Helper()
	s, err := c.Drain(t.Context())
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	return s
}

// deliveries returns the recipient's deliveries, oldest first.
func (b *bundle[TTx]) deliveries(recipient string) []oncepush.Delivery {
	b.t.Helper()
	ds, err := b.client.RecipientDeliveries(b.ctx, recipient, 0, 1000)
	if err != nil {
		b.t.Fatalf("RecipientDeliveries: %v", err)
	}
	slices.Reverse(ds)
	return ds
}

// recipientOf is the recipient of the delivery s was submitted for.
func (b *bundle[TTx]) recipientOf(s oncepush.Submission) string {
	b.t.Helper()
	d, err := b.client.Delivery(b.ctx, s.DeliveryID)
	if err != nil {
		b.t.Fatalf("Delivery(%d): %v", s.DeliveryID, err)
	}
	return d.Recipient
}

// only returns the recipient's one delivery.
func (b *bundle[TTx]) only(recipient string) oncepush.Delivery {
	b.t.Helper()
	ds := b.deliveries(recipient)
	if len(ds) != 1 {
		b.t.Fatalf("recipient %s has %d deliveries, want 1", recipient, len(ds))
	}
	return ds[0]
}

func msg(title string) oncepush.Message {
	return oncepush.Message{Type: "test", Title: title, Body: "body of " + title}
}

func wantStatus(t *testing.T, d oncepush.Delivery, want oncepush.DeliveryStatus) {
	t.Helper()
	if d.Status != want {
		t.Fatalf("delivery %d (%s): status %s, want %s (attempts %d, last error %q)", d.ID, d.Recipient, d.Status, want, d.Attempts, d.LastError)
	}
}

// wantSends fails the test unless the fake provider p has had exactly want
// sends; what names the sends counted.
func wantSends(t *testing.T, p *pushtest.Provider, want int, what string) {
	t.Helper()
	if n := p.Count(); n != want {
		t.Fatalf("%s: %d sends, want %d", what, n, want)
	}
}

// attempt returns the ledger row of the device in the delivery.
func attempt(t *testing.T, d oncepush.Delivery, deviceID int64) oncepush.DeviceAttempt {
	t.Helper()
	for _, a := range d.Devices {
		if a.DeviceID == deviceID {
			return a
		}
	}
	t.Fatalf("delivery %d has no ledger row for device %d (has %+v)", d.ID, deviceID, d.Devices)
	return oncepush.DeviceAttempt{}
}

// logCapture is a slog handler that keeps records for assertions.
type logCapture struct {
	mu   sync.Mutex
	recs []string
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		sb.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, sb.String())
	l.mu.Unlock()
	return nil
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

// has reports whether a record contains every fragment.
func (l *logCapture) has(fragments ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(r, f)
		}
		if ok {
			return true
		}
	}
	return false
}

func (l *logCapture) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.recs, "\n")
}
