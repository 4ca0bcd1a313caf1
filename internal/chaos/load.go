//go:build unix

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/pushtest"
)

// transports are the four the fake speaks.
var transports = []oncepush.Transport{oncepush.TransportFCM, oncepush.TransportAPNs, oncepush.TransportWebPush, oncepush.TransportRuStore}

// Shares of the workload, in percent.
const (
	deadTokenPercent      = 3  // devices whose token the fake answers as invalid
	concurrentDupsPercent = 12 // notifications posted 2 or 3 times at once
	laterDupPercent       = 12 // … posted again later
	fanOutPercent         = 25 // … to several recipients
	posters               = 4  // goroutines posting
)

// workload is the phase's devices and notifications.
type workload struct {
	p          plan
	recipients []string
	devices    map[string]int    // recipient → how many devices it has (for pacing)
	tokens     map[int64]string  // device id → its token as the fake records it
	owners     map[string]string // token as the fake records it → recipient
	dead       int

	mu            sync.Mutex
	rng           *rand.Rand
	notifications []*notification
	errs          []error // answers the harness did not expect (its own bug, or the API's)

	// The pacing: pairs posted to live devices (dead tokens are deleted
	// after their first answer, and left out), and pairs of live devices the
	// fake has received a request for. Counting pairs, not requests, keeps
	// the retries and resends of a long run from letting the backlog grow.
	expected      atomic.Int64
	receivedPairs atomic.Int64
	requests      atomic.Int64 // requests the fake received
	deadTokens    map[string]bool
	posts         sync.WaitGroup
	postCtx       context.Context // POSTs go on past the end of the load, until drained
	cancel        context.CancelFunc
}

// notification is one key's state; its POSTs update it concurrently.
type notification struct {
	mu   sync.Mutex
	n    Notification
	body notificationBody
}

// setUpWorkload registers the recipients' devices over the API, and
// programs the fake: dead tokens, and the mix of answers every other
// request draws from.
func setUpWorkload(ctx context.Context, a *api, f *fake, p plan, rng *rand.Rand) (*workload, error) {
	w := &workload{p: p, devices: map[string]int{}, tokens: map[int64]string{}, owners: map[string]string{}, rng: rng, deadTokens: map[string]bool{}}
	w.postCtx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	type device struct {
		recipient string
		transport oncepush.Transport
		dead      bool
	}
	var devices []device
	for i := range p.recipients {
		r := fmt.Sprintf("chaos-%s-%05d", p.driver, i)
		w.recipients = append(w.recipients, r)
		k := 1 + rng.IntN(3) // 1 to 3 devices, of distinct transports
		for _, j := range rng.Perm(len(transports))[:k] {
			d := device{recipient: r, transport: transports[j], dead: rng.IntN(100) < deadTokenPercent}
			devices = append(devices, d)
			if !d.dead {
				w.devices[r]++
			}
		}
	}
	var mu sync.Mutex
	err := inParallel(len(devices), func(i int) error {
		d := devices[i]
		id, tok, err := register(ctx, a, f, d.recipient, d.transport, i, d.dead)
		mu.Lock()
		defer mu.Unlock()
		w.tokens[id] = tok
		w.owners[tok] = d.recipient
		if d.dead {
			w.dead++
			w.deadTokens[tok] = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, t := range transports {
		// A short latency on every answer, so that a busy worker always has
		// requests held at the fake when the harness looks for a victim.
		if err := f.latency(ctx, string(t), 10*time.Millisecond); err != nil {
			return nil, err
		}
		if err := f.mix(ctx, string(t), p.seed+uint64(i), answerMix(t)); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// register registers one device and, for a dead one, programs the fake to
// answer its token as invalid. It returns the device id and the token as the
// fake records it.
func register(ctx context.Context, a *api, f *fake, recipient string, t oncepush.Transport, n int, dead bool) (int64, string, error) {
	token, fakeToken := "", ""
	switch t {
	case oncepush.TransportAPNs:
		token = fmt.Sprintf("%064x", n+1)
		fakeToken = token
	case oncepush.TransportWebPush:
		s, err := f.subscription(ctx)
		if err != nil {
			return 0, "", err
		}
		token, fakeToken = s.Token, s.ID
	default:
		token = fmt.Sprintf("%s-chaos-%06d", t, n)
		fakeToken = token
	}
	if dead {
		if err := f.program(ctx, string(t), fakeToken, invalidToken(t)); err != nil {
			return 0, "", err
		}
	}
	var d struct{ ID int64 }
	if err := a.must(ctx, http.MethodPut, "/v1/recipients/"+url.PathEscape(recipient)+"/devices",
		map[string]string{"transport": string(t), "token": token}, http.StatusOK, &d); err != nil {
		return 0, "", err
	}
	return d.ID, fakeToken, nil
}

// invalidToken is each provider's word for a dead token.
func invalidToken(t oncepush.Transport) pushtest.FakeAnswer {
	switch t {
	case oncepush.TransportAPNs:
		return pushtest.APNsError(http.StatusGone, "Unregistered")
	case oncepush.TransportWebPush:
		return pushtest.WebPushError(http.StatusGone)
	case oncepush.TransportRuStore:
		return pushtest.RuStoreError(http.StatusNotFound, "NOT_FOUND", "wrong push token")
	}
	return pushtest.FCMError(http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")
}

// answerMix is what the fake answers, in parts per thousand: mostly success
// (some of it after a latency that holds requests in flight), 503, 429 with
// Retry-After, an answer held past the send timeout (the client gives up: a
// maybe-sent), and accept-then-reset (the fake reads the request whole, then
// resets the stream).
func answerMix(t oncepush.Transport) []pushtest.FakeChoice {
	unavailable, tooMany := pushtest.FCMError(http.StatusServiceUnavailable, "UNAVAILABLE", "The service is currently unavailable.", ""),
		pushtest.FCMDeviceRateExceeded()
	switch t {
	case oncepush.TransportAPNs:
		unavailable, tooMany = pushtest.APNsError(http.StatusServiceUnavailable, "ServiceUnavailable"), pushtest.APNsError(http.StatusTooManyRequests, "TooManyRequests")
	case oncepush.TransportWebPush:
		unavailable, tooMany = pushtest.WebPushError(http.StatusServiceUnavailable), pushtest.WebPushError(http.StatusTooManyRequests)
	case oncepush.TransportRuStore:
		unavailable, tooMany = pushtest.RuStoreError(http.StatusServiceUnavailable, "UNAVAILABLE", "The service is currently unavailable."),
			pushtest.RuStoreError(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Too many requests.")
	}
	tooMany.Header = http.Header{"Retry-After": {"1"}}
	success := func(d time.Duration) pushtest.FakeAnswer { return pushtest.FakeAnswer{Latency: d} }
	return []pushtest.FakeChoice{
		{Weight: 780, Answer: success(0)},
		{Weight: 80, Answer: success(150 * time.Millisecond)},
		{Weight: 40, Answer: success(400 * time.Millisecond)},
		{Weight: 20, Answer: success(900 * time.Millisecond)},
		{Weight: 40, Answer: unavailable},
		{Weight: 20, Answer: tooMany},
		{Weight: 15, Answer: pushtest.FakeAnswer{Drop: true}},
		{Weight: 5, Answer: success(engineSendTimeout + time.Second)},
	}
}

// run posts notifications until ctx ends, no faster than the workers
// deliver them (at most p.backlog pairs posted and not yet received; a few
// never are: the submissions a fault left unreceived under at-most-once).
func (w *workload) run(ctx context.Context, a *api, f *fake) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // what the fake has received, for the pacing: read as it grows
		defer wg.Done()
		type key struct{ id, transport, token string }
		seen := map[key]bool{}
		var after int64
		for ctx.Err() == nil {
			page, err := f.receivedAfter(ctx, after)
			for _, r := range page {
				after = r.Seq
				w.requests.Add(1)
				if k := (key{r.NotificationID, r.Transport, r.Token}); !seen[k] && !w.deadTokens[r.Token] {
					seen[k] = true
					w.receivedPairs.Add(1)
				}
			}
			if err != nil || len(page) == 0 {
				_ = sleep(ctx, 100*time.Millisecond)
			}
		}
	}()
	for range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				// Awaited: the workers catching up with what was posted.
				if w.expected.Load()-w.receivedPairs.Load() >= int64(w.p.backlog) {
					_ = sleep(ctx, 50*time.Millisecond)
					continue
				}
				w.post(w.next(), a)
			}
		}()
	}
	wg.Wait()
}

// next makes the next notification: its recipients, policy and key.
func (w *workload) next() *notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := len(w.notifications)
	count := 1
	if w.rng.IntN(100) < fanOutPercent {
		count = 2 + w.rng.IntN(7)
	}
	var recipients []string
	for _, j := range w.rng.Perm(len(w.recipients))[:count] {
		recipients = append(recipients, w.recipients[j])
	}
	policy := "resend"
	if w.rng.IntN(2) == 0 {
		policy = "at-most-once"
	}
	key := fmt.Sprintf("chaos-%s-%d-%07d", w.p.driver, w.p.seed, i)
	n := &notification{
		n: Notification{Key: key, Policy: policy, Recipients: recipients},
		body: notificationBody{Recipients: recipients, Type: "chaos", Title: fmt.Sprintf("chaos %d", i),
			Body: "at most once, or say so", Data: map[string]string{"n": fmt.Sprint(i)}, Ambiguity: policy},
	}
	w.notifications = append(w.notifications, n)
	pairs := 0
	for _, r := range recipients {
		pairs += w.devices[r]
	}
	w.expected.Add(int64(pairs))
	return n
}

// post posts a notification, and again as the workload says: a few times at
// once, or once more a moment later. Every POST goes on until it is
// answered 202 (its answer may be lost to an API kill; a retry under the same
// key must replay it).
func (w *workload) post(n *notification, a *api) {
	w.mu.Lock()
	roll, forms := w.rng.IntN(100), w.rng.Uint64()
	delay := time.Duration(100+w.rng.IntN(2900)) * time.Millisecond
	w.mu.Unlock()
	inHeader := func(i int) bool { return forms>>i&1 == 1 }
	switch {
	case roll < concurrentDupsPercent:
		k := 2 + int(forms%2)
		var wg sync.WaitGroup
		for i := range k {
			wg.Add(1)
			w.posts.Add(1)
			go func() {
				defer w.posts.Done()
				defer wg.Done()
				w.postUntilAcked(n, a, inHeader(i+1))
			}()
		}
		wg.Wait()
	case roll < concurrentDupsPercent+laterDupPercent:
		w.posts.Add(1)
		w.postUntilAcked(n, a, inHeader(1))
		w.posts.Done()
		w.posts.Add(1)
		go func() {
			defer w.posts.Done()
			if sleep(w.postCtx, delay) == nil {
				w.postUntilAcked(n, a, inHeader(2))
			}
		}()
	default:
		w.posts.Add(1)
		w.postUntilAcked(n, a, inHeader(1))
		w.posts.Done()
	}
}

// postUntilAcked posts once, and again under the same key while the answer
// says the API or its database is down.
func (w *workload) postUntilAcked(n *notification, a *api, inHeader bool) {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		status, ans, err := a.postOnce(w.postCtx, n.body, n.n.Key, inHeader)
		if w.postCtx.Err() != nil {
			return
		}
		n.mu.Lock()
		n.n.Posts++
		switch {
		case err == nil && status == http.StatusAccepted:
			n.n.Acked = true
			if !slices.Contains(n.n.IDs, ans.ID) {
				n.n.IDs = append(n.n.IDs, ans.ID)
			}
		case err == nil && status == http.StatusConflict:
			n.n.Conflicts++
		}
		n.mu.Unlock()
		switch {
		case err == nil && (status == http.StatusAccepted || status == http.StatusConflict):
			return
		case retryable(status, err):
			if sleep(w.postCtx, delay) != nil {
				return
			}
		default:
			w.mu.Lock()
			w.errs = append(w.errs, fmt.Errorf("POST /v1/notifications (key %s): %d %v", n.n.Key, status, err))
			w.mu.Unlock()
			return
		}
	}
}

// drain waits for every POST still retrying, at most d; those left are
// abandoned (and show as never acknowledged).
func (w *workload) drain(ctx context.Context, d time.Duration) error {
	done := make(chan struct{})
	go func() {
		w.posts.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		w.cancel()
		<-done
	case <-ctx.Done():
		w.cancel()
		<-done
		return ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) > 0 {
		return fmt.Errorf("%d answers the harness did not expect, the first: %w", len(w.errs), w.errs[0])
	}
	return nil
}

// notificationList is a copy of the notifications for the checker.
func (w *workload) notificationList() []Notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Notification, 0, len(w.notifications))
	for _, n := range w.notifications {
		n.mu.Lock()
		c := n.n
		c.IDs = slices.Clone(c.IDs)
		n.mu.Unlock()
		out = append(out, c)
	}
	return out
}

// waitFinal reads every recipient's delivery history until every delivery
// is final (what is awaited: the workers recovering and retrying the last of
// them), or d passes; then it returns the ledger as last read, pending
// deliveries included, for the checker to count as lost.
func (w *workload) waitFinal(ctx context.Context, a *api, d time.Duration) ([]deliveryView, error) {
	deadline := time.Now().Add(d)
	final := map[string][]deliveryView{}
	pending := slices.Clone(w.recipients)
	for round := 0; ; round++ {
		var mu sync.Mutex
		var still []string
		err := inParallel(len(pending), func(i int) error {
			ds, err := a.recipientDeliveries(ctx, pending[i])
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			final[pending[i]] = ds
			if slices.ContainsFunc(ds, func(d deliveryView) bool { return d.Status == "pending" }) {
				still = append(still, pending[i])
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		pending = still
		if len(pending) == 0 || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
	var all []deliveryView
	for _, r := range w.recipients {
		all = append(all, final[r]...)
	}
	return all, nil
}

// inParallel calls fn for every i in [0, n) on up to 8 goroutines and returns
// the first error; once one fails, no new call starts.
func inParallel(n int, fn func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(8)
	var failed atomic.Bool
	for i := 0; i < n && !failed.Load(); i++ {
		g.Go(func() error {
			err := fn(i)
			if err != nil {
				failed.Store(true)
			}
			return err
		})
	}
	return g.Wait()
}
