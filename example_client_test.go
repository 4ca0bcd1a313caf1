package oncepush_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/pushtest"
)

// exampleClient opens a fresh SQLite ledger in a temporary directory and a
// client whose FCM provider is the in-process fake, with one device for
// each recipient named. An application passes its real providers instead
// (provider/fcm, provider/apns, …) and, in production, a PostgreSQL driver.
func exampleClient(recipients ...string) (*oncepush.Client[*sql.Tx], *pushtest.Provider, func()) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "oncepush-example-")
	if err != nil {
		log.Fatal(err)
	}
	drv, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := drv.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	fcm := pushtest.NewProvider(oncepush.TransportFCM)
	client, err := oncepush.NewClient(drv, &oncepush.Config{
		Providers: []oncepush.Provider{fcm},
		Logger:    slog.New(slog.DiscardHandler), // the default logs to slog's default
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recipients {
		if _, err := client.RegisterDevice(ctx, oncepush.Device{Recipient: r, Transport: oncepush.TransportFCM, Token: oncepush.Token("fcm-token-of-" + r)}); err != nil {
			log.Fatal(err)
		}
	}
	return client, fcm, func() { drv.Close(); os.RemoveAll(dir) }
}

// Send outside a transaction: the dedup key makes a retried job harmless,
// and Drain delivers what is due (a started client's workers do it in the
// background instead).
func ExampleClient_Send() {
	ctx := context.Background()
	client, fcm, done := exampleClient("alice", "bob")
	defer done()

	msg := oncepush.Message{Type: "invoice.paid", Title: "Invoice paid", Body: "Globex paid inv_2201."}
	opts := &oncepush.SendOptions{DedupKey: "invoice.paid:inv_2201"}
	first, err := client.Send(ctx, []string{"alice", "bob"}, msg, opts)
	if err != nil {
		log.Fatal(err)
	}
	again, err := client.Send(ctx, []string{"alice", "bob"}, msg, opts) // the job ran twice
	if err != nil {
		log.Fatal(err)
	}
	stats, err := client.Drain(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("first: %d queued; again: %d queued, %d duplicates\n", first.Queued, again.Queued, again.Duplicates)
	fmt.Printf("submitted %d, the provider received %d\n", stats.Submitted, fcm.Count())
	// Output:
	// first: 2 queued; again: 0 queued, 2 duplicates
	// submitted 2, the provider received 2
}

// SendTx writes the notification in the application's own transaction: it
// is sent if and only if the order commits.
func ExampleClient_SendTx() {
	ctx := context.Background()
	client, fcm, done := exampleClient("alice")
	defer done()
	db := client.Driver().(*sqlite.Driver).DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}

	order := func(id string, commit bool) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (?)`, id); err != nil {
			log.Fatal(err)
		}
		msg := oncepush.Message{Type: "order.placed", Title: "Order " + id + " placed"}
		if _, err := client.SendTx(ctx, tx, []string{"alice"}, msg, &oncepush.SendOptions{DedupKey: "order.placed:" + id}); err != nil {
			log.Fatal(err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				log.Fatal(err)
			}
		}
	}
	order("o-1", true)
	order("o-2", false) // rolled back: no order, no notification

	if _, err := client.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	for _, s := range fcm.Submissions() {
		fmt.Println(s.Title)
	}
	// Output: Order o-1 placed
}

// Start runs the workers in the background: a send wakes them at once. Stop
// lets sends in flight finish and records them before it returns.
func ExampleClient_Start() {
	ctx := context.Background()
	client, fcm, done := exampleClient("alice")
	defer done()

	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := client.Send(ctx, []string{"alice"}, oncepush.Message{Type: "welcome", Title: "Welcome"}, nil); err != nil {
		log.Fatal(err)
	}
	fcm.WaitCount(ctx, 1)
	if err := client.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("received:", fcm.Count())
	// Output: received: 1
}

// A campaign sends one message to an uploaded audience, expanded in the
// background in bounded batches (a started client does it on its own;
// ExpandCampaigns and Drain do it here in the foreground).
func ExampleClient_CreateCampaign() {
	ctx := context.Background()
	client, fcm, done := exampleClient("alice", "bob", "carol")
	defer done()

	c, err := client.CreateCampaign(ctx, oncepush.CampaignSpec{
		Name:     "spring sale",
		Message:  oncepush.Message{Type: "promo.spring", Title: "Spring sale"},
		Audience: oncepush.AudienceRecipients,
	})
	if err != nil {
		log.Fatal(err)
	}
	// Pages are idempotent by number: uploading page 1 again changes nothing.
	if _, err := client.AddCampaignRecipients(ctx, c.ID, 1, []string{"alice", "bob", "carol", "dave"}); err != nil {
		log.Fatal(err)
	}
	if _, err := client.StartCampaign(ctx, c.ID); err != nil {
		log.Fatal(err)
	}
	if _, err := client.ExpandCampaigns(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := client.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	c, err = client.Campaign(ctx, c.ID)
	if err != nil {
		log.Fatal(err)
	}
	// dave has no device: no delivery is written for him.
	fmt.Printf("%s: %d recipients, %d deliveries written, %d received\n", c.Status, c.Recipients, c.Written, fcm.Count())
	// Output: completed: 4 recipients, 3 deliveries written, 3 received
}
