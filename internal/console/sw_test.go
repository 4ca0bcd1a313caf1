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
	// checked is how many of completed settle has checked.
	checked int
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
	w.setPermission(browser.PermissionSettingGranted)
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
	w.settleAs(true)
}

// settleFailed waits until the browser reports every push delivered so far
// handled, and fails unless each one since the last settle failed: the
// promise the worker gave waitUntil rejected.
func (w *worker) settleFailed() {
	w.t.Helper()
	w.settleAs(false)
}

func (w *worker) settleAs(success bool) {
	w.t.Helper()
	w.await("every push delivered to be handled", func() bool { return len(w.completed) >= w.pushed })
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := w.checked; i < len(w.completed); i++ {
		if s := w.completed[i]; (s == pushCompletedSuccess) != success {
			want := "status " + pushCompletedSuccess
			if !success {
				want = "a failure"
			}
			w.t.Fatalf("push event %d of %d completed with %q, want %s (worker errors %q)", i+1, len(w.completed), s, want, w.errors)
		}
	}
	w.checked = len(w.completed)
}

// setPermission grants or denies the page's origin notifications.
func (w *worker) setPermission(setting browser.PermissionSetting) {
	w.t.Helper()
	ctx, cancel := bounded(w.ctx)
	defer cancel()
	if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: setting, Origin: w.origin,
	}); err != nil {
		w.t.Fatalf("set the notification permission %s: %v", setting, boundedErr(ctx, err))
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
// evicting the oldest, so it never grows past its bound. (In a page, with
// the kit imported and a registration whose showNotification() only counts.)
func TestSeenSetIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := tab(t)
	openFresh(t, ctx, e)
	got := run(t, ctx, chromedp.Evaluate[string](`(async () => {
		const m = await import("/web/oncepush-sw.js");
		const shown = [];
		const reg = { showNotification: async (title, opts) => { shown.push(opts.tag); } };
		const show = (id) => m.show(reg, { oncepush_id: id, title: id });
		for (let i = 0; i < m.SEEN_MAX + 5; i++) {
			if (!(await show("id-" + i))) return "id-" + i + " was taken for shown";
		}
		if (await show("id-" + (m.SEEN_MAX + 4))) return "the newest id was forgotten";
		const db = await new Promise((ok, fail) => { const r = indexedDB.open(m.DB_NAME); r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
		const n = await new Promise(ok => { const q = db.transaction(m.STORE).objectStore(m.STORE).count(); q.onsuccess = () => ok(q.result); });
		if (n !== m.SEEN_MAX) return "the set holds " + n + ", want " + m.SEEN_MAX;
		if (shown.length !== m.SEEN_MAX + 5) return shown.length + " shows, want " + (m.SEEN_MAX + 5);
		// id-0 was evicted: it counts as new again.
		return (await show("id-0")) ? "ok" : "the oldest id was kept";
	})()`, chromedp.EvalAwaitPromise))
	if got != "ok" {
		t.Error(got)
	}
}

// TestServiceWorkerShowsAfterAFailedShow: a copy whose show fails (the
// notification permission withdrawn meanwhile) leaves its id unrecorded, so
// the next copy shows it; once shown, a further copy shows nothing. In the
// worker, from what Chromium reports.
func TestServiceWorkerShowsAfterAFailedShow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := pushPayloads(t, e, "inv_3301")[0]
	idA := idOf(t, a)
	ctx := tab(t)
	w := registerWorker(t, ctx, e)

	w.setPermission(browser.PermissionSettingDenied)
	w.push(a)
	w.settleFailed()
	w.wantDisplayed("A while notifications were denied")

	w.setPermission(browser.PermissionSettingGranted)
	w.push(a)
	if got := w.shown(); got != idA {
		t.Fatalf("A again once notifications were granted: shown %q, want %s", got, idA)
	}
	w.wantDisplayed("A again once notifications were granted", idA)

	w.dismissAll()
	w.push(a)
	if got := w.shown(); got != "" {
		t.Errorf("A after it was shown and dismissed: shown %q, want nothing", got)
	}
	w.wantDisplayed("A after it was shown and dismissed", idA)
}

// kitCopiesJS drives the kit's show() in a page, with a registration whose
// showNotification() the script holds and settles, and with marks of other
// workers written straight into the store. It waits only for what the kit
// does — showNotification() called, a copy reporting that it waits
// (testHooks.waiting), a show() settling — never for time, and returns "ok"
// or what went wrong.
const kitCopiesJS = `(async () => {
	const m = await import("/web/oncepush-sw.js");
	const hooks = m.testHooks || {};
	if (m.settings) m.settings.showingLeaseMs = 10 * 60 * 1000; // no mark runs out while the script runs

	// A registration whose shows are held until the script settles them.
	const calls = [], held = [];
	let onCall = null;
	const reg = { showNotification: (title, opts) => new Promise((resolve, reject) => {
		calls.push(opts.tag);
		held.push({ resolve, reject });
		if (onCall) { const f = onCall; onCall = null; f(); }
	}) };
	const called = () => new Promise(ok => { onCall = ok; });
	const waits = () => new Promise(ok => { hooks.waiting = id => { hooks.waiting = null; ok(id); }; });
	// The first of: the copy reports that it waits, or it settles (it did not wait).
	const waitsOrEnds = (w, p) => Promise.race([w.then(id => "waits " + id), p.then(v => "ended with " + v, e => "failed: " + e)]);
	const msg = id => ({ oncepush_id: id, title: "title " + id });

	// 1. Two copies at once; the first's show fails: the second shows it,
	// and only after the first failed.
	let first = called();
	const a1 = m.show(reg, msg("A"));
	await first;
	let w = waits();
	const a2 = m.show(reg, msg("A"));
	let r = await waitsOrEnds(w, a2);
	if (r !== "waits A") return "a copy of A arriving while another was being shown: " + r + ", want it to wait";
	if (calls.length !== 1) return "shows " + calls + " while the first copy of A was being shown";
	const second = called();
	held[0].reject(new TypeError("no permission"));
	if ((await a1.then(() => "resolved", () => "rejected")) !== "rejected") return "the failed show of A resolved";
	await second;
	held[1].resolve();
	if ((await a2) !== true) return "the copy of A that waited for a failed show did not show it";
	if ((await m.show(reg, msg("A"))) !== false || calls.length !== 2) return "A shown again after it was shown: " + calls;

	// 2. Two copies at once; the first's show succeeds: the second shows nothing.
	first = called();
	const b1 = m.show(reg, msg("B"));
	await first;
	w = waits();
	const b2 = m.show(reg, msg("B"));
	r = await waitsOrEnds(w, b2);
	if (r !== "waits B") return "a copy of B arriving while another was being shown: " + r + ", want it to wait";
	held[2].resolve();
	if ((await b1) !== true || (await b2) !== false) return "two copies of B";
	if (calls.filter(t => t === "B").length !== 1) return "B shown " + calls.filter(t => t === "B").length + " times";

	// Marks of other workers, written as they would write them.
	const db = await new Promise((ok, fail) => { const q = indexedDB.open(m.DB_NAME); q.onsuccess = () => ok(q.result); q.onerror = () => fail(q.error); });
	const write = fn => new Promise((ok, fail) => {
		const tx = db.transaction(m.STORE, "readwrite"), store = tx.objectStore(m.STORE);
		const k = id => new Promise(done => { const q = store.index("id").getKey(id); q.onsuccess = () => done(q.result); });
		fn(store, k);
		tx.oncomplete = ok; tx.onerror = () => fail(tx.error);
	});
	const mark = rec => write((store, k) => k(rec.id).then(key => key === undefined ? store.add(rec) : store.put(rec, key)));
	const unmark = id => write((store, k) => k(id).then(key => key !== undefined && store.delete(key)));
	const auto = { shown: [], showNotification: async (title, opts) => { auto.shown.push(opts.tag); } };

	// 3. A worker killed while showing C left its mark; its lease is over:
	// the next copy shows C.
	await mark({ id: "C", state: "showing", owner: "a worker that was killed", until: Date.now() - 1 });
	if ((await m.show(auto, msg("C"))) !== true || auto.shown.join() !== "C") return "C, marked by a killed worker: shown " + auto.shown;

	// 4. Another worker is showing D: the copy waits, and shows nothing once
	// the other has shown it.
	await mark({ id: "D", state: "showing", owner: "another worker", until: Date.now() + 5 * 60 * 1000 });
	w = waits();
	const d = m.show(auto, msg("D"));
	r = await waitsOrEnds(w, d);
	if (r !== "waits D") return "a copy of D while another worker was showing it: " + r + ", want it to wait";
	await mark({ id: "D", state: "shown" });
	if ((await d) !== false || auto.shown.includes("D")) return "D shown by the waiting copy too";

	// 5. Another worker is showing E and fails: the waiting copy shows E.
	await mark({ id: "E", state: "showing", owner: "another worker", until: Date.now() + 5 * 60 * 1000 });
	w = waits();
	const e = m.show(auto, msg("E"));
	r = await waitsOrEnds(w, e);
	if (r !== "waits E") return "a copy of E while another worker was showing it: " + r + ", want it to wait";
	await unmark("E");
	if ((await e) !== true || !auto.shown.includes("E")) return "E not shown after the other worker's show failed";
	return "ok";
})()`

// TestServiceWorkerKitWaitsForTheCopyBeingShown: a copy of an id that
// another copy is showing — in the same worker, or in another worker (an
// old version still finishing its events) — waits for it and shows the
// notification only if that show failed; a mark left by a worker killed
// mid-show holds copies back only until its lease runs out.
func TestServiceWorkerKitWaitsForTheCopyBeingShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := tab(t)
	openFresh(t, ctx, e)
	if got := run(t, ctx, chromedp.Evaluate[string](kitCopiesJS, chromedp.EvalAwaitPromise)); got != "ok" {
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
