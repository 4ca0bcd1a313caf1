package blackbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/failpoint"
)

// crashDeliveries is how many deliveries each crash takes down at its step:
// one batch, every pair in flight at once.
const crashDeliveries = 100

// stepWritten is the step no failpoint can mark from inside the worker: every
// request of the batch is at the provider (the fake has read it whole and
// holds its answer), and the test SIGKILLs the worker.
const stepWritten = "written"

// crashTokenSeq makes APNs tokens unique across the cases sharing one fake.
var crashTokenSeq atomic.Int64

// TestCrashAtEveryStep kills a worker (SIGKILL, from a failpoint compiled into
// a test build, or from the test once the fake provider holds every request
// of the batch) at each step of the delivery path, with a batch of 100
// deliveries there, lets a second worker recover after the lease, and checks
// every pair against the fake provider's record: sent once where nothing was
// in doubt; where the provider had accepted but nothing was recorded, exactly
// twice with the same identity under resend, and once, ending ambiguous,
// under at-most-once.
//
// ONCEPUSH_CRASH_ROUNDS=n repeats every case n times (each a kill of its own);
// the suite runs one round.
func TestCrashAtEveryStep(t *testing.T) {
	rounds := 1
	if v := os.Getenv("ONCEPUSH_CRASH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ONCEPUSH_CRASH_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	bin := buildWith(t, "-tags", "oncepush_failpoints")
	f := startFake(t, bin)
	for round := range rounds {
		for _, db := range databases {
			for _, step := range []string{failpoint.ClaimCommitted, stepWritten, failpoint.Answered, failpoint.Recorded} {
				for _, policy := range []oncepush.AmbiguityPolicy{oncepush.AmbiguityResend, oncepush.AmbiguityAtMostOnce} {
					t.Run(fmt.Sprintf("%s/%s/%s/%d", db.name, step, policy, round), func(t *testing.T) {
						t.Parallel()
						testCrashAt(t, bin, f, db, step, policy, round)
					})
				}
			}
		}
	}
}

func testCrashAt(t *testing.T, bin string, f *fake, db database, step string, policy oncepush.AmbiguityPolicy, round int) {
	if step == stepWritten {
		// A fake of its own, to hold every answer without holding the others'.
		f = startFake(t, bin)
		f.latency(oncepush.TransportFCM, time.Hour)
		f.latency(oncepush.TransportAPNs, time.Hour)
	}
	dbURL := db.new(t)
	// Generous send timeout and run budget: a send that timed out on a busy
	// machine would be an outcome of its own and change the counts. The lease
	// (their default) is not waited for: the test expires it once the worker
	// is dead (expireLeases).
	cfg := f.serverConfig(t, func(c *config.File) {
		c.Engine.Workers = 1
		c.Engine.BatchSize = crashDeliveries
		c.Engine.ConcurrentSends = crashDeliveries
		c.Engine.RunBudget = time.Minute
		c.Engine.SendTimeout = time.Minute
		c.Engine.PollInterval = 50 * time.Millisecond
	})
	api := startServe(t, bin, dbURL, cfg, true, "--no-workers")
	prefix := fmt.Sprintf("crash-%s-%s-%s-%d", db.name, step, policy, round)
	tokens := map[string]string{} // recipient → token; half FCM, half APNs
	var recipients []string
	for i := range crashDeliveries {
		r := fmt.Sprintf("u_%s_%03d", prefix, i)
		tr, tok := oncepush.TransportFCM, fmt.Sprintf("fcm-%s-%03d", prefix, i)
		if i%2 == 1 {
			tr, tok = oncepush.TransportAPNs, fmt.Sprintf("%064x", crashTokenSeq.Add(1))
		}
		api.register(r, tr, tok)
		tokens[r] = tok
		recipients = append(recipients, r)
	}
	sent := api.send(map[string]any{"recipients": recipients, "title": "crash at " + step, "ambiguity": string(policy)})

	doomed := startEnv(t, bin, []string{"ONCEPUSH_FAILPOINT=" + step},
		"work", "--database", dbURL, "--config", cfg, "--log-format", "json")
	if step == stepWritten {
		eventually(t, "every request of the batch held at the provider", func() bool {
			return len(f.received()) == crashDeliveries
		})
		doomed.signal(syscall.SIGKILL)
		f.latency(oncepush.TransportFCM, 0)
		f.latency(oncepush.TransportAPNs, 0)
	}
	select {
	case <-doomed.Done():
	case <-time.After(runTimeout):
		t.Fatalf("the worker never reached the failpoint %s", step)
	}
	var ee *exec.ExitError
	if !errors.As(doomed.Err(), &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the worker ended with %v, want killed by its failpoint", doomed.Err())
	}

	// The dead worker's leases end now rather than in minutes: the rows are
	// as a lease expiry leaves them (pending, due, the dead run's lease id),
	// which is what recovery reads.
	expireLeases(t, db, dbURL)
	rescuer := start(t, bin, "work", "--database", dbURL, "--config", cfg, "--log-format", "json")
	rescuer.waitFor(rescuer.Stderr, "that it is working", func(s string) (string, bool) {
		return "", strings.Contains(s, `"msg":"oncepush working"`)
	})
	var ds []delivery
	eventually(t, "every delivery final after the crash", func() bool {
		ds = api.notificationDeliveries(sent.ID)
		if len(ds) != crashDeliveries {
			return false
		}
		for _, d := range ds {
			if d.Status == "pending" {
				return false
			}
		}
		return true
	})
	rescuer.signal(syscall.SIGTERM)
	if code := rescuer.exitCode(15 * time.Second); code != 0 {
		t.Errorf("the rescuing worker exited %d", code)
	}

	byToken := map[string][]string{} // token → the provider-side identity of each receipt
	for _, r := range f.received() {
		byToken[r.Token] = append(byToken[r.Token], r.CollapseID+"/"+r.APNsID+"/"+r.NotificationID)
	}
	// The provider had every request and nothing was recorded.
	inDoubt := step == failpoint.Answered || step == stepWritten
	for _, d := range ds {
		got := byToken[tokens[d.Recipient]]
		wantReceipts, wantStatus, wantAmbiguous := 1, "sent", 0
		if inDoubt {
			wantAmbiguous = 1
			if policy == oncepush.AmbiguityResend {
				wantReceipts = 2
			} else {
				wantStatus = "ambiguous"
			}
		}
		if len(got) != wantReceipts || d.Status != wantStatus || len(d.Devices) != 1 ||
			d.Devices[0].Submissions != wantReceipts || d.Devices[0].Ambiguous != wantAmbiguous {
			t.Fatalf("%s: provider received %d, delivery %s, ledger %+v; want %d received, %s, %d submissions, %d ambiguous",
				d.Recipient, len(got), d.Status, d.Devices, wantReceipts, wantStatus, wantReceipts, wantAmbiguous)
		}
		if len(got) == 2 && got[0] != got[1] {
			t.Fatalf("%s: the resend changed identity: %v", d.Recipient, got)
		}
	}
}

// expireLeases ends every lease in the database now: each pending delivery
// becomes due, keeping the lease id of the run that held it. It stands in for
// waiting out the lease, which would make the test as slow as the lease is
// long, or, with a lease short enough to wait for, tie it to send timeouts a
// busy machine can exceed.
func expireLeases(t *testing.T, db database, url string) {
	t.Helper()
	const pending = "UPDATE oncepush_delivery SET next_attempt_at = %s WHERE status = 'pending'"
	var err error
	switch db.name {
	case "sqlite":
		var h *sql.DB
		if h, err = sql.Open("sqlite", sqlite.DSN(url, nil)); err == nil {
			_, err = h.ExecContext(t.Context(), fmt.Sprintf(pending, "?"), time.Now().Add(-time.Second).UnixMicro())
			h.Close()
		}
	case "postgres":
		var c *pgx.Conn
		if c, err = pgx.Connect(t.Context(), url); err == nil {
			_, err = c.Exec(t.Context(), fmt.Sprintf(pending, "now() - interval '1 second'"))
			c.Close(context.Background())
		}
	default:
		t.Fatalf("expireLeases: no SQL for %s", db.name)
	}
	if err != nil {
		t.Fatalf("expire the dead worker's leases: %v", err)
	}
}
