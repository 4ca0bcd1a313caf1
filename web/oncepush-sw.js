// oncepush service-worker module: show each notification once.
//
// In your service worker (a module worker):
//
//   import { listen } from "/web/oncepush-sw.js";
//   listen(self);
//
// On "push" it reads the payload oncepush's Web Push provider encrypts,
//   {"title", "body", "image", "link", "data", "oncepush_id"},
// and shows it only if its oncepush_id is not in the seen-set: a small
// IndexedDB store that keeps the most recent ids (SEEN_MAX, oldest evicted)
// and survives the worker's restarts. The check and the insert are one
// read-write transaction, so two deliveries of one id racing in the worker
// cannot both be shown. The id is the notification's tag, so a copy that
// gets past the seen-set (site data cleared) replaces the banner instead of
// stacking a second. A click closes the notification and opens its link.
// See docs/clients.md.

export const DB_NAME = "oncepush";
export const STORE = "seen";
export const SEEN_MAX = 500;

let dbPromise = null;

function openDB() {
  if (!dbPromise) {
    dbPromise = new Promise((resolve, reject) => {
      const req = indexedDB.open(DB_NAME, 1);
      req.onupgradeneeded = () => {
        // Ids in the order they were seen: the key is an increasing number,
        // the id is unique.
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

// firstSight records id in the seen-set and resolves true, or resolves
// false if it was there already. One transaction: check, insert, evict.
export async function firstSight(id) {
  const db = await openDB();
  return new Promise((resolve, reject) => {
    const tx = db.transaction(STORE, "readwrite");
    const store = tx.objectStore(STORE);
    let fresh = false;
    const found = store.index("id").getKey(id);
    found.onsuccess = () => {
      if (found.result !== undefined) {
        return;
      }
      fresh = true;
      store.add({ id });
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
    };
    tx.oncomplete = () => resolve(fresh);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

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

// show displays msg unless its oncepush_id was seen; it resolves whether
// it showed it. A message without an id cannot be deduplicated and is shown.
export async function show(registration, msg) {
  const id = typeof msg.oncepush_id === "string" ? msg.oncepush_id : "";
  if (id !== "" && !(await firstSight(id))) {
    return false;
  }
  const options = {
    body: msg.body || "",
    data: { oncepush_id: id, link: msg.link || "", data: msg.data || {} },
  };
  if (id !== "") {
    options.tag = id;
  }
  if (msg.image) {
    options.image = msg.image;
  }
  await registration.showNotification(msg.title || "", options);
  return true;
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
