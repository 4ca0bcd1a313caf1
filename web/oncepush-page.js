// oncepush page helper: subscribe this browser to Web Push and hand the
// subscription to your backend, which registers it with oncepush
// (PUT /v1/recipients/{recipient}/devices, transport "webpush", the
// subscription as the token).
//
//   import { subscribe } from "/web/oncepush-page.js";
//   await subscribe({
//     vapidPublicKey: "BNc…",            // oncepush vapid public key
//     serviceWorker: "/sw.js",           // a module worker that calls listen(self)
//     register: (subscription) =>        // your backend, with your session
//       fetch("/api/push-subscription", {
//         method: "POST",
//         headers: { "Content-Type": "application/json" },
//         body: JSON.stringify(subscription),
//       }),
//   });
//
// The backend, never the page, holds the oncepush API key.

// applicationServerKey turns a base64url VAPID public key into the bytes
// PushManager.subscribe takes.
export function applicationServerKey(base64url) {
  const b64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
  const raw = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    out[i] = raw.charCodeAt(i);
  }
  return out;
}

// activated resolves once the registration has an active worker (which
// navigator.serviceWorker.ready would not do for a page outside its scope).
function activated(registration) {
  return new Promise((resolve) => {
    const w = registration.installing || registration.waiting || registration.active;
    const check = () => {
      if (w.state === "activated") {
        resolve(registration);
      }
    };
    w.addEventListener("statechange", check);
    check();
  });
}

// subscribe asks for permission (call it from a click: browsers refuse a
// prompt without one), registers the service worker, subscribes (or reuses
// the existing subscription) and passes subscription.toJSON() to register.
// It resolves the subscription's JSON; it rejects with an Error saying why
// when push is unsupported or permission is refused.
export async function subscribe({ vapidPublicKey, serviceWorker, scope, register }) {
  if (!("serviceWorker" in navigator) || !("PushManager" in window)) {
    throw new Error("this browser does not support Web Push");
  }
  const permission = await Notification.requestPermission();
  if (permission !== "granted") {
    throw new Error(`notification permission is ${permission}`);
  }
  const registration = await navigator.serviceWorker.register(serviceWorker, { type: "module", scope });
  await activated(registration);
  let sub = await registration.pushManager.getSubscription();
  if (!sub) {
    sub = await registration.pushManager.subscribe({
      userVisibleOnly: true,
      applicationServerKey: applicationServerKey(vapidPublicKey),
    });
  }
  const json = sub.toJSON();
  if (register) {
    await register(json);
  }
  return json;
}
