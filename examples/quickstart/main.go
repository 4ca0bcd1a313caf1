// Command quickstart runs oncepush end to end with nothing but Go installed: an
// embedded SQLite ledger, and the real FCM, APNs, Web Push and RuStore clients
// talking HTTP/2 to local fake providers (no credentials, no network).
//
// It registers devices for two recipients, sends one notification twice with
// the same dedup key (the second send is a duplicate), drains the ledger, and
// prints what each device's provider answered.
//
//	go run ./examples/quickstart            # a fresh ledger in a temporary directory
//	go run ./examples/quickstart -db my.db  # keep the ledger in my.db
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/pushtest"
	"github.com/oncepush/oncepush/pushtest/fakeproviders"
)

func main() {
	dbPath := flag.String("db", "", "SQLite file for the ledger (default: a new file in a temporary directory)")
	verbose := flag.Bool("v", false, "log what the engine does")
	flag.Parse()
	if err := run(*dbPath, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(dbPath string, verbose bool) error {
	ctx := context.Background()
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	if dbPath == "" {
		dir, err := os.MkdirTemp("", "oncepush-quickstart-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dbPath = filepath.Join(dir, "oncepush.db")
	}
	drv, err := sqlite.Open(ctx, dbPath, nil)
	if err != nil {
		return err
	}
	defer drv.Close()
	if _, err := drv.Migrate(ctx); err != nil {
		return err
	}

	// The fake providers: one local HTTPS server speaking FCM, Google OAuth,
	// APNs, Web Push and RuStore, and the real provider clients pointed at it.
	fake, err := pushtest.StartFakeServer(nil)
	if err != nil {
		return err
	}
	defer fake.Close()
	providers, err := fakeproviders.New(fake, fakeproviders.Options{Logger: logger})
	if err != nil {
		return err
	}
	client, err := oncepush.NewClient(drv, &oncepush.Config{Providers: providers, Logger: logger})
	if err != nil {
		return err
	}

	// Alice has a phone (FCM), an iPad (APNs) and a browser (Web Push); Bob an
	// Android phone on RuStore and an old FCM token that is no longer valid.
	devices := []oncepush.Device{
		{Recipient: "alice", Transport: oncepush.TransportFCM, Token: "alice-pixel-fcm-token-0001", Platform: "android"},
		{Recipient: "alice", Transport: oncepush.TransportAPNs, Token: "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", Platform: "ios"},
		{Recipient: "alice", Transport: oncepush.TransportWebPush, Token: fake.NewWebPushSubscription(), Platform: "web"},
		{Recipient: "bob", Transport: oncepush.TransportRuStore, Token: "bob-rustore-token-0001", Platform: "android"},
		{Recipient: "bob", Transport: oncepush.TransportFCM, Token: "bob-old-fcm-token-0001", Platform: "android"},
	}
	for _, d := range devices {
		if _, err := client.RegisterDevice(ctx, d); err != nil {
			return err
		}
	}
	// FCM says Bob's old token is dead, in its own words.
	fake.Program(oncepush.TransportFCM, "bob-old-fcm-token-0001",
		pushtest.FCMError(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED"))

	msg := oncepush.Message{
		Type:  "invoice.paid",
		Title: "Invoice paid",
		Body:  "Globex paid invoice inv_2201 (1 240,00 zł).",
		Link:  "/invoices/inv_2201",
		Data:  map[string]any{"invoice": "inv_2201"},
	}
	opts := &oncepush.SendOptions{DedupKey: "invoice.paid:inv_2201"}
	first, err := client.Send(ctx, []string{"alice", "bob"}, msg, opts)
	if err != nil {
		return err
	}
	// The same event again — a retried job, say: nothing new is queued.
	again, err := client.Send(ctx, []string{"alice", "bob"}, msg, opts)
	if err != nil {
		return err
	}
	fmt.Printf("first send:  %d queued, %d duplicates\n", first.Queued, first.Duplicates)
	fmt.Printf("second send: %d queued, %d duplicates (same dedup key)\n\n", again.Queued, again.Duplicates)

	stats, err := client.Drain(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("drained: %d deliveries claimed, %d provider calls\n\n", stats.Claimed, stats.Submitted)

	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for _, r := range []string{"alice", "bob"} {
		ds, err := client.RecipientDeliveries(ctx, r, 0, 10)
		if err != nil {
			return err
		}
		for _, d := range ds {
			fmt.Fprintf(out, "%s\tdelivery %d\t%s\tnotification %s\n", r, d.ID, d.Status, d.NotificationID)
			for _, a := range d.Devices {
				said := a.ProviderID
				if a.Error != "" {
					said = a.Error
				}
				fmt.Fprintf(out, "\t  %s device %d\t%s\t%s\n", a.Transport, a.DeviceID, a.State, said)
			}
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	left, err := client.Devices(ctx, "bob")
	if err != nil {
		return err
	}
	fmt.Printf("\nbob's devices now: %d (the dead FCM token was deleted; RuStore kept)\n", len(left))
	fmt.Printf("requests the fake providers received: %d\n", fake.Count())
	return nil
}
