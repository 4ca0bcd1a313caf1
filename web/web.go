// Package web is oncepush's web client kit: plain JavaScript modules, with
// no framework and no build step, that a site uses to receive Web Push
// notifications and show each one once.
//
//   - oncepush-page.js: subscribe() asks for permission, registers the
//     service worker and subscribes with the server's VAPID public key, and
//     hands the subscription to the site's own backend.
//   - oncepush-sw.js: listen(self) in a service worker shows a push unless
//     its oncepush_id was shown already, by a bounded set of ids kept in
//     IndexedDB and recorded once the show succeeded (a copy whose show
//     failed leaves the id for the next one); tagged with that id; and opens
//     its link on click.
//   - sw.js: a service worker that is listen(self) and nothing else.
//
// oncepush serve serves them at /web/ (see docs/clients.md); Files is what
// it serves.
package web

import "embed"

// Files holds the kit's modules, at the top of the file system.
//
//go:embed *.js
var Files embed.FS
