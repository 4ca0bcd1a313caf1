package blackbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/failpoint"
)

// campaignTimeout bounds a campaign's whole run, from its start to every
// delivery final: thousands of deliveries, under the race detector on a busy
// machine.
const campaignTimeout = 3 * time.Minute

// campaignAnswer is a campaign as GET /v1/campaigns/{id} answers it, as far
// as the tests read it.
type campaignAnswer struct {
	ID             int64
	Status         string
	NotificationID *int64
	Cursor         string
	Recipients     int64
	Written        int64
	Tries          int
	LastError      string
	Totals         *struct {
		Queued, Sent, Failed, Ambiguous, Accepted, AmbiguousAttempts int
	}
}

// campaignAudience registers n recipients with one FCM device each (tokens
// unique to prefix), creates a campaign to them as an uploaded audience, and
// returns its id and the token of each recipient, in the audience's order.
func campaignAudience(t *testing.T, api *apiServer, prefix string, n int) (int64, []string, map[string]string) {
	t.Helper()
	recipients := make([]string, n)
	tokens := make(map[string]string, n)
	for i := range n {
		// Zero-padded: the audience's order (its primary key) is the upload's.
		recipients[i] = fmt.Sprintf("u_%s_%05d", prefix, i)
		tokens[recipients[i]] = fmt.Sprintf("fcm-%s-%05d", prefix, i)
	}
	registerMany(t, api, recipients, tokens)
	var c campaignAnswer
	api.must(http.MethodPost, "/v1/campaigns", map[string]any{
		"name":     prefix,
		"message":  map[string]any{"type": "campaign." + prefix, "title": "campaign " + prefix},
		"audience": "recipients",
	}, http.StatusCreated, &c)
	var added struct{ Added int }
	api.must(http.MethodPut, fmt.Sprintf("/v1/campaigns/%d/recipients/1", c.ID),
		map[string]any{"recipients": recipients}, http.StatusOK, &added)
	if added.Added != n {
		t.Fatalf("the upload added %d recipients, want %d", added.Added, n)
	}
	return c.ID, recipients, tokens
}

// registerMany registers each recipient's FCM device, a few requests at a
// time (thousands one by one would be most of the test's time).
func registerMany(t *testing.T, api *apiServer, recipients []string, tokens map[string]string) {
	t.Helper()
	const parallel = 8
	work := make(chan string)
	errs := make(chan error, parallel)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for r := range work {
				body := map[string]string{"transport": string(oncepush.TransportFCM), "token": tokens[r]}
				status, b, err := request(context.Background(), http.DefaultClient, http.MethodPut, api.url+"/v1/recipients/"+url.PathEscape(r)+"/devices", api.key, body)
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("register %s: %d: %s", r, status, b)
				}
				if err != nil {
					errs <- err
					for range work { // drain: the test fails on the first error
					}
					return
				}
			}
		})
	}
	for _, r := range recipients {
		work <- r
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// campaign reads a campaign with its totals.
func (s *apiServer) campaign(id int64) campaignAnswer {
	s.t.Helper()
	var c campaignAnswer
	s.must(http.MethodGet, fmt.Sprintf("/v1/campaigns/%d", id), nil, http.StatusOK, &c)
	return c
}

// waitCampaignDone waits until the campaign is completed and none of its
// deliveries is still queued, and returns it.
func (s *apiServer) waitCampaignDone(id int64) campaignAnswer {
	s.t.Helper()
	var c campaignAnswer
	eventuallyWithin(s.t, campaignTimeout, fmt.Sprintf("campaign %d completed with nothing queued", id), func() bool {
		c = s.campaign(id)
		return c.Status == "completed" && c.Totals != nil && c.Totals.Queued == 0
	})
	return c
}

// checkOncePerDevice checks the fake's record against the audience: every
// token received exactly once, nothing else received; and the campaign's
// own account against both.
func checkOncePerDevice(t *testing.T, receipts []receipt, recipients []string, tokens map[string]string, c campaignAnswer) {
	t.Helper()
	got := map[string]int{}
	for _, r := range receipts {
		got[r.Token]++
	}
	bad := 0
	for _, r := range recipients {
		if n := got[tokens[r]]; n != 1 {
			if bad++; bad <= 10 {
				t.Errorf("%s (token %s): the fake received %d requests, want 1", r, tokens[r], n)
			}
		}
		delete(got, tokens[r])
	}
	if bad > 0 {
		t.Errorf("%d of %d devices were not received exactly once", bad, len(recipients))
	}
	if len(got) != 0 {
		var some []string
		for tok, n := range got {
			if some = append(some, fmt.Sprintf("%s ×%d", tok, n)); len(some) == 5 {
				break
			}
		}
		t.Errorf("the fake received %d tokens outside the audience, such as %v", len(got), some)
	}
	n := len(recipients)
	if c.Written != int64(n) || c.Totals.Sent != n || c.Totals.Accepted != len(receipts) {
		t.Errorf("campaign: written %d, totals %+v; want written %d, sent %d, accepted %d (the fake's record)",
			c.Written, *c.Totals, n, n, len(receipts))
	}
}

// receipt is a request the fake read whole, as the campaign tests count it.
type receipt struct {
	Seq   int64
	Token string
}

// receivedAfter lists every request the fake has read whole after the
// sequence number after (0: all), and the last sequence number read.
func (f *fake) receivedAfter(after int64) ([]receipt, int64) {
	f.t.Helper()
	var out []receipt
	for {
		var page []receipt
		f.control(http.MethodGet, fmt.Sprintf("/_fake/received?after=%d&limit=1000", after), nil, &page, http.StatusOK)
		if len(page) == 0 {
			return out, after
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

// testCampaignTwoStarters: two 'oncepush serve' processes, with workers, on
// one database; one campaign started by both at once, twice over — once by
// POST /start sent to both together (one 200, the other 409
// campaign_state), once scheduled a moment ahead so that both campaign
// loops, looking every 20 ms, find it due together. The campaign starts
// once: one notification, its deliveries written once per recipient
// however the two processes share the batches, each device received
// exactly once by the fake provider, the totals equal to the fake's record.
// It attacks the start's status check under the row lock: a second starter
// that did not re-read the status would write a second message and expand
// the audience again from an empty cursor.
func testCampaignTwoStarters(t *testing.T, bin string, db database) {
	const audience = 3000
	f := startFake(t, bin)
	dbURL := db.new(t)
	cfg := f.serverConfig(t, func(c *config.File) {
		c.Engine.CampaignInterval = 20 * time.Millisecond
		c.Engine.CampaignBatch = 250 // a dozen batches for the two to share
		c.Engine.PollInterval = 100 * time.Millisecond
	})
	a := startServe(t, bin, dbURL, cfg, true)
	b := startServe(t, bin, dbURL, cfg, false)
	b.key = a.key

	t.Run("Start", func(t *testing.T) {
		_, seq := f.receivedAfter(0)
		id, recipients, tokens := campaignAudience(t, a, "twostart", audience)
		path := fmt.Sprintf("/v1/campaigns/%d/start", id)
		gate := make(chan struct{})
		type answer struct {
			status int
			body   []byte
			err    error
		}
		answers := make([]answer, 2)
		var wg sync.WaitGroup
		for i, s := range []*apiServer{a, b} {
			wg.Go(func() {
				<-gate
				status, body, err := request(context.Background(), http.DefaultClient, http.MethodPost, s.url+path, s.key, nil)
				answers[i] = answer{status, body, err}
			})
		}
		close(gate)
		wg.Wait()
		var won, refused int
		for i, an := range answers {
			if an.err != nil {
				t.Fatalf("POST %s to process %d: %v", path, i, an.err)
			}
			var p problemAnswer
			switch {
			case an.status == http.StatusOK:
				won++
			case an.status == http.StatusConflict && json.Unmarshal(an.body, &p) == nil && p.Code == "campaign_state":
				refused++
			default:
				t.Errorf("POST %s to process %d: %d %s", path, i, an.status, an.body)
			}
		}
		if won != 1 || refused != 1 {
			t.Fatalf("two starts at once: %d answered 200 and %d 409 campaign_state, want 1 and 1", won, refused)
		}
		c := a.waitCampaignDone(id)
		got, _ := f.receivedAfter(seq)
		checkOncePerDevice(t, got, recipients, tokens, c)
	})
	t.Run("Schedule", func(t *testing.T) {
		_, seq := f.receivedAfter(0)
		id, recipients, tokens := campaignAudience(t, a, "twosched", audience)
		// A moment ahead, so that both loops are looking when it comes; a
		// machine slow enough to pass it first only starts it at the next
		// look of each, which is the same race.
		at := time.Now().Add(500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		a.must(http.MethodPost, fmt.Sprintf("/v1/campaigns/%d/schedule", id), map[string]string{"startAt": at}, http.StatusOK, nil)
		c := b.waitCampaignDone(id)
		got, _ := f.receivedAfter(seq)
		checkOncePerDevice(t, got, recipients, tokens, c)
	})
	for _, s := range []*apiServer{a, b} {
		s.proc.signal(syscall.SIGTERM)
		if code := s.proc.exitCode(15 * time.Second); code != 0 {
			t.Errorf("%s exited %d on SIGTERM, want 0", s.proc.Name, code)
		}
	}
}

// TestCampaignExpanderKilled builds the binary with failpoints and runs
// testCampaignExpanderKilled on PostgreSQL.
func TestCampaignExpanderKilled(t *testing.T) {
	t.Parallel()
	testCampaignExpanderKilled(t, buildWith(t, "-tags", "oncepush_failpoints"))
}

// testCampaignExpanderKilled: a worker expanding a campaign in batches of 50
// SIGKILLs itself (failpoint campaign-batch) inside its sixth batch's
// transaction, five batches committed; while it is down the campaign is
// sending, its cursor on the fifth batch's last recipient, the dead try
// counted; a second worker goes on from the cursor and completes it. Every
// device is received exactly once, tries are back to 0. It attacks the
// cursor's commit with its batch: a cursor committed on its own would skip
// the dying batch's recipients, deliveries committed before the cursor
// would be written again.
//
// The killed worker's providers are a fake of their own that holds every
// request: what it claimed of the committed batches is never answered, so
// the second worker sends each of those (the dead worker's requests are
// the delivery path's crash, TestCrashAtEveryStep's subject). That fake
// must have seen only recipients of the committed batches.
func testCampaignExpanderKilled(t *testing.T, bin string) {
	const (
		audience  = 1000
		batch     = 50
		committed = 5
	)
	f := startFake(t, bin)
	hole := startFake(t, bin)
	hole.latency(oncepush.TransportFCM, time.Hour)
	db := databases[1]
	dbURL := db.new(t)
	engine := func(c *config.File) {
		c.Engine.CampaignInterval = 20 * time.Millisecond
		c.Engine.CampaignBatch = batch
		c.Engine.PollInterval = 100 * time.Millisecond
		// The dead worker's sends are ended by expireLeases, not by a timeout.
		c.Engine.SendTimeout = time.Minute
		c.Engine.RunBudget = time.Minute
	}
	cfg := f.serverConfig(t, engine)
	api := startServe(t, bin, dbURL, cfg, true, "--no-workers")
	id, recipients, tokens := campaignAudience(t, api, "expkill", audience)
	api.must(http.MethodPost, fmt.Sprintf("/v1/campaigns/%d/start", id), nil, http.StatusOK, nil)

	doomed := startEnv(t, bin, []string{"ONCEPUSH_FAILPOINT=" + failpoint.CampaignBatch, fmt.Sprintf("ONCEPUSH_FAILPOINT_AFTER=%d", committed)},
		"work", "--database", dbURL, "--config", hole.serverConfig(t, engine), "--log-format", "json")
	select {
	case <-doomed.Done():
	case <-time.After(runTimeout):
		t.Fatalf("the worker never reached the failpoint %s after %d batches", failpoint.CampaignBatch, committed)
	}
	var ee *exec.ExitError
	if !errors.As(doomed.Err(), &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the worker ended with %v, want killed by its failpoint", doomed.Err())
	}

	down := api.campaign(id)
	if down.Status != "sending" || down.Written != committed*batch || down.Cursor != recipients[committed*batch-1] || down.Tries < 1 {
		// Errorf: the run goes on, to show what the rescue makes of it.
		t.Errorf("with the expander dead: %s, written %d, cursor %q, tries %d; want sending, %d, %q, at least 1 (the dead try counted)",
			down.Status, down.Written, down.Cursor, down.Tries, committed*batch, recipients[committed*batch-1])
	}
	committedTokens := map[string]bool{}
	for _, r := range recipients[:committed*batch] {
		committedTokens[tokens[r]] = true
	}
	held := hole.received()
	for _, r := range held {
		if !committedTokens[r.Token] {
			t.Errorf("the dead worker sent %s, which no committed batch wrote", r.Token)
		}
	}
	t.Logf("killed in batch %d: written %d, tries %d; the dead worker's fake held %d requests", committed+1, down.Written, down.Tries, len(held))

	expireLeases(t, db, dbURL)
	rescuer := start(t, bin, "work", "--database", dbURL, "--config", cfg, "--log-format", "json")
	c := api.waitCampaignDone(id)
	if c.Tries != 0 || c.LastError != "" {
		t.Errorf("completed with tries %d, lastError %q; want 0 and none", c.Tries, c.LastError)
	}
	got, _ := f.receivedAfter(0)
	checkOncePerDevice(t, got, recipients, tokens, c)
	rescuer.signal(syscall.SIGTERM)
	if code := rescuer.exitCode(15 * time.Second); code != 0 {
		t.Errorf("the rescuing worker exited %d", code)
	}
}
