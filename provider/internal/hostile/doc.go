// Package hostile tests oncepush's provider clients (FCM, APNs, Web Push,
// RuStore) against a push service that misbehaves the way an attacker, a
// compromised proxy or a buggy provider might: it redirects to an internal
// address, echoes back the request's credentials and device token in its
// error text, puts control characters and terminal escapes into its words.
// It checks what reaches the Result (and so the ledger and the API) and the
// log, and that message text cannot add request headers or make the server
// fetch anything. The package has no code of its own; see its tests.
package hostile
