// A service worker that shows oncepush's notifications once, for a site
// that has no worker of its own. Register it as a module:
//
//   navigator.serviceWorker.register("/web/sw.js", { type: "module" });
//
// A site with its own worker imports oncepush-sw.js and calls listen(self).
import { listen } from "./oncepush-sw.js";

listen(self);
