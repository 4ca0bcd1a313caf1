package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/pushtest"
	"github.com/oncepush/oncepush/pushtest/fakeproviders"
)

// BenchmarkProviders measures device sends per second through the engine and
// the real provider clients into the fake providers over loopback HTTP/2, with
// the fake answering at once and after 50 ms. Run with -benchtime=1x; see
// docs/benchmarks.md. ONCEPUSH_BENCH_CPUPROFILE=file profiles the drain only.
func BenchmarkProviders(b *testing.B) {
	const sends = 20000
	for _, tr := range transports() {
		for _, latency := range []time.Duration{0, 50 * time.Millisecond} {
			b.Run(fmt.Sprintf("%s/latency=%s", tr, latency), func(b *testing.B) {
				benchProvider(b, tr, latency, sends)
			})
		}
	}
}

func benchProvider(b *testing.B, tr oncepush.Transport, latency time.Duration, n int) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		conn := testdb.Schema(b)
		drv := postgres.New(testdb.Pool(b, conn, 0))
		if _, err := drv.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		fake, err := pushtest.StartFakeServer(nil)
		if err != nil {
			b.Fatal(err)
		}
		quiet := slog.New(slog.DiscardHandler)
		providers, err := fakeproviders.New(fake, fakeproviders.Options{Logger: quiet, Transports: specs()})
		if err != nil {
			b.Fatal(err)
		}
		client, err := oncepush.NewClient(drv, &oncepush.Config{
			Transports: specs(), Providers: providers, Logger: quiet, Workers: 4, BatchSize: 1000, ConcurrentSends: 1024,
			PollInterval: 10 * time.Millisecond,
		})
		if err != nil {
			b.Fatal(err)
		}
		e := &env{ctx: ctx, fake: fake, client: client}
		names := make([]string, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for r := range names {
			names[r] = fmt.Sprintf("bench-%06d", r)
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := client.RegisterDevice(ctx, oncepush.Device{Recipient: names[r], Transport: tr, Token: e.token(tr, r)}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		for r := 0; r < n; r += 1000 {
			if _, err := client.Send(ctx, names[r:min(r+1000, n)], oncepush.Message{Title: "bench", Body: "over HTTP/2"}, nil); err != nil {
				b.Fatal(err)
			}
		}
		fake.SetLatency(tr, latency)

		if path := os.Getenv("ONCEPUSH_BENCH_CPUPROFILE"); path != "" {
			// The drain only, without the set-up -test.cpuprofile would include.
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
		b.StartTimer()
		start := time.Now()
		if err := client.Start(ctx); err != nil {
			b.Fatal(err)
		}
		if !fake.WaitCount(ctx, n) {
			b.Fatalf("%d requests answered, want %d", fake.Count(), n)
		}
		if err := client.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		if got := fake.Count(); got != n {
			b.Fatalf("%d requests, want %d", got, n)
		}
		fake.Close()
		b.ReportMetric(float64(n)/elapsed.Seconds(), "sends/s")
	}
}
