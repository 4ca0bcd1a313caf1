package console_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/backgroundservice"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"

	"github.com/oncepush/oncepush"
)

// pushPayloads sends one notification per key to a Web Push device and
// returns what the fake push service decrypted for each, in the keys' order: the
// exact plaintext the Web Push provider writes, which the service worker
// reads with event.data.json().
func pushPayloads(t *testing.T, e *env, keys ...string) []string {
	t.Helper()
	e.register("u_web", oncepush.TransportWebPush, e.fake.NewWebPushSubscription())
	for _, k := range keys {
		e.send([]string{"u_web"}, oncepush.Message{
			Type: "invoice.paid", Title: "Invoice " + k + " paid", Body: "Globex paid " + k + ".", Link: "/invoices/" + k,
			Data: map[string]any{"invoice": k},
		}, &oncepush.SendOptions{DedupKey: "invoice.paid:" + k})
	}
	e.drain()
	reqs := e.fake.RequestsFor(oncepush.TransportWebPush)
	if len(reqs) != len(keys) {
		t.Fatalf("the fake push service received %d requests, want %d", len(reqs), len(keys))
	}
	// Sent concurrently: the requests are matched to the keys by link.
	byLink := map[string]string{}
	for _, r := range reqs {
		var msg struct {
			OncepushID string `json:"oncepush_id"`
			Link       string `json:"link"`
		}
		if err := json.Unmarshal(r.Payload, &msg); err != nil || msg.OncepushID == "" {
			t.Fatalf("payload %s (%v); want an oncepush_id", r.Payload, err)
		}
		byLink[msg.Link] = string(r.Payload)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		if out[i] = byLink["/invoices/"+k]; out[i] == "" {
			t.Fatalf("no payload links to /invoices/%s: %v", k, byLink)
		}
	}
	return out
}

// worker is the web kit's service worker registered in a tab, with the
// DevTools handles to push to it, to stop it, and to hear what the browser
// did with each push.
type worker struct {
	t      *testing.T
	ctx    context.Context
	origin string

	// What DevTools last reported; changed is closed and replaced on each
	// report, so a wait can block until the next one.
	mu      sync.Mutex
	changed chan struct{}
	id      serviceworker.RegistrationID
	scopes  map[string]serviceworker.RegistrationID // registrations not deleted, by scope
	status  map[string]versionStatus                // by version id
	errors  []string
	// The services of the BackgroundService domain that record events.
	recording map[backgroundservice.ServiceName]bool
	// pushed counts the deliveries sent; completed holds the status of each
	// push event the browser reports finished (dispatched to the worker, and
	// the promise the worker gave waitUntil settled), and displayed the tag
	// of each notification it reports displayed, in order, for this
	// registration.
	pushed    int
	completed []string
	displayed []string
}

type versionStatus struct {
	registration serviceworker.RegistrationID
	running      serviceworker.VersionRunningStatus
}

// Chromium's names for the BackgroundService events the worker counts.
const (
	pushCompleted        = "Push event completed"
	notificationShown    = "Notification displayed"
	pushCompletedSuccess = "Success"
)

// openFresh opens a page of the server, with nothing left in the browser
// from an earlier test at the same origin. The package's tests share one
// browser profile, and an origin is 127.0.0.1 and the port the kernel gave
// the test's server: a later test can get a port an earlier one had, and
// then its page finds that test's service worker and seen-set, which holds
// this test's ids (they are derived from the dedup keys, so they are the
// same in every run), and the first push is, rightly, not shown.
func openFresh(t *testing.T, ctx context.Context, e *env) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(e.url+"/healthz"))
	call(t, ctx, "clear the origin's data", storage.ClearDataForOrigin, storage.ClearDataForOriginParams{Origin: e.url, StorageTypes: "all"})
	left := run(t, ctx, chromedp.Evaluate[[]string](`Promise.all([navigator.serviceWorker.getRegistrations(), indexedDB.databases()]).then(([regs, dbs]) =>
		[...regs.map(r => "service worker " + r.scope), ...dbs.map(d => "IndexedDB " + d.name)])`, chromedp.EvalAwaitPromise))
	if len(left) != 0 {
		t.Fatalf("the origin %s still holds %v after its data was cleared", e.url, left)
	}
}

// registerWorker opens a page of the server, grants it notifications,
// registers /web/sw.js as a module service worker, and has the browser
// report the push events it dispatches to it and the notifications shown.
func registerWorker(t *testing.T, ctx context.Context, e *env) *worker {
	t.Helper()
	w := &worker{t: t, ctx: ctx, origin: e.url, changed: make(chan struct{}),
		scopes: map[string]serviceworker.RegistrationID{}, status: map[string]versionStatus{},
		recording: map[backgroundservice.ServiceName]bool{}}
	openFresh(t, ctx, e)
	if err := chromedp.Listen(ctx, w.listen); err != nil {
		t.Fatal(err)
	}
	call(t, ctx, "enable the ServiceWorker domain", serviceworker.Enable, cdp.Empty{})
	bctx, cancel := bounded(ctx)
	defer cancel()
	if _, err := chromedp.CallBrowser(bctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted, Origin: e.url,
	}); err != nil {
		t.Fatalf("grant notifications: %v", boundedErr(bctx, err))
	}
	// (navigator.serviceWorker.ready waits for a worker whose scope holds
	// the page, which /healthz is not in: wait for this one's activation.)
	scope := run(t, ctx, chromedp.Evaluate[string](`navigator.serviceWorker.register("/web/sw.js", {type: "module"}).then(reg => new Promise((ok, fail) => {
		const w = reg.installing || reg.waiting || reg.active;
		const done = () => {
			if (w.state === "activated") ok(reg.scope);
			if (w.state === "redundant") fail(new Error("the service worker became redundant: it failed to install or activate"));
		};
		w.addEventListener("statechange", done);
		done();
	}))`, chromedp.EvalAwaitPromise))
	w.await("DevTools to report the registration of "+scope, func() bool {
		w.id = w.scopes[scope]
		return w.id != ""
	})
	// The browser records these events only while DevTools has asked it
	// to; wait until it says it does, or the first push could go unheard.
	services := []backgroundservice.ServiceName{backgroundservice.ServiceNamePushMessaging, backgroundservice.ServiceNameNotifications}
	for _, s := range services {
		call(t, ctx, "observe "+string(s), backgroundservice.StartObserving, backgroundservice.StartObservingParams{Service: s})
		call(t, ctx, "record "+string(s), backgroundservice.SetRecording, backgroundservice.SetRecordingParams{ShouldRecord: true, Service: s})
	}
	w.await("the browser to record push and notification events", func() bool {
		return w.recording[services[0]] && w.recording[services[1]]
	})
	return w
}

// listen takes in DevTools' reports on the worker; it runs on the tab's
// reading goroutine.
func (w *worker) listen(ev any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev := ev.(type) {
	case *serviceworker.EventWorkerRegistrationUpdated:
		for _, r := range ev.Registrations {
			if r.IsDeleted {
				delete(w.scopes, r.ScopeURL)
			} else {
				w.scopes[r.ScopeURL] = r.RegistrationID
			}
		}
	case *serviceworker.EventWorkerVersionUpdated:
		for _, v := range ev.Versions {
			w.status[v.VersionID] = versionStatus{v.RegistrationID, v.RunningStatus}
		}
	case *serviceworker.EventWorkerErrorReported:
		w.errors = append(w.errors, ev.ErrorMessage.ErrorMessage)
	case *backgroundservice.EventRecordingStateChanged:
		w.recording[ev.Service] = ev.IsRecording
	case *backgroundservice.EventBackgroundServiceEventReceived:
		// Events of other registrations, and those stored from earlier
		// tests, which StartObserving replays, are not this worker's.
		b := ev.BackgroundServiceEvent
		if w.id == "" || b.ServiceWorkerRegistrationID != w.id {
			return
		}
		switch {
		case b.Service == backgroundservice.ServiceNamePushMessaging && b.EventName == pushCompleted:
			status := "(no status)"
			for _, m := range b.EventMetadata {
				if m.Key == "Status" {
					status = m.Value
				}
			}
			w.completed = append(w.completed, status)
		case b.Service == backgroundservice.ServiceNameNotifications && b.EventName == notificationShown:
			w.displayed = append(w.displayed, b.InstanceID)
		default:
			return
		}
	default:
		return
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// await waits until cond, which runs with w.mu held, holds; it is checked
// again on each report from DevTools. It fails the test, saying what it
// waited for and what DevTools reported, after waitLimit.
func (w *worker) await(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok, changed := cond(), w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			w.mu.Lock()
			defer w.mu.Unlock()
			w.t.Fatalf("waited %v for %s: registration %q, versions %v, worker errors %q, pushes delivered %d, completed %q, notifications displayed %q",
				waitLimit, what, w.id, w.status, w.errors, w.pushed, w.completed, w.displayed)
		case <-w.ctx.Done():
			w.t.Fatal(w.ctx.Err())
		}
	}
}

// push delivers a payload as the push service would.
func (w *worker) push(payload string) {
	w.t.Helper()
	w.mu.Lock()
	w.pushed++
	w.mu.Unlock()
	call(w.t, w.ctx, "deliver a push", serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{
		Origin: w.origin, RegistrationID: w.id, Data: payload,
	})
}

// settle waits until the browser reports every push delivered so far
// handled, and fails unless each succeeded: a promise the worker gave
// waitUntil that rejected (an IndexedDB error, showNotification refused)
// is otherwise silent.
func (w *worker) settle() {
	w.t.Helper()
	w.await("every push delivered to be handled", func() bool { return len(w.completed) >= w.pushed })
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, s := range w.completed {
		if s != pushCompletedSuccess {
			w.t.Fatalf("push event %d of %d completed with %q, want %q (worker errors %q)", i+1, len(w.completed), s, pushCompletedSuccess, w.errors)
		}
	}
}

// stop stops the worker, as the browser does to an idle one, and waits
// until DevTools reports every version of the registration stopped: a push
// delivered while the old worker is still shutting down could be dropped
// with it, and then the test would not be asking what it means to ask (the
// next push starts a fresh worker, which reads the seen-set from disk).
func (w *worker) stop() {
	w.t.Helper()
	call(w.t, w.ctx, "stop the service workers", serviceworker.StopAllWorkers, cdp.Empty{})
	w.await("the service worker to stop", func() bool {
		seen := false
		for _, v := range w.status {
			if v.registration == w.id {
				seen = true
				if v.running != serviceworker.VersionRunningStatusStopped {
					return false
				}
			}
		}
		return seen
	})
}

// shown waits until every push delivered so far is handled, then lists
// the tags of the notifications on display, sorted, comma-separated.
//
// It reads them once, and only when no push is being handled. Chromium's
// getNotifications() deletes from its notification database each record
// that the platform does not list as displayed when the call asks it, and
// a call that begins while a showNotification() is under way (its record
// written, the platform not yet told) deletes the new one: Chromium reports
// it "Notification displayed", the worker's promise resolves, and
// getNotifications() never lists it again. Polling getNotifications()
// while the pushes were handled did that in about one run in ten, and as
// the id was by then rightly in the seen-set, no later delivery showed it.
func (w *worker) shown() string {
	w.t.Helper()
	w.settle()
	return run(w.t, w.ctx, chromedp.Evaluate[string](shownJS, chromedp.EvalAwaitPromise))
}

// shownJS lists the tags of the notifications shown, sorted, comma-separated.
const shownJS = `navigator.serviceWorker.getRegistration("/web/").then(r => r.getNotifications()).then(ns => ns.map(n => n.tag).sort().join(","))`

// wantDisplayed checks that the browser displayed a notification for
// exactly these tags, once each, in this order, since the worker was
// registered: the replacement of a banner by one with the same tag would
// hide a second showing from getNotifications(), not from this.
func (w *worker) wantDisplayed(when string, tags ...string) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Equal(w.displayed, tags) {
		w.t.Errorf("%s: notifications displayed %q, want %q", when, w.displayed, tags)
	}
}

// dismissAll closes every notification shown, as a user clearing them.
// (It polls getNotifications(), which is safe here: no push is being
// handled, see shown.)
func (w *worker) dismissAll() {
	w.t.Helper()
	w.settle()
	until[bool](w.t, w.ctx, `navigator.serviceWorker.getRegistration("/web/").then(r => r.getNotifications()).then(ns => { ns.forEach(n => n.close()); return ns.length === 0; })`)
}

func idOf(t *testing.T, payload string) string {
	t.Helper()
	var m struct {
		ID string `json:"oncepush_id"`
	}
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// TestServiceWorkerShowsEachNotificationOnce: the same push twice shows one
// notification, even after the first was dismissed (which a tag alone
// would not prevent); two ids show two; the seen-set survives the worker's
// restart.
func TestServiceWorkerShowsEachNotificationOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	payloads := pushPayloads(t, e, "inv_2201", "inv_2202", "inv_2203", "inv_2204")
	a, b, c, d := payloads[0], payloads[1], payloads[2], payloads[3]
	idA, idB, idC, idD := idOf(t, a), idOf(t, b), idOf(t, c), idOf(t, d)
	ctx := tab(t)
	w := registerWorker(t, ctx, e)

	// The payload arrives twice at once (a resend racing the first).
	w.push(a)
	w.push(a)
	if got := w.shown(); got != idA {
		t.Fatalf("after A twice: shown %q, want one notification tagged %s", got, idA)
	}
	w.wantDisplayed("after A twice", idA)
	shown := run(t, ctx, chromedp.Evaluate[map[string]any](
		`navigator.serviceWorker.getRegistration("/web/").then(r => r.getNotifications()).then(ns => ({title: ns[0].title, body: ns[0].body, link: ns[0].data.link, invoice: ns[0].data.data.invoice}))`,
		chromedp.EvalAwaitPromise))
	if shown["title"] != "Invoice inv_2201 paid" || shown["body"] != "Globex paid inv_2201." || shown["link"] != "/invoices/inv_2201" || shown["invoice"] != "inv_2201" {
		t.Errorf("the notification shown: %v", shown)
	}

	// The user dismisses it; the resend arrives later: nothing is shown
	// again.
	w.dismissAll()
	w.push(a)
	w.push(b)
	if got := w.shown(); got != idB {
		t.Errorf("A again after it was dismissed, then B: shown %q, want only %s", got, idB)
	}
	w.wantDisplayed("A again after it was dismissed, then B", idA, idB)

	// Two different ids: two notifications.
	w.push(c)
	both := []string{idB, idC}
	slices.Sort(both)
	if got, want := w.shown(), strings.Join(both, ","); got != want {
		t.Errorf("after C: shown %q, want %q", got, want)
	}
	w.wantDisplayed("after C", idA, idB, idC)

	// A worker restarted keeps its seen-set: A, B and C again show nothing.
	w.dismissAll()
	w.stop()
	w.push(a)
	w.push(b)
	w.push(c)
	w.push(d)
	if got := w.shown(); got != idD {
		t.Errorf("after the worker's restart, A, B, C and D: shown %q, want only %s", got, idD)
	}
	w.wantDisplayed("after the worker's restart, A, B, C and D", idA, idB, idC, idD)
}

// TestSeenSetIsBounded: the seen-set keeps the SEEN_MAX most recent ids,
// evicting the oldest, so it never grows past its bound.
func TestSeenSetIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := tab(t)
	openFresh(t, ctx, e)
	got := run(t, ctx, chromedp.Evaluate[string](`(async () => {
		const m = await import("/web/oncepush-sw.js");
		for (let i = 0; i < m.SEEN_MAX + 5; i++) {
			if (!(await m.firstSight("id-" + i))) return "id-" + i + " was taken for seen";
		}
		if (await m.firstSight("id-" + (m.SEEN_MAX + 4))) return "the newest id was forgotten";
		const db = await new Promise((ok, fail) => { const r = indexedDB.open(m.DB_NAME); r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
		const n = await new Promise(ok => { const q = db.transaction(m.STORE).objectStore(m.STORE).count(); q.onsuccess = () => ok(q.result); });
		if (n !== m.SEEN_MAX) return "the set holds " + n + ", want " + m.SEEN_MAX;
		// id-0 was evicted: it counts as new again.
		return (await m.firstSight("id-0")) ? "ok" : "the oldest id was kept";
	})()`, chromedp.EvalAwaitPromise))
	if got != "ok" {
		t.Error(got)
	}
}

// call sends one DevTools command to the tab, failing the test, saying what
// it was for, on an error or when the browser has not answered after
// waitLimit.
func call[P, R any](t *testing.T, ctx context.Context, what string, cmd cdp.Command[P, R], params P) R {
	t.Helper()
	ctx, cancel := bounded(ctx)
	defer cancel()
	r, err := chromedp.Call(ctx, cmd, params)
	if err != nil {
		t.Fatalf("%s: %v", what, boundedErr(ctx, err))
	}
	return r
}
