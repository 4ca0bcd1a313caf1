// Command loadgen measures the HTTP API on loopback: how many notifications
// POST /v1/notifications accepts per second, and how long a notification takes
// from its POST to the fake provider's receipt at a steady rate.
//
// It runs the server in process (the same handler `oncepush serve` runs, on a
// real 127.0.0.1 listener, with its delivery workers), the fake providers in
// process, and an HTTP client pool; every request crosses the loopback.
//
//	go run ./internal/tools/loadgen -database postgres://…/db?search_path=bench -mode ingest
//	go run ./internal/tools/loadgen -database /tmp/bench.db -mode fanout
//	go run ./internal/tools/loadgen -database postgres://… -mode latency -rate 1000
//	go run ./internal/tools/loadgen -database postgres://… -mode drain -count 20000 -cpuprofile drain.prof
//
// The database must be empty or disposable: loadgen migrates it and writes to it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/server"
	"github.com/oncepush/oncepush/internal/stack"
	"github.com/oncepush/oncepush/internal/tools/loadkit"
	"github.com/oncepush/oncepush/pushtest"
	"github.com/oncepush/oncepush/pushtest/fakeproviders"
)

// profile is the -cpuprofile file.
var profile string

type options struct {
	database    string
	mode        string
	duration    time.Duration
	concurrency int
	rate        int
	recipients  int
	fanout      int
	workers     bool
	batch       int
	dedupe      bool
	count       int
}

func main() {
	var o options
	flag.StringVar(&o.database, "database", "", "PostgreSQL URL or SQLite path (required; its contents are disposable)")
	flag.StringVar(&o.mode, "mode", "ingest", "ingest (1 recipient per POST, as fast as possible), fanout (many recipients per POST), latency (steady rate, POST→provider), drain (queue -count POSTs with the workers stopped, then time the workers alone)")
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "how long to send")
	flag.IntVar(&o.concurrency, "concurrency", 32, "concurrent HTTP clients (ingest, fanout)")
	flag.IntVar(&o.rate, "rate", 1000, "notifications per second (latency)")
	flag.IntVar(&o.recipients, "recipients", 2000, "recipients with one FCM device each")
	flag.IntVar(&o.fanout, "fanout", 1000, "recipients per POST (fanout)")
	flag.BoolVar(&o.workers, "workers", true, "run the delivery workers in the server while sending")
	flag.IntVar(&o.batch, "batch", 0, "engine batch size (0 = default)")
	flag.BoolVar(&o.dedupe, "dedupe", true, "send a dedupeKey with every POST (idempotent sends)")
	flag.IntVar(&o.count, "count", 20000, "single-recipient notifications queued before the workers start (drain)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the sending phase to this file")
	flag.Parse()
	profile = *cpuProfile
	if o.database == "" {
		fmt.Fprintln(os.Stderr, "loadgen: -database is required")
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	st, err := config.Load(config.Flags{Database: o.database}, func(string) string { return "" })
	if err != nil {
		return err
	}
	db, err := stack.OpenMigrated(ctx, st)
	if err != nil {
		return err
	}
	defer db.Close()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fake, err := pushtest.StartFakeServer(nil)
	if err != nil {
		return err
	}
	defer fake.Close()
	providers, err := fakeproviders.New(fake, fakeproviders.Options{Logger: quiet})
	if err != nil {
		return err
	}
	metrics := server.NewMetrics()
	stk, err := db.Assemble(&oncepush.Config{Providers: providers, Observer: metrics, Logger: quiet, BatchSize: o.batch},
		&stack.ServerOptions{Metrics: metrics})
	if err != nil {
		return err
	}
	client, srv := stk.Client, stk.Server
	key, err := apikey.New()
	if err != nil {
		return err
	}
	if err := db.Server.APIKeyInsert(ctx, &serverstore.APIKey{ID: key.ID(), Name: "loadgen", Hash: key.Hash(), Scopes: []string{apikey.ScopeAdmin}}); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go httpSrv.Serve(ln)
	defer httpSrv.Close()
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}, Timeout: 30 * time.Second}
	call := func(method, path string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+string(key))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}

	// Devices: one FCM device per recipient, registered over the API.
	fmt.Fprintf(os.Stderr, "registering %d devices…\n", o.recipients)
	names := make([]string, o.recipients)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var regErr atomic.Value
	for i := range names {
		names[i] = fmt.Sprintf("lg-%06d", i)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			code, body, err := call("PUT", "/v1/recipients/"+names[i]+"/devices",
				map[string]string{"transport": "fcm", "token": fmt.Sprintf("loadgen-fcm-token-%06d", i)})
			if err != nil || code != 200 {
				regErr.CompareAndSwap(nil, fmt.Errorf("register: %d %s %v", code, body, err))
			}
		})
	}
	wg.Wait()
	if e := regErr.Load(); e != nil {
		return e.(error)
	}
	if o.mode == "drain" {
		return drain(ctx, o, call, names, time.Now().UnixNano(), fake, client)
	}
	if o.workers {
		if err := client.Start(ctx); err != nil {
			return err
		}
		defer client.Stop(context.Background())
	}
	runID := time.Now().UnixNano()
	stopProfile, err := startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	fmt.Fprintf(os.Stderr, "mode %s on %s for %s…\n", o.mode, db.Name, o.duration)
	switch o.mode {
	case "ingest", "fanout":
		return ingest(ctx, o, call, names, runID, fake)
	case "latency":
		return latency(ctx, o, call, names, runID, fake)
	}
	return fmt.Errorf("unknown -mode %q", o.mode)
}

// startProfile starts the -cpuprofile profile, if asked for, and returns
// what stops it.
func startProfile() (func(), error) {
	if profile == "" {
		return func() {}, nil
	}
	f, err := os.Create(profile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// drain measures the workers alone, as the benchmark's "workers alone"
// case does with two processes: -count single-recipient notifications are
// queued over the API while the workers are stopped, then the workers start
// and the clock (and the profile) runs until the fake has received them all.
func drain(ctx context.Context, o options, call caller, names []string, runID int64, fake *pushtest.FakeServer, client interface {
	Start(context.Context) error
	Stop(context.Context) error
}) error {
	fmt.Fprintf(os.Stderr, "queueing %d notifications…\n", o.count)
	var seq, failed atomic.Int64
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Go(func() {
			for n := seq.Add(1); n <= int64(o.count); n = seq.Add(1) {
				body, _, _ := notification(o, names, n, runID)
				code, resp, err := call("POST", "/v1/notifications", body)
				if err != nil || code != http.StatusAccepted {
					if failed.Add(1) <= 3 {
						fmt.Fprintf(os.Stderr, "POST: %d %s %v\n", code, resp, err)
					}
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		return fmt.Errorf("%d POSTs failed", failed.Load())
	}
	stopProfile, err := startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	fmt.Fprintln(os.Stderr, "draining…")
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer client.Stop(context.Background())
	for fake.Count() < o.count {
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("after 5 minutes, %d of %d sends", fake.Count(), o.count)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	fmt.Printf("mode=drain sends=%d in %.2fs: %.0f sends/s\n", o.count, elapsed.Seconds(), float64(o.count)/elapsed.Seconds())
	return nil
}

type caller func(method, path string, body any) (int, []byte, error)

func notification(o options, names []string, n int64, runID int64) (map[string]any, []string, string) {
	per := 1
	if o.mode == "fanout" {
		per = min(o.fanout, len(names))
	}
	start := int(n*int64(per)) % len(names)
	var rs []string
	for i := range per {
		rs = append(rs, names[(start+i)%len(names)])
	}
	body := map[string]any{"recipients": rs, "type": "loadgen", "title": "load", "body": fmt.Sprintf("notification %d", n)}
	key := ""
	if o.dedupe {
		key = fmt.Sprintf("lg-%d-%d", runID, n)
		body["dedupeKey"] = key
	}
	return body, rs, key
}

func ingest(ctx context.Context, o options, call caller, names []string, runID int64, fake *pushtest.FakeServer) error {
	var seq, accepted, failed, queued atomic.Int64
	var lat []time.Duration
	var mu sync.Mutex
	deadline := time.Now().Add(o.duration)
	var wg sync.WaitGroup
	start := time.Now()
	for range o.concurrency {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) {
				n := seq.Add(1)
				body, _, _ := notification(o, names, n, runID)
				t0 := time.Now()
				code, resp, err := call("POST", "/v1/notifications", body)
				mine = append(mine, time.Since(t0))
				if err != nil || code != http.StatusAccepted {
					if failed.Add(1) <= 3 {
						fmt.Fprintf(os.Stderr, "POST: %d %s %v\n", code, resp, err)
					}
					continue
				}
				var a struct{ Queued int }
				_ = json.Unmarshal(resp, &a)
				queued.Add(int64(a.Queued))
				accepted.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	p50, p99 := percentiles(lat)
	fmt.Printf("mode=%s accepted=%d failed=%d in %.1fs: %.0f notifications/s (%.0f deliveries/s); POST latency p50=%s p99=%s\n",
		o.mode, accepted.Load(), failed.Load(), elapsed.Seconds(), float64(accepted.Load())/elapsed.Seconds(),
		float64(queued.Load())/elapsed.Seconds(), p50, p99)
	if o.workers {
		// Let the workers catch up, to report delivery throughput too.
		wantSends := int(queued.Load())
		t0 := time.Now()
		for fake.Count() < wantSends && time.Since(t0) < 2*time.Minute {
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Printf("delivered %d of %d device sends; all delivered %.1fs after the last POST\n", fake.Count(), wantSends, time.Since(t0).Seconds())
	}
	return nil
}

func latency(ctx context.Context, o options, call caller, names []string, runID int64, fake *pushtest.FakeServer) error {
	if !o.dedupe || !o.workers {
		return fmt.Errorf("latency mode needs -dedupe and -workers")
	}
	type sent struct {
		at time.Time
		id string // the oncepush_id the provider will see
	}
	var mu sync.Mutex
	var sents []sent
	var failed atomic.Int64
	interval := time.Second / time.Duration(o.rate)
	deadline := time.Now().Add(o.duration)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var wg sync.WaitGroup
	var n int64
	sem := make(chan struct{}, 512)
	for time.Now().Before(deadline) {
		<-tick.C
		n++
		body, rs, key := notification(o, names, n, runID)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			code, resp, err := call("POST", "/v1/notifications", body)
			if err != nil || code != http.StatusAccepted {
				if failed.Add(1) <= 3 {
					fmt.Fprintf(os.Stderr, "POST: %d %s %v\n", code, resp, err)
				}
				return
			}
			id := loadkit.NotificationID("loadgen", rs[0], key)
			mu.Lock()
			sents = append(sents, sent{at: t0, id: id})
			mu.Unlock()
		})
	}
	wg.Wait()
	// Wait for the provider to have them all.
	t0 := time.Now()
	for fake.Count() < len(sents) && time.Since(t0) < time.Minute {
		time.Sleep(20 * time.Millisecond)
	}
	received := map[string]time.Time{}
	for _, r := range fake.RequestsFor(oncepush.TransportFCM) {
		if _, seen := received[r.NotificationID]; !seen {
			received[r.NotificationID] = r.At
		}
	}
	var lat []time.Duration
	missing := 0
	for _, s := range sents {
		at, ok := received[s.id]
		if !ok {
			missing++
			continue
		}
		lat = append(lat, at.Sub(s.at))
	}
	p50, p99 := percentiles(lat)
	fmt.Printf("mode=latency rate=%d/s sent=%d failed=%d received=%d missing=%d: POST→provider p50=%s p99=%s max=%s\n",
		o.rate, len(sents), failed.Load(), len(lat), missing, p50, p99, loadkit.Max(lat))
	return nil
}

func percentiles(d []time.Duration) (time.Duration, time.Duration) {
	s := loadkit.Sorted(d)
	return loadkit.Percentile(s, 0.50), loadkit.Percentile(s, 0.99)
}
