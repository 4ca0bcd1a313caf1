// oncepush service-worker module: show each notification once.
//
// In your service worker (a module worker):
//
//   import { listen } from "/web/oncepush-sw.js";
//   listen(self);
//
// On "push" it reads the payload oncepush's Web Push provider encrypts,
//   {"title", "body", "image", "link", "data", "oncepush_id"},
// and shows it unless its oncepush_id was shown already. The ids live in a
// small IndexedDB store (SEEN_MAX most recent, oldest evicted) that survives
// the worker's restarts, each marked "showing" while a copy is being shown
// and "shown" once showNotification() resolved:
//
//   - an id is recorded as shown only after it was shown, so a copy whose
//     show failed (permission withdrawn, the worker killed before it could
//     show) leaves nothing behind, and the next copy shows it;
//   - a copy that finds its id being shown by another copy waits for that
//     one to finish, then shows it only if that one failed. Copies in one
//     worker wait on each other in memory; a mark left by another worker
//     (an old version still finishing its events, or one killed mid-show)
//     is waited for until its lease (settings.showingLeaseMs) runs out.
//
// The id is the notification's tag, so the one copy that can show twice —
// its worker killed after the notification was displayed and before the
// store said so — replaces the banner while it is still on screen instead
// of stacking a second. A click closes the notification and opens its link.
// See docs/clients.md.

export const DB_NAME = "oncepush";
export const STORE = "seen";
export const SEEN_MAX = 500;

// settings may be changed before the first push is handled.
export const settings = {
  // showingLeaseMs is how long a "showing" mark of another worker holds
  // back a copy of its id: far longer than a show takes, short enough that
  // a mark left by a killed worker does not keep its notification from the
  // next copy for long.
  showingLeaseMs: 10000,
};
// WAIT_POLL_MS is how often a copy held back by another worker's mark reads
// the store again.
const WAIT_POLL_MS = 50;

// testHooks lets the kit's tests see the moments they wait for: waiting(id)
// is called when a copy starts waiting for another copy of its id.
export const testHooks = {};

// This worker's name in the marks it writes, to tell its own from another's.
const INSTANCE = typeof crypto !== "undefined" && crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2);

let dbPromise = null;

function openDB() {
  if (!dbPromise) {
    dbPromise = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB_NAME, 1);
      req.onupgradeneeded = () => {
        // Ids in the order they were first seen: the key is an increasing
        // number, the id is unique. A record is {id, state, owner, until}; a
        // record without a state (written by an older kit) means shown.
        const store = req.result.createObjectStore(STORE, { autoIncrement: true });
        store.createIndex("id", "id", { unique: true });
      };
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => {
        dbPromise = null;
        reject(req.error);
      };
    });
  }
  return dbPromise;
}

// update runs fn(store, tx) in one read-write transaction on the store and
// resolves what fn last set as the transaction's result, once it committed.
async function update(fn) {
  const db = await openDB();
  return new Promise((resolve, reject) => {
    const tx = db.transaction(STORE, "readwrite");
    const result = { value: undefined };
    fn(tx.objectStore(STORE), result);
    tx.oncomplete = () => resolve(result.value);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

// withRecord reads id's record (and its key) in the transaction and hands
// both to fn; record is undefined when the id is not in the store.
function withRecord(store, id, fn) {
  const found = store.index("id").getKey(id);
  found.onsuccess = () => {
    const key = found.result;
    if (key === undefined) {
      fn(undefined, undefined);
      return;
    }
    const got = store.get(key);
    got.onsuccess = () => fn(got.result, key);
  };
}

// claim decides, in one transaction, what a copy of id does: "shown" (show
// nothing), "mine" (the copy marked it showing and shows it), or a number,
// the milliseconds until another worker's mark runs out (wait, then ask
// again). A new id's mark evicts the oldest ids beyond SEEN_MAX.
function claim(id) {
  return update((store, result) => {
    withRecord(store, id, (rec, key) => {
      const now = Date.now();
      if (rec && (rec.state === undefined || rec.state === "shown")) {
        result.value = "shown";
        return;
      }
      // A mark whose lease ends implausibly far ahead was written before
      // the clock went back: treat it as run out.
      if (rec && rec.owner !== INSTANCE && rec.until > now && rec.until - now <= settings.showingLeaseMs) {
        result.value = rec.until - now;
        return;
      }
      const mark = { id, state: "showing", owner: INSTANCE, until: now + settings.showingLeaseMs };
      result.value = "mine";
      if (key !== undefined) {
        store.put(mark, key); // a mark of a worker that is gone: taken over
        return;
      }
      store.add(mark);
      evict(store);
    });
  });
}

// evict deletes the oldest ids beyond SEEN_MAX.
function evict(store) {
  const count = store.count();
  count.onsuccess = () => {
    let extra = count.result - SEEN_MAX;
    if (extra <= 0) {
      return;
    }
    // The oldest ids have the smallest keys.
    const cursor = store.openCursor();
    cursor.onsuccess = () => {
      const c = cursor.result;
      if (c && extra > 0) {
        c.delete();
        extra--;
        c.continue();
      }
    };
  };
}

// settle ends this worker's mark on id: shown, or (after a failed show)
// removed, so that the next copy shows it. A mark another worker took over
// meanwhile is left to it.
function settle(id, shown) {
  return update((store) => {
    withRecord(store, id, (rec, key) => {
      if (!rec || rec.owner !== INSTANCE || rec.state !== "showing") {
        return;
      }
      if (shown) {
        store.put({ id, state: "shown" }, key);
      } else {
        store.delete(key);
      }
    });
  });
}

// showing holds, per id, the copy this worker is showing or deciding on:
// a later copy of the id waits for it, then decides for itself.
const showing = new Map();

// once runs fn for id after every earlier call for id has finished.
function once(id, fn) {
  const earlier = showing.get(id);
  if (earlier) {
    call(testHooks.waiting, id);
  }
  const mine = (earlier || Promise.resolve()).then(() => {}, () => {}).then(fn);
  const done = mine.then(() => {}, () => {});
  showing.set(id, done);
  done.then(() => {
    if (showing.get(id) === done) {
      showing.delete(id);
    }
  });
  return mine;
}

function call(hook, ...args) {
  if (typeof hook === "function") {
    hook(...args);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// parse reads a push event's payload; null when it is not oncepush's JSON.
export function parse(event) {
  if (!event.data) {
    return null;
  }
  try {
    const msg = event.data.json();
    return msg && typeof msg === "object" ? msg : null;
  } catch {
    return null;
  }
}

// show displays msg unless its oncepush_id was shown already; it resolves
// whether it showed it, and rejects when showNotification() did (the id is
// then left for the next copy). A message without an id cannot be
// deduplicated and is shown.
export async function show(registration, msg) {
  const id = typeof msg.oncepush_id === "string" ? msg.oncepush_id : "";
  const options = {
    body: msg.body || "",
    data: { oncepush_id: id, link: msg.link || "", data: msg.data || {} },
  };
  if (msg.image) {
    options.image = msg.image;
  }
  if (id === "") {
    await registration.showNotification(msg.title || "", options);
    return true;
  }
  options.tag = id;
  return once(id, async () => {
    for (let waited = false; ; ) {
      const c = await claim(id);
      if (c === "shown") {
        return false;
      }
      if (c === "mine") {
        break;
      }
      if (!waited) {
        waited = true;
        call(testHooks.waiting, id);
      }
      await sleep(Math.min(c, WAIT_POLL_MS));
    }
    try {
      await registration.showNotification(msg.title || "", options);
    } catch (err) {
      await settle(id, false);
      throw err;
    }
    await settle(id, true);
    return true;
  });
}

// open focuses or opens the notification's link (a path on the site).
export async function open(worker, notification) {
  notification.close();
  const link = notification.data && notification.data.link;
  if (!link) {
    return;
  }
  const url = new URL(link, worker.location.origin).href;
  const windows = await worker.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const w of windows) {
    if (w.url === url && "focus" in w) {
      return w.focus();
    }
  }
  return worker.clients.openWindow(url);
}

// listen installs the push and click handlers on a service worker's global
// scope (self). Call it while the worker's script is first evaluated.
export function listen(worker) {
  worker.addEventListener("push", (event) => {
    const msg = parse(event);
    if (msg) {
      event.waitUntil(show(worker.registration, msg));
    }
  });
  worker.addEventListener("notificationclick", (event) => {
    event.waitUntil(open(worker, event.notification));
  });
}
