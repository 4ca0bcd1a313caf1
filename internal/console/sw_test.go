package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
// DevTools handles to push to it and to stop it.
type worker struct {
	t      *testing.T
	ctx    context.Context
	origin string
	id     serviceworker.RegistrationID

	// The running status of each version of every registration, as
	// DevTools last reported it; changed is closed and replaced on each
	// report.
	mu      sync.Mutex
	status  map[string]versionStatus
	changed chan struct{}
	errors  []string
}

type versionStatus struct {
	registration serviceworker.RegistrationID
	running      serviceworker.VersionRunningStatus
}

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
	if _, err := chromedp.Call(ctx, storage.ClearDataForOrigin, storage.ClearDataForOriginParams{Origin: e.url, StorageTypes: "all"}); err != nil {
		t.Fatal(err)
	}
	left := run(t, ctx, chromedp.Evaluate[[]string](`Promise.all([navigator.serviceWorker.getRegistrations(), indexedDB.databases()]).then(([regs, dbs]) =>
		[...regs.map(r => "service worker " + r.scope), ...dbs.map(d => "IndexedDB " + d.name)])`, chromedp.EvalAwaitPromise))
	if len(left) != 0 {
		t.Fatalf("the origin %s still holds %v after its data was cleared", e.url, left)
	}
}

// registerWorker opens a fresh page of the server, grants it notifications,
// and registers /web/sw.js as a module service worker.
func registerWorker(t *testing.T, ctx context.Context, e *env) *worker {
	t.Helper()
	w := &worker{t: t, ctx: ctx, origin: e.url, status: map[string]versionStatus{}, changed: make(chan struct{})}
	registrations := chromedp.Events(ctx, serviceworker.WorkerRegistrationUpdated)
	openFresh(t, ctx, e)
	if err := chromedp.Listen(ctx, func(ev any) {
		if ev, ok := ev.(*serviceworker.EventWorkerErrorReported); ok {
			w.mu.Lock()
			w.errors = append(w.errors, ev.ErrorMessage.ErrorMessage)
			w.mu.Unlock()
		}
		if ev, ok := ev.(*serviceworker.EventWorkerVersionUpdated); ok {
			w.mu.Lock()
			for _, v := range ev.Versions {
				w.status[v.VersionID] = versionStatus{v.RegistrationID, v.RunningStatus}
			}
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, serviceworker.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted, Origin: e.url,
	}); err != nil {
		t.Fatal(err)
	}
	// (navigator.serviceWorker.ready waits for a worker whose scope holds
	// the page, which /healthz is not in: wait for this one's activation.)
	scope := run(t, ctx, chromedp.Evaluate[string](`navigator.serviceWorker.register("/web/sw.js", {type: "module"}).then(reg => new Promise(ok => {
		const w = reg.installing || reg.waiting || reg.active;
		const done = () => w.state === "activated" && ok(reg.scope);
		w.addEventListener("statechange", done);
		done();
	}))`, chromedp.EvalAwaitPromise))
	for ev, err := range registrations {
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ev.Registrations {
			if r.ScopeURL == scope && !r.IsDeleted {
				w.id = r.RegistrationID
			}
		}
		if w.id != "" {
			break
		}
	}
	return w
}

// push delivers a payload as the push service would.
func (w *worker) push(payload string) {
	w.t.Helper()
	if _, err := chromedp.Call(w.ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{
		Origin: w.origin, RegistrationID: w.id, Data: payload,
	}); err != nil {
		w.t.Fatal(err)
	}
}

// stop stops the worker, as the browser does to an idle one, and waits
// until DevTools reports every version of the registration stopped: a push
// delivered while the old worker is still shutting down could be dropped
// with it, and then the test would not be asking what it means to ask (the
// next push starts a fresh worker, which reads the seen-set from disk).
func (w *worker) stop() {
	w.t.Helper()
	if _, err := chromedp.Call(w.ctx, serviceworker.StopAllWorkers, cdp.Empty{}); err != nil {
		w.t.Fatal(err)
	}
	deadline := time.After(waitLimit)
	for {
		w.mu.Lock()
		stopped, seen := true, false
		for _, v := range w.status {
			if v.registration == w.id {
				seen = true
				stopped = stopped && v.running == serviceworker.VersionRunningStatusStopped
			}
		}
		changed, desc := w.changed, fmt.Sprint(w.status)
		w.mu.Unlock()
		if seen && stopped {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			w.t.Fatalf("the service worker did not stop within %v: %s", waitLimit, desc)
		case <-w.ctx.Done():
			w.t.Fatal(w.ctx.Err())
		}
	}
}

// shownJS lists the tags of the notifications shown, sorted, comma-separated.
const shownJS = `navigator.serviceWorker.getRegistration("/web/").then(r => r.getNotifications()).then(ns => ns.map(n => n.tag).sort().join(","))`

// waitShown waits until the notification tagged tag is shown, and returns
// the tags of all that are. The tag's push was delivered with payload: when
// it is not shown within a few seconds it is delivered again, as a push
// service does when a delivery was not acknowledged. (DevTools' delivery to
// the worker drops an event now and then, a few runs in a hundred, with
// the worker running and no error; a second delivery of the same payload is
// what the seen-set exists for, so it changes nothing the test asserts.)
func (w *worker) waitShown(tag, payload string) string {
	w.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for again := 0; ; again++ {
		v, err := chromedp.Run(w.ctx, chromedp.Poll[string](fmt.Sprintf(`(%s).then(tags => tags.split(",").includes(%q) && tags)`, shownJS, tag),
			chromedp.WithPollingTimeout(redeliverAfter), chromedp.WithPollingInterval(10*time.Millisecond)))
		if err == nil {
			if again > 0 {
				w.t.Logf("the notification %s was shown after %d more deliveries", tag, again)
			}
			return v
		}
		if time.Now().After(deadline) {
			shown, _ := chromedp.Run(w.ctx, chromedp.Evaluate[any](`navigator.serviceWorker.getRegistration("/web/").then(r => r.getNotifications()).then(ns => ns.map(n => n.tag))`, chromedp.EvalAwaitPromise))
			w.mu.Lock()
			defer w.mu.Unlock()
			w.t.Fatalf("the notification %s was not shown after %d deliveries in %v: %v (shown %v; worker versions %v, errors %q)",
				tag, again+1, waitLimit, err, shown, w.status, w.errors)
		}
		w.push(payload)
	}
}

// redeliverAfter is how long waitShown waits before it delivers a push
// again.
const redeliverAfter = 3 * time.Second

// dismissAll closes every notification shown, as a user clearing them.
func (w *worker) dismissAll() {
	w.t.Helper()
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
	if got := w.waitShown(idA, a); got != idA {
		t.Fatalf("after A twice: shown %q, want one notification tagged %s", got, idA)
	}
	shown := run(t, ctx, chromedp.Evaluate[map[string]any](
		`navigator.serviceWorker.getRegistration("/web/").then(r => r.getNotifications()).then(ns => ({title: ns[0].title, body: ns[0].body, link: ns[0].data.link, invoice: ns[0].data.data.invoice}))`,
		chromedp.EvalAwaitPromise))
	if shown["title"] != "Invoice inv_2201 paid" || shown["body"] != "Globex paid inv_2201." || shown["link"] != "/invoices/inv_2201" || shown["invoice"] != "inv_2201" {
		t.Errorf("the notification shown: %v", shown)
	}

	// The user dismisses it; the resend arrives later: nothing is shown
	// again. B, pushed after it, is the fence: once B shows, A's push was
	// handled before it.
	w.dismissAll()
	w.push(a)
	w.push(b)
	if got := w.waitShown(idB, b); got != idB {
		t.Errorf("A again after it was dismissed, then B: shown %q, want only %s", got, idB)
	}

	// Two different ids: two notifications.
	w.push(c)
	both := []string{idB, idC}
	slices.Sort(both)
	if got, want := w.waitShown(idC, c), strings.Join(both, ","); got != want {
		t.Errorf("after C: shown %q, want %q", got, want)
	}

	// A worker restarted keeps its seen-set: A, B and C again show nothing.
	w.dismissAll()
	w.stop()
	w.push(a)
	w.push(b)
	w.push(c)
	w.push(d)
	if got := w.waitShown(idD, d); got != idD {
		t.Errorf("after the worker's restart, A, B, C and D: shown %q, want only %s", got, idD)
	}
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
