// Package oncepush delivers push notifications (FCM, APNs, Web Push, RuStore) so
// that each (notification, device) pair is submitted to its provider at most once
// under oncepush's own retry model, while the workers that run it are only
// at-least-once: processes crash, runs repeat, two workers race, providers time
// out after accepting. Nothing is lost: every delivery ends in a recorded outcome,
// in the provider's own words.
//
// A Client writes notifications into a database ledger — inside the caller's
// own transaction with SendTx, so a rolled-back command sends nothing and a
// retried command with the same dedup key sends once — and its workers drain the
// ledger: claim due deliveries in one short transaction, send them holding no
// database connection, record every provider answer in one short transaction
// guarded by the claim's lease.
//
//	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	client, err := oncepush.NewClient(postgres.New(pool), &oncepush.Config{
//		Providers: []oncepush.Provider{fcmProvider, apnsProvider},
//	})
//	…
//	res, err := client.SendTx(ctx, tx, []string{"u_8831"}, oncepush.Message{
//		Type:  "invoice.paid",
//		Title: "Invoice paid",
//		Body:  "Globex paid invoice inv_2201.",
//		Link:  "/invoices/inv_2201",
//	}, &oncepush.SendOptions{DedupKey: "invoice.paid:inv_2201"})
//
// See docs/architecture.md for how data flows and docs/guarantees.md for what is
// promised and where the promise ends.
package oncepush
