package drivertest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/pushtest"
)

// BenchDrain measures deliveries drained per second into the in-process fake
// provider: recipients × devicesEach device sends, queued before the clock
// starts, drained by `clients` independent clients (own pools) with the given
// batch size (0 = default). It reports device sends per second.
//
// Run it with -benchtime=1x: one iteration drains the whole set once.
// newDB returns a function that opens a new driver (its own pool of at most
// maxConns connections, 0 = default) on a fresh, migrated database.
func BenchDrain[TTx any](b *testing.B, newDB func(b *testing.B) func(maxConns int) driver.Driver[TTx], recipients, devicesEach, clients, batchSize int) {
	ctx := context.Background()
	transports := []oncepush.Transport{oncepush.TransportFCM, oncepush.TransportAPNs, oncepush.TransportRuStore}[:devicesEach]
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		open := newDB(b)
		quiet := slog.New(slog.DiscardHandler)
		seed, err := oncepush.NewClient(open(8), &oncepush.Config{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		names, err := registerMany(ctx, seed, "bench-%06d", recipients, transports)
		if err != nil {
			b.Fatal(err)
		}
		var msgIDs []int64
		for r := 0; r < recipients; r += 1000 {
			end := min(r+1000, recipients)
			res, err := seed.Send(ctx, names[r:end], oncepush.Message{Title: "bench", Body: "drain me"}, nil)
			if err != nil {
				b.Fatal(err)
			}
			msgIDs = append(msgIDs, res.MessageID)
		}
		var provs []oncepush.Provider
		var fakes []*pushtest.Provider
		for _, tr := range transports {
			p := pushtest.NewProvider(tr)
			provs = append(provs, p)
			fakes = append(fakes, p)
		}
		var cs []*oncepush.Client[TTx]
		for range clients {
			c, err := oncepush.NewClient(open(0), &oncepush.Config{
				Providers: provs, BatchSize: batchSize, Logger: quiet, PollInterval: 10 * time.Millisecond,
			})
			if err != nil {
				b.Fatal(err)
			}
			cs = append(cs, c)
		}
		want := recipients * devicesEach
		total := func() int {
			n := 0
			for _, p := range fakes {
				n += p.Count()
			}
			return n
		}

		b.StartTimer()
		start := time.Now()
		for _, c := range cs {
			if err := c.Start(ctx); err != nil {
				b.Fatal(err)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		for _, p := range fakes {
			if !p.WaitCount(wctx, recipients) {
				b.Fatalf("after 10 minutes, %d of %d sends", total(), want)
			}
		}
		cancel()
		// Stop waits for the last records: the drain is over when it returns.
		for _, c := range cs {
			if err := c.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		sent := 0
		for _, id := range msgIDs {
			counts, err := seed.DeliveryCounts(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			sent += counts[oncepush.StatusSent]
		}
		if sent != recipients {
			b.Fatalf("%d deliveries sent, want %d", sent, recipients)
		}
		if got := total(); got != want {
			b.Fatalf("%d sends, want %d", got, want)
		}
		b.ReportMetric(float64(want)/elapsed.Seconds(), "sends/s")
		b.ReportMetric(elapsed.Seconds(), "s/drain")
	}
}

// registerMany registers n recipients, named by format from their index, with
// a device on each of transports, eight recipients at a time, and returns
// their names. Its error is the first registration's that failed, with how
// long registering had taken by then.
func registerMany[TTx any](ctx context.Context, c *oncepush.Client[TTx], format string, n int, transports []oncepush.Transport) ([]string, error) {
	names := make([]string, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	sem := make(chan struct{}, 8)
	for r := range names {
		names[r] = fmt.Sprintf(format, r)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, tr := range transports {
				if _, err := c.RegisterDevice(ctx, oncepush.Device{Recipient: names[r], Transport: tr, Token: tokenFor(tr, names[r])}); err != nil {
					mu.Lock()
					first = cmp.Or(first, fmt.Errorf("register %s %s at %s: %w", names[r], tr, time.Since(start), err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return names, first
}
